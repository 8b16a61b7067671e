//! `detach`: stop-gradient, a copy of a value that backward does not pass through.

use std::panic::Location;

use crate::ops::Op;
use crate::{Float, Tape, Var};

/// `x`'s value, cut from the graph: backward passes no gradient through it
/// (PyTorch's `x.detach()`, JAX's `lax.stop_gradient`). Use it for targets
/// computed from the model (a target network, a straight-through
/// estimator's `x + detach(round(x) - x)`), or to train one part of a model
/// against another's output.
///
/// Gradient: none; `x` gets nothing from this node.
///
/// ```
/// use grad_runtime::{g_detach, g_mul, g_sum, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![1.0, 2.0, 3.0]);
/// let fixed = g_detach(&mut tape, x);
/// let xx = g_mul(&mut tape, x, fixed); // x · stop(x): gradient x, not 2x
/// let loss = g_sum(&mut tape, xx);
/// tape.backward(loss)?;
/// assert_eq!(tape.value(fixed), tape.value(x));
/// assert_eq!(tape.grad(x), array![1.0, 2.0, 3.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_detach<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    const NAME: &str = "g_detach";
    let location = Location::caller();
    let Some([x]) = tp.resolve(NAME, [x], location) else {
        return tp.poisoned_var();
    };
    let Some(mut out) = tp.output_like(NAME, x, location) else {
        return tp.poisoned_var();
    };
    out.data.copy_from_slice(&tp.value_of(x).data);
    tp.push(Op::Detach, out)
}
