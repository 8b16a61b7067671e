use grad_runtime::{grad, Tape};
use ndarray::Array2;

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 784)));
    let w = tape.param(Array2::<f32>::zeros((256, 784)));
    let _h = grad!(tape; x: [B, 784], w: [256, 784]; relu(x @ w));
}
