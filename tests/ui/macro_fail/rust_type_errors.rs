use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::arr2(&[[1.0f32]]));
    let lr = 0.5f32;
    let not_a_tape = 3;
    let _a = grad!(tape; relu(lr));
    let _b = grad!(not_a_tape; relu(x));
    let _c = grad!(tape; lienar(x));
}
