use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::arr2(&[[1.0f32]]));
    let y = tape.param(ndarray::arr2(&[[2.0f32]]));
    let _a = grad!(tape; x % y);
    let _b = grad!(tape; x ** 2);
    let _c = grad!(tape; x ^ 2);
    let _d = grad!(tape; x += y; x);
}
