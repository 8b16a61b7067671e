//! Losses: `mse` and `cross_entropy`.

use std::panic::Location;

use ndarray::IxDyn;

use crate::backward::GradSink;
use crate::error::ErrorKind;
use crate::ops::Op;
use crate::tape::NodeId;
use crate::tensor::Tensor;
use crate::{Float, Tape, Var};

/// Mean squared error `mean((y - t)²)` over every element, as a scalar.
/// `y` and `t` must have the same shape (no broadcasting: a silently
/// broadcast target is a classic bug).
///
/// Gradient: `g · 2 (y - t) / n` to `y` and its negation to `t`.
#[track_caller]
pub fn g_mse<T: Float>(tp: &mut Tape<T>, y: Var, t: Var) -> Var {
    const NAME: &str = "g_mse";
    let location = Location::caller();
    let Some([y, t]) = tp.resolve(NAME, [y, t], location) else {
        return tp.poisoned_var();
    };
    if tp.shape(y) != tp.shape(t) {
        return tp.fail(NAME, ErrorKind::ShapeMismatch, &[y, t], location);
    }
    let (vy, vt) = (&tp.nodes[y].value.data, &tp.nodes[t].value.data);
    let mut squares = tp.pool.take(vy.len());
    for ((s, &y), &t) in squares.iter_mut().zip(vy).zip(vt) {
        *s = (y - t) * (y - t);
    }
    let mean = super::reduce::sum_slice(&squares) / T::from_usize(squares.len());
    tp.pool.give(squares);
    let mut out = tp.output(IxDyn(&[]));
    out.data[0] = mean;
    tp.push(Op::Mse(y, t), out)
}

pub(crate) fn mse_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &Tensor<T>, y: NodeId, t: NodeId) {
    let (vy, vt) = (sink.value(y), sink.value(t));
    let scale = (g.data[0] + g.data[0]) / T::from_usize(vy.len());
    for (x, sign) in [(y, T::one()), (t, -T::one())] {
        if sink.wants(x) {
            let mut contribution = sink.pool.take(vy.len());
            for ((c, &y), &t) in contribution.iter_mut().zip(&vy.data).zip(&vt.data) {
                *c = sign * scale * (y - t);
            }
            sink.add(x, contribution);
        }
    }
}

/// Cross-entropy of `logits: [N, C]` against integer class `targets` (one
/// per row, each in `0..C`): `mean over n of -log_softmax(logits[n])[targets[n]]`,
/// a scalar. Fused with its softmax, so it is stable for any finite logits.
/// A target out of range is an error naming its position and value.
///
/// Gradient: `g · (softmax(logits[n]) - onehot(targets[n])) / N` to row `n`.
#[track_caller]
pub fn g_cross_entropy<T: Float>(tp: &mut Tape<T>, logits: Var, targets: &[usize]) -> Var {
    const NAME: &str = "g_cross_entropy";
    let location = Location::caller();
    let Some([logits]) = tp.resolve(NAME, [logits], location) else {
        return tp.poisoned_var();
    };
    let shape = tp.shape(logits);
    if shape.len() != 2 {
        let kind = ErrorKind::Rank { expected: "2-D ([batch, classes])", got: shape.len() };
        return tp.fail(NAME, kind, &[logits], location);
    }
    let (rows, classes) = (shape[0], shape[1]);
    if targets.len() != rows {
        let kind = ErrorKind::IndexCount { what: "target", got: targets.len(), expected: rows };
        return tp.fail(NAME, kind, &[logits], location);
    }
    if let Some((position, &index)) = targets.iter().enumerate().find(|&(_, &t)| t >= classes) {
        let kind = ErrorKind::IndexOutOfRange { what: "target class", position, index, len: classes };
        return tp.fail(NAME, kind, &[logits], location);
    }
    let x = &tp.nodes[logits].value.data;
    let total = x.chunks_exact(classes.max(1)).zip(targets).fold(T::zero(), |sum, (row, &t)| sum + row_loss(row, t));
    let mut out = tp.output(IxDyn(&[]));
    out.data[0] = total / T::from_usize(rows);
    let targets = tp.copy_indices(targets);
    tp.push(Op::CrossEntropy { logits, targets }, out)
}

/// `-log_softmax(row)[target]`, as `log(sum(exp(row - max))) - (row[target] - max)`:
/// the maximum is subtracted before `exp` and never added back, so a
/// confident row costs no rounding at the logits' magnitude.
fn row_loss<T: Float>(row: &[T], target: usize) -> T {
    let max = row.iter().fold(T::neg_infinity(), |m, &v| m.max(v));
    row.iter().fold(T::zero(), |s, &v| s + (v - max).exp()).ln() - (row[target] - max)
}

pub(crate) fn cross_entropy_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &Tensor<T>,
    logits: NodeId,
    targets: &[usize],
) {
    if !sink.wants(logits) {
        return;
    }
    let x = sink.value(logits);
    let classes = x.shape()[1];
    let scale = g.data[0] / T::from_usize(targets.len());
    let mut contribution = sink.pool.take(x.len());
    let rows = x.data.chunks_exact(classes).zip(contribution.chunks_exact_mut(classes));
    for ((row, grad_row), &t) in rows.zip(targets) {
        let max = row.iter().fold(T::neg_infinity(), |m, &v| m.max(v));
        let mut total = T::zero();
        for (d, &v) in grad_row.iter_mut().zip(row) {
            *d = (v - max).exp();
            total += *d;
        }
        for d in grad_row.iter_mut() {
            *d = *d / total * scale;
        }
        grad_row[t] -= scale;
    }
    sink.add(logits, contribution);
}
