//! `cumsum`: running sums along one axis.

use std::panic::Location;

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::axis::{AxisLanes, normalize_axis};
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var};

/// The running sum along `axis` (negative counts from the end): element
/// `j` of each lane is `x[0] + ... + x[j]`, as `torch.cumsum`. Same shape
/// as `x`; an axis out of range is an error.
///
/// Gradient: the reverse running sum of `g` along the axis (element `j`
/// gets `g[j] + ... + g[n - 1]`).
///
/// ```
/// use grad_runtime::{g_cumsum, g_sum, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
/// let running = g_cumsum(&mut tape, x, -1);
/// assert_eq!(tape.value(running), array![[1.0, 3.0, 6.0], [4.0, 9.0, 15.0]].into_dyn());
/// let loss = g_sum(&mut tape, running);
/// tape.backward(loss)?;
/// assert_eq!(tape.grad(x), array![[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_cumsum<T: Float>(tp: &mut Tape<T>, x: Var, axis: isize) -> Var {
    const NAME: &str = "g_cumsum";
    let location = Location::caller();
    let Some([x]) = tp.resolve(NAME, [x], location) else {
        return tp.poisoned_var();
    };
    let ndim = tp.shape(x).len();
    let Some(axis) = normalize_axis(axis, ndim) else {
        return tp.fail(NAME, ErrorKind::Axis { axis, ndim }, &[x], location);
    };
    let Some(mut out) = tp.output_like(NAME, x, location) else {
        return tp.poisoned_var();
    };
    let lanes = AxisLanes::new(tp.shape(x), axis);
    running_sums(&tp.value_of(x).data, lanes, &mut out.data, false);
    tp.push(Op::Cumsum { x, axis }, out)
}

pub(crate) fn cumsum_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, x: NodeId, axis: usize) {
    let lanes = AxisLanes::new(g.shape(), axis);
    sink.contribute(x, |c| running_sums(g.data, lanes, c, true));
}

/// `out` = the running sums of every lane of `x`, from the lane's end when `reverse`.
fn running_sums<T: Float>(x: &[T], lanes: AxisLanes, out: &mut [T], reverse: bool) {
    lanes.for_each(|_, start| {
        let mut total = T::zero();
        let mut add = |j: usize| {
            let at = start + j * lanes.inner;
            total += x[at];
            out[at] = total;
        };
        if reverse { (0..lanes.len).rev().for_each(&mut add) } else { (0..lanes.len).for_each(&mut add) }
    });
}
