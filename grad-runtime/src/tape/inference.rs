//! `Tape::inference`: a forward pass that keeps no state for backward
//! rules, and whose nodes are dropped when it ends.

use std::panic::Location;

use crate::error::{ErrorKind, GradError};
use crate::{Float, Tape};

impl<T: Float> Tape<T> {
    /// Runs `f` as a forward pass for evaluation or sampling (PyTorch's
    /// `torch.inference_mode()`): what it records carries no gradient and
    /// keeps nothing for backward rules (attention keeps no softmax
    /// weights), and every node it made is dropped when it returns, its
    /// buffers back to the pool, so a loop of such passes allocates
    /// nothing after its first. Read what you need inside `f` (or return
    /// it as an owned array); a handle made inside is stale outside.
    ///
    /// Values live until the scope ends or, for the intermediates of a
    /// [`checkpoint`](Tape::checkpoint) segment, until the segment
    /// returns: a model checkpointed per block holds one block's
    /// intermediates at a time.
    ///
    /// - [`backward`](Tape::backward) and [`grad_graph`](Tape::grad_graph)
    ///   inside `f` return [`ErrorKind::InInference`].
    /// - Gradients, parameters and the tape's other nodes are untouched.
    /// - An op that fails inside `f` makes this return its error, and the
    ///   tape is as it was before the call (the failure's nodes are dropped
    ///   with the rest). A tape already poisoned returns its error without
    ///   running `f`.
    ///
    /// ```
    /// use grad_runtime::{grad, ndarray::array, ErrorKind, Tape};
    ///
    /// let mut tape = Tape::<f32>::new();
    /// let w = tape.param(array![[2.0f32], [1.0]]);
    /// let before = tape.len();
    /// let y = tape.inference(|t| {
    ///     let x = t.constant(array![[1.0f32, 3.0]]);
    ///     let y = grad!(t; relu(x @ w));
    ///     assert_eq!(t.backward(y).unwrap_err().kind(), &ErrorKind::InInference);
    ///     t.value(y).to_owned()
    /// })?;
    /// assert_eq!(y, array![[5.0f32]].into_dyn());
    /// assert_eq!(tape.len(), before);
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn inference<R>(&mut self, f: impl FnOnce(&mut Tape<T>) -> R) -> Result<R, GradError> {
        if let Some(error) = self.error() {
            return Err(error.clone());
        }
        let start = self.nodes.len();
        let outer = std::mem::replace(&mut self.inference, true);
        let result = f(self);
        self.inference = outer;
        // The scope's failure is returned, not kept: its nodes are dropped.
        let error = self.error.take().or_else(|| self.misuse.take());
        if self.nodes.len() > start {
            self.drop_nodes_from(start);
        }
        // As in `reset_to`: a handle made inside can never name a later node.
        self.generation += 1;
        match error {
            Some(error) => Err(error),
            None => Ok(result),
        }
    }

    /// True inside [`inference`](Tape::inference): what a model may ask
    /// to choose its evaluation path.
    pub fn is_inference(&self) -> bool {
        self.inference
    }

    /// The error `backward` and `grad_graph` return inside an inference scope.
    pub(crate) fn refuse_in_inference(
        &self,
        op: &'static str,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        if self.inference { Err(GradError::new(op, ErrorKind::InInference, Vec::new(), location)) } else { Ok(()) }
    }
}
