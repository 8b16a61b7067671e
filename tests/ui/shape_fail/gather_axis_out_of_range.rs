use grad_runtime::{grad, Tape};
use ndarray::Array2;

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array2::<f32>::zeros((4, 6)));
    let index = Array2::<usize>::zeros((4, 2));
    let _y = grad!(tape; x: [B, 6]; gather(x, 2, &index));
}
