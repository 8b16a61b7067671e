//! `ops/permute.rs`: axes reordered in one copy.

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn};

use crate::common::{Rng, check_finite_differences, integers};
use crate::oracle::Case;

/// The oracle cases of this module's op.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    (case.op() == "permute").then(|| g_permute(tp, case.x(0), &case.usizes("axes")))
}

#[test]
fn permute_finite_differences() {
    let mut rng = Rng::new(110);
    for (shape, axes) in [
        (&[3, 4][..], &[1, 0][..]),
        (&[2, 3, 4], &[2, 0, 1]),
        (&[2, 3, 2, 4], &[0, 2, 1, 3]),
        (&[5], &[0]),
        (&[2, 1, 3], &[1, 2, 0]),
    ] {
        let program = |tp: &mut Tape<f64>, v: &[Var]| g_permute(tp, v[0], axes);
        check_finite_differences("g_permute", &program, &[rng.normal_array(shape)], 111);
    }
}

#[test]
fn permute_identities_hold_exactly() {
    // [1, 0] is the transpose; a permutation then its inverse is the input;
    // moving heads with one permute equals the transpose-reshape-transpose way.
    let x = integers(&[2, 3, 4, 5], 0.0);
    let mut tp = Tape::<f64>::new();
    let v = tp.param(&x);
    let m = tp.param(integers(&[3, 7], 1.0));
    let (t1, t2) = (g_permute(&mut tp, m, &[1, 0]), g_transpose(&mut tp, m));
    assert_eq!(tp.value(t1), tp.value(t2));
    let p = g_permute(&mut tp, v, &[3, 1, 0, 2]);
    let back = g_permute(&mut tp, p, &[2, 1, 3, 0]);
    assert_eq!(tp.value(back), x.view());
    let heads = g_permute(&mut tp, v, &[0, 2, 1, 3]);
    let expected = x.clone().permuted_axes(IxDyn(&[0, 2, 1, 3])).as_standard_layout().into_owned();
    assert_eq!(tp.value(heads), expected.view());
    // The gradient of Σ permute(x) · c is c permuted back.
    let c = integers(&[4, 3, 2, 5], 7.0);
    let cv = tp.constant(&c);
    let q = g_permute(&mut tp, v, &[2, 1, 0, 3]);
    let qc = g_mul(&mut tp, q, cv);
    let loss = g_sum(&mut tp, qc);
    tp.backward(loss).unwrap();
    assert_eq!(tp.grad(v), c.permuted_axes(IxDyn(&[2, 1, 0, 3])).as_standard_layout().view());
}

#[test]
fn a_list_that_is_no_permutation_is_an_error() {
    let mut tp = Tape::<f64>::new();
    let x = tp.param(ArrayD::<f64>::zeros(IxDyn(&[2, 3, 4])));
    let mark = tp.mark();
    for axes in [&[0, 1][..], &[0, 1, 1], &[0, 1, 3], &[0, 1, 2, 3]] {
        g_permute(&mut tp, x, axes);
        let err = tp.error().expect("refused").clone();
        assert_eq!(err.op(), "g_permute");
        assert!(matches!(err.kind(), ErrorKind::InvalidArgument { .. }), "{err}");
        assert!(err.to_string().contains("[2, 3, 4]"), "{err}");
        tp.reset_to(mark);
    }
}

#[test]
fn permute_in_a_grad_block_has_its_shape_at_compile_time() {
    // Heads to the batch dim and back: [B, T, H, D] -> [B, H, T, D] -> [B, T, H * D].
    let mut tp = Tape::<f64>::new();
    let x = tp.param(integers(&[2, 3, 4, 5], 0.0));
    let y = grad!(tp; x: [B, T, H, D];
        let heads = permute(x, [0, 2, 1, 3]);
        reshape(permute(heads * 2.0, [0, 2, 1, 3]), [B, T, H * D]));
    assert_eq!(tp.value(y).shape(), &[2, 3, 20]);
    assert_eq!(tp.value(y).iter().copied().collect::<Vec<_>>(), (0..120).map(|v| 2.0 * v as f64).collect::<Vec<_>>());
}

/// A permutation large enough to be shared out between threads by groups
/// of rows, with contiguous and strided innermost axes, against ndarray's
/// own view of the permuted axes; its gradient is the inverse permutation.
#[test]
fn large_permutations_match_ndarray_and_invert_in_backward() {
    let mut rng = Rng::new(58);
    let x_value = rng.normal_array(&[16, 64, 4, 32]);
    for axes in [[0, 2, 1, 3], [3, 1, 0, 2], [0, 1, 3, 2]] {
        let mut tape = Tape::<f64>::new();
        let x = tape.param(&x_value);
        let y = g_permute(&mut tape, x, &axes);
        assert_eq!(tape.value(y), x_value.view().permuted_axes(axes.as_slice()), "{axes:?}");
        let weights = rng.normal_array(tape.value(y).shape());
        let w = tape.constant(&weights);
        let weighted = g_mul(&mut tape, y, w);
        let loss = g_sum(&mut tape, weighted);
        tape.backward(loss).unwrap();
        let mut back = [0; 4];
        axes.iter().enumerate().for_each(|(d, &a)| back[a] = d);
        assert_eq!(tape.grad(x), weights.view().permuted_axes(back.as_slice()), "{axes:?}");
    }
}
