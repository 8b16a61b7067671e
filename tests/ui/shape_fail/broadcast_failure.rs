use grad_runtime::{grad, Tape};
use ndarray::{Array2, Array3};

fn main() {
    let mut tape = Tape::<f32>::new();
    let a = tape.constant(Array3::<f32>::zeros((8, 3, 4)));
    let m = tape.param(Array2::<f32>::zeros((2, 4)));
    let _y = grad!(tape; a: [B, 3, 4], m: [2, 4]; a * m);
}
