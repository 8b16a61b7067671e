use grad_runtime::{grad, Tape};
use ndarray::Array2;

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 10)));
    let _s = grad!(tape; x: [B, 10]; slice(x, [0, 2], [B, 12]));
}
