//! Elementwise ops: for each, a central finite-difference check in f64 and
//! an analytic identity that must hold to the bit. Binary ops are checked
//! on every broadcasting pattern.

mod common;

use common::{Rng, check_finite_differences, grads_of_sum, integers};
use grad_runtime::*;
use ndarray::{ArrayD, IxDyn, array};

/// Shape pairs covering every broadcasting pattern: equal shapes, a
/// missing leading axis on either side, stretched 1s on both sides, a
/// one-element operand and a scalar.
const BROADCAST_PAIRS: [(&[usize], &[usize]); 8] = [
    (&[3, 4], &[3, 4]),
    (&[4, 3], &[3]),
    (&[3], &[4, 3]),
    (&[2, 1, 3], &[4, 1]),
    (&[3, 1], &[1, 4]),
    (&[2, 3, 4], &[1, 3, 1]),
    (&[5], &[1]),
    (&[2, 3], &[]),
];

type Binary = fn(&mut Tape<f64>, Var, Var) -> Var;

fn check_binary_broadcasting(name: &str, op: Binary, positive_rhs: bool) {
    let mut rng = Rng::new(7);
    for (i, (sa, sb)) in BROADCAST_PAIRS.iter().enumerate() {
        let a = rng.normal_array(sa);
        // Division is checked away from b = 0, where it is not smooth.
        let b = if positive_rhs { rng.uniform_array(sb, 0.5, 2.0) } else { rng.normal_array(sb) };
        let label = format!("{name} {sa:?} with {sb:?}");
        let program = move |tp: &mut Tape<f64>, v: &[Var]| op(tp, v[0], v[1]);
        check_finite_differences(&label, &program, &[a.clone(), b.clone()], i as u64);
        // The swapped order exercises broadcasting of the left operand.
        let swapped = move |tp: &mut Tape<f64>, v: &[Var]| op(tp, v[1], v[0]);
        let (a2, b2) = if positive_rhs { (rng.normal_array(sb), rng.uniform_array(sa, 0.5, 2.0)) } else { (b, a) };
        check_finite_differences(&format!("{label}, swapped"), &swapped, &[b2, a2], 100 + i as u64);
    }
}

#[test]
fn add_broadcasting_finite_differences() {
    check_binary_broadcasting("g_add", g_add, false);
}

#[test]
fn add_gradient_counts_how_often_each_element_was_used() {
    // d/db sum(a + b) for b broadcast over 4 rows is exactly 4.
    let g = grads_of_sum(&[integers(&[4, 3], 1.0), integers(&[3], 1.0)], |tp, v| g_add(tp, v[0], v[1]));
    assert_eq!(g[0], ArrayD::<f64>::ones(IxDyn(&[4, 3])));
    assert_eq!(g[1], ArrayD::from_elem(IxDyn(&[3]), 4.0));
    let g = grads_of_sum(&[integers(&[2, 1, 3], 1.0), integers(&[4, 1], 1.0)], |tp, v| g_add(tp, v[0], v[1]));
    assert_eq!(g[0], ArrayD::from_elem(IxDyn(&[2, 1, 3]), 4.0));
    assert_eq!(g[1], ArrayD::from_elem(IxDyn(&[4, 1]), 6.0));
}

#[test]
fn sub_broadcasting_finite_differences() {
    check_binary_broadcasting("g_sub", g_sub, false);
}

#[test]
fn sub_gradient_is_exactly_minus_the_use_count_for_the_right_operand() {
    let g = grads_of_sum(&[integers(&[3, 1], 1.0), integers(&[1, 4], 1.0)], |tp, v| g_sub(tp, v[0], v[1]));
    assert_eq!(g[0], ArrayD::from_elem(IxDyn(&[3, 1]), 4.0));
    assert_eq!(g[1], ArrayD::from_elem(IxDyn(&[1, 4]), -3.0));
    // x - x is constant: its gradient is exactly zero.
    let g = grads_of_sum(&[integers(&[5], 1.5)], |tp, v| g_sub(tp, v[0], v[0]));
    assert_eq!(g[0], ArrayD::<f64>::zeros(IxDyn(&[5])));
}

#[test]
fn mul_broadcasting_finite_differences() {
    check_binary_broadcasting("g_mul", g_mul, false);
}

#[test]
fn mul_of_a_tensor_with_itself_has_gradient_exactly_two_x() {
    let x = Rng::new(3).normal_array(&[3, 4]);
    let g = grads_of_sum(std::slice::from_ref(&x), |tp, v| g_mul(tp, v[0], v[0]));
    assert_eq!(g[0], &x * 2.0, "d/dx sum(x*x) must be 2x bit for bit");
}

#[test]
fn mul_broadcast_gradient_is_the_sum_of_the_other_operand() {
    // d/db sum(a * b) with b: [3] broadcast over a: [4, 3] = column sums of a (exact on integers).
    let a = integers(&[4, 3], 1.0);
    let g = grads_of_sum(&[a.clone(), array![2.0, 3.0, 5.0].into_dyn()], |tp, v| g_mul(tp, v[0], v[1]));
    assert_eq!(g[1], a.sum_axis(ndarray::Axis(0)));
    assert_eq!(g[0], array![[2.0, 3.0, 5.0]].broadcast((4, 3)).unwrap().into_dyn().to_owned());
}

