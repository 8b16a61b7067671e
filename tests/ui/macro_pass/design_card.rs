//! The design card's example, in a training loop with mark / reset_to:
//! the same values and gradients as the hand-written ops, every step.

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::{g_add, g_matmul, g_mse, g_relu, grad, Tape};
use support::{assert_bits, assert_same, data};

fn main() {
    let inputs = [data::<f32>(&[8, 4], 1), data(&[4, 3], 2), data(&[3], 3), data(&[8, 3], 4)];
    assert_same(
        "mlp",
        &inputs,
        |tape, v| {
            let (x, w, b, t) = (v[0], v[1], v[2], v[3]);
            grad!(tape; let y = relu(x @ w + b); mse(y, t))
        },
        |tape, v| {
            let xw = g_matmul(tape, v[0], v[1]);
            let z = g_add(tape, xw, v[2]);
            let y = g_relu(tape, z);
            g_mse(tape, y, v[3])
        },
    );

    // Two tapes side by side over three steps of a mark / reset_to loop.
    let (mut a, mut b) = (Tape::<f64>::new(), Tape::<f64>::new());
    let (wa, ba) = (a.param(data::<f64>(&[4, 3], 5)), a.param(data::<f64>(&[3], 6)));
    let (wb, bb) = (b.param(data::<f64>(&[4, 3], 5)), b.param(data::<f64>(&[3], 6)));
    let (mark_a, mark_b) = (a.mark(), b.mark());
    for step in 0..3 {
        let (xs, ts) = (data::<f64>(&[8, 4], 10 + step), data::<f64>(&[8, 3], 20 + step));
        let (x, t) = (a.constant(&xs), a.constant(&ts));
        let w = wa;
        let b_ = ba;
        let loss = grad!(a; let y = relu(x @ w + b_); mse(y, t));
        a.backward(loss).unwrap();

        let (x, t) = (b.constant(&xs), b.constant(&ts));
        let xw = g_matmul(&mut b, x, wb);
        let z = g_add(&mut b, xw, bb);
        let y = g_relu(&mut b, z);
        let want = g_mse(&mut b, y, t);
        b.backward(want).unwrap();

        assert_eq!(a.scalar(loss).to_bits(), b.scalar(want).to_bits(), "step {step}: loss");
        assert_bits("w gradient", &a.grad(wa).to_owned(), &b.grad(wb).to_owned());
        assert_bits("b gradient", &a.grad(ba).to_owned(), &b.grad(bb).to_owned());
        a.reset_to(mark_a);
        b.reset_to(mark_b);
    }
    assert_eq!(a.len(), 2);
}
