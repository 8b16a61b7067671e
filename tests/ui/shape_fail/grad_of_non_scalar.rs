use grad_runtime::{grad, Tape};
use ndarray::Array2;

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array2::<f32>::zeros((4, 3)));
    let _g = grad!(tape; x: [4, 3]; grad(tanh(x), x));
}
