//! `ops/unary.rs`: every elementwise function of one tensor (`neg`, the
//! scalar forms, the activations).

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn, array};

use crate::common::{Rng, check_finite_differences, forward, unary_grad};
use crate::oracle::Case;

/// The oracle cases of this module's ops.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    let x = || case.x(0);
    Some(match case.op() {
        "neg" => g_neg(tp, x()),
        "add_scalar" => g_adds(tp, x(), case.number("scalar")),
        "mul_scalar" => g_muls(tp, x(), case.number("scalar")),
        "relu" => g_relu(tp, x()),
        "sigmoid" => g_sigmoid(tp, x()),
        "tanh" => g_tanh(tp, x()),
        "exp" => g_exp(tp, x()),
        "log" => g_log(tp, x()),
        "sqrt" => g_sqrt(tp, x()),
        "pow" => g_pow(tp, x(), case.number("p")),
        "abs" => g_abs(tp, x()),
        "leaky_relu" => g_leaky_relu(tp, x(), case.number("slope")),
        "gelu" => g_gelu(tp, x()),
        "silu" => g_silu(tp, x()),
        "softplus" => g_softplus(tp, x()),
        "clamp" => g_clamp(tp, x(), case.number("lo"), case.number("hi")),
        _ => return None,
    })
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

#[test]
fn unary_derivatives_hit_exact_known_values() {
    assert_eq!(unary_grad(&[2.5, -1.0], g_neg), [-1.0, -1.0]);
    assert_eq!(unary_grad(&[-2.0, -0.5, 0.0, 0.5, 3.0], g_relu), [0.0, 0.0, 0.0, 1.0, 1.0]);
    // sigmoid'(0) = 1/4; saturated far out, with no NaN from exp overflow.
    assert_eq!(unary_grad(&[0.0, 800.0, -800.0], g_sigmoid), [0.25, 0.0, 0.0]);
    assert_eq!(unary_grad(&[0.0], g_tanh), [1.0]);
    let x = [-1.5, 0.0, 0.7, 2.0];
    let exp_x: Vec<f64> = x.iter().map(|v: &f64| v.exp()).collect();
    assert_eq!(unary_grad(&x, g_exp), exp_x, "d/dx exp(x) = exp(x) bit for bit");
    assert_eq!(unary_grad(&[1.0, 2.0, 4.0, 0.5], g_log), [1.0, 0.5, 0.25, 2.0]);
    assert_eq!(unary_grad(&[4.0, 1.0, 0.25, 16.0], g_sqrt), [0.25, 0.5, 1.0, 0.125]);
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

#[test]
fn activations_finite_differences() {
    let mut rng = Rng::new(44);
    let x = rng.away_from_zero(&[3, 4], 0.1);
    let positive = rng.uniform_array(&[3, 4], 0.5, 2.0);
    type Program = fn(&mut Tape<f64>, &[Var]) -> Var;
    let cases: [(&str, Program, &ArrayD<f64>); 10] = [
        ("g_pow 2.5 on positives", |tp, v| g_pow(tp, v[0], 2.5), &positive),
        ("g_pow -1.5 on positives", |tp, v| g_pow(tp, v[0], -1.5), &positive),
        ("g_pow 3", |tp, v| g_pow(tp, v[0], 3.0), &x),
        ("g_abs", |tp, v| g_abs(tp, v[0]), &x),
        ("g_leaky_relu", |tp, v| g_leaky_relu(tp, v[0], 0.01), &x),
        ("g_gelu", |tp, v| g_gelu(tp, v[0]), &x),
        ("g_silu", |tp, v| g_silu(tp, v[0]), &x),
        ("g_softplus", |tp, v| g_softplus(tp, v[0]), &x),
        (
            "g_clamp",
            |tp, v| g_clamp(tp, v[0], -0.5, 0.5),
            &x.mapv(|v| if (v.abs() - 0.5).abs() < 0.05 { v * 2.0 } else { v }),
        ),
        ("g_softplus wide", |tp, v| g_softplus(tp, v[0]), &x.mapv(|v| v * 30.0)),
    ];
    for (i, (name, program, input)) in cases.into_iter().enumerate() {
        check_finite_differences(name, &program, std::slice::from_ref(input), 10 + i as u64);
    }
}

#[test]
fn activation_derivatives_hit_exact_known_values() {
    let x = [-3.0, -0.5, 0.25, 2.0];
    assert_eq!(unary_grad(&x, |tp, v| g_pow(tp, v, 2.0)), [-6.0, -1.0, 0.5, 4.0], "d/dx x² = 2x");
    assert_eq!(unary_grad(&[-2.0, 0.0, 3.0], |tp, v| g_abs(tp, v)), [-1.0, 0.0, 1.0]);
    assert_eq!(unary_grad(&[-2.0, 0.0, 3.0], |tp, v| g_leaky_relu(tp, v, 0.125)), [0.125, 0.125, 1.0]);
    assert_eq!(unary_grad(&[0.0], |tp, v| g_gelu(tp, v)), [0.5]);
    assert_eq!(unary_grad(&[0.0], |tp, v| g_silu(tp, v)), [0.5]);
    assert_eq!(unary_grad(&[0.0, 1000.0, -1000.0], |tp, v| g_softplus(tp, v)), [0.5, 1.0, 0.0]);
    assert_eq!(unary_grad(&[-1.0, -0.5, 0.0, 0.5, 1.0], |tp, v| g_clamp(tp, v, -0.5, 0.5)), [0.0, 1.0, 1.0, 1.0, 0.0]);
    let values = forward(&[array![0.0, 1000.0, -1000.0].into_dyn()], |tp, v| g_softplus(tp, v[0]));
    assert_eq!(values, array![2f64.ln(), 1000.0, 0.0].into_dyn());
    let values = forward(&[array![-2.0, 0.0, 3.0].into_dyn()], |tp, v| g_clamp(tp, v[0], -1.0, 1.0));
    assert_eq!(values, array![-1.0, 0.0, 1.0].into_dyn());
}

#[test]
fn gelu_matches_pytorchs_tanh_approximation_values() {
    // torch 2.5.1: F.gelu(torch.tensor([-1., 0.5, 2.], dtype=torch.float64), approximate="tanh")
    let values = forward(&[array![-1.0, 0.5, 2.0].into_dyn()], |tp, v| g_gelu(tp, v[0]));
    let want = array![-0.15880800939172324, 0.34571400982514394, 1.954597694087775].into_dyn();
    crate::common::assert_close("gelu", &values, &want, 1e-14, 1e-15);
}

#[test]
fn clamp_with_crossed_bounds_is_an_error() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(array![1.0]);
    let y = g_clamp(&mut tape, x, 1.0, -1.0);
    assert!(y.is_poisoned());
    let error = tape.error().unwrap();
    assert!(error.to_string().starts_with("g_clamp: lo = 1 is invalid"), "{error}");
}

