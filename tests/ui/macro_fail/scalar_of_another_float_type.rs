// A scalar of the other float type: the message names both types, not the
// expansion's helper types.
use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(grad_runtime::ndarray::arr1(&[1.0f32]));
    let scale = 0.5f64;
    let _fused = grad!(tape; tanh(x) * scale);
    let _unfused = grad!(#[nofuse] tape; x * scale);
}
