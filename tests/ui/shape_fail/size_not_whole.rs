use grad_runtime::{grad, Tape};
use ndarray::Array3;

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array3::<f32>::zeros((8, 16, 12)));
    // 12 / 5 is not a size; neither is 4 - 5.
    let _heads = grad!(tape; x: [B, T, 12]; reshape(x, [B, T, 5, 12 / 5]));
    let _past = grad!(tape; x: [B, T, 12]; slice(x, [0, 0, 0], [B, T, 4 - 5]));
}
