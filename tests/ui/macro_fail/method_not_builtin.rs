use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::arr2(&[[1.0f32]]));
    let _a = grad!(tape; x.linear(x));
    let _b = grad!(tape; x[0]);
    let _c = grad!(tape; &x);
}
