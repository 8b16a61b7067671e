use grad_runtime::{grad, Tape};
use ndarray::{Array2, Array3};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array3::<f32>::zeros((2, 3, 4)));
    let w = tape.param(Array2::<f32>::zeros((4, 5)));
    let _y = grad!(tape; x: [B, 3, 4], w: [4, 5]; flatten(x, 1) @ w);
}
