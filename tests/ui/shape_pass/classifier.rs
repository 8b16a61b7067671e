//! Embeddings, concat and slice with symbolic bounds, log_softmax and
//! cross_entropy on declared shapes; `_` and Rust `usize` sizes where a dim
//! is not worth naming.

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::{g_add, g_concat, g_cross_entropy, g_embedding, g_matmul, g_reshape, g_slice, grad};
use support::{assert_same, data};

fn main() {
    let ids = [3usize, 1, 4, 1, 5, 2];
    let targets = [0usize, 2, 1, 2, 0, 1];
    let width = 8usize;
    let inputs = [data::<f64>(&[6, 4], 1), data(&[6, 4], 2), data(&[8, 3], 3), data(&[3], 4)];
    assert_same(
        "classifier",
        &inputs,
        |tape, v| {
            let (table, extra, w, b) = (v[0], v[1], v[2], v[3]);
            let loss = grad!(tape; table: [V, D], extra: [N, D], w: [_, C], b: [C];
                let tokens = embedding(table, &ids);
                let both = concat(tokens, extra, 1);
                let first = slice(both, [0, 0], [N, width]);
                let logits = reshape(first, [N, width]) @ w + b;
                cross_entropy(logits, &targets)
            );
            assert!(tape.is_ok());
            loss
        },
        |tape, v| {
            let tokens = g_embedding(tape, v[0], &ids);
            let both = g_concat(tape, tokens, v[1], 1);
            let first = g_slice(tape, both, &[0, 0], &[6, 8]);
            let flat = g_reshape(tape, first, &[6, 8]);
            let xw = g_matmul(tape, flat, v[2]);
            let logits = g_add(tape, xw, v[3]);
            g_cross_entropy(tape, logits, &targets)
        },
    );
}
