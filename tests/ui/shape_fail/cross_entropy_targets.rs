use grad_runtime::{grad, Tape};
use ndarray::{Array2, Array3};

fn main() {
    let mut tape = Tape::<f32>::new();
    let logits = tape.constant(Array3::<f32>::zeros((8, 16, 65)));
    // The targets of a [B, T, V] batch transposed by mistake.
    let targets = Array2::<usize>::zeros((16, 8));
    let _loss = grad!(tape; logits: [B, T, V], targets: [T, B]; cross_entropy(logits, &targets));
}
