// Rust type errors inside a fused region point at the operand.
use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::arr1(&[1.0f32]));
    let lr = 0.5f32;
    let n = 3usize;
    let _a = grad!(tape; tanh(lr) * 2.0);
    let _b = grad!(tape; x * n + 1);
}
