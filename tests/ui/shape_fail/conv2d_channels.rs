use grad_runtime::{grad, Tape};
use ndarray::{Array1, Array4};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array4::<f32>::zeros((4, 1, 8, 8)));
    let k = tape.param(Array4::<f32>::zeros((16, 3, 3, 3)));
    let b = tape.param(Array1::<f32>::zeros(16));
    let _y = grad!(tape; x: [B, 1, 8, 8], k: [16, 3, 3, 3]; relu(conv2d(x, k, Some(b), [1, 1], [1, 1])));
}
