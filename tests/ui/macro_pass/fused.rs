//! Fused regions against the hand-written ops: one node per region; every
//! value the same bits; gradients the same bits when each input is read
//! once. `#[nofuse]` records the hand-written ops exactly, gradients of
//! inputs read twice included.

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::*;
use support::{assert_bits, assert_same, data, run};

fn main() {
    let inputs = [data::<f32>(&[8, 4], 1), data(&[4, 3], 2), data(&[3], 3), data(&[8, 3], 4)];
    let by_hand = |tape: &mut Tape<f32>, v: &[Var]| {
        let xw = g_matmul(tape, v[0], v[1]);
        let z = g_add(tape, xw, v[2]);
        let h = g_relu(tape, z);
        let s = g_sigmoid(tape, h);
        let sh = g_mul(tape, s, v[3]);
        g_sum(tape, sh)
    };
    // Each input read once: the same bits, values and gradients.
    assert_same(
        "relu(x @ w + b), then sum(sigmoid(h) * t)",
        &inputs,
        |tape, v| {
            let (x, w, b, t) = (v[0], v[1], v[2], v[3]);
            let before = tape.len();
            let loss = grad!(tape; let h = relu(x @ w + b); sum(sigmoid(h) * t));
            assert_eq!(tape.len() - before, 3, "the product and two regions");
            loss
        },
        by_hand,
    );

    // `x` read twice: `#[nofuse]` is the hand-written ops bit for bit; the
    // fused gradient of `x` sums its two contributions in the kernel.
    let x = [data::<f64>(&[5, 7], 5)];
    let twice = |tape: &mut Tape<f64>, v: &[Var]| {
        let s = g_sigmoid(tape, v[0]);
        let sx = g_mul(tape, s, v[0]);
        g_sum(tape, sx)
    };
    assert_same("#[nofuse] sum(sigmoid(x) * x)", &x, |tape, v| { let x = v[0]; grad!(#[nofuse] tape; sum(sigmoid(x) * x)) }, twice);
    let (value, grads) = run(&x, |tape, v| { let x = v[0]; grad!(tape; sum(sigmoid(x) * x)) });
    let (want_value, want_grads) = run(&x, twice);
    assert_bits("fused sum(sigmoid(x) * x)", &value, &want_value);
    // Within the manual's bound: 4 ulps of the largest gradient element.
    let scale = want_grads[0].iter().fold(0.0f64, |m, g| m.max(g.abs()));
    for (g, w) in grads[0].iter().zip(&want_grads[0]) {
        assert!((g - w).abs() <= 4.0 * f64::EPSILON * scale, "{g} vs {w}");
    }
}
