//! `group_norm`: normalisation of each sample over blocks of channels
//! (`normalize.rs` holds the arithmetic it shares with batch norm).

use std::panic::Location;

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::normalize::{self, Grouping, Planes};
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var};

/// Group normalisation of `x: [N, C, *]` (any rank from 2), as PyTorch's
/// `F.group_norm(x, groups, gamma, beta, eps)`: the `C` channels of each
/// sample are split into `groups` blocks of `C / groups`, each block is
/// normalised by its own mean and biased variance (over its channels and
/// every spatial position), then scaled and shifted per channel by
/// `gamma: [C]` and `beta: [C]`. `groups` must divide `C`; `eps` is finite
/// and `>= 0`. The same in training and evaluation (no running statistics).
///
/// Gradient, per block, with `x̂ = (x − mean) / √(var + eps)` and
/// `ĝ = g · gamma`: `x` gets `(ĝ − mean(ĝ) − x̂ · mean(ĝ · x̂)) / √(var + eps)`,
/// `gamma` gets `Σ g · x̂` and `beta` gets `Σ g` per channel.
///
/// ```
/// use grad_runtime::{g_group_norm, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// // One sample, four channels of one element, two groups: [1, 3] and [5, 9].
/// let x = tape.param(array![[1.0, 3.0, 5.0, 9.0]]);
/// let (gamma, beta) = (tape.param(array![1.0, 1.0, 2.0, 2.0]), tape.param(array![0.0, 0.0, 0.0, 0.0]));
/// let y = g_group_norm(&mut tape, x, 2, gamma, beta, 0.0);
/// assert_eq!(tape.value(y), array![[-1.0, 1.0, -2.0, 2.0]].into_dyn());
/// tape.backward(y)?;
/// assert_eq!(tape.grad(gamma), array![-1.0, 1.0, -1.0, 1.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_group_norm<T: Float>(tp: &mut Tape<T>, x: Var, groups: usize, gamma: Var, beta: Var, eps: T) -> Var {
    const NAME: &str = "g_group_norm";
    let location = Location::caller();
    let Some(ids) = tp.resolve(NAME, [x, gamma, beta], location) else {
        return tp.poisoned_var();
    };
    let [x, gamma, beta] = ids;
    let planes = match check(tp, ids, groups, eps) {
        Ok(planes) => planes,
        Err(kind) => return tp.fail(NAME, kind, &ids, location),
    };
    let Some(mut out) = tp.output(NAME, tp.value_of(x).shape.clone(), &ids, location) else {
        return tp.poisoned_var();
    };
    let count = planes.groups();
    // Each block's mean and 1 / √(var + eps), then eps (for the recorded gradient).
    let mut stats = tp.scratch(2 * count + 1);
    stats[2 * count] = eps;
    {
        let (mean, rest) = stats.split_at_mut(count);
        let rstd = &mut rest[..count];
        normalize::moments(&tp.value_of(x).data, &planes, mean, rstd);
        rstd.iter_mut().for_each(|r| *r = T::one() / (*r + eps).sqrt());
        let affine = [&tp.value_of(gamma).data[..], &tp.value_of(beta).data[..]];
        normalize::normalize(&tp.value_of(x).data, &planes, [mean, rstd], affine, &mut out.data);
    }
    tp.push(Op::GroupNorm { x, gamma, beta, groups, stats }, out)
}

/// `x`'s planes if every argument fits, or why one does not.
fn check<T: Float>(tp: &Tape<T>, [x, gamma, beta]: [NodeId; 3], groups: usize, eps: T) -> Result<Planes, ErrorKind> {
    let shape = tp.shape(x);
    let planes = Planes::of(shape, Grouping::Blocks { groups })
        .ok_or(ErrorKind::Rank { expected: "[N, C, ...] (2-D or more)", got: shape.len() })?;
    if groups == 0 || planes.c % groups != 0 {
        let expected = "a divisor of the channel count (dim 1 of x), at least 1";
        return Err(ErrorKind::InvalidArgument { name: "groups", value: groups as f64, expected });
    }
    if tp.shape(gamma) != [planes.c] || tp.shape(beta) != [planes.c] {
        return Err(ErrorKind::ShapeMismatch);
    }
    if !eps.is_finite() || eps < T::zero() {
        return Err(ErrorKind::InvalidArgument { name: "eps", value: eps.to_f64(), expected: "a finite value >= 0" });
    }
    Ok(planes)
}

pub(crate) fn group_norm_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    [x, gamma, beta]: [NodeId; 3],
    groups: usize,
    stats: &[T],
) {
    let (input, scale) = (sink.value(x), sink.value(gamma));
    let planes = Planes::of(input.shape(), Grouping::Blocks { groups }).expect("invariant: checked by g_group_norm");
    let count = planes.groups();
    let stats = [&stats[..count], &stats[count..2 * count]];
    sink.contribute(x, |dx| normalize::input_grad(&input.data, g.data, &planes, stats, &scale.data, true, dx));
    sink.contribute_zeroed(gamma, |d| normalize::affine_grads(&input.data, g.data, &planes, stats, Some(d), None));
    sink.contribute_zeroed(beta, |d| normalize::affine_grads(&input.data, g.data, &planes, stats, None, Some(d)));
}
