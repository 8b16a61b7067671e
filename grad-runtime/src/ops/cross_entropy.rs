//! `cross_entropy`: fused log-softmax and negative log-likelihood of
//! integer class targets.

use std::panic::Location;

use ndarray::{Dimension, IxDyn};

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::axis::AxisLanes;
use crate::ops::reduce::sum_slice;
use crate::ops::sink::GradSink;
use crate::ops::softmax::{row_max, softmax_row};
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Indices, Tape, Var};

/// Cross-entropy of `logits: [.., C]` (2-D or more, the classes on the
/// last axis) against integer class `targets` (one per row, each in
/// `0..C`): `mean over rows n of -log_softmax(logits[n])[targets[n]]`, a
/// scalar, where the rows are every position of the leading dims: logits
/// `[B, T, V]` with targets `[B, T]` is the mean over all `B · T`
/// positions, PyTorch's `F.cross_entropy(logits.view(-1, V), targets.view(-1))`.
/// The targets are any [`Indices`]: shaped as the leading dims (an
/// `Array2<usize>` `[B, T]`), or a flat list of one target per row. Fused
/// with its softmax, so it is stable for any finite logits. A target out
/// of range is an error naming its (row-major) position and value.
///
/// Gradient: `g · (softmax(logits[n]) - onehot(targets[n])) / N` to row `n`.
///
/// ```
/// use grad_runtime::{g_cross_entropy, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let logits = tape.param(array![[0.0, 0.0]]);
/// let y = g_cross_entropy(&mut tape, logits, &[1]);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), ndarray::arr0(2f64.ln()).into_dyn());
/// assert_eq!(tape.grad(logits), array![[0.5, -0.5]].into_dyn());
///
/// // A language model's logits [batch, time, vocab] and targets [batch, time].
/// let logits = tape.param(ndarray::Array3::<f64>::zeros((2, 3, 4)));
/// let loss = g_cross_entropy(&mut tape, logits, &array![[0, 1, 2], [3, 0, 1]]);
/// assert!((tape.scalar(loss) - 4f64.ln()).abs() < 1e-15);
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_cross_entropy<T: Float, I: Indices + ?Sized>(tp: &mut Tape<T>, logits: Var, targets: &I) -> Var {
    const NAME: &str = "g_cross_entropy";
    let location = Location::caller();
    let Some([logits]) = tp.resolve(NAME, [logits], location) else {
        return tp.poisoned_var();
    };
    let shape = tp.shape(logits);
    if shape.len() < 2 {
        let kind = ErrorKind::Rank { expected: "2-D or more ([.., classes])", got: shape.len() };
        return tp.fail(NAME, kind, &[logits], location);
    }
    let (leading, classes) = (&shape[..shape.len() - 1], shape[shape.len() - 1]);
    // Saturating: with 0 classes the leading dims' product may not fit, and no targets match it.
    let rows = leading.iter().fold(1usize, |n, &d| n.saturating_mul(d));
    let given = targets.index_shape();
    if given.ndim() == 1 && given[0] != rows {
        let kind = ErrorKind::IndexCount { what: "target", got: given[0], expected: rows };
        return tp.fail(NAME, kind, &[logits], location);
    }
    if given.ndim() != 1 && given.slice() != leading {
        let kind = ErrorKind::IndicesShape { what: "targets", expected: leading.to_vec(), got: given.slice().to_vec() };
        return tp.fail(NAME, kind, &[logits], location);
    }
    let targets = tp.copy_indices_of(targets);
    if let Some((position, &index)) = targets.iter().enumerate().find(|&(_, &t)| t >= classes) {
        tp.recycle_indices(targets);
        let kind = ErrorKind::IndexOutOfRange { what: "target class", position, index, len: classes };
        return tp.fail(NAME, kind, &[logits], location);
    }
    // One row of scratch; none without rows (`classes` may then be huge).
    let mut exps = tp.scratch(if rows == 0 { 0 } else { classes });
    let x = &tp.value_of(logits).data;
    let total = x
        .chunks_exact(classes.max(1))
        .zip(&targets)
        .fold(T::zero(), |sum, (row, &t)| sum + row_loss(row, t, &mut exps));
    tp.recycle(exps);
    let Some(mut out) = tp.output(NAME, IxDyn(&[]), &[logits], location) else {
        tp.recycle_indices(targets);
        return tp.poisoned_var();
    };
    out.data[0] = total / T::from_usize(rows);
    tp.push(Op::CrossEntropy { logits, targets }, out)
}

/// `-log_softmax(row)[target]`, as `log(sum(exp(row - max))) - (row[target] - max)`:
/// the maximum is subtracted before `exp` and never added back, so a
/// confident row costs no rounding at the logits' magnitude. `exps` is
/// scratch of the row's length.
fn row_loss<T: Float>(row: &[T], target: usize, exps: &mut [T]) -> T {
    let max = row_max(row);
    for (e, &v) in exps.iter_mut().zip(row) {
        *e = (v - max).tape_exp();
    }
    sum_slice(exps).ln() - (row[target] - max)
}

pub(crate) fn cross_entropy_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    logits: NodeId,
    targets: &[usize],
) {
    let x = sink.value(logits);
    let classes = x.shape()[x.shape().len() - 1];
    let scale = g.data[0] / T::from_usize(targets.len());
    let rows = AxisLanes { outer: targets.len(), len: classes, inner: 1 };
    sink.contribute(logits, |c| {
        rows.rows([&x.data], c, &mut [], softmax_row);
        for (row, &t) in c.chunks_exact_mut(classes.max(1)).zip(targets) {
            row.iter_mut().for_each(|d| *d *= scale);
            row[t] -= scale;
        }
    });
}
