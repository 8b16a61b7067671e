//! The tape may be an owned `Tape` or a `&mut Tape` (a parameter that is
//! not `mut`, a field, an explicit `&mut`); the block borrows it and the
//! caller keeps using it afterwards.

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::{g_exp, g_matmul, g_sigmoid, grad, Tape, Var};
use support::{assert_bits, assert_same, data};

struct Model {
    tape: Tape<f64>,
    w: Var,
}

impl Model {
    fn forward(&mut self, x: Var) -> Var {
        let w = self.w;
        grad!(self.tape; sigmoid(x @ w))
    }
}

/// `tp` is a `&mut Tape` binding that is not `mut`, used by two blocks.
fn twice(tp: &mut Tape<f64>, x: Var) -> Var {
    let once = grad!(tp; exp(x));
    grad!(tp; exp(once))
}

fn main() {
    assert_same(
        "&mut Tape parameter",
        &[data::<f64>(&[3, 2], 1)],
        |tape, v| twice(tape, v[0]),
        |tape, v| {
            let once = g_exp(tape, v[0]);
            g_exp(tape, once)
        },
    );

    let mut tape = Tape::<f64>::new();
    let w = tape.param(data::<f64>(&[2, 2], 3));
    let mut model = Model { tape, w };
    let x = model.tape.constant(data::<f64>(&[3, 2], 4));
    let y = model.forward(x);
    let z = grad!(&mut model.tape; exp(y));
    model.tape.backward(z).unwrap();

    let mut by_hand = Tape::<f64>::new();
    let w = by_hand.param(data::<f64>(&[2, 2], 3));
    let x = by_hand.constant(data::<f64>(&[3, 2], 4));
    let xw = g_matmul(&mut by_hand, x, w);
    let s = g_sigmoid(&mut by_hand, xw);
    let want = g_exp(&mut by_hand, s);
    by_hand.backward(want).unwrap();
    assert_bits("value", &model.tape.value(z).to_owned(), &by_hand.value(want).to_owned());
    assert_bits("gradient", &model.tape.grad(model.w).to_owned(), &by_hand.grad(w).to_owned());
    assert_eq!(model.tape.len(), 5, "w, x, x @ w, sigmoid, exp");
}