#[test]
fn div_broadcasting_finite_differences() {
    check_binary_broadcasting("g_div", g_div, true);
}

#[test]
fn div_gradients_are_exact_reciprocals() {
    // d/da sum(a / b) = 1 / b; d/db = -a / b², exact on powers of two.
    let a = array![3.0, -5.0, 7.0].into_dyn();
    let b = array![2.0, 4.0, 0.5].into_dyn();
    let g = grads_of_sum(&[a, b], |tp, v| g_div(tp, v[0], v[1]));
    assert_eq!(g[0], array![0.5, 0.25, 2.0].into_dyn());
    assert_eq!(g[1], array![-0.75, 0.3125, -28.0].into_dyn());
    // x / x is constant: the two contributions cancel exactly.
    let g = grads_of_sum(&[integers(&[4], 1.0)], |tp, v| g_div(tp, v[0], v[0]));
    assert_eq!(g[0], ArrayD::<f64>::zeros(IxDyn(&[4])));
}

fn check_unary(name: &str, op: fn(&mut Tape<f64>, Var) -> Var, input: ArrayD<f64>) {
    let program = move |tp: &mut Tape<f64>, v: &[Var]| op(tp, v[0]);
    check_finite_differences(name, &program, &[input], 11);
}

#[test]
fn unary_ops_finite_differences() {
    let mut rng = Rng::new(5);
    check_unary("g_neg", g_neg, rng.normal_array(&[3, 4]));
    check_unary("g_relu", g_relu, rng.away_from_zero(&[2, 3, 4], 0.1));
    check_unary("g_sigmoid", g_sigmoid, rng.normal_array(&[3, 4]).mapv(|v| 3.0 * v));
    check_unary("g_tanh", g_tanh, rng.normal_array(&[2, 3, 4]));
    check_unary("g_exp", g_exp, rng.normal_array(&[3, 4]));
    check_unary("g_log", g_log, rng.uniform_array(&[3, 4], 0.5, 3.0));
    check_unary("g_sqrt", g_sqrt, rng.uniform_array(&[3, 4], 0.5, 3.0));
    check_unary("g_neg on a scalar", g_neg, ArrayD::from_elem(IxDyn(&[]), 0.3));
    let adds = |tp: &mut Tape<f64>, v: &[Var]| g_adds(tp, v[0], 0.7);
    check_finite_differences("g_adds", &adds, &[rng.normal_array(&[3, 4])], 12);
    let muls = |tp: &mut Tape<f64>, v: &[Var]| g_muls(tp, v[0], -1.3);
    check_finite_differences("g_muls", &muls, &[rng.normal_array(&[3, 4])], 13);
}

fn unary_grad(op: fn(&mut Tape<f64>, Var) -> Var, x: &[f64]) -> Vec<f64> {
    let g = grads_of_sum(&[ArrayD::from_shape_vec(IxDyn(&[x.len()]), x.to_vec()).unwrap()], |tp, v| op(tp, v[0]));
    g[0].iter().copied().collect()
}

#[test]
fn unary_derivatives_hit_exact_known_values() {
    assert_eq!(unary_grad(g_neg, &[2.5, -1.0]), [-1.0, -1.0]);
    assert_eq!(unary_grad(g_relu, &[-2.0, -0.5, 0.0, 0.5, 3.0]), [0.0, 0.0, 0.0, 1.0, 1.0]);
    // sigmoid'(0) = 1/4; saturated far out, with no NaN from exp overflow.
    assert_eq!(unary_grad(g_sigmoid, &[0.0, 800.0, -800.0]), [0.25, 0.0, 0.0]);
    assert_eq!(unary_grad(g_tanh, &[0.0]), [1.0]);
    let x = [-1.5, 0.0, 0.7, 2.0];
    let exp_x: Vec<f64> = x.iter().map(|v: &f64| v.exp()).collect();
    assert_eq!(unary_grad(g_exp, &x), exp_x, "d/dx exp(x) = exp(x) bit for bit");
    assert_eq!(unary_grad(g_log, &[1.0, 2.0, 4.0, 0.5]), [1.0, 0.5, 0.25, 2.0]);
    assert_eq!(unary_grad(g_sqrt, &[4.0, 1.0, 0.25, 16.0]), [0.25, 0.5, 1.0, 0.125]);
    let mut tape = Tape::<f64>::new();
    let x = tape.param(array![1.0, -2.0]);
    let shifted = g_adds(&mut tape, x, 0.7);
    let scaled = g_muls(&mut tape, shifted, -1.3);
    let loss = g_sum(&mut tape, scaled);
    tape.backward(loss).unwrap();
    assert_eq!(tape.grad(x), array![-1.3, -1.3].into_dyn());
}

#[test]
fn sigmoid_forward_is_finite_and_symmetric_at_extremes() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(array![-1000.0f32, -20.0, 0.0, 20.0, 1000.0]);
    let y = g_sigmoid(&mut tape, x);
    let y = tape.value(y).to_owned();
    assert!(y.iter().all(|v| v.is_finite()));
    assert_eq!(y[0], 0.0);
    assert_eq!(y[2], 0.5);
    assert_eq!(y[4], 1.0);
    assert_eq!(y[1] + y[3], 1.0);
}
