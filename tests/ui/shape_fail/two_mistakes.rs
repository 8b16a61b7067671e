use grad_runtime::{grad, Tape};
use ndarray::{Array1, Array2};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 784)));
    let w = tape.param(Array2::<f32>::zeros((784, 10)));
    let b = tape.param(Array1::<f32>::zeros(5));
    let t = tape.constant(Array2::<f32>::zeros((64, 1)));
    let _loss = grad!(tape; x: [B, 784], w: [784, 10], b: [5], t: [B, 1];
        let logits = x @ w + b;
        mse(softmax(x @ w, -1), t)
    );
}
