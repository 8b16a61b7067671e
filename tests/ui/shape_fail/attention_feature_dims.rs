use grad_runtime::{grad, Tape};
use ndarray::Array4;

fn main() {
    let mut tape = Tape::<f32>::new();
    let q = tape.constant(Array4::<f32>::zeros((2, 4, 16, 32)));
    let k = tape.constant(Array4::<f32>::zeros((2, 4, 16, 8)));
    let v = tape.constant(Array4::<f32>::zeros((2, 4, 16, 32)));
    let _y = grad!(tape; q: [B, H, T, D], k: [B, H, T, 8], v: [B, H, T, D]; attention(q, k, v, true));
}
