//! Symbolic dims flowing through transpose, bmm, softmax, NumPy-batched
//! matmul and reshape: `reshape(out, [B * T, D])` reads B and T bound at
//! run time by the declarations, and reshapes back with `[B, T, D]`.

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::{g_bmm, g_matmul, g_muls, g_reshape, g_softmax, g_sum, g_transpose, grad};
use support::{assert_same, data};

fn main() {
    let (b, t, d) = (2, 5, 4);
    let inputs = [data::<f64>(&[b, t, d], 1), data(&[b, t, d], 2), data(&[b, t, d], 3), data(&[d, d], 4), data(&[d, d], 5)];
    assert_same(
        "attention",
        &inputs,
        |tape, v| {
            let (q, k, v_, wo, wf) = (v[0], v[1], v[2], v[3], v[4]);
            let y = grad!(tape; q: [B, T, D], k: [B, T, D], v_: [B, T, D], wo: [D, D], wf: [D, D];
                let scores = bmm(q, transpose(k)) * 0.5;
                let attention = softmax(scores, -1);
                let mixed = bmm(attention, v_);
                let flat = reshape(mixed, [B * T, D]) @ wo;
                let back = reshape(flat, [B, T, D]);
                sum(back @ wf)
            );
            assert!(tape.is_ok());
            y
        },
        |tape, v| {
            let kt = g_transpose(tape, v[1]);
            let raw = g_bmm(tape, v[0], kt);
            let scores = g_muls(tape, raw, 0.5);
            let attention = g_softmax(tape, scores, -1);
            let mixed = g_bmm(tape, attention, v[2]);
            let flat = g_reshape(tape, mixed, &[b * t, d]);
            let projected = g_matmul(tape, flat, v[3]);
            let back = g_reshape(tape, projected, &[b, t, d]);
            let out = g_matmul(tape, back, v[4]);
            g_sum(tape, out)
        },
    );
}
