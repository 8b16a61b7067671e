use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::arr2(&[[1.0f32]]));
    let _y = grad!(let h = relu(x); h);
    let _z = grad!(relu(x));
}
