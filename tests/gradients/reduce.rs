//! `ops/reduce.rs`: `sum` and `mean` over everything or one axis, `max`
//! over one axis, and `argmax`.

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn, array, s};

use crate::common::{Rng, check_finite_differences, forward, grads_with, integers, scalar};
use crate::oracle::Case;

/// The oracle cases of this module's ops.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    Some(match (case.op(), case.axis()) {
        ("sum", None) => g_sum(tp, case.x(0)),
        ("mean", None) => g_mean(tp, case.x(0)),
        ("sum", Some(axis)) => g_sum_axis(tp, case.x(0), axis, case.flag("keepdim")),
        ("mean", Some(axis)) => g_mean_axis(tp, case.x(0), axis, case.flag("keepdim")),
        ("max", Some(axis)) => g_max_axis(tp, case.x(0), axis, case.flag("keepdim")),
        ("min", Some(axis)) => g_min_axis(tp, case.x(0), axis, case.flag("keepdim")),
        _ => return None,
    })
}

#[test]
fn sum_and_mean_finite_differences() {
    let mut rng = Rng::new(21);
    for shape in [&[3, 4][..], &[2, 3, 4], &[7], &[]] {
        let x = rng.normal_array(shape);
        check_finite_differences("g_sum", &|tp, v| g_sum(tp, v[0]), std::slice::from_ref(&x), 1);
        check_finite_differences("g_mean", &|tp, v| g_mean(tp, v[0]), &[x], 2);
    }
}

#[test]
fn sum_gradient_is_the_seed_everywhere_and_mean_divides_by_the_count() {
    let g = grads_with(&[integers(&[2, 3, 4], 1.0)], &scalar(1.5), |tp, v| g_sum(tp, v[0]));
    assert_eq!(g[0], ArrayD::from_elem(IxDyn(&[2, 3, 4]), 1.5));
    let g = grads_with(&[integers(&[2, 4], 1.0)], &scalar(1.0), |tp, v| g_mean(tp, v[0]));
    assert_eq!(g[0], ArrayD::from_elem(IxDyn(&[2, 4]), 0.125));
}

#[test]
fn axis_reductions_finite_differences_on_every_axis() {
    let mut rng = Rng::new(41);
    let x = rng.normal_array(&[2, 3, 4]);
    for axis in [0, 1, 2, -1, -3] {
        for keepdim in [false, true] {
            let label = format!("axis {axis} keepdim {keepdim}");
            let sum = move |tp: &mut Tape<f64>, v: &[Var]| g_sum_axis(tp, v[0], axis, keepdim);
            check_finite_differences(&format!("g_sum_axis {label}"), &sum, std::slice::from_ref(&x), 1);
            let mean = move |tp: &mut Tape<f64>, v: &[Var]| g_mean_axis(tp, v[0], axis, keepdim);
            check_finite_differences(&format!("g_mean_axis {label}"), &mean, std::slice::from_ref(&x), 2);
            let max = move |tp: &mut Tape<f64>, v: &[Var]| g_max_axis(tp, v[0], axis, keepdim);
            check_finite_differences(&format!("g_max_axis {label}"), &max, std::slice::from_ref(&x), 3);
            let min = move |tp: &mut Tape<f64>, v: &[Var]| g_min_axis(tp, v[0], axis, keepdim);
            check_finite_differences(&format!("g_min_axis {label}"), &min, std::slice::from_ref(&x), 4);
        }
    }
}

#[test]
fn axis_reductions_have_exact_gradients_and_shapes() {
    let x = integers(&[2, 3, 4], 1.0);
    let g = grads_with(std::slice::from_ref(&x), &ArrayD::<f64>::ones(IxDyn(&[2, 4])), |tp, v| {
        g_sum_axis(tp, v[0], 1, false)
    });
    assert_eq!(g[0], ArrayD::<f64>::ones(IxDyn(&[2, 3, 4])));
    let g = grads_with(std::slice::from_ref(&x), &ArrayD::<f64>::ones(IxDyn(&[2, 3, 1])), |tp, v| {
        g_mean_axis(tp, v[0], -1, true)
    });
    assert_eq!(g[0], ArrayD::from_elem(IxDyn(&[2, 3, 4]), 0.25));
    assert_eq!(forward(std::slice::from_ref(&x), |tp, v| g_sum_axis(tp, v[0], 0, true)).shape(), &[1, 3, 4]);
    assert_eq!(
        forward(std::slice::from_ref(&x), |tp, v| g_sum_axis(tp, v[0], 0, false)),
        (&x.slice(s![0, .., ..]) + &x.slice(s![1, .., ..])).into_dyn()
    );
    assert_eq!(
        forward(std::slice::from_ref(&x), |tp, v| g_max_axis(tp, v[0], 2, false)),
        x.slice(s![.., .., 3]).into_dyn()
    );
}

#[test]
fn max_sends_the_gradient_to_the_first_maximum_only() {
    let x = array![[1.0, 5.0, 5.0, 2.0], [7.0, -1.0, 7.0, 7.0]].into_dyn();
    let g =
        grads_with(std::slice::from_ref(&x), &array![10.0, 20.0].into_dyn(), |tp, v| g_max_axis(tp, v[0], 1, false));
    assert_eq!(g[0], array![[0.0, 10.0, 0.0, 0.0], [20.0, 0.0, 0.0, 0.0]].into_dyn());
    let mut tape = Tape::<f64>::new();
    let v = tape.constant(&x);
    assert_eq!(argmax(&tape, v, -1).unwrap(), array![1, 0].into_dyn());
    assert_eq!(argmax(&tape, v, 0).unwrap(), array![1, 0, 1, 1].into_dyn());
    assert_eq!(argmax(&tape, v, 2).unwrap_err().kind(), &ErrorKind::Axis { axis: 2, ndim: 2 });
}

#[test]
fn min_sends_the_gradient_to_the_first_minimum_only() {
    let x = array![[1.0, -5.0, -5.0, 2.0], [7.0, 9.0, 7.0, 7.0]].into_dyn();
    let g =
        grads_with(std::slice::from_ref(&x), &array![10.0, 20.0].into_dyn(), |tp, v| g_min_axis(tp, v[0], 1, false));
    assert_eq!(g[0], array![[0.0, 10.0, 0.0, 0.0], [20.0, 0.0, 0.0, 0.0]].into_dyn());
    // min(x) = -max(-x), value for value.
    let y = forward(std::slice::from_ref(&x), |tp, v| g_min_axis(tp, v[0], 0, true));
    let negated_max = forward(std::slice::from_ref(&x), |tp, v| {
        let negated = g_neg(tp, v[0]);
        let max = g_max_axis(tp, negated, 0, true);
        g_neg(tp, max)
    });
    assert_eq!(y, negated_max);
    assert_eq!(y, array![[1.0, -5.0, -5.0, 2.0]].into_dyn());
}

#[test]
fn min_over_an_empty_axis_is_an_error() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(ArrayD::<f64>::zeros(IxDyn(&[3, 0])));
    let y = g_min_axis(&mut tape, x, 1, false);
    assert!(y.is_poisoned());
    assert_eq!(tape.error().unwrap().kind(), &ErrorKind::EmptyReduction { axis: 1 });
}
