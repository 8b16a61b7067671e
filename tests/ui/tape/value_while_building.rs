// Ops need the tape mutably: holding a value view while building the next
// op on the same tape does not compile.
use grad_runtime::{g_relu, Tape};
use ndarray::Array1;

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array1::<f32>::zeros(3));
    let view = tape.value(x);
    let y = g_relu(&mut tape, x);
    println!("{} {:?}", view[0], y);
}
