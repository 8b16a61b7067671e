//! `ops/cross_entropy.rs`: cross-entropy of logits against class targets.

use grad_runtime::*;
use ndarray::{Array2, ArrayD, IxDyn, array, s};

use crate::common::{Rng, check_finite_differences, forward, grads_with};
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
fn cross_entropy_over_n_d_logits_is_the_flat_loss_of_their_rows() {
    let mut rng = Rng::new(47);
    let logits = rng.normal_array(&[2, 3, 4]);
    let targets: Array2<usize> = array![[3, 0, 1], [2, 2, 0]];
    let program = |tp: &mut Tape<f64>, v: &[Var]| g_cross_entropy(tp, v[0], &targets);
    check_finite_differences("g_cross_entropy (3-D)", &program, std::slice::from_ref(&logits), 7);
    // Exactly the 2-D loss of the rows [6, 4]: targets shaped [2, 3] or flat.
    let flat = targets.iter().copied().collect::<Vec<_>>();
    let rows = logits.clone().into_shape_with_order(IxDyn(&[6, 4])).unwrap();
    let cot = ArrayD::from_elem(IxDyn(&[]), 1.5);
    let want = grads_with(&[rows], &cot, |tp, v| g_cross_entropy(tp, v[0], &flat));
    for got in [
        grads_with(std::slice::from_ref(&logits), &cot, |tp, v| g_cross_entropy(tp, v[0], &targets)),
        grads_with(std::slice::from_ref(&logits), &cot, |tp, v| g_cross_entropy(tp, v[0], &flat)),
        grads_with(std::slice::from_ref(&logits), &cot, |tp, v| g_cross_entropy(tp, v[0], &targets.view())),
    ] {
        assert_eq!(got[0].as_slice().unwrap(), want[0].as_slice().unwrap());
    }
    let value = |targets: &dyn Fn(&mut Tape<f64>, Var) -> Var, x: &ArrayD<f64>| {
        let mut tape = Tape::<f64>::new();
        let x = tape.param(x);
        let loss = targets(&mut tape, x);
        tape.scalar(loss)
    };
    let rows = logits.clone().into_shape_with_order(IxDyn(&[6, 4])).unwrap();
    assert_eq!(
        value(&|tp, x| g_cross_entropy(tp, x, &targets), &logits).to_bits(),
        value(&|tp, x| g_cross_entropy(tp, x, &flat), &rows).to_bits()
    );
    // The same targets stored column-major agree too.
    let fortran = targets.t().to_owned().reversed_axes();
    assert_eq!(
        value(&|tp, x| g_cross_entropy(tp, x, &fortran), &logits).to_bits(),
        value(&|tp, x| g_cross_entropy(tp, x, &flat), &rows).to_bits()
    );
}

#[test]
fn n_d_targets_must_have_the_leading_shape_of_the_logits() {
    let mut tape = Tape::<f32>::new();
    let logits = tape.param(ArrayD::<f32>::zeros(IxDyn(&[2, 3, 4])));
    let loss = g_cross_entropy(&mut tape, logits, &Array2::<usize>::zeros((3, 2)));
    assert!(loss.is_poisoned());
    let error = tape.error().unwrap();
    assert_eq!(error.kind(), &ErrorKind::IndicesShape { what: "targets", expected: vec![2, 3], got: vec![3, 2] });
    assert!(
        error.to_string().starts_with(
            "g_cross_entropy: the targets are shaped [3, 2], expected [2, 3] (or a flat list of 6); input [2, 3, 4]"
        ),
        "{error}"
    );
    let mut tape = Tape::<f32>::new();
    let logits = tape.param(ArrayD::<f32>::zeros(IxDyn(&[2, 3, 4])));
    g_cross_entropy(&mut tape, logits, &[0; 5]);
    assert_eq!(tape.error().unwrap().kind(), &ErrorKind::IndexCount { what: "target", got: 5, expected: 6 });
    // A target out of range names its row-major position.
    let mut tape = Tape::<f32>::new();
    let logits = tape.param(ArrayD::<f32>::zeros(IxDyn(&[2, 3, 4])));
    g_cross_entropy(&mut tape, logits, &array![[0, 1, 2], [3, 4, 0]]);
    let kind = ErrorKind::IndexOutOfRange { what: "target class", position: 4, index: 4, len: 4 };
    assert_eq!(tape.error().unwrap().kind(), &kind);
    // 1-D logits are refused: the classes need an axis of rows before them.
    let mut tape = Tape::<f32>::new();
    let logits = tape.param(ArrayD::<f32>::zeros(IxDyn(&[4])));
    g_cross_entropy(&mut tape, logits, &[0]);
    assert!(matches!(tape.error().unwrap().kind(), ErrorKind::Rank { got: 1, .. }));
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
