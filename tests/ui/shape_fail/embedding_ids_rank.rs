use grad_runtime::{grad, Tape};
use ndarray::Array2;

fn main() {
    let mut tape = Tape::<f32>::new();
    let wte = tape.param(Array2::<f32>::zeros((65, 32)));
    let ids = Array2::<usize>::zeros((8, 16));
    // Ids [B, T] give [B, T, C]: a reshape to [B * T, C] is no longer needed,
    // and one to [B, C] loses T.
    let _x = grad!(tape; wte: [V, C], ids: [B, T]; reshape(embedding(wte, &ids), [B, C]));
}
