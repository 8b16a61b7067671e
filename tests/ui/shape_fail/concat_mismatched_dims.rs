use grad_runtime::{grad, Tape};
use ndarray::Array2;

fn main() {
    let mut tape = Tape::<f32>::new();
    let a = tape.constant(Array2::<f32>::zeros((64, 3)));
    let b = tape.constant(Array2::<f32>::zeros((64, 5)));
    let _c = grad!(tape; a: [B, 3], b: [B, 5]; concat(a, b, 0));
}
