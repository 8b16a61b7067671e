use grad_runtime::{grad, Tape};
use ndarray::{Array1, Array4};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array4::<f32>::zeros((8, 6, 5, 5)));
    let (gamma, beta) = (tape.param(Array1::<f32>::ones(6)), tape.param(Array1::<f32>::zeros(6)));
    let _y = grad!(tape; x: [B, 6, 5, 5], gamma: [6], beta: [6]; group_norm(x, 4, gamma, beta, 1e-5));
}
