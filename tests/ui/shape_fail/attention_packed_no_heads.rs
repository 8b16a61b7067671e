use grad_runtime::{grad, Tape};
use ndarray::Array3;

fn main() {
    let mut tape = Tape::<f32>::new();
    let qkv = tape.constant(Array3::<f32>::zeros((2, 16, 24)));
    let _y = grad!(tape; qkv: [B, T, 24]; attention_packed(qkv, 0, true));
}
