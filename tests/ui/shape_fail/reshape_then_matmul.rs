use grad_runtime::{grad, Tape};
use ndarray::{Array2, Array3};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array3::<f32>::zeros((8, 16, 32)));
    let w = tape.param(Array2::<f32>::zeros((16, 32)));
    let _y = grad!(tape; x: [B, T, D], w: [T, D];
        let flat = reshape(x, [B * T, D]);
        flat @ w
    );
}
