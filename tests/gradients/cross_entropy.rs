//! `ops/cross_entropy.rs`: cross-entropy of logits against class targets.

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn, array, s};

use crate::common::{Rng, check_finite_differences, forward};
use crate::oracle::Case;

/// The oracle cases of this module's op.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    (case.op() == "cross_entropy").then(|| g_cross_entropy(tp, case.x(0), case.indices(1)))
}

#[test]
fn cross_entropy_finite_differences_and_exact_gradient() {
    let mut rng = Rng::new(43);
    let logits = rng.normal_array(&[4, 5]);
    let program = |tp: &mut Tape<f64>, v: &[Var]| g_cross_entropy(tp, v[0], &[2, 0, 4, 0]);
    check_finite_differences("g_cross_entropy", &program, &[logits], 5);
    // Equal logits over 4 classes: loss ln 4, gradient (1/4 - onehot) / N.
    let mut tape = Tape::<f64>::new();
    let logits = tape.param(ArrayD::<f64>::zeros(IxDyn(&[2, 4])));
    let loss = g_cross_entropy(&mut tape, logits, &[1, 3]);
    tape.backward(loss).unwrap();
    assert_eq!(tape.scalar(loss), 4f64.ln());
    assert_eq!(tape.grad(logits), array![[0.125, -0.375, 0.125, 0.125], [0.125, 0.125, 0.125, -0.375]].into_dyn());
}

#[test]
fn logits_of_a_thousand_give_finite_correct_losses_and_gradients() {
    confident_wrong_row_costs_its_logit_gap::<f32>();
    confident_wrong_row_costs_its_logit_gap::<f64>();
    let mut tape = Tape::<f64>::new();
    let logits = tape.param(array![[1000.0, 0.0, -1000.0], [0.0, 1000.0, 1000.0]]);
    let right = g_cross_entropy(&mut tape, logits, &[0, 1]);
    tape.backward(right).unwrap();
    // Row 0 is certain and right (loss 0); row 1 splits evenly (loss ln 2).
    assert_eq!(tape.scalar(right), 2f64.ln() / 2.0);
    assert_eq!(tape.grad(logits), array![[0.0, 0.0, 0.0], [0.0, -0.25, 0.25]].into_dyn());

    let mut tape = Tape::<f64>::new();
    let logits = tape.param(array![[1000.0, 0.0]]);
    let wrong = g_cross_entropy(&mut tape, logits, &[1]);
    tape.backward(wrong).unwrap();
    assert_eq!(tape.scalar(wrong), 1000.0);
    assert_eq!(tape.grad(logits), array![[1.0, -1.0]].into_dyn());

    let ls = forward(&[array![[1000.0, 1000.0, 1000.0], [-1000.0, 0.0, 1000.0]].into_dyn()], |tp, v| {
        g_log_softmax(tp, v[0], -1)
    });
    assert_eq!(ls.slice(s![0, ..]).to_vec(), vec![-(3f64.ln()); 3]);
    assert_eq!(ls.slice(s![1, ..]).to_vec(), [-2000.0, -1000.0, 0.0]);
}

#[test]
fn cross_entropy_targets_are_checked() {
    let mut tape = Tape::<f32>::new();
    let logits = tape.param(ArrayD::<f32>::zeros(IxDyn(&[3, 4])));
    g_cross_entropy(&mut tape, logits, &[0, 4, 1]);
    let error = tape.error().unwrap().to_string();
    assert!(
        error
            .starts_with("g_cross_entropy: target class 4 at position 1 is out of range (valid: 0 to 3); input [3, 4]"),
        "{error}"
    );

    let mut tape = Tape::<f32>::new();
    let logits = tape.param(ArrayD::<f32>::zeros(IxDyn(&[3, 4])));
    g_cross_entropy(&mut tape, logits, &[0, 1]);
    assert_eq!(tape.error().unwrap().kind(), &ErrorKind::IndexCount { what: "target", got: 2, expected: 3 });
}

/// A row of logits `[1000, -1000, 0]` with target 2: the loss is exactly
/// 1000 and every gradient finite, in either float type.
fn confident_wrong_row_costs_its_logit_gap<T: Float>() {
    let mut tape = Tape::<T>::new();
    let logits = tape.param(array![[1000.0, -1000.0, 0.0]].mapv(T::from_f64));
    let loss = g_cross_entropy(&mut tape, logits, &[2]);
    tape.backward(loss).unwrap();
    assert_eq!(tape.scalar(loss), T::from_f64(1000.0));
    assert!(tape.grad(logits).iter().all(|g| g.is_finite()));
}
