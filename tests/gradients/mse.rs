//! `ops/mse.rs`: the mean squared error.

use grad_runtime::*;
use ndarray::array;

use crate::common::{Rng, check_finite_differences, grads_with, scalar};
use crate::oracle::Case;

/// The oracle cases of this module's op.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    (case.op() == "mse").then(|| g_mse(tp, case.x(0), case.x(1)))
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
