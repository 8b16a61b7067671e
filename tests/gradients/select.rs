//! `ops/select.rs`: `where` and `masked_fill`, choosing by a boolean mask.

use grad_runtime::*;
use ndarray::{Array2, ArrayD, IxDyn, array};

use crate::common::{Rng, check_finite_differences, forward, grads_with, integers};
use crate::oracle::Case;

/// The oracle cases of this module's ops: the mask is given as 0/1
/// indices with its shape in the `mask_shape` argument.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    let mask = |k: usize| {
        let set = case.indices(k).iter().map(|&m| m != 0).collect();
        ArrayD::from_shape_vec(IxDyn(&case.usizes("mask_shape")), set).expect("mask_shape matches the mask")
    };
    Some(match case.op() {
        "where" => g_where(tp, &mask(0), case.x(1), case.x(2)),
        "masked_fill" => g_masked_fill(tp, case.x(0), &mask(1), case.number("value")),
        _ => return None,
    })
}

fn random_mask(rng: &mut Rng, shape: &[usize]) -> ArrayD<bool> {
    rng.uniform_array(shape, 0.0, 1.0).mapv(|u| u < 0.5)
}

#[test]
fn where_finite_differences_for_every_broadcasting_pattern() {
    let mut rng = Rng::new(151);
    let patterns: [(&[usize], &[usize], &[usize]); 5] = [
        (&[3, 4], &[3, 4], &[3, 4]),
        (&[3, 4], &[4], &[3, 1]),
        (&[4], &[3, 4], &[]),
        (&[2, 1, 4], &[3, 1], &[3, 4]),
        (&[2, 3, 4], &[], &[]),
    ];
    for (seed, (m, a, b)) in patterns.into_iter().enumerate() {
        let mask = random_mask(&mut rng, m);
        let inputs = [rng.normal_array(a), rng.normal_array(b)];
        let program = move |tp: &mut Tape<f64>, v: &[Var]| g_where(tp, &mask, v[0], v[1]);
        check_finite_differences(&format!("g_where {m:?} {a:?} {b:?}"), &program, &inputs, seed as u64);
    }
}

#[test]
fn where_splits_the_seed_exactly_between_its_branches_and_ignores_the_other_branch() {
    let mask = array![[true, false, true], [false, false, true]];
    let a = integers(&[2, 3], 1.0);
    let b = array![f64::NAN, f64::NEG_INFINITY, 0.5].into_dyn();
    let value = forward(&[a.clone(), b.clone()], |tp, v| g_where(tp, &mask, v[0], v[1]));
    assert_eq!(value.as_slice().unwrap()[..3], [1.0, f64::NEG_INFINITY, 3.0]);
    assert!(value[[1, 0]].is_nan());
    let cot = integers(&[2, 3], 1.0);
    let g = grads_with(&[a, b], &cot, |tp, v| g_where(tp, &mask, v[0], v[1]));
    assert_eq!(g[0], array![[1.0, 0.0, 3.0], [0.0, 0.0, 6.0]].into_dyn());
    assert_eq!(g[1], array![4.0, 2.0 + 5.0, 0.0].into_dyn());
    // The two gradients add up to the seed, summed to each shape.
    let g = grads_with(&[integers(&[2, 3], 1.0), integers(&[2, 3], 1.0)], &cot, |tp, v| g_where(tp, &mask, v[0], v[1]));
    assert_eq!(&g[0] + &g[1], cot);
}

#[test]
fn masked_fill_finite_differences_and_its_gradient_is_zero_where_filled() {
    let mut rng = Rng::new(157);
    for (seed, (m, x)) in
        [(&[3, 4][..], &[3, 4][..]), (&[4], &[2, 3, 4]), (&[3, 1], &[2, 3, 4])].into_iter().enumerate()
    {
        let mask = random_mask(&mut rng, m);
        let program = move |tp: &mut Tape<f64>, v: &[Var]| g_masked_fill(tp, v[0], &mask, 0.75);
        check_finite_differences(&format!("g_masked_fill {m:?} {x:?}"), &program, &[rng.normal_array(x)], seed as u64);
    }
    let mask = array![[false, true], [true, false]];
    let value = forward(&[integers(&[2, 2], 1.0)], |tp, v| g_masked_fill(tp, v[0], &mask, f64::NEG_INFINITY));
    assert_eq!(value, array![[1.0, f64::NEG_INFINITY], [f64::NEG_INFINITY, 4.0]].into_dyn());
    let g = grads_with(&[integers(&[2, 2], 1.0)], &integers(&[2, 2], 5.0), |tp, v| {
        g_masked_fill(tp, v[0], &mask, f64::NEG_INFINITY)
    });
    assert_eq!(g[0], array![[5.0, 0.0], [0.0, 8.0]].into_dyn());
}

#[test]
fn masks_that_do_not_broadcast_are_errors_naming_every_shape() {
    let mut tape = Tape::<f32>::new();
    let a = tape.param(Array2::<f32>::zeros((2, 3)));
    let b = tape.param(Array2::<f32>::zeros((1, 3)));
    let y = g_where(&mut tape, &Array2::from_elem((2, 2), true), a, b);
    assert!(y.is_poisoned());
    let error = tape.error().unwrap().to_string();
    assert!(error.starts_with("g_where: shapes cannot be broadcast together"), "{error}");
    assert!(error.contains("; inputs [2, 2] and [2, 3] and [1, 3] (at tests/gradients/select.rs:"), "{error}");
    assert_eq!(tape.len(), 2, "a failed op appends no node, not even its mask");

    // masked_fill's output is x's shape: a mask that would enlarge it is refused.
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array2::<f32>::zeros((1, 3)));
    let y = g_masked_fill(&mut tape, x, &Array2::from_elem((2, 3), true), 0.0);
    assert!(y.is_poisoned());
    let error = tape.error().unwrap().to_string();
    assert!(error.starts_with("g_masked_fill: shapes cannot be broadcast together"), "{error}");
    assert!(error.contains("; inputs [2, 3] and [1, 3] (at tests/gradients/select.rs:"), "{error}");
    assert_eq!(tape.len(), 1);
}
