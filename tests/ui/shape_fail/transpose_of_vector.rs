use grad_runtime::{grad, Tape};
use ndarray::Array1;

fn main() {
    let mut tape = Tape::<f32>::new();
    let b = tape.param(Array1::<f32>::zeros(256));
    let _t = grad!(tape; b: [256]; transpose(b));
}
