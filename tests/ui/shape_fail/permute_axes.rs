use grad_runtime::{grad, Tape};
use ndarray::Array4;

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array4::<f32>::zeros((2, 8, 4, 16)));
    let _heads = grad!(tape; x: [B, T, H, D]; permute(x, [0, 2, 2, 3]));
}
