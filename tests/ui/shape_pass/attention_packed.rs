//! `attention_packed` after a qkv projection: its result is `[B, T, C]`
//! with `C` a third of the projection's width, known to the shape pass
//! (the product after it is checked against it).

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::{g_attention_packed, g_matmul, g_sum, grad};
use support::{assert_same, data};

fn main() {
    let inputs = [data::<f64>(&[2, 5, 4], 1), data(&[4, 24], 2), data(&[8, 3], 3)];
    assert_same(
        "attention_packed",
        &inputs,
        |tape, v| {
            let (x, w_qkv, w_out) = (v[0], v[1], v[2]);
            let y = grad!(tape; x: [B, T, 4], w_qkv: [4, 24], w_out: [8, 3];
                sum(attention_packed(x @ w_qkv, 2, true) @ w_out));
            assert!(tape.is_ok());
            y
        },
        |tape, v| {
            let qkv = g_matmul(tape, v[0], v[1]);
            let y = g_attention_packed(tape, qkv, 2, true);
            let out = g_matmul(tape, y, v[2]);
            g_sum(tape, out)
        },
    );
}
