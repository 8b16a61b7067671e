// A gradient view cannot outlive the tape it borrows from.
use grad_runtime::{g_sum, Tape};
use ndarray::Array1;

fn main() {
    let view = {
        let mut tape = Tape::<f32>::new();
        let x = tape.param(Array1::<f32>::ones(3));
        let loss = g_sum(&mut tape, x);
        tape.backward(loss).unwrap();
        tape.grad(x)
    };
    println!("{}", view[0]);
}
