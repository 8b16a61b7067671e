use grad_runtime::{grad, Tape};
use ndarray::{Array1, Array2};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 784)));
    let v = tape.param(Array1::<f32>::zeros(784));
    let _y = grad!(tape; x: [B, 784], v: [784]; x @ v);
}
