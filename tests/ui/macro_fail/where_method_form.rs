use grad_runtime::{grad, Tape};
use ndarray::Array1;

fn main() {
    let mut tape = Tape::<f32>::new();
    let a = tape.param(Array1::<f32>::zeros(3));
    let b = tape.param(Array1::<f32>::zeros(3));
    let mask = Array1::from_elem(3, true);
    let _y = grad!(tape; mask.where(a, b));
}
