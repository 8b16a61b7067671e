use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::arr2(&[[1.0f32]]));
    let _a = grad!(tape; softmax(x, 1.5));
    let _b = grad!(tape; reshape(x, 4));
    let _c = grad!(tape; relu(2.0));
    let _d = grad!(tape; 2.0 @ x);
    let _e = grad!(tape; sum(x, 0, 1));
}
