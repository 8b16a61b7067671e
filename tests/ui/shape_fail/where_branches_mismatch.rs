use grad_runtime::{grad, Tape};
use ndarray::{Array2, Array3};

fn main() {
    let mut tape = Tape::<f32>::new();
    let scores = tape.param(Array3::<f32>::zeros((8, 4, 4)));
    let fill = tape.constant(Array2::<f32>::zeros((4, 5)));
    let mask = Array2::from_elem((4, 4), true);
    let _y = grad!(tape; scores: [B, T, T], fill: [T, 5]; where(&mask, scores, fill));
}
