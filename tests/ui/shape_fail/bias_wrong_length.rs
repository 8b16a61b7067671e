use grad_runtime::{grad, Tape};
use ndarray::{Array1, Array2};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 784)));
    let w = tape.param(Array2::<f32>::zeros((784, 256)));
    let b = tape.param(Array1::<f32>::zeros(128));
    let _h = grad!(tape; x: [B, 784], w: [784, 256], b: [128]; relu(x @ w + b));
}
