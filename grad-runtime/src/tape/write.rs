//! Writing a leaf's value: `Tape::set_value`.

use std::panic::Location;

use crate::error::{ErrorKind, GradError};
use crate::tensor::{TensorInput, tensor_from_input};
use crate::{Float, Tape, Var};

impl<T: Float> Tape<T> {
    /// Overwrites the value of a parameter, buffer or constant with `t`,
    /// which must have its shape: an EMA update of a shadow copy, a batch
    /// norm's running statistics, weight surgery. Gradients and optimizer
    /// state are untouched; the new value is what later ops read (ops
    /// already recorded keep the values they computed).
    ///
    /// Errors, with nothing written: a bad handle (stale, foreign,
    /// poisoned), an op's result ([`ErrorKind::NotALeaf`]), a different
    /// shape ([`ErrorKind::ShapeMismatch`], naming both). The element
    /// type is the tape's, checked by the compiler.
    ///
    /// ```
    /// use grad_runtime::{ErrorKind, g_muls, Tape};
    /// use grad_runtime::ndarray::array;
    ///
    /// let mut tape = Tape::<f64>::new();
    /// let w = tape.param(array![1.0, 2.0]);
    /// tape.set_value(w, array![0.5, 0.25])?;
    /// assert_eq!(tape.value(w), array![0.5, 0.25].into_dyn());
    ///
    /// let err = tape.set_value(w, array![1.0]).unwrap_err();
    /// assert_eq!(err.kind(), &ErrorKind::ShapeMismatch);
    /// let y = g_muls(&mut tape, w, 2.0);
    /// assert_eq!(tape.set_value(y, array![0.0, 0.0]).unwrap_err().kind(), &ErrorKind::NotALeaf);
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn set_value(&mut self, var: Var, t: impl TensorInput<T>) -> Result<(), GradError> {
        const OP: &str = "Tape::set_value";
        let location = Location::caller();
        let id = self.check_or_error(OP, var, location)?;
        if !self.is_leaf(id) {
            return Err(GradError::new(OP, ErrorKind::NotALeaf, vec![self.shape(id).to_vec()], location));
        }
        let value = tensor_from_input(t, &mut self.pool)
            .map_err(|kind| GradError::new(OP, kind, vec![self.shape(id).to_vec()], location))?;
        if value.shape() != self.shape(id) {
            let shapes = vec![self.shape(id).to_vec(), value.shape().to_vec()];
            self.recycle(value.data);
            return Err(GradError::new(OP, ErrorKind::ShapeMismatch, shapes, location));
        }
        // The copy's buffer becomes the value; the old one goes back to the pool.
        let old = std::mem::replace(&mut self.nodes[id].value.data, value.data);
        self.recycle(old);
        Ok(())
    }

    /// Adds one to a one-element buffer (batch norm's
    /// `num_batches_tracked`) in place, with no allocation; a bad handle,
    /// or a counter that is not a one-element buffer, poisons the tape
    /// naming `op`.
    #[track_caller]
    pub(crate) fn count_batch(&mut self, op: &'static str, counter: Var) {
        let location = Location::caller();
        let id = match self.check(counter) {
            Ok(id) => id,
            Err(kind) => return self.record(GradError::new(op, kind, Vec::new(), location)),
        };
        let is_buffer = matches!(self.nodes[id].op, crate::ops::Op::Buffer);
        match self.value_mut(id) {
            [count] if is_buffer => *count += T::one(),
            _ => {
                let shapes = vec![self.shape(id).to_vec()];
                self.record(GradError::new(op, ErrorKind::NotABuffer, shapes, location));
            }
        }
    }
}
