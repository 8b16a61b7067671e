//! `softmax` and `log_softmax` along one axis, both stable for any finite
//! logits (the lane's maximum is subtracted before `exp`).

use std::panic::Location;

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::axis::{AxisLanes, normalize_axis};
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::Tensor;
use crate::{Float, Tape, Var};

/// `exp(x - max) / sum(exp(x - max))` along `axis` (negative counts from
/// the end, `-1` = last).
///
/// Gradient: `y * (g - sum(g * y))`, the sum taken along `axis`.
#[track_caller]
pub fn g_softmax<T: Float>(tp: &mut Tape<T>, x: Var, axis: isize) -> Var {
    let op = |x, axis| Op::Softmax { x, axis };
    along_axis(tp, "g_softmax", x, axis, op, |x, y, lanes| lanes.for_each(|_, start| softmax_lane(x, y, lanes, start)))
}

/// Softmax of one lane (elements at `start + j * lanes.inner`) of `x` into
/// the same positions of `y`.
pub(crate) fn softmax_lane<T: Float>(x: &[T], y: &mut [T], lanes: AxisLanes, start: usize) {
    let at = |j: usize| start + j * lanes.inner;
    let max = lane_max(x, lanes, start);
    let mut total = T::zero();
    for j in 0..lanes.len {
        y[at(j)] = (x[at(j)] - max).exp();
        total += y[at(j)];
    }
    for j in 0..lanes.len {
        y[at(j)] /= total;
    }
}

/// `x - max - log(sum(exp(x - max)))` along `axis`: the log of softmax,
/// computed without forming softmax, so it stays finite for logits of any
/// finite size.
///
/// Gradient: `g - softmax(x) * sum(g)`, the sum taken along `axis`.
#[track_caller]
pub fn g_log_softmax<T: Float>(tp: &mut Tape<T>, x: Var, axis: isize) -> Var {
    let op = |x, axis| Op::LogSoftmax { x, axis };
    along_axis(tp, "g_log_softmax", x, axis, op, |x, y, lanes| {
        lanes.for_each(|_, start| {
            let at = |j: usize| start + j * lanes.inner;
            let max = lane_max(x, lanes, start);
            let total = (0..lanes.len).fold(T::zero(), |s, j| s + (x[at(j)] - max).exp());
            let log_total = total.ln();
            for j in 0..lanes.len {
                y[at(j)] = x[at(j)] - max - log_total;
            }
        })
    })
}

/// The largest element of a lane (`-inf` for an empty lane).
pub(crate) fn lane_max<T: Float>(x: &[T], lanes: AxisLanes, start: usize) -> T {
    (0..lanes.len).fold(T::neg_infinity(), |m, j| m.max(x[start + j * lanes.inner]))
}

#[track_caller]
fn along_axis<T: Float>(
    tp: &mut Tape<T>,
    name: &'static str,
    x: Var,
    axis: isize,
    op: fn(NodeId, usize) -> Op<T>,
    kernel: impl Fn(&[T], &mut [T], AxisLanes),
) -> Var {
    let location = Location::caller();
    let Some([x]) = tp.resolve(name, [x], location) else {
        return tp.poisoned_var();
    };
    let ndim = tp.shape(x).len();
    let Some(axis) = normalize_axis(axis, ndim) else {
        return tp.fail(name, ErrorKind::Axis { axis, ndim }, &[x], location);
    };
    let lanes = AxisLanes::new(tp.shape(x), axis);
    let Some(mut out) = tp.output(name, tp.value_of(x).shape.clone(), &[x], location) else { return tp.poisoned_var() };
    kernel(&tp.value_of(x).data, &mut out.data, lanes);
    tp.push(op(x, axis), out)
}

pub(crate) fn softmax_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &Tensor<T>,
    out: &Tensor<T>,
    x: NodeId,
    axis: usize,
) {
    // y * (g - sum(g * y)) along each lane.
    lane_backward(sink, g, out, x, axis, |g, y, lanes, start, dx| {
        let at = |j: usize| start + j * lanes.inner;
        let dot = (0..lanes.len).fold(T::zero(), |s, j| s + g[at(j)] * y[at(j)]);
        for j in 0..lanes.len {
            dx[at(j)] = y[at(j)] * (g[at(j)] - dot);
        }
    });
}

pub(crate) fn log_softmax_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &Tensor<T>,
    out: &Tensor<T>,
    x: NodeId,
    axis: usize,
) {
    // g - exp(y) * sum(g) along each lane.
    lane_backward(sink, g, out, x, axis, |g, y, lanes, start, dx| {
        let at = |j: usize| start + j * lanes.inner;
        let total = (0..lanes.len).fold(T::zero(), |s, j| s + g[at(j)]);
        for j in 0..lanes.len {
            dx[at(j)] = g[at(j)] - y[at(j)].exp() * total;
        }
    });
}

/// Runs `rule(g, y, lanes, start, dx)` on every lane along `axis` (the
/// lane's elements sit at `start + j * lanes.inner`) and adds `dx` to `x`'s gradient.
fn lane_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &Tensor<T>,
    out: &Tensor<T>,
    x: NodeId,
    axis: usize,
    rule: impl Fn(&[T], &[T], AxisLanes, usize, &mut [T]),
) {
    let lanes = AxisLanes::new(out.shape(), axis);
    sink.contribute(x, |c| lanes.for_each(|_, start| rule(&g.data, &out.data, lanes, start, c)));
}
