//! `batch_norm`: normalisation of each channel over the batch, with
//! running statistics for evaluation (`normalize.rs` holds the arithmetic
//! it shares with group norm).

use std::panic::Location;

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::normalize::{self, Grouping, Planes};
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var};

/// Batch normalisation of `x: [N, C, *]` (any rank from 2), as PyTorch's
/// `F.batch_norm(x, running_mean, running_var, gamma, beta, train,
/// momentum, eps)`: `y = (x − mean) / √(var + eps) · gamma + beta` per
/// channel, where `running_mean`, `running_var`, `gamma` and `beta` are
/// `[C]`.
///
/// - `train`: `mean` and the biased `var` are the batch's, over every
///   element of the channel (`N` times the spatial size, which must be
///   more than 1); the running statistics are then updated in place,
///   `running = (1 − momentum) · running + momentum · batch`, with the
///   unbiased variance (`n / (n − 1)` times the biased), as PyTorch does.
/// - evaluation: `mean` and `var` are the running statistics, which are
///   left alone.
///
/// `running_mean` and `running_var` must be buffers ([`Tape::buffer`]) or
/// constants: an op writes them, so neither may carry a gradient.
/// `momentum` is in `[0, 1]`, `eps` finite and `>= 0`.
///
/// Gradient, with `x̂ = (x − mean) / √(var + eps)` and `ĝ = g · gamma`: in
/// training, `x` gets `(ĝ − mean(ĝ) − x̂ · mean(ĝ · x̂)) / √(var + eps)`
/// per channel (the statistics depend on `x`); in evaluation,
/// `ĝ / √(var + eps)`. `gamma` gets `Σ g · x̂`, `beta` gets `Σ g`.
///
/// ```
/// use grad_runtime::{g_batch_norm, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 10.0], [3.0, 30.0]]); // [N = 2, C = 2]
/// let (mean, var) = (tape.buffer(array![0.0, 0.0]), tape.buffer(array![1.0, 1.0]));
/// let (gamma, beta) = (tape.param(array![1.0, 1.0]), tape.param(array![0.0, 0.5]));
/// let y = g_batch_norm(&mut tape, x, mean, var, gamma, beta, true, 0.1, 0.0);
/// assert_eq!(tape.value(y), array![[-1.0, -0.5], [1.0, 1.5]].into_dyn());
/// // Running statistics: 0.9 · old + 0.1 · batch (variance unbiased: 2 and 200).
/// assert_eq!(tape.value(mean), array![0.2, 2.0].into_dyn());
/// assert_eq!(tape.value(var), array![0.9 + 0.2, 0.9 + 20.0].into_dyn());
/// tape.backward(y)?;
/// assert_eq!(tape.grad(beta), array![2.0, 2.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[allow(clippy::too_many_arguments)] // PyTorch's argument list, in its order
#[track_caller]
pub fn g_batch_norm<T: Float>(
    tp: &mut Tape<T>,
    x: Var,
    running_mean: Var,
    running_var: Var,
    gamma: Var,
    beta: Var,
    train: bool,
    momentum: T,
    eps: T,
) -> Var {
    const NAME: &str = "g_batch_norm";
    let location = Location::caller();
    let Some(ids) = tp.resolve(NAME, [x, running_mean, running_var, gamma, beta], location) else {
        return tp.poisoned_var();
    };
    let [x, running_mean, running_var, gamma, beta] = ids;
    let planes = match check(tp, ids, train, momentum, eps) {
        Ok(planes) => planes,
        Err(kind) => return tp.fail(NAME, kind, &ids, location),
    };
    let Some(mut out) = tp.output(NAME, tp.value_of(x).shape.clone(), &ids, location) else {
        return tp.poisoned_var();
    };
    let channels = planes.c;
    // Each channel's mean and 1 / √(var + eps), then eps (for the recorded gradient).
    let mut stats = tp.scratch(2 * channels + 1);
    stats[2 * channels] = eps;
    let mut running = tp.scratch(2 * channels);
    {
        let (mean, rest) = stats.split_at_mut(channels);
        let rstd = &mut rest[..channels];
        let (old_mean, old_var) = (&tp.value_of(running_mean).data, &tp.value_of(running_var).data);
        if train {
            normalize::moments(&tp.value_of(x).data, &planes, mean, rstd);
            let (new_mean, new_var) = running.split_at_mut(channels);
            let (n, one) = (T::from_usize(planes.count()), T::one());
            for c in 0..channels {
                new_mean[c] = (one - momentum) * old_mean[c] + momentum * mean[c];
                new_var[c] = (one - momentum) * old_var[c] + momentum * rstd[c] * n / (n - one);
                rstd[c] = one / (rstd[c] + eps).sqrt();
            }
        } else {
            mean.copy_from_slice(old_mean);
            for (r, &v) in rstd.iter_mut().zip(old_var) {
                *r = T::one() / (v + eps).sqrt();
            }
        }
        let (mean, rstd) = (&*mean, &*rstd);
        let affine = [&tp.value_of(gamma).data[..], &tp.value_of(beta).data[..]];
        normalize::normalize(&tp.value_of(x).data, &planes, [mean, rstd], affine, &mut out.data);
    }
    let y = tp.push(Op::BatchNorm { x, gamma, beta, stats, train }, out);
    // Written once the node is recorded: an op that fails changes nothing.
    if train && tp.is_ok() {
        let (new_mean, new_var) = running.split_at(channels);
        tp.value_mut(running_mean).copy_from_slice(new_mean);
        tp.value_mut(running_var).copy_from_slice(new_var);
    }
    tp.recycle(running);
    y
}

