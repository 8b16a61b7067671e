use grad_runtime::{grad, Tape};
use ndarray::Array2;

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 3)));
    let w = tape.param(Array2::<f32>::zeros((3, 4)));
    let _y = grad!(tape; x: [B, 3], w: [N, 4]; x @ w);
}
