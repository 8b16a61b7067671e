// A view returned by `tape.value` borrows the tape: rewinding the tape while
// the view is alive must not compile, so no view can outlive its node.
use grad_runtime::Tape;
use ndarray::Array1;

fn main() {
    let mut tape = Tape::<f32>::new();
    let mark = tape.mark();
    let x = tape.constant(Array1::<f32>::zeros(3));
    let view = tape.value(x);
    tape.reset_to(mark);
    println!("{}", view[0]);
}
