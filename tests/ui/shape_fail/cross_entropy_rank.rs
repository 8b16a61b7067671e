use grad_runtime::{grad, Tape};
use ndarray::Array3;

fn main() {
    let mut tape = Tape::<f32>::new();
    let logits = tape.constant(Array3::<f32>::zeros((8, 16, 100)));
    let targets = vec![0usize; 128];
    let _loss = grad!(tape; logits: [B, T, V]; cross_entropy(logits, &targets));
}