/// `x`'s planes if every argument fits, or why one does not.
fn check<T: Float>(tp: &Tape<T>, ids: [NodeId; 5], train: bool, momentum: T, eps: T) -> Result<Planes, ErrorKind> {
    let [x, running_mean, running_var, gamma, beta] = ids;
    let shape = tp.shape(x);
    let planes = Planes::of(shape, Grouping::Channels)
        .ok_or(ErrorKind::Rank { expected: "[N, C, ...] (2-D or more)", got: shape.len() })?;
    if [running_mean, running_var, gamma, beta].iter().any(|&id| tp.shape(id) != [planes.c]) {
        return Err(ErrorKind::ShapeMismatch);
    }
    if [running_mean, running_var].iter().any(|&id| !tp.is_leaf(id) || tp.requires_grad(id)) {
        return Err(ErrorKind::NotABuffer);
    }
    if !eps.is_finite() || eps < T::zero() {
        return Err(ErrorKind::InvalidArgument { name: "eps", value: eps.to_f64(), expected: "a finite value >= 0" });
    }
    if !(momentum >= T::zero() && momentum <= T::one()) {
        return Err(ErrorKind::InvalidArgument { name: "momentum", value: momentum.to_f64(), expected: "in [0, 1]" });
    }
    if train && planes.count() < 2 {
        let expected = "more than 1 value per channel in training (N times the spatial size)";
        return Err(ErrorKind::InvalidArgument { name: "values per channel", value: planes.count() as f64, expected });
    }
    Ok(planes)
}

pub(crate) fn batch_norm_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    [x, gamma, beta]: [NodeId; 3],
    stats: &[T],
    train: bool,
) {
    let (input, scale) = (sink.value(x), sink.value(gamma));
    let planes = Planes::of(input.shape(), Grouping::Channels).expect("invariant: checked by g_batch_norm");
    let stats = [&stats[..planes.c], &stats[planes.c..2 * planes.c]];
    sink.contribute(x, |dx| normalize::input_grad(&input.data, g.data, &planes, stats, &scale.data, train, dx));
    sink.contribute_zeroed(gamma, |d| normalize::affine_grads(&input.data, g.data, &planes, stats, Some(d), None));
    sink.contribute_zeroed(beta, |d| normalize::affine_grads(&input.data, g.data, &planes, stats, None, Some(d)));
}
