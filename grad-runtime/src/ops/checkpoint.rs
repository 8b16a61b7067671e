//! `checkpoint`: a checkpointed segment as a call of the DSL
//! ([`Tape::checkpoint`], whose module `tape/checkpoint.rs` holds the
//! forward, the recompute in backward and the replay in `grad_graph`).

use crate::{Float, Tape, Var};

/// Runs `body` as a checkpointed segment: what `checkpoint(expr)` in a
/// `grad!` block calls, `body` being `expr`'s ops. See
/// [`Tape::checkpoint`]: the intermediates are dropped now and recomputed
/// in backward, the gradients are bit-identical.
///
/// ```
/// use grad_runtime::{grad, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, -2.0]]);
/// let w = tape.param(array![[0.5, 1.0], [2.0, -1.0]]);
/// let before = tape.len();
/// let h = grad!(tape; checkpoint(gelu(x @ w) * 2.0));
/// assert_eq!(tape.len(), before + 1); // the segment is one node
/// let loss = grad!(tape; sum(h * h));
/// tape.backward(loss)?;
/// assert!(tape.grad(w).iter().all(|g| *g != 0.0));
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_checkpoint<T: Float, F>(tape: &mut Tape<T>, body: F) -> Var
where
    F: Fn(&mut Tape<T>) -> Var + Send + Sync + 'static,
{
    tape.checkpoint(body)
}
