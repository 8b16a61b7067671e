use grad_runtime::{grad, Tape};

fn main() {
    let mut tape = Tape::<f32>::new();
    let _a = grad!(tape;);
    let _b = grad!(tape);
    let _c = grad!();
}
