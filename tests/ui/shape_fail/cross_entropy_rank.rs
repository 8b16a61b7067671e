use grad_runtime::{grad, Tape};
use ndarray::Array1;

fn main() {
    let mut tape = Tape::<f32>::new();
    let logits = tape.constant(Array1::<f32>::zeros(100));
    let targets = vec![0usize; 1];
    let _loss = grad!(tape; logits: [V]; cross_entropy(logits, &targets));
}
