// A call one slip away from a built-in is not taken for the user's own
// function; a path calls the user's function of that name.
use grad_runtime::{grad, Tape, Var};

fn sigmoud(tp: &mut Tape<f32>, x: Var) -> Var {
    grad!(tp; sigmoid(x) * 2.0)
}

fn main() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(grad_runtime::ndarray::arr2(&[[1.0f32]]));
    let _p = grad!(tape; sofmax(x, -1));
    let _q = grad!(tape; self::sigmoud(x) + sigmoud(x));
}
