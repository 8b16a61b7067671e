use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::arr2(&[[1.0f32]]));
    let _a = grad!(tape; softmax(x));
    let _b = grad!(tape; relu(x, x));
    let _c = grad!(tape; x.concat(x));
    let _d = grad!(tape; sum(x, 0, true, 1));
}
