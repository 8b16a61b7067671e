use grad_runtime::{grad, Tape};
use ndarray::{Array1, Array3};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array3::<f32>::zeros((8, 16, 32)));
    let gamma = tape.param(Array1::<f32>::ones(16));
    let beta = tape.param(Array1::<f32>::zeros(32));
    let _y = grad!(tape; x: [B, T, D], gamma: [T], beta: [D]; layer_norm(x, gamma, beta, 1e-5));
}