/// A value read by two unary ops: the second rule adds into the gradient
/// the first one wrote, in place; the result is the f32 sum of the two
/// gradients each op gives alone, bit for bit (a sum of two terms does not
/// depend on their order). Sizes: one thread, two halves, the pool.
#[test]
fn a_value_read_by_two_unary_ops_gets_the_sum_of_their_gradients() {
    let alone = |x: &ArrayD<f32>, op: fn(&mut Tape<f32>, Var) -> Var| {
        let mut tp = Tape::<f32>::new();
        let v = tp.param(x.clone());
        let y = op(&mut tp, v);
        let loss = g_sum(&mut tp, y);
        tp.backward(loss).unwrap();
        tp.grad(v).to_owned()
    };
    for len in [7, 1 << 16, 1 << 18] {
        let mut rng = Rng::new(len as u64);
        let x = ArrayD::from_shape_fn(IxDyn(&[len]), |_| rng.normal() as f32);
        let mut tp = Tape::<f32>::new();
        let v = tp.param(x.clone());
        let (t, s) = (g_tanh(&mut tp, v), g_sigmoid(&mut tp, v));
        let both = g_add(&mut tp, t, s);
        let loss = g_sum(&mut tp, both);
        tp.backward(loss).unwrap();
        let expected = alone(&x, g_tanh) + alone(&x, g_sigmoid);
        let same = tp.grad(v).iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{len} elements");
    }
}
