//! Reductions, losses, products and layout ops: for each, a central
//! finite-difference check in f64 and an analytic identity exact to the bit.

mod common;

use common::{Rng, check_finite_differences, grads_with, integers};
use grad_runtime::*;
use ndarray::{Array2, ArrayD, Axis, IxDyn, array, s};

fn scalar(x: f64) -> ArrayD<f64> {
    ArrayD::from_elem(IxDyn(&[]), x)
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
fn mse_finite_differences_for_both_operands() {
    let mut rng = Rng::new(22);
    let inputs = [rng.normal_array(&[3, 4]), rng.normal_array(&[3, 4])];
    check_finite_differences("g_mse", &|tp, v| g_mse(tp, v[0], v[1]), &inputs, 3);
}

#[test]
fn mse_gradient_is_exactly_two_residuals_over_n() {
    let y = array![[1.0, 2.0], [3.0, 5.0]].into_dyn();
    let t = array![[0.0, 2.0], [4.0, 1.0]].into_dyn();
    let g = grads_with(&[y, t], &scalar(1.0), |tp, v| g_mse(tp, v[0], v[1]));
    assert_eq!(g[0], array![[0.5, 0.0], [-0.5, 2.0]].into_dyn());
    assert_eq!(g[1], array![[-0.5, 0.0], [0.5, -2.0]].into_dyn());
}

#[test]
fn matmul_and_bmm_finite_differences() {
    let mut rng = Rng::new(23);
    let ab = [rng.normal_array(&[3, 4]), rng.normal_array(&[4, 5])];
    check_finite_differences("g_matmul", &|tp, v| g_matmul(tp, v[0], v[1]), &ab, 4);
    let vec_like = [rng.normal_array(&[1, 4]), rng.normal_array(&[4, 1])];
    check_finite_differences("g_matmul [1,4]@[4,1]", &|tp, v| g_matmul(tp, v[0], v[1]), &vec_like, 5);
    let batched = [rng.normal_array(&[2, 3, 4]), rng.normal_array(&[2, 4, 5])];
    check_finite_differences("g_bmm", &|tp, v| g_bmm(tp, v[0], v[1]), &batched, 6);
}

#[test]
fn matmul_gradients_of_a_sum_are_row_and_column_sums() {
    // d/dA sum(A @ B) = ones @ Bᵀ: every row is B's row sums; d/dB = Aᵀ @ ones.
    let (a, b) = (integers(&[3, 4], 1.0), integers(&[4, 2], 1.0));
    let g = grads_with(&[a.clone(), b.clone()], &ArrayD::ones(IxDyn(&[3, 2])), |tp, v| g_matmul(tp, v[0], v[1]));
    let b_row_sums = b.sum_axis(Axis(1));
    let a_col_sums = a.sum_axis(Axis(0));
    for row in g[0].rows() {
        assert_eq!(row.into_dyn(), b_row_sums);
    }
    for col in g[1].columns() {
        assert_eq!(col.into_dyn(), a_col_sums);
    }
}

#[test]
fn bmm_gradient_of_each_batch_is_that_batchs_matmul_gradient() {
    let (a, b) = (integers(&[2, 3, 4], 1.0), integers(&[2, 4, 5], 1.0).mapv(|v| v - 20.0));
    let cot = Rng::new(9).normal_array(&[2, 3, 5]).mapv(f64::round);
    let g = grads_with(&[a.clone(), b.clone()], &cot, |tp, v| g_bmm(tp, v[0], v[1]));
    for i in 0..2 {
        let ai = a.slice(s![i, .., ..]).to_owned().into_dyn();
        let bi = b.slice(s![i, .., ..]).to_owned().into_dyn();
        let ci = cot.slice(s![i, .., ..]).to_owned().into_dyn();
        let gi = grads_with(&[ai, bi], &ci, |tp, v| g_matmul(tp, v[0], v[1]));
        assert_eq!(g[0].slice(s![i, .., ..]).into_dyn(), gi[0]);
        assert_eq!(g[1].slice(s![i, .., ..]).into_dyn(), gi[1]);
    }
}

#[test]
fn layout_ops_finite_differences() {
    let mut rng = Rng::new(24);
    let x2 = rng.normal_array(&[3, 4]);
    let x3 = rng.normal_array(&[2, 3, 4]);
    check_finite_differences("g_transpose 2-D", &|tp, v| g_transpose(tp, v[0]), std::slice::from_ref(&x2), 7);
    check_finite_differences("g_transpose 3-D", &|tp, v| g_transpose(tp, v[0]), std::slice::from_ref(&x3), 8);
    check_finite_differences("g_reshape", &|tp, v| g_reshape(tp, v[0], &[6, 4]), std::slice::from_ref(&x3), 9);
    let slice = |tp: &mut Tape<f64>, v: &[Var]| g_slice(tp, v[0], &[0, 1, 2], &[2, 3, 4]);
    check_finite_differences("g_slice", &slice, std::slice::from_ref(&x3), 10);
    let pair = [rng.normal_array(&[2, 3]), rng.normal_array(&[4, 3])];
    check_finite_differences("g_concat axis 0", &|tp, v| g_concat(tp, v[0], v[1], 0), &pair, 11);
    let pair = [rng.normal_array(&[3, 2]), rng.normal_array(&[3, 5])];
    check_finite_differences("g_concat axis 1", &|tp, v| g_concat(tp, v[0], v[1], 1), &pair, 12);
}

#[test]
fn layout_gradients_move_the_cotangent_back_exactly() {
    let x = integers(&[2, 3, 4], 1.0);
    let cot = integers(&[2, 4, 3], 1.0).mapv(|v| v * 10.0);
    let g = grads_with(std::slice::from_ref(&x), &cot, |tp, v| g_transpose(tp, v[0]));
    assert_eq!(g[0], cot.view().permuted_axes(IxDyn(&[0, 2, 1])));

    let cot = integers(&[6, 4], 1.0);
    let g = grads_with(std::slice::from_ref(&x), &cot, |tp, v| g_reshape(tp, v[0], &[6, 4]));
    assert_eq!(g[0], cot.to_shape(IxDyn(&[2, 3, 4])).unwrap());

    let cot = integers(&[2, 2, 2], 1.0);
    let g = grads_with(std::slice::from_ref(&x), &cot, |tp, v| g_slice(tp, v[0], &[0, 1, 2], &[2, 3, 4]));
    let mut want = ArrayD::zeros(IxDyn(&[2, 3, 4]));
    want.slice_mut(s![.., 1..3, 2..4]).assign(&cot);
    assert_eq!(g[0], want);

    let cot = integers(&[5, 3], 1.0);
    let g = grads_with(&[integers(&[2, 3], 1.0), integers(&[3, 3], 1.0)], &cot, |tp, v| g_concat(tp, v[0], v[1], 0));
    assert_eq!(g[0], cot.slice(s![..2, ..]).into_dyn());
    assert_eq!(g[1], cot.slice(s![2.., ..]).into_dyn());
}

#[test]
fn layout_forward_values_match_ndarray() {
    let x = integers(&[2, 3, 4], 1.0);
    let mut tape = Tape::<f64>::new();
    let v = tape.constant(&x);
    let t = g_transpose(&mut tape, v);
    let r = g_reshape(&mut tape, v, &[4, 6]);
    let sl = g_slice(&mut tape, v, &[1, 0, 1], &[2, 3, 3]);
    let c = g_concat(&mut tape, v, v, 2);
    assert_eq!(tape.value(t), x.view().permuted_axes(IxDyn(&[0, 2, 1])));
    assert_eq!(tape.value(r), x.to_shape(IxDyn(&[4, 6])).unwrap());
    assert_eq!(tape.value(sl), x.slice(s![1..2, 0..3, 1..3]).into_dyn());
    assert_eq!(tape.value(c), ndarray::concatenate(Axis(2), &[x.view(), x.view()]).unwrap());
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
fn matmul_matches_a_naive_triple_loop() {
    let mut rng = Rng::new(26);
    let a: Array2<f64> = rng.normal_array(&[5, 7]).into_dimensionality().unwrap();
    let b: Array2<f64> = rng.normal_array(&[7, 3]).into_dimensionality().unwrap();
    let mut tape = Tape::<f64>::new();
    let (va, vb) = (tape.constant(&a), tape.constant(&b));
    let c = g_matmul(&mut tape, va, vb);
    let naive = Array2::from_shape_fn((5, 3), |(i, j)| (0..7).map(|k| a[[i, k]] * b[[k, j]]).sum::<f64>());
    common::assert_close("matmul", &tape.value(c).to_owned(), &naive.into_dyn(), 1e-14, 1e-14);
}
