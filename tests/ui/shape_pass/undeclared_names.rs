//! Undeclared names have unknown shapes and never cause a compile error;
//! declared ones are checked where they meet. A user function's result has
//! an unknown shape too.

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::{g_add, g_matmul, g_mean, g_tanh, grad, Tape, Var};
use support::{assert_same, data};

fn squash(tp: &mut Tape<f64>, x: Var) -> Var {
    grad!(tp; tanh(x))
}

fn main() {
    let inputs = [data::<f64>(&[3, 4], 1), data(&[4, 2], 2), data(&[2], 3)];
    assert_same(
        "partly declared",
        &inputs,
        |tape, v| {
            let (x, w, b) = (v[0], v[1], v[2]);
            grad!(tape; w: [4, 2]; mean(squash(x @ w) + b))
        },
        |tape, v| {
            let xw = g_matmul(tape, v[0], v[1]);
            let s = g_tanh(tape, xw);
            let z = g_add(tape, s, v[2]);
            g_mean(tape, z)
        },
    );
}
