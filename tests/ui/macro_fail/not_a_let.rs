use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::arr2(&[[1.0f32]]));
    let _a = grad!(tape; h = relu(x); h);
    let _b = grad!(tape; relu(x); sigmoid(x));
    let _c = grad!(tape; let h = relu(x));
    let _d = grad!(tape; for i in 0..3 { x }; x);
}
