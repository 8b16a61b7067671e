use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let logits = tape.param(ndarray::Array2::<f32>::zeros((4, 3)));
    let labels = vec![0usize, 2, 1, 1];
    let _loss = grad!(tape; logits: [B, C]; checkpoint(cross_entropy(logits * 2.0, &labels)));
    let _number = grad!(tape; checkpoint(2.0));
}
