use grad_runtime::{grad, Tape};
use ndarray::Array2;

fn main() {
    let mut tape = Tape::<f32>::new();
    let logits = tape.constant(Array2::<f32>::zeros((64, 10)));
    let _p = grad!(tape; logits: [B, 10]; softmax(logits, 2));
}
