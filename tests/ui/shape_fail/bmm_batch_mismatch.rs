use grad_runtime::{grad, Tape};
use ndarray::Array3;

fn main() {
    let mut tape = Tape::<f32>::new();
    let q = tape.constant(Array3::<f32>::zeros((8, 16, 32)));
    let k = tape.constant(Array3::<f32>::zeros((4, 32, 16)));
    let _s = grad!(tape; q: [H, T, D], k: [G, D, T]; bmm(q, k));
}
