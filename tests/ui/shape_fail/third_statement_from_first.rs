use grad_runtime::{grad, Tape};
use ndarray::Array2;

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 784)));
    let w1 = tape.param(Array2::<f32>::zeros((784, 256)));
    let w2 = tape.param(Array2::<f32>::zeros((128, 10)));
    let _logits = grad!(tape; x: [B, 784], w1: [784, 256], w2: [128, 10];
        let h = x @ w1;
        let a = relu(h);
        a @ w2
    );
}
