use grad_runtime::{grad, Tape};
use ndarray::{Array2, Array4};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array4::<f32>::zeros((4, 1, 8, 8)));
    let k = tape.param(Array4::<f32>::zeros((16, 1, 3, 3)));
    let w = tape.param(Array2::<f32>::zeros((1024, 10)));
    // padding 1 keeps 8x8, and the pool halves it: [B, 16, 4, 4] is 256 features, not 1024.
    let _y = grad!(tape; x: [B, 1, 8, 8], k: [16, 1, 3, 3], w: [1024, 10];
        let h = avg_pool2d(relu(conv2d(x, k, None, [1, 1], [1, 1])), [2, 2], [2, 2]);
        reshape(h, [B, 256]) @ w);
}
