use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::arr2(&[[1.0f32]]));
    let w = tape.param(ndarray::arr2(&[[2.0f32]]));
    let _a = grad!(tape; relu(x @ w +));
    let _b = grad!(tape; * x);
    let _c = grad!(tape; let h = ; h);
    let _d = grad!(tape; relu(x) w);
}
