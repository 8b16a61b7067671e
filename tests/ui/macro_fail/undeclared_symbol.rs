// In a block that declares symbols, a dims entry written like a symbol
// must be one of them; `{D}` is a Rust constant.
use grad_runtime::{grad, Tape};

const D: usize = 4;

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(grad_runtime::ndarray::Array3::<f32>::zeros((2, 3, 4)));
    let _y = grad!(tape; x: [B, T, 4]; reshape(x, [B * T, D]));
    let _z = grad!(tape; x: [B, T, 4]; reshape(x, [B * T, {D}]));
}
