//! Users extend the language with Rust functions: an unknown call `f(a, b)`
//! is `f(tape, a, b)`. The layers here are generic over the float type and
//! call `grad!` on the `&mut Tape` they receive; a path names one too.

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::{g_add, g_matmul, g_muls, g_relu, g_sum, g_tanh, grad, Float, Tape, Var};
use support::assert_same;

/// `relu(x @ w + b)`, a dense layer.
fn dense<T: Float>(tp: &mut Tape<T>, x: Var, w: Var, b: Var) -> Var {
    grad!(tp; relu(x @ w + b))
}

mod layers {
    use grad_runtime::{grad, Float, Tape, Var};

    /// A residual block with a literal scale: works for f32 and f64 tapes.
    pub fn residual<T: Float>(tp: &mut Tape<T>, x: Var, w: Var) -> Var {
        grad!(tp; x + 0.5 * tanh(x @ w))
    }
}

fn main() {
    for seed in 0..2 {
        let inputs = [support::data::<f64>(&[6, 4], seed), support::data(&[4, 4], seed + 10), support::data(&[4], seed + 20)];
        assert_same(
            "layers",
            &inputs,
            |tape, v| {
                let (x, w, b) = (v[0], v[1], v[2]);
                grad!(tape; let h = dense(x, w, b); sum(layers::residual(h, w)))
            },
            |tape, v| {
                let xw = g_matmul(tape, v[0], v[1]);
                let z = g_add(tape, xw, v[2]);
                let h = g_relu(tape, z);
                let hw = g_matmul(tape, h, v[1]);
                let t = g_tanh(tape, hw);
                let scaled = g_muls(tape, t, 0.5);
                let r = g_add(tape, h, scaled);
                g_sum(tape, r)
            },
        );
    }
    // The same generic layer on an f32 tape.
    let inputs = [support::data::<f32>(&[3, 4], 7), support::data(&[4, 4], 8)];
    assert_same(
        "f32 residual",
        &inputs,
        |tape, v| layers::residual(tape, v[0], v[1]),
        |tape, v| {
            let hw = g_matmul(tape, v[0], v[1]);
            let t = g_tanh(tape, hw);
            let scaled = g_muls(tape, t, 0.5);
            g_add(tape, v[0], scaled)
        },
    );
}
