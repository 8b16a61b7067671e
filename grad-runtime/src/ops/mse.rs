//! `mse`: the mean squared error of a prediction against a target.

use std::panic::Location;

use ndarray::IxDyn;

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::reduce::sum_slice;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var};

/// Mean squared error `mean((y - t)²)` over every element, as a scalar.
/// `y` and `t` must have the same shape (no broadcasting: a silently
/// broadcast target is a classic bug).
///
/// Gradient: `g · 2 (y - t) / n` to `y` and its negation to `t`.
///
/// ```
/// use grad_runtime::{g_mse, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let p = tape.param(array![1.0, 3.0]);
/// let t = tape.constant(array![0.0, 1.0]);
/// let y = g_mse(&mut tape, p, t);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), ndarray::arr0(2.5).into_dyn());
/// assert_eq!(tape.grad(p), array![1.0, 2.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
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
    let mut squares = tp.scratch(tp.value_of(y).len());
    let (vy, vt) = (&tp.value_of(y).data, &tp.value_of(t).data);
    for ((s, &y), &t) in squares.iter_mut().zip(vy).zip(vt) {
        *s = (y - t) * (y - t);
    }
    let mean = sum_slice(&squares) / T::from_usize(squares.len());
    tp.recycle(squares);
    let Some(mut out) = tp.output(NAME, IxDyn(&[]), &[y, t], location) else { return tp.poisoned_var() };
    out.data[0] = mean;
    tp.push(Op::Mse(y, t), out)
}

pub(crate) fn mse_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, y: NodeId, t: NodeId) {
    let (vy, vt) = (sink.value(y), sink.value(t));
    let scale = (g.data[0] + g.data[0]) / T::from_usize(vy.len());
    for (x, sign) in [(y, T::one()), (t, -T::one())] {
        sink.contribute(x, |c| {
            for ((c, &y), &t) in c.iter_mut().zip(&vy.data).zip(&vt.data) {
                *c = sign * scale * (y - t);
            }
        });
    }
}
