// A mismatch inside a chain that fuses: reported on the sub-expression
// that cannot broadcast, naming both shapes, as without fusion.
use grad_runtime::{grad, Tape};
use ndarray::{Array1, Array2};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((8, 3)));
    let b = tape.param(Array1::<f32>::zeros(4));
    let _y = grad!(tape; x: [B, 3], b: [4]; sum(tanh(x * 0.5 + b) * 2.0));
}
