//! A tuple result: the macro yields a tuple of `Var`s, each the same as
//! the hand-written op's.

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::{g_add, g_matmul, g_mean, g_relu, g_sum, grad, Tape};
use support::{assert_bits, data};

fn main() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(data::<f64>(&[5, 4], 1));
    let w = tape.param(data::<f64>(&[4, 2], 2));
    let (total, average, hidden) = grad!(tape; let h = x @ w; (sum(h), mean(relu(h)), h));
    let both = grad!(tape; total + average);
    tape.backward(both).unwrap();
    let got = [tape.value(hidden).to_owned(), tape.value(both).to_owned(), tape.grad(x).to_owned(), tape.grad(w).to_owned()];

    let mut by_hand = Tape::<f64>::new();
    let x = by_hand.param(data::<f64>(&[5, 4], 1));
    let w = by_hand.param(data::<f64>(&[4, 2], 2));
    let h = g_matmul(&mut by_hand, x, w);
    let total = g_sum(&mut by_hand, h);
    let r = g_relu(&mut by_hand, h);
    let average = g_mean(&mut by_hand, r);
    let both = g_add(&mut by_hand, total, average);
    by_hand.backward(both).unwrap();
    let want = [by_hand.value(h).to_owned(), by_hand.value(both).to_owned(), by_hand.grad(x).to_owned(), by_hand.grad(w).to_owned()];

    for (name, (g, w)) in ["h", "sum + mean", "x gradient", "w gradient"].iter().zip(got.iter().zip(&want)) {
        assert_bits(name, g, w);
    }
}
