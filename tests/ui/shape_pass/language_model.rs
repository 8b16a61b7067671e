//! A language model's shapes as written: token ids [B, T] declared beside
//! the tensors give embeddings [B, T, C]; heads split by `C / H` with `H`
//! a Rust `usize`; logits [B, T, V] against targets [B, T]. Each equals
//! the hand-written `g_*` calls on flat ids with the sizes computed in Rust.

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::{g_add, g_cross_entropy, g_embedding, g_matmul, g_permute, g_reshape, g_transpose, grad};
use ndarray::array;
use support::{assert_same, data};

fn main() {
    let tokens = array![[3usize, 1, 4], [1, 5, 2]];
    let targets = array![[1usize, 4, 1], [5, 2, 0]];
    let heads = 2usize;
    let inputs = [data::<f64>(&[6, 4], 1), data(&[3, 4], 2)];
    assert_same(
        "language_model",
        &inputs,
        |tape, v| {
            let (wte, wpe) = (v[0], v[1]);
            let loss = grad!(tape; wte: [V, C], wpe: [T, C], tokens: [B, T], targets: [B, T];
                let x = embedding(wte, &tokens) + wpe;
                let q = permute(reshape(x, [B, T, heads, C / heads]), [0, 2, 1, 3]);
                let x = x + reshape(permute(q, [0, 2, 1, 3]), [B, T, C]);
                cross_entropy(x @ transpose(wte), &targets)
            );
            assert!(tape.is_ok());
            loss
        },
        |tape, v| {
            let flat: Vec<usize> = tokens.iter().copied().collect();
            let e = g_embedding(tape, v[0], &flat);
            let e = g_reshape(tape, e, &[2, 3, 4]);
            let x = g_add(tape, e, v[1]);
            let q = g_reshape(tape, x, &[2, 3, 2, 2]);
            let q = g_permute(tape, q, &[0, 2, 1, 3]);
            let back = g_permute(tape, q, &[0, 2, 1, 3]);
            let back = g_reshape(tape, back, &[2, 3, 4]);
            let x = g_add(tape, x, back);
            let x = g_reshape(tape, x, &[6, 4]);
            let t = g_transpose(tape, v[0]);
            let logits = g_matmul(tape, x, t);
            let flat_targets: Vec<usize> = targets.iter().copied().collect();
            g_cross_entropy(tape, logits, &flat_targets)
        },
    );
}
