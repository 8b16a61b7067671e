use grad_runtime::{grad, Tape};
use ndarray::Array3;

fn main() {
    let mut tape = Tape::<f32>::new();
    let qkv = tape.constant(Array3::<f32>::zeros((2, 16, 20)));
    let _y = grad!(tape; qkv: [B, T, 20]; attention_packed(qkv, 2, true));
}
