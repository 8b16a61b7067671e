//! `ops/layout.rs`: `transpose`, `reshape`, `flatten`, `slice`, `concat`.

use grad_runtime::*;
use ndarray::{ArrayD, Axis, IxDyn, s};

use crate::common::{Rng, check_finite_differences, forward, grads_with, integers};
use crate::oracle::Case;

/// The oracle cases of this module's ops.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    Some(match case.op() {
        "transpose" => g_transpose(tp, case.x(0)),
        "reshape" => g_reshape(tp, case.x(0), &case.usizes("shape")),
        "slice" => g_slice(tp, case.x(0), &case.usizes("starts"), &case.usizes("stops")),
        "concat" => g_concat(tp, case.x(0), case.x(1), case.index("axis")),
        _ => return None,
    })
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
    let mut want = ArrayD::<f64>::zeros(IxDyn(&[2, 3, 4]));
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
fn flatten_finite_differences_and_shapes() {
    let x = Rng::new(171).normal_array(&[2, 3, 4]);
    for (seed, (from, shape)) in
        [(0, &[24][..]), (1, &[2, 12]), (-1, &[2, 3, 4]), (-2, &[2, 12])].into_iter().enumerate()
    {
        let program = move |tp: &mut Tape<f64>, v: &[Var]| g_flatten(tp, v[0], from);
        check_finite_differences(&format!("g_flatten {from}"), &program, std::slice::from_ref(&x), seed as u64);
        assert_eq!(forward(std::slice::from_ref(&x), program).shape(), shape);
    }
    // Gradient: the seed, reshaped back, to the bit.
    let cot = Rng::new(172).normal_array(&[2, 12]);
    let g = grads_with(std::slice::from_ref(&x), &cot, |tp, v| g_flatten(tp, v[0], 1));
    assert_eq!(g[0], cot.into_shape_with_order(vec![2, 3, 4]).unwrap());
}

#[test]
fn flatten_axis_out_of_range_is_an_error_naming_flatten() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::Array2::<f32>::zeros((2, 3)));
    assert!(g_flatten(&mut tape, x, 2).is_poisoned());
    let error = tape.error().unwrap().to_string();
    assert_eq!(
        error.split(" (at").next().unwrap(),
        "g_flatten: axis 2 is out of range for a 2-D input (valid: -2 to 1); input [2, 3]"
    );
}

#[test]
fn overlapping_slices_of_one_tensor_add_their_gradients_exactly() {
    // The first slice read in backward starts the gradient (zeros but its
    // block), later ones add their blocks into it in place; with the
    // tensor also summed whole, that sum starts it instead. Quarter
    // integers: every sum below is exact.
    let x = ArrayD::from_shape_fn(vec![4, 6], |ix| (ix[0] * 6 + ix[1]) as f64 * 0.25 - 2.0);
    let mut want = ArrayD::<f64>::zeros(vec![4, 6]);
    want.slice_mut(s![.., 0..2]).zip_mut_with(&x.slice(s![.., 0..2]), |w, &v| *w += 2.0 * v);
    want.slice_mut(s![.., 1..4]).mapv_inplace(|w| w + 3.0);
    want.slice_mut(s![1..3, 3..6]).zip_mut_with(&x.slice(s![1..3, 3..6]), |w, &v| *w += 3.0 * v * v);
    for summed_whole in [false, true] {
        let mut tape = Tape::<f64>::new();
        let v = tape.param(x.clone());
        let a = g_slice(&mut tape, v, &[0, 0], &[4, 2]);
        let b = g_slice(&mut tape, v, &[0, 1], &[4, 4]);
        let c = g_slice(&mut tape, v, &[1, 3], &[3, 6]);
        let aa = g_mul(&mut tape, a, a);
        let b3 = g_muls(&mut tape, b, 3.0);
        let cc = g_mul(&mut tape, c, c);
        let ccc = g_mul(&mut tape, cc, c);
        let terms = [aa, b3, ccc].map(|t| g_sum(&mut tape, t));
        let mut loss = g_add(&mut tape, terms[0], terms[1]);
        loss = g_add(&mut tape, loss, terms[2]);
        if summed_whole {
            let whole = g_sum(&mut tape, v);
            loss = g_add(&mut tape, loss, whole);
        }
        tape.backward(loss).unwrap();
        let expected = if summed_whole { want.mapv(|w| w + 1.0) } else { want.clone() };
        assert_eq!(tape.grad(v), expected, "summed whole: {summed_whole}");
    }
}

#[test]
fn large_slices_hand_back_their_blocks_on_several_threads() {
    // Large enough for the rows of the slices and of the input's gradient
    // to be shared out over threads: blocks cut in the outer axes and the last, one of them
    // read twice, against hand indexing (integers: every sum is exact).
    let shape = [8, 64, 300];
    let x = ArrayD::from_shape_fn(IxDyn(&shape), |ix| ((ix[0] * 7 + ix[1] * 5 + ix[2]) % 13) as f64 - 6.0);
    let mut tape = Tape::<f64>::new();
    let v = tape.param(x.clone());
    let a = g_slice(&mut tape, v, &[1, 3, 10], &[7, 50, 210]);
    let b = g_slice(&mut tape, v, &[0, 0, 100], &[8, 64, 300]);
    let a2 = g_muls(&mut tape, a, 2.0);
    let bb = g_mul(&mut tape, b, b);
    let terms = [g_sum(&mut tape, a2), g_sum(&mut tape, bb), g_sum(&mut tape, a)];
    let loss = g_add(&mut tape, terms[0], terms[1]);
    let loss = g_add(&mut tape, loss, terms[2]);
    tape.backward(loss).unwrap();
    assert_eq!(tape.value(a), x.slice(s![1..7, 3..50, 10..210]).into_dyn());
    assert_eq!(tape.value(b), x.slice(s![.., .., 100..300]).into_dyn());
    let mut want = ArrayD::<f64>::zeros(IxDyn(&shape));
    want.slice_mut(s![1..7, 3..50, 10..210]).mapv_inplace(|w| w + 3.0);
    want.slice_mut(s![.., .., 100..300]).zip_mut_with(&x.slice(s![.., .., 100..300]), |w, &v| *w += 2.0 * v);
    assert_eq!(tape.grad(v), want);
}
