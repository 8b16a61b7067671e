//! `softmax` and `log_softmax` along one axis, both stable for any finite
//! logits (the lane's maximum is subtracted before `exp`). Each rule is a
//! function of one lane as slices (`*_row`), run over every lane by
//! [`AxisLanes::rows`]: in place and vectorised along the last axis, on a
//! gathered copy along any other.

use std::panic::Location;

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::axis::{AxisLanes, normalize_axis};
use crate::ops::reduce::sum_slice;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::{Tensor, TensorRef};
use crate::{Float, Tape, Var, simd};

/// `exp(x - max) / sum(exp(x - max))` along `axis` (negative counts from
/// the end, `-1` = last).
///
/// Gradient: `y * (g - sum(g * y))`, the sum taken along `axis`.
///
/// ```
/// use grad_runtime::{g_softmax, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[0.0, 0.0]]);
/// let y = g_softmax(&mut tape, x, -1);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![[0.5, 0.5]].into_dyn());
/// assert_eq!(tape.grad(x), array![[0.0, 0.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_softmax<T: Float>(tp: &mut Tape<T>, x: Var, axis: isize) -> Var {
    along_axis(tp, "g_softmax", x, axis, |x, axis| Op::Softmax { x, axis }, softmax_row)
}

/// `x - max - log(sum(exp(x - max)))` along `axis`: the log of softmax,
/// computed without forming softmax, so it stays finite for logits of any
/// finite size.
///
/// Gradient: `g - softmax(x) * sum(g)`, the sum taken along `axis`.
///
/// ```
/// use grad_runtime::{g_log_softmax, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[0.0, 0.0]]);
/// let y = g_log_softmax(&mut tape, x, -1);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![[-(2f64.ln()), -(2f64.ln())]].into_dyn());
/// assert_eq!(tape.grad(x), array![[0.0, 0.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_log_softmax<T: Float>(tp: &mut Tape<T>, x: Var, axis: isize) -> Var {
    along_axis(tp, "g_log_softmax", x, axis, |x, axis| Op::LogSoftmax { x, axis }, log_softmax_row)
}

simd::multiversion! {
    /// The softmax of one lane `x` into `y`.
    pub(crate) fn softmax_row[T: Float][T](x: [&[T]; 1], y: &mut [T]) {
        let [x] = x;
        let max = row_max(x);
        for (y, &x) in y.iter_mut().zip(x) {
            *y = (x - max).tape_exp();
        }
        let total = sum_slice(y);
        y.iter_mut().for_each(|y| *y /= total);
    }
}

simd::multiversion! {
    fn log_softmax_row[T: Float][T](x: [&[T]; 1], y: &mut [T]) {
        let [x] = x;
        let max = row_max(x);
        for (y, &x) in y.iter_mut().zip(x) {
            *y = (x - max).tape_exp();
        }
        let log_total = sum_slice(y).ln();
        for (y, &x) in y.iter_mut().zip(x) {
            *y = x - max - log_total;
        }
    }
}

/// The largest element of a lane (`-inf` for an empty one).
#[inline]
pub(crate) fn row_max<T: Float>(x: &[T]) -> T {
    x.iter().fold(T::neg_infinity(), |m, &v| m.max(v))
}

#[track_caller]
fn along_axis<T: Float>(
    tp: &mut Tape<T>,
    name: &'static str,
    x: Var,
    axis: isize,
    op: fn(NodeId, usize) -> Op<T>,
    row: fn([&[T]; 1], &mut [T]),
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
    let Some(mut out) = tp.output_like(name, x, location) else { return tp.poisoned_var() };
    let mut scratch = tp.scratch(lanes.scratch_len(1));
    lanes.rows([&tp.value_of(x).data], &mut out.data, &mut scratch, row);
    tp.recycle(scratch);
    tp.push(op(x, axis), out)
}

pub(crate) fn softmax_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    out: &Tensor<T>,
    x: NodeId,
    axis: usize,
) {
    lane_backward(sink, g, out, x, axis, softmax_backward_row);
}

simd::multiversion! {
    /// `y * (g - sum(g * y))` along one lane.
    fn softmax_backward_row[T: Float][T](gy: [&[T]; 2], dx: &mut [T]) {
        let [g, y] = gy;
        for ((d, &g), &y) in dx.iter_mut().zip(g).zip(y) {
            *d = g * y;
        }
        let dot = sum_slice(dx);
        for ((d, &g), &y) in dx.iter_mut().zip(g).zip(y) {
            *d = y * (g - dot);
        }
    }
}

pub(crate) fn log_softmax_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    out: &Tensor<T>,
    x: NodeId,
    axis: usize,
) {
    lane_backward(sink, g, out, x, axis, log_softmax_backward_row);
}

simd::multiversion! {
    /// `g - exp(y) * sum(g)` along one lane.
    fn log_softmax_backward_row[T: Float][T](gy: [&[T]; 2], dx: &mut [T]) {
        let [g, y] = gy;
        let total = sum_slice(g);
        for ((d, &g), &y) in dx.iter_mut().zip(g).zip(y) {
            *d = g - y.tape_exp() * total;
        }
    }
}

/// Runs `row([g, y], dx)` on every lane along `axis` and adds `dx` to `x`'s gradient.
fn lane_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    out: &Tensor<T>,
    x: NodeId,
    axis: usize,
    row: impl Fn([&[T]; 2], &mut [T]) + Sync,
) {
    let lanes = AxisLanes::new(out.shape(), axis);
    let mut scratch = sink.scratch(lanes.scratch_len(2));
    sink.contribute(x, |dx| lanes.rows([g.data, &out.data], dx, &mut scratch, row));
    sink.recycle(scratch);
}
