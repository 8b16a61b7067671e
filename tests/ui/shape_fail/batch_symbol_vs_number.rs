use grad_runtime::{grad, Tape};
use ndarray::Array2;

fn main() {
    let mut tape = Tape::<f32>::new();
    let y = tape.param(Array2::<f32>::zeros((64, 10)));
    let t = tape.constant(Array2::<f32>::zeros((64, 10)));
    let _loss = grad!(tape; y: [B, 10], t: [64, 10]; mse(y, t));
}
