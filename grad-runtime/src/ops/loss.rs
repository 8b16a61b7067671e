//! Losses: `mse`.

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
