//! `ops/matmul.rs`: `matmul` with NumPy batching and the strict `bmm`.

use grad_runtime::*;
use ndarray::{Array2, ArrayD, Axis, IxDyn, s};

use crate::common::{Rng, check_finite_differences, forward, grads_with, integers};
use crate::oracle::Case;

/// The oracle cases of this module's ops.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    Some(match case.op() {
        "matmul" => g_matmul(tp, case.x(0), case.x(1)),
        "bmm" => g_bmm(tp, case.x(0), case.x(1)),
        _ => return None,
    })
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
    let g = grads_with(&[a.clone(), b.clone()], &ArrayD::<f64>::ones(IxDyn(&[3, 2])), |tp, v| g_matmul(tp, v[0], v[1]));
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
fn matmul_matches_a_naive_triple_loop() {
    let mut rng = Rng::new(26);
    let a: Array2<f64> = rng.normal_array(&[5, 7]).into_dimensionality().unwrap();
    let b: Array2<f64> = rng.normal_array(&[7, 3]).into_dimensionality().unwrap();
    let mut tape = Tape::<f64>::new();
    let (va, vb) = (tape.constant(&a), tape.constant(&b));
    let c = g_matmul(&mut tape, va, vb);
    let naive = Array2::from_shape_fn((5, 3), |(i, j)| (0..7).map(|k| a[[i, k]] * b[[k, j]]).sum::<f64>());
    crate::common::assert_close("matmul", &tape.value(c).to_owned(), &naive.into_dyn(), 1e-14, 1e-14);
}

#[test]
fn batched_matmul_finite_differences_for_every_broadcast_pattern() {
    let mut rng = Rng::new(46);
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
    let mut gw_sum = ArrayD::<f64>::zeros(IxDyn(&[4, 5]));
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
