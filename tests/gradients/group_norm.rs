//! `ops/group_norm.rs`: group normalisation.

use grad_runtime::*;
use ndarray::{ArrayD, Axis, IxDyn, array};

use crate::common::{Rng, check_finite_differences, grads_with};
use crate::oracle::Case;

/// The oracle cases of this module's op.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    (case.op() == "group_norm")
        .then(|| g_group_norm(tp, case.x(0), case.index("groups"), case.x(1), case.x(2), case.number("eps")))
}

#[test]
fn group_norm_finite_differences() {
    let mut rng = Rng::new(70);
    for (shape, groups) in [(&[2, 6, 2, 2][..], 3), (&[3, 4][..], 2), (&[2, 4, 3][..], 1), (&[2, 4, 3][..], 4)] {
        let c = shape[1];
        let inputs = [rng.normal_array(shape), rng.normal_array(&[c]), rng.normal_array(&[c])];
        let program = |tp: &mut Tape<f64>, v: &[Var]| g_group_norm(tp, v[0], groups, v[1], v[2], 1e-5);
        check_finite_differences("g_group_norm", &program, &inputs, 71);
    }
}

#[test]
fn group_norm_identities_hold() {
    // Each (sample, group) block is normalised on its own: with gamma = 1
    // and beta = 0 every block has mean 0, and the input gradient sums to
    // zero over each block; beta's gradient is Σ g per channel.
    let mut rng = Rng::new(72);
    let x = rng.normal_array(&[2, 4, 3]);
    let cot = rng.normal_array(&[2, 4, 3]);
    let ones = ArrayD::from_elem(IxDyn(&[4]), 1.0);
    let zeros = ArrayD::zeros(IxDyn(&[4]));
    let inputs = [x.clone(), ones, zeros];
    let y = crate::common::forward(&inputs, |tp, v| g_group_norm(tp, v[0], 2, v[1], v[2], 1e-5));
    let g = grads_with(&inputs, &cot, |tp, v| g_group_norm(tp, v[0], 2, v[1], v[2], 1e-5));
    for n in 0..2 {
        for block in 0..2 {
            let of =
                |a: &ArrayD<f64>| a.index_axis(Axis(0), n).slice(ndarray::s![2 * block..2 * block + 2, ..]).to_owned();
            assert!(of(&y).sum().abs() < 1e-13);
            assert!(of(&g[0]).sum().abs() < 1e-13);
        }
    }
    assert_eq!(g[2], cot.sum_axis(Axis(2)).sum_axis(Axis(0)).into_dyn());
}

#[test]
fn one_group_per_channel_is_instance_norm_and_the_macro_checks_groups() {
    // groups = C normalises each (sample, channel) plane alone.
    let mut tape = Tape::<f64>::new();
    let x = tape.param(array![[[1.0, 3.0], [10.0, 20.0]]]);
    let (gamma, beta) = (tape.param(array![1.0, 1.0]), tape.param(array![0.0, 0.0]));
    let y = grad!(tape; x: [1, 2, 2], gamma: [2], beta: [2]; group_norm(x, 2, gamma, beta, 0.0));
    assert_eq!(tape.value(y), array![[[-1.0, 1.0], [-1.0, 1.0]]].into_dyn());

    let err_of = |groups: usize| {
        let mut tape = Tape::<f64>::new();
        let x = tape.param(ArrayD::<f64>::zeros(IxDyn(&[2, 6])));
        let (gamma, beta) =
            (tape.param(ArrayD::<f64>::ones(IxDyn(&[6]))), tape.param(ArrayD::<f64>::zeros(IxDyn(&[6]))));
        g_group_norm(&mut tape, x, groups, gamma, beta, 1e-5);
        tape.error().map(|e| e.kind().clone())
    };
    assert!(matches!(err_of(4), Some(ErrorKind::InvalidArgument { name: "groups", .. })));
    assert!(matches!(err_of(0), Some(ErrorKind::InvalidArgument { name: "groups", .. })));
    assert_eq!(err_of(3), None);
}
