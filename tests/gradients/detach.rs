//! `g_detach`: the value passes, the gradient does not. Finite differences
//! cannot check a stop-gradient (the function does depend on what it
//! detaches), so the checks are identities: the gradient of a function of
//! `detach(x)` is the gradient with `x` held as a constant, to the bit.

use grad_runtime::*;
use ndarray::array;

use crate::common::Rng;
use crate::oracle::Case;

/// The oracle cases of this module's op: `x · stop(x) · y`.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    (case.op() == "mul_detach").then(|| {
        let (x, y) = (case.x(0), case.x(1));
        let fixed = g_detach(tp, x);
        let xx = g_mul(tp, x, fixed);
        g_mul(tp, xx, y)
    })
}

#[test]
fn detach_copies_the_value_and_passes_no_gradient() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(array![[1.5, -2.0], [0.25, 3.0]]);
    let d = g_detach(&mut tape, x);
    assert_eq!(tape.value(d), tape.value(x));
    let loss = g_sum(&mut tape, d);
    tape.backward(loss).unwrap();
    assert_eq!(tape.grad(x), array![[0.0, 0.0], [0.0, 0.0]].into_dyn());
    assert!(format!("{tape:?}").contains("#1 g_detach [2, 2]"));
}

#[test]
fn a_detached_factor_is_a_constant_to_backward() {
    // d/dx sum(tanh(x) · stop(x²)) = (1 - tanh²x) · x², the gradient with
    // x² a constant copied onto the tape.
    let mut rng = Rng::new(50);
    let x0 = rng.normal_array(&[3, 4]);
    let run = |detached: bool| {
        let mut tape = Tape::<f64>::new();
        let x = tape.param(&x0);
        let square = if detached {
            let xx = g_mul(&mut tape, x, x);
            g_detach(&mut tape, xx)
        } else {
            tape.constant(x0.mapv(|v| v * v))
        };
        let t = g_tanh(&mut tape, x);
        let y = g_mul(&mut tape, t, square);
        let loss = g_sum(&mut tape, y);
        tape.backward(loss).unwrap();
        (tape.scalar(loss), tape.grad(x).to_owned())
    };
    assert_eq!(run(true), run(false));
}

#[test]
fn detach_in_a_grad_block_splits_the_fused_region() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(array![1.0, 2.0, 3.0]);
    let loss = grad!(tape; x: [N]; sum(x * detach(x * 2.0)));
    tape.backward(loss).unwrap();
    assert_eq!(tape.scalar(loss), 28.0);
    assert_eq!(tape.grad(x), array![2.0, 4.0, 6.0].into_dyn());
}

#[test]
fn a_bad_handle_to_detach_is_an_error_naming_it() {
    let mut tape = Tape::<f64>::new();
    let mark = tape.mark();
    let x = tape.param(array![1.0]);
    tape.reset_to(mark);
    g_detach(&mut tape, x);
    let err = tape.error().unwrap();
    assert_eq!((err.op(), err.kind()), ("g_detach", &ErrorKind::StaleVar));
}
