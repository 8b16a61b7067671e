//! `ops/batch_norm.rs`: batch normalisation, in training (through the
//! batch statistics) and in evaluation (by the running ones).

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn, array};

use crate::common::{Rng, check_finite_differences, grads_with};
use crate::oracle::Case;

/// The oracle cases of this module's op; the running statistics after the
/// call must be PyTorch's too.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    (case.op() == "batch_norm").then(|| {
        let (mean, var) = (case.x(1), case.x(2));
        let y = g_batch_norm(tp, case.x(0), mean, var, case.x(3), case.x(4), case.flag("train"), 0.1, 1e-5);
        for (stat, name) in [(mean, "running_mean_after"), (var, "running_var_after")] {
            let want = ArrayD::from_shape_vec(IxDyn(&[case.floats(name).len()]), case.floats(name)).unwrap();
            crate::common::assert_close(name, &tp.value(stat).to_owned(), &want, 1e-12, 1e-14);
        }
        y
    })
}

/// `batch_norm` on `x, gamma, beta` with fresh running statistics.
fn program(train: bool) -> impl Fn(&mut Tape<f64>, &[Var]) -> Var {
    move |tp, v| {
        let c = tp.value(v[1]).len();
        let mean = tp.buffer(ArrayD::from_elem(IxDyn(&[c]), 0.25));
        let var = tp.buffer(ArrayD::from_elem(IxDyn(&[c]), 2.0));
        g_batch_norm(tp, v[0], mean, var, v[1], v[2], train, 0.1, 1e-5)
    }
}

#[test]
fn batch_norm_finite_differences_in_training_and_evaluation() {
    let mut rng = Rng::new(60);
    for shape in [&[4, 3, 2, 2][..], &[5, 2], &[2, 3, 4]] {
        let c = shape[1];
        let inputs = [rng.normal_array(shape), rng.normal_array(&[c]), rng.normal_array(&[c])];
        check_finite_differences("g_batch_norm train", &program(true), &inputs, 61);
        check_finite_differences("g_batch_norm eval", &program(false), &inputs, 62);
    }
}

#[test]
fn batch_norm_identities_hold() {
    // In training each channel's output is invariant to adding a constant
    // to the channel, so the input gradient sums to zero per channel; with
    // eps = 0 it is invariant to scaling too, so it is orthogonal to the
    // centred input. gamma's and beta's gradients are sums of g·x̂ and g.
    let mut rng = Rng::new(63);
    let x = rng.normal_array(&[3, 2, 4]);
    let cot = rng.normal_array(&[3, 2, 4]);
    let inputs = [x.clone(), array![1.5, -0.5].into_dyn(), array![0.25, 2.0].into_dyn()];
    let g = grads_with(&inputs, &cot, |tp, v| {
        let (mean, var) = (tp.buffer(array![0.0, 0.0]), tp.buffer(array![1.0, 1.0]));
        g_batch_norm(tp, v[0], mean, var, v[1], v[2], true, 0.1, 0.0)
    });
    for c in 0..2 {
        let channel = |a: &ArrayD<f64>| a.index_axis(ndarray::Axis(1), c).to_owned();
        let (xc, dx) = (channel(&x), channel(&g[0]));
        let centred = &xc - xc.mean().unwrap();
        assert!(dx.sum().abs() < 1e-13, "channel {c}: Σ dx = {}", dx.sum());
        assert!((&dx * &centred).sum().abs() < 1e-12, "channel {c}: Σ dx · (x − mean)");
        let x_hat = &centred / centred.mapv(|v| v * v).mean().unwrap().sqrt();
        let gc = channel(&cot);
        assert!((g[1][c] - (&gc * &x_hat).sum()).abs() < 1e-12);
        assert_eq!(g[2][c], gc.sum());
    }
}

#[test]
fn batch_norm_in_evaluation_is_an_affine_map_of_the_running_statistics() {
    // y = (x − m) / √(v + eps) · γ + β exactly, and the input gradient is
    // g · γ / √(v + eps): the statistics are constants.
    let mut tape = Tape::<f64>::new();
    let x = tape.param(array![[1.0, 2.0], [3.0, -4.0]]);
    let (mean, var) = (tape.buffer(array![1.0, -2.0]), tape.buffer(array![4.0, 0.25]));
    let (gamma, beta) = (tape.param(array![2.0, 3.0]), tape.param(array![0.5, 0.0]));
    let y = g_batch_norm(&mut tape, x, mean, var, gamma, beta, false, 0.1, 0.0);
    assert_eq!(tape.value(y), array![[0.5, 24.0], [2.5, -12.0]].into_dyn());
    assert_eq!(tape.value(mean), array![1.0, -2.0].into_dyn(), "evaluation changes no statistic");
    tape.backward(y).unwrap();
    assert_eq!(tape.grad(x), array![[1.0, 6.0], [1.0, 6.0]].into_dyn());
}

#[test]
fn batch_norm_refuses_bad_arguments_and_changes_nothing() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(ArrayD::<f64>::zeros(IxDyn(&[4, 3])));
    let (mean, var) = (tape.buffer(array![0.0, 0.0, 0.0]), tape.buffer(array![1.0, 1.0, 1.0]));
    let (gamma, beta) = (tape.param(array![1.0, 1.0, 1.0]), tape.param(array![0.0, 0.0, 0.0]));
    let short = tape.param(array![0.0, 0.0]);
    let (one_row, flat) = (tape.param(ArrayD::<f64>::zeros(IxDyn(&[1, 3]))), tape.param(array![1.0, 2.0, 3.0]));
    let mark = tape.mark();
    let mut error_of = |x: Var, stats: [Var; 2], beta: Var, train: bool, momentum: f64, eps: f64| {
        g_batch_norm(&mut tape, x, stats[0], stats[1], gamma, beta, train, momentum, eps);
        let err = tape.error().expect("refused").clone();
        tape.reset_to(mark);
        err
    };
    let err = error_of(x, [mean, var], short, true, 0.1, 1e-5);
    assert_eq!((err.op(), err.kind()), ("g_batch_norm", &ErrorKind::ShapeMismatch));
    assert!(err.to_string().contains("[4, 3] and [3] and [3] and [3] and [2]"), "{err}");
    // A parameter as a running statistic: the op would write it.
    assert_eq!(error_of(x, [gamma, var], beta, true, 0.1, 1e-5).kind(), &ErrorKind::NotABuffer);
    for (momentum, eps, name) in [(1.5, 1e-5, "momentum"), (0.1, -1.0, "eps"), (f64::NAN, 1e-5, "momentum")] {
        let kind = error_of(x, [mean, var], beta, true, momentum, eps).kind().clone();
        assert!(matches!(kind, ErrorKind::InvalidArgument { name: n, .. } if n == name), "{kind:?}");
    }
    let kind = error_of(one_row, [mean, var], beta, true, 0.1, 1e-5).kind().clone();
    assert!(matches!(kind, ErrorKind::InvalidArgument { name: "values per channel", .. }), "{kind:?}");
    let kind = error_of(flat, [mean, var], beta, false, 0.1, 1e-5).kind().clone();
    assert!(matches!(kind, ErrorKind::Rank { got: 1, .. }), "{kind:?}");
    assert_eq!(tape.value(mean), array![0.0, 0.0, 0.0].into_dyn(), "no failed call wrote a statistic");
    assert_eq!(tape.value(var), array![1.0, 1.0, 1.0].into_dyn());
}
