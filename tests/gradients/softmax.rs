//! `ops/softmax.rs`: `softmax` and `log_softmax` along an axis.

use grad_runtime::*;
use ndarray::{ArrayD, Axis, IxDyn, array};

use crate::common::{Rng, check_finite_differences, grads_with};
use crate::oracle::Case;

/// The oracle cases of this module's ops.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    let axis = || case.axis().expect("softmax cases name their axis");
    Some(match case.op() {
        "softmax" => g_softmax(tp, case.x(0), axis()),
        "log_softmax" => g_log_softmax(tp, case.x(0), axis()),
        _ => return None,
    })
}

#[test]
fn softmax_finite_differences_on_every_axis() {
    let mut rng = Rng::new(25);
    let x2 = rng.normal_array(&[3, 4]);
    let x3 = rng.normal_array(&[2, 3, 4]);
    for axis in [0, 1, -1, -2] {
        let program = move |tp: &mut Tape<f64>, v: &[Var]| g_softmax(tp, v[0], axis);
        check_finite_differences(&format!("g_softmax axis {axis}"), &program, std::slice::from_ref(&x2), 13);
    }
    for axis in [0, 1, 2, -1] {
        let program = move |tp: &mut Tape<f64>, v: &[Var]| g_softmax(tp, v[0], axis);
        check_finite_differences(&format!("g_softmax 3-D axis {axis}"), &program, std::slice::from_ref(&x3), 14);
    }
}

#[test]
fn softmax_of_equal_logits_has_an_exact_gradient() {
    // y = 1/4 everywhere, so the gradient y * (c - sum(c * y)) = (c - mean(c)) / 4.
    let x = ArrayD::from_elem(IxDyn(&[2, 4]), 3.0);
    let cot = array![[1.0, 2.0, 3.0, 6.0], [0.0, 0.0, 4.0, 0.0]].into_dyn();
    let g = grads_with(&[x], &cot, |tp, v| g_softmax(tp, v[0], -1));
    assert_eq!(g[0], array![[-0.5, -0.25, 0.0, 0.75], [-0.25, -0.25, 0.75, -0.25]].into_dyn());
}

#[test]
fn softmax_of_large_logits_is_finite_and_shift_invariant() {
    let x = array![[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]];
    let mut tape = Tape::<f32>::new();
    let big = tape.constant(x.mapv(|v| v as f32));
    let small = tape.constant(x.mapv(|v| v as f32) - 1000.0);
    let (a, b) = (g_softmax(&mut tape, big, 1), g_softmax(&mut tape, small, 1));
    let a = tape.value(a).into_dimensionality::<ndarray::Ix2>().unwrap().to_owned();
    assert!(a.iter().all(|v| v.is_finite()));
    assert_eq!(a.row(0).into_dyn(), tape.value(b).index_axis(Axis(0), 0));
    assert_eq!(a.row(1).to_vec(), [0.0, 0.0, 1.0]);
}

#[test]
fn log_softmax_finite_differences_and_exact_gradient() {
    let mut rng = Rng::new(42);
    for axis in [0, 1, -1] {
        let program = move |tp: &mut Tape<f64>, v: &[Var]| g_log_softmax(tp, v[0], axis);
        check_finite_differences(&format!("g_log_softmax axis {axis}"), &program, &[rng.normal_array(&[3, 4])], 4);
    }
    // Equal logits: softmax is exactly 1/4, so the gradient is g - sum(g) / 4.
    let cot = array![[1.0, 2.0, 3.0, 6.0]].into_dyn();
    let g = grads_with(&[ArrayD::from_elem(IxDyn(&[1, 4]), -2.0)], &cot, |tp, v| g_log_softmax(tp, v[0], -1));
    assert_eq!(g[0], array![[-2.0, -1.0, 0.0, 3.0]].into_dyn());
}
