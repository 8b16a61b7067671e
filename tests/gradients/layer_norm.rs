//! `ops/layer_norm.rs`: layer normalization over the last axis.

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn, array};

use crate::common::{Rng, check_finite_differences, forward, grads_with};
use crate::oracle::Case;

/// The oracle cases of this module's op.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    (case.op() == "layer_norm").then(|| g_layer_norm(tp, case.x(0), case.x(1), case.x(2), case.number("eps")))
}

#[test]
fn layer_norm_finite_differences_for_all_three_inputs() {
    let mut rng = Rng::new(47);
    // Rows shorter than the row sums' 16 lanes, and longer with a tail.
    for (shape, dim) in [(&[2, 3, 5][..], 5), (&[3, 37][..], 37)] {
        let inputs = [rng.normal_array(shape), rng.normal_array(&[dim]), rng.normal_array(&[dim])];
        let program = |tp: &mut Tape<f64>, v: &[Var]| g_layer_norm(tp, v[0], v[1], v[2], 1e-5);
        check_finite_differences("g_layer_norm", &program, &inputs, 7);
    }
}

#[test]
fn layer_norm_identities_hold_exactly() {
    // Two-element rows normalize to exactly [-1, 1] whatever their values,
    // so the input gradient is exactly zero; beta's gradient sums g.
    let x = array![[3.0, 5.0], [-4.0, 10.0], [7.0, 1.0]].into_dyn();
    let cot = array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]].into_dyn();
    let inputs = [x.clone(), array![2.0, 3.0].into_dyn(), array![0.5, -0.5].into_dyn()];
    let g = grads_with(&inputs, &cot, |tp, v| g_layer_norm(tp, v[0], v[1], v[2], 0.0));
    assert_eq!(g[0], ArrayD::<f64>::zeros(IxDyn(&[3, 2])));
    assert_eq!(g[1], array![-1.0 - 3.0 + 5.0, 2.0 + 4.0 - 6.0].into_dyn());
    assert_eq!(g[2], array![9.0, 12.0].into_dyn());
    let y = forward(&inputs, |tp, v| g_layer_norm(tp, v[0], v[1], v[2], 0.0));
    assert_eq!(y, array![[-1.5, 2.5], [-1.5, 2.5], [2.5, -3.5]].into_dyn());
}

#[test]
fn layer_norm_parameters_must_match_the_last_axis() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(ArrayD::<f32>::zeros(IxDyn(&[4, 8])));
    let gamma = tape.param(ArrayD::<f32>::ones(IxDyn(&[8])));
    let beta = tape.param(ArrayD::<f32>::zeros(IxDyn(&[4])));
    g_layer_norm(&mut tape, x, gamma, beta, 1e-5);
    let error = tape.error().unwrap();
    assert_eq!(error.kind(), &ErrorKind::ShapeMismatch);
    assert!(error.to_string().contains("[4, 8] and [8] and [4]"), "{error}");
}

/// Rows large enough to be shared out between threads in groups give, to
/// the bit, what each row gives alone: value and input gradient.
#[test]
fn rows_shared_out_in_groups_match_each_row_alone() {
    let mut rng = Rng::new(48);
    let (rows, dim) = (300, 512);
    let inputs = [rng.normal_array(&[rows, dim]), rng.normal_array(&[dim]), rng.normal_array(&[dim])];
    let mut tape = Tape::<f64>::new();
    let [x, gamma, beta] = [0, 1, 2].map(|i| tape.param(&inputs[i]));
    let y = g_layer_norm(&mut tape, x, gamma, beta, 1e-5);
    let t = g_tanh(&mut tape, y);
    let loss = g_sum(&mut tape, t);
    tape.backward(loss).unwrap();
    let (whole, whole_dx) = (tape.value(y).to_owned(), tape.grad(x).to_owned());
    for r in [0, 1, rows / 2, rows - 1] {
        let mut tape = Tape::<f64>::new();
        let row = inputs[0].slice(ndarray::s![r..r + 1, ..]).to_owned().into_dyn();
        let (x, gamma, beta) = (tape.param(row), tape.param(&inputs[1]), tape.param(&inputs[2]));
        let y = g_layer_norm(&mut tape, x, gamma, beta, 1e-5);
        let t = g_tanh(&mut tape, y);
        let loss = g_sum(&mut tape, t);
        tape.backward(loss).unwrap();
        assert_eq!(tape.value(y).slice(ndarray::s![0, ..]), whole.slice(ndarray::s![r, ..]), "value of row {r}");
        assert_eq!(tape.grad(x).slice(ndarray::s![0, ..]), whole_dx.slice(ndarray::s![r, ..]), "gradient of row {r}");
    }
}

#[test]
fn scale_and_shift_gradients_over_many_rows_are_their_sums() {
    // Enough rows for the parameters' gradients to be summed in blocks on
    // two threads: the shift's is `Σ g` (exact here: integer cotangents),
    // the scale's `Σ g · x̂`, against the same sum formed here in f64.
    let mut rng = Rng::new(49);
    let (rows, dim) = (700, 64);
    let x = rng.normal_array(&[rows, dim]);
    let cot = ArrayD::from_shape_fn(IxDyn(&[rows, dim]), |i| ((i[0] * 7 + i[1] * 3) % 11) as f64 - 5.0);
    let inputs = [x.clone(), rng.normal_array(&[dim]), rng.normal_array(&[dim])];
    let g = grads_with(&inputs, &cot, |tp, v| g_layer_norm(tp, v[0], v[1], v[2], 1e-5));
    let shift = cot.sum_axis(ndarray::Axis(0));
    assert_eq!(g[2], shift);
    let mut scale = ArrayD::<f64>::zeros(IxDyn(&[dim]));
    for (row, g_row) in x.outer_iter().zip(cot.outer_iter()) {
        let mean = row.mean().unwrap();
        let rstd = 1.0 / (row.mapv(|v| (v - mean) * (v - mean)).mean().unwrap() + 1e-5).sqrt();
        scale.zip_mut_with(&(&g_row * &row.mapv(|v| (v - mean) * rstd)), |s, &t| *s += t);
    }
    let error = (&g[1] - &scale).mapv(f64::abs).fold(0.0f64, |m, &e| m.max(e));
    assert!(error < 1e-9, "the scale's gradient is off by {error}");
}
