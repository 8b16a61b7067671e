use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::arr1(&[1.0f32]));
    let _a = grad!(#[fuse] tape; relu(x) + 1);
    let _b = grad!(#[nofuse]);
}
