use grad_runtime::{grad, Tape};
use ndarray::Array4;

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array4::<f32>::zeros((4, 8, 4, 4)));
    let k = tape.param(Array4::<f32>::zeros((8, 8, 3, 3)));
    // The pooled map is [B, 8, 2, 2]: a 3x3 kernel without padding does not fit.
    let _y = grad!(tape; x: [B, 8, 4, 4], k: [8, 8, 3, 3];
        let pooled = max_pool2d(x, [2, 2], [2, 2]);
        conv2d(pooled, k, None));
}
