//! `ops/cumsum.rs`: running sums along an axis.

use grad_runtime::*;
use ndarray::{Array2, array};

use crate::common::{Rng, check_finite_differences, forward, grads_with, integers};
use crate::oracle::Case;

/// The oracle cases of this module's op.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    (case.op() == "cumsum").then(|| g_cumsum(tp, case.x(0), case.axis().expect("cumsum has an axis")))
}

#[test]
fn cumsum_finite_differences_on_every_axis() {
    let x = Rng::new(161).normal_array(&[2, 3, 4]);
    for (seed, axis) in [0, 1, 2, -1, -3].into_iter().enumerate() {
        let program = move |tp: &mut Tape<f64>, v: &[Var]| g_cumsum(tp, v[0], axis);
        check_finite_differences(&format!("g_cumsum axis {axis}"), &program, std::slice::from_ref(&x), seed as u64);
    }
    let empty = Rng::new(162).normal_array(&[2, 0, 3]);
    check_finite_differences("g_cumsum empty", &|tp, v| g_cumsum(tp, v[0], 1), &[empty], 9);
}

#[test]
fn cumsum_gradient_is_the_reverse_running_sum_of_the_seed() {
    let x = integers(&[2, 4], 1.0);
    let value = forward(std::slice::from_ref(&x), |tp, v| g_cumsum(tp, v[0], -1));
    assert_eq!(value, array![[1.0, 3.0, 6.0, 10.0], [5.0, 11.0, 18.0, 26.0]].into_dyn());
    let cot = integers(&[2, 4], 1.0);
    let g = grads_with(&[x], &cot, |tp, v| g_cumsum(tp, v[0], 1));
    assert_eq!(g[0], array![[10.0, 9.0, 7.0, 4.0], [26.0, 21.0, 15.0, 8.0]].into_dyn());
    let g = grads_with(&[integers(&[2, 4], 1.0)], &cot, |tp, v| g_cumsum(tp, v[0], 0));
    assert_eq!(g[0], array![[6.0, 8.0, 10.0, 12.0], [5.0, 6.0, 7.0, 8.0]].into_dyn());
}

#[test]
fn cumsum_axis_out_of_range_is_an_error() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array2::<f32>::zeros((2, 3)));
    assert!(g_cumsum(&mut tape, x, 2).is_poisoned());
    let error = tape.error().unwrap().to_string();
    assert_eq!(
        error.split(" (at").next().unwrap(),
        "g_cumsum: axis 2 is out of range for a 2-D input (valid: -2 to 1); input [2, 3]"
    );
}
