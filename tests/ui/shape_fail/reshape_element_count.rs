use grad_runtime::{grad, Tape};
use ndarray::Array2;

fn main() {
    let mut tape = Tape::<f32>::new();
    let images = tape.constant(Array2::<f32>::zeros((64, 784)));
    let _x = grad!(tape; images: [B, 784]; reshape(images, [B, 28, 27]));
}
