//! The example: declared shapes, inferred intermediates, the same
//! values and gradients as the hand-written ops, and the run-time check of
//! the declarations passing (the tape stays clean).

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::{g_add, g_matmul, g_mse, g_relu, grad};
use support::{assert_same, data};

fn main() {
    let inputs = [
        data::<f32>(&[32, 784], 1),
        data(&[784, 256], 2),
        data(&[256], 3),
        data(&[256, 10], 4),
        data(&[10], 5),
        data(&[32, 10], 6),
    ];
    assert_same(
        "declared mlp",
        &inputs,
        |tape, v| {
            let (x, w1, b1, w2, b2, t) = (v[0], v[1], v[2], v[3], v[4], v[5]);
            let loss = grad!(tape; x: [B, 784], w1: [784, 256], b1: [256], w2: [256, 10], b2: [10], t: [B, 10];
                let h = relu(x @ w1 + b1);
                mse(h @ w2 + b2, t)
            );
            assert!(tape.is_ok(), "the declarations hold at run time");
            loss
        },
        |tape, v| {
            let xw = g_matmul(tape, v[0], v[1]);
            let z = g_add(tape, xw, v[2]);
            let h = g_relu(tape, z);
            let hw = g_matmul(tape, h, v[3]);
            let y = g_add(tape, hw, v[4]);
            g_mse(tape, y, v[5])
        },
    );
}
