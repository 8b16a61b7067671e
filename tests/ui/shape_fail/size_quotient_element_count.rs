use grad_runtime::{grad, Tape};
use ndarray::Array3;

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array3::<f32>::zeros((8, 16, 12)));
    // `B * T * C / T` is `B * C`: the reshape loses the factor T.
    let _rows = grad!(tape; x: [B, T, C]; reshape(x, [B * T * C / T, 1]));
}
