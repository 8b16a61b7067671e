use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::arr2(&[[1.0f32]]));
    let _a = grad!(tape; let mut h = relu(x); h);
    let _b = grad!(tape; let (a, b) = (x, x); a);
    let _c = grad!(tape; let h: [B, 3] = relu(x); h);
    let _d = grad!(tape; x, x);
    let _e = grad!(tape; let h = relu(x); x: [B, 3]; h);
}
