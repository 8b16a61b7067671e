//! The ops real models need (axis reductions, log_softmax, cross_entropy,
//! activations, embedding, batched matmul, layer_norm, dropout): for each,
//! a central finite-difference check in f64 and an analytic identity exact
//! to the bit, plus stability at logits of 1000.

mod common;

use common::{Rng as TestRng, check_finite_differences, forward, grads_with, integers};
use grad_runtime::*;
use ndarray::{ArrayD, IxDyn, array, s};

#[test]
fn axis_reductions_finite_differences_on_every_axis() {
    let mut rng = TestRng::new(41);
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
        }
    }
}

#[test]
fn axis_reductions_have_exact_gradients_and_shapes() {
    let x = integers(&[2, 3, 4], 1.0);
    let g = grads_with(std::slice::from_ref(&x), &ArrayD::ones(IxDyn(&[2, 4])), |tp, v| g_sum_axis(tp, v[0], 1, false));
    assert_eq!(g[0], ArrayD::<f64>::ones(IxDyn(&[2, 3, 4])));
    let g =
        grads_with(std::slice::from_ref(&x), &ArrayD::ones(IxDyn(&[2, 3, 1])), |tp, v| g_mean_axis(tp, v[0], -1, true));
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
fn log_softmax_finite_differences_and_exact_gradient() {
    let mut rng = TestRng::new(42);
    for axis in [0, 1, -1] {
        let program = move |tp: &mut Tape<f64>, v: &[Var]| g_log_softmax(tp, v[0], axis);
        check_finite_differences(&format!("g_log_softmax axis {axis}"), &program, &[rng.normal_array(&[3, 4])], 4);
    }
    // Equal logits: softmax is exactly 1/4, so the gradient is g - sum(g) / 4.
    let cot = array![[1.0, 2.0, 3.0, 6.0]].into_dyn();
    let g = grads_with(&[ArrayD::from_elem(IxDyn(&[1, 4]), -2.0)], &cot, |tp, v| g_log_softmax(tp, v[0], -1));
    assert_eq!(g[0], array![[-2.0, -1.0, 0.0, 3.0]].into_dyn());
}

#[test]
fn cross_entropy_finite_differences_and_exact_gradient() {
    let mut rng = TestRng::new(43);
    let logits = rng.normal_array(&[4, 5]);
    let program = |tp: &mut Tape<f64>, v: &[Var]| g_cross_entropy(tp, v[0], &[2, 0, 4, 0]);
    check_finite_differences("g_cross_entropy", &program, &[logits], 5);
    // Equal logits over 4 classes: loss ln 4, gradient (1/4 - onehot) / N.
    let mut tape = Tape::<f64>::new();
    let logits = tape.param(ArrayD::zeros(IxDyn(&[2, 4])));
    let loss = g_cross_entropy(&mut tape, logits, &[1, 3]);
    tape.backward(loss).unwrap();
    assert_eq!(tape.scalar(loss), 4f64.ln());
    assert_eq!(tape.grad(logits), array![[0.125, -0.375, 0.125, 0.125], [0.125, 0.125, 0.125, -0.375]].into_dyn());
}

#[test]
fn logits_of_a_thousand_give_finite_correct_losses_and_gradients() {
    for_both_float_types();
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

fn for_both_float_types() {
    let mut tape = Tape::<f32>::new();
    let logits = tape.param(array![[1000.0f32, -1000.0, 0.0]]);
    let loss = g_cross_entropy(&mut tape, logits, &[2]);
    tape.backward(loss).unwrap();
    assert_eq!(tape.scalar(loss), 1000.0);
    assert!(tape.grad(logits).iter().all(|g| g.is_finite()));
}

#[test]
fn activations_finite_differences() {
    let mut rng = TestRng::new(44);
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

fn unary_grad(x: &[f64], op: impl Fn(&mut Tape<f64>, Var) -> Var) -> Vec<f64> {
    let input = ArrayD::from_shape_vec(IxDyn(&[x.len()]), x.to_vec()).unwrap();
    let g = grads_with(&[input], &ArrayD::ones(IxDyn(&[x.len()])), |tp, v| op(tp, v[0]));
    g[0].iter().copied().collect()
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
    common::assert_close("gelu", &values, &want, 1e-14, 1e-15);
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

#[test]
fn embedding_finite_differences_and_accumulation_of_repeated_ids() {
    let table = TestRng::new(45).normal_array(&[5, 3]);
    let program = |tp: &mut Tape<f64>, v: &[Var]| g_embedding(tp, v[0], &[4, 0, 4, 2, 4]);
    check_finite_differences("g_embedding", &program, &[table], 6);
    let cot = integers(&[4, 2], 1.0);
    let g = grads_with(&[ArrayD::zeros(IxDyn(&[3, 2]))], &cot, |tp, v| g_embedding(tp, v[0], &[2, 2, 0, 2]));
    assert_eq!(g[0], array![[5.0, 6.0], [0.0, 0.0], [1.0 + 3.0 + 7.0, 2.0 + 4.0 + 8.0]].into_dyn());
}

#[test]
fn embedding_ids_out_of_range_are_errors_naming_the_id() {
    let mut tape = Tape::<f32>::new();
    let table = tape.param(ArrayD::<f32>::zeros(IxDyn(&[10, 4])));
    let rows = g_embedding(&mut tape, table, &[3, 9, 10, 2]);
    assert!(rows.is_poisoned());
    let error = tape.error().unwrap();
    assert_eq!(error.kind(), &ErrorKind::IndexOutOfRange { what: "id", position: 2, index: 10, len: 10 });
    assert_eq!(
        error.to_string().split(" (at").next().unwrap(),
        "g_embedding: id 10 at position 2 is out of range (valid: 0 to 9); input [10, 4]"
    );
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

#[test]
fn batched_matmul_finite_differences_for_every_broadcast_pattern() {
    let mut rng = TestRng::new(46);
    let pairs: [(&[usize], &[usize]); 5] = [
        (&[2, 3, 4], &[4, 5]),
        (&[2, 3, 4], &[2, 4, 5]),
        (&[3, 4], &[2, 4, 5]),
        (&[2, 1, 3, 4], &[5, 4, 2]),
        (&[2, 2, 3, 4], &[4, 3]),
    ];
    for (i, (sa, sb)) in pairs.into_iter().enumerate() {
        let inputs = [rng.normal_array(sa), rng.normal_array(sb)];
        let program = |tp: &mut Tape<f64>, v: &[Var]| g_matmul(tp, v[0], v[1]);
        check_finite_differences(&format!("g_matmul {sa:?} @ {sb:?}"), &program, &inputs, 20 + i as u64);
    }
}

#[test]
fn batched_matmul_equals_one_matmul_per_batch_entry() {
    let a = integers(&[2, 3, 4], 1.0);
    let w = integers(&[4, 5], 1.0).mapv(|v| v - 10.0);
    let cot = integers(&[2, 3, 5], 1.0).mapv(|v| (v % 7.0) - 3.0);
    let batched = grads_with(&[a.clone(), w.clone()], &cot, |tp, v| g_matmul(tp, v[0], v[1]));
    let mut gw_sum = ArrayD::zeros(IxDyn(&[4, 5]));
    for i in 0..2 {
        let ai = a.slice(s![i, .., ..]).to_owned().into_dyn();
        let ci = cot.slice(s![i, .., ..]).to_owned().into_dyn();
        let single = grads_with(&[ai.clone(), w.clone()], &ci, |tp, v| g_matmul(tp, v[0], v[1]));
        assert_eq!(batched[0].slice(s![i, .., ..]).into_dyn(), single[0]);
        gw_sum += &single[1];
        let out = forward(&[a.clone(), w.clone()], |tp, v| g_matmul(tp, v[0], v[1]));
        assert_eq!(out.slice(s![i, .., ..]).into_dyn(), forward(&[ai, w.clone()], |tp, v| g_matmul(tp, v[0], v[1])));
    }
    assert_eq!(batched[1], gw_sum, "the shared matrix's gradient sums over the batch");
}

#[test]
fn layer_norm_finite_differences_for_all_three_inputs() {
    let mut rng = TestRng::new(47);
    let inputs = [rng.normal_array(&[2, 3, 5]), rng.normal_array(&[5]), rng.normal_array(&[5])];
    let program = |tp: &mut Tape<f64>, v: &[Var]| g_layer_norm(tp, v[0], v[1], v[2], 1e-5);
    check_finite_differences("g_layer_norm", &program, &inputs, 7);
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

#[test]
fn dropout_is_reproducible_differentiable_and_the_identity_in_eval() {
    let x = TestRng::new(48).normal_array(&[4, 6]);
    let program = |tp: &mut Tape<f64>, v: &[Var]| g_dropout(tp, v[0], 0.3, &mut Rng::new(9), true);
    check_finite_differences("g_dropout", &program, std::slice::from_ref(&x), 8);

    let mut tape = Tape::<f64>::new();
    let v = tape.param(&x);
    let y = g_dropout(&mut tape, v, 0.5, &mut Rng::new(1), true);
    let again = g_dropout(&mut tape, v, 0.5, &mut Rng::new(1), true);
    assert_eq!(tape.value(y), tape.value(again), "same seed, same mask");
    let loss = g_sum(&mut tape, y);
    tape.backward(loss).unwrap();
    let mask = tape.value(y).to_owned() / &x;
    assert!(mask.iter().all(|&m| m == 0.0 || m == 2.0), "kept elements are scaled by 1/(1-p)");
    assert_eq!(tape.grad(v), mask, "the gradient is the mask itself");

    assert_eq!(g_dropout(&mut tape, v, 0.5, &mut Rng::new(1), false), v, "eval mode is the identity");
    g_dropout(&mut tape, v, 1.0, &mut Rng::new(1), true);
    assert!(tape.error().unwrap().to_string().contains("p = 1 is invalid: expected a probability in [0, 1)"));
}
