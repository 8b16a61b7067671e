//! `grad`: the gradient of a scalar, recorded as ops, as a call of the DSL
//! ([`Tape::grad_graph`] for one input).

use crate::{Float, Tape, Var};

/// The gradient of the one-element `y` in `x`, recorded as ops: what
/// `grad(y, x)` in a `grad!` block calls ([`Tape::grad_graph`] for one
/// input). An error poisons the tape, as a failed op does.
///
/// ```
/// use grad_runtime::{grad, ndarray::array, Tape};
///
/// // A gradient penalty: (|∇ₓ d(x)| − 1)², d(x) = Σ tanh(x · w).
/// let mut tape = Tape::<f64>::new();
/// let x = tape.constant(array![[0.5, -1.0]]);
/// let w = tape.param(array![[2.0, 0.0], [1.0, 3.0]]);
/// let penalty = grad!(tape; x: [1, 2], w: [2, 2];
///     let gx = grad(sum(tanh(x @ w)), x);
///     mean(pow(sqrt(sum(gx * gx, 1)) - 1.0, 2.0)));
/// tape.backward(penalty)?;
/// assert!(tape.grad(w).iter().all(|g| g.is_finite() && *g != 0.0));
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_grad<T: Float>(tape: &mut Tape<T>, y: Var, x: Var) -> Var {
    match tape.grad_graph_one(y, x, std::panic::Location::caller()) {
        Ok(grad) => grad,
        Err(error) => {
            tape.poison(error);
            tape.poisoned_var()
        }
    }
}
