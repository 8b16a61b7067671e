use grad_runtime::{grad, Tape};
use ndarray::{Array1, Array4};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array4::<f32>::zeros((8, 16, 5, 5)));
    let (mean, var) = (tape.buffer(Array1::<f32>::zeros(16)), tape.buffer(Array1::<f32>::ones(16)));
    let (gamma, beta) = (tape.param(Array1::<f32>::ones(16)), tape.param(Array1::<f32>::zeros(8)));
    let _y = grad!(tape; x: [B, 16, 5, 5], mean: [16], var: [16], gamma: [16], beta: [8];
        batch_norm(x, mean, var, gamma, beta, true, 0.1, 1e-5));
}
