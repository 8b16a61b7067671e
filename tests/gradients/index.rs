//! `ops/index.rs`: `gather` and `index_select` along an axis.

use grad_runtime::*;
use ndarray::{Array2, ArrayD, IxDyn, array};

use crate::common::{Rng, check_finite_differences, forward, grads_with, integers};
use crate::oracle::Case;

/// The oracle cases of this module's ops (the indices of `gather` carry
/// their shape in the `index_shape` argument).
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    let axis = case.axis()?;
    Some(match case.op() {
        "gather" => {
            let indices =
                ArrayD::from_shape_vec(IxDyn(&case.usizes("index_shape")), case.indices(1).iter().copied().collect())
                    .expect("index_shape matches the indices");
            g_gather(tp, case.x(0), axis, &indices)
        }
        "index_select" => g_index_select(tp, case.x(0), axis, case.indices(1).as_slice().unwrap()),
        _ => return None,
    })
}

#[test]
fn gather_finite_differences_on_every_axis_with_repeats() {
    let x = Rng::new(131).normal_array(&[3, 4, 2]);
    let cases: [(isize, ArrayD<usize>); 4] = [
        (0, ArrayD::from_shape_vec(IxDyn(&[2, 3, 2]), vec![2, 0, 1, 1, 2, 2, 0, 0, 2, 1, 1, 0]).unwrap()),
        (1, ArrayD::from_shape_vec(IxDyn(&[3, 5, 1]), vec![3, 3, 0, 1, 2, 0, 0, 0, 1, 3, 2, 2, 1, 3, 0]).unwrap()),
        (-1, ArrayD::from_shape_vec(IxDyn(&[2, 2, 3]), vec![1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1]).unwrap()),
        (2, ArrayD::from_shape_vec(IxDyn(&[3, 4, 0]), vec![]).unwrap()),
    ];
    for (seed, (axis, indices)) in cases.into_iter().enumerate() {
        let program = move |tp: &mut Tape<f64>, v: &[Var]| g_gather(tp, v[0], axis, &indices);
        check_finite_differences(&format!("g_gather axis {axis}"), &program, std::slice::from_ref(&x), seed as u64);
    }
}

#[test]
fn gather_picks_per_element_and_its_gradient_counts_every_read() {
    let x = integers(&[2, 3], 1.0);
    let indices = array![[2, 2, 0], [1, 1, 1]];
    let value = forward(std::slice::from_ref(&x), |tp, v| g_gather(tp, v[0], 1, &indices));
    assert_eq!(value, array![[3.0, 3.0, 1.0], [5.0, 5.0, 5.0]].into_dyn());
    let cot = integers(&[2, 3], 10.0);
    let g = grads_with(&[x], &cot, |tp, v| g_gather(tp, v[0], 1, &indices));
    assert_eq!(g[0], array![[12.0, 0.0, 10.0 + 11.0], [0.0, 13.0 + 14.0 + 15.0, 0.0]].into_dyn());
}

#[test]
fn index_select_finite_differences_and_accumulation_of_repeats() {
    let x = Rng::new(137).normal_array(&[3, 4, 2]);
    for (seed, (axis, indices)) in
        [(0, vec![2, 0, 2]), (1, vec![3, 3, 1, 0, 3]), (-1, vec![1]), (1, vec![])].into_iter().enumerate()
    {
        let program = move |tp: &mut Tape<f64>, v: &[Var]| g_index_select(tp, v[0], axis, &indices);
        check_finite_differences(
            &format!("g_index_select axis {axis}"),
            &program,
            std::slice::from_ref(&x),
            seed as u64,
        );
    }
    let cot = integers(&[2, 3], 1.0);
    let g = grads_with(&[integers(&[2, 3], 0.0)], &cot, |tp, v| g_index_select(tp, v[0], 1, &[2, 2, 0]));
    assert_eq!(g[0], array![[3.0, 0.0, 1.0 + 2.0], [6.0, 0.0, 4.0 + 5.0]].into_dyn());
}

#[test]
fn index_select_of_every_row_in_order_is_the_identity_and_its_gradient_the_seed() {
    let x = Rng::new(139).normal_array(&[4, 3]);
    let value = forward(std::slice::from_ref(&x), |tp, v| g_index_select(tp, v[0], 0, &[0, 1, 2, 3]));
    assert_eq!(value, x);
    let cot = Rng::new(140).normal_array(&[4, 3]);
    let g = grads_with(&[x], &cot, |tp, v| g_index_select(tp, v[0], -2, &[0, 1, 2, 3]));
    assert_eq!(g[0], cot);
}

#[test]
fn bad_indices_and_axes_are_errors_naming_the_op_position_and_shapes() {
    let message = |f: &dyn Fn(&mut Tape<f32>, Var) -> Var| {
        let mut tape = Tape::<f32>::new();
        let x = tape.param(Array2::<f32>::zeros((2, 3)));
        let y = f(&mut tape, x);
        assert!(y.is_poisoned() && !tape.is_ok());
        let error = tape.error().unwrap();
        assert!(error.to_string().contains("tests/gradients/index.rs"), "{error}");
        error.to_string().split(" (at").next().unwrap().to_string()
    };
    assert_eq!(
        message(&|tp, x| g_gather(tp, x, 1, &array![[0, 2], [3, 1]])),
        "g_gather: index 3 at position 2 is out of range (valid: 0 to 2); input [2, 3]"
    );
    assert_eq!(
        message(&|tp, x| g_gather(tp, x, 2, &array![[0]])),
        "g_gather: axis 2 is out of range for a 2-D input (valid: -2 to 1); input [2, 3]"
    );
    assert_eq!(
        message(&|tp, x| g_gather(tp, x, 0, &array![0, 1])),
        "g_gather: inputs must have the same number of dims, got 2-D and 1-D; input [2, 3]"
    );
    assert_eq!(
        message(&|tp, x| g_gather(tp, x, 0, &array![[0, 1, 0, 1]])),
        "g_gather: the indices have 4 entries on dim 1, but the input has only 3 \
         (off the gathered axis, each dim of the indices must be at most the input's); input [2, 3]"
    );
    assert_eq!(
        message(&|tp, x| g_index_select(tp, x, 0, &[1, 0, 2])),
        "g_index_select: index 2 at position 2 is out of range (valid: 0 to 1); input [2, 3]"
    );
    assert_eq!(
        message(&|tp, x| g_index_select(tp, x, -3, &[0])),
        "g_index_select: axis -3 is out of range for a 2-D input (valid: -2 to 1); input [2, 3]"
    );
}
