use grad_runtime::{grad, Tape};
use ndarray::Array3;

fn main() {
    let mut tape = Tape::<f32>::new();
    let a = tape.constant(Array3::<f32>::zeros((8, 16, 32)));
    let b = tape.constant(Array3::<f32>::zeros((4, 32, 16)));
    let _y = grad!(tape; a: [8, T, D], b: [4, D, T]; a @ b);
}
