//! Anomaly mode: the first op whose output holds a NaN or an infinity
//! poisons the tape, naming the op, its input shapes and where it was
//! called; in `backward`, the first rule that makes a gradient non-finite
//! is reported the same way. Off by default: an op then pays one branch.

use std::panic::Location;

use crate::error::{ErrorKind, GradError};
use crate::finite::{describe, first_non_finite};
use crate::ops::Op;
use crate::tape::NodeId;
use crate::tensor::Tensor;
use crate::{Float, Tape};

impl<T: Float> Tape<T> {
    /// Turns anomaly detection on or off (off by default).
    ///
    /// When on, every op checks its output: the first one holding a NaN or
    /// an infinity poisons the tape with [`ErrorKind::NonFinite`] naming the
    /// op, its input shapes and the caller's location (for an op of a
    /// `grad!` block, its sub-expression), instead of letting the value flow
    /// on. [`backward`](Tape::backward) checks every gradient a backward
    /// rule passes on and reports the first non-finite one the same way
    /// (named by the op whose rule produced it), poisoning the tape so no
    /// optimizer step uses the gradients of that pass.
    ///
    /// Costs a pass over every output and gradient when on; one branch per
    /// op when off. Parameters and constants are inputs, not checked: a NaN
    /// in one is reported at the first op that uses it. Composite ops
    /// (`g_dropout`, the scalar forms of `grad!` such as `s / x`) report
    /// the primitive op that produced the value. An infinity used on
    /// purpose (a `-inf` attention mask) is reported too: turn the mode on
    /// to find a NaN's origin, not for every run.
    ///
    /// ```
    /// use grad_runtime::{g_log, g_sum, ErrorKind, Tape};
    /// use ndarray::array;
    ///
    /// let mut tape = Tape::<f32>::new();
    /// tape.set_detect_anomaly(true);
    /// let x = tape.param(array![1.0, 0.0]);
    /// let y = g_log(&mut tape, x); // log(0) = -inf
    /// let loss = g_sum(&mut tape, y);
    /// let error = tape.backward(loss).unwrap_err();
    /// assert_eq!(error.op(), "g_log");
    /// assert_eq!(error.kind(), &ErrorKind::NonFinite { value: "-inf", position: 1, input: None });
    /// ```
    pub fn set_detect_anomaly(&mut self, on: bool) {
        self.detect_anomaly = on;
    }

    /// Whether anomaly detection is on; see [`set_detect_anomaly`](Tape::set_detect_anomaly).
    pub fn detect_anomaly(&self) -> bool {
        self.detect_anomaly
    }

    /// The error for an op output holding a non-finite value, if it does.
    /// Parameters, buffers and constants (including dropout's mask) are not checked.
    pub(super) fn non_finite_output(
        &self,
        op: &Op<T>,
        value: &Tensor<T>,
        location: &'static Location<'static>,
    ) -> Option<GradError> {
        if matches!(op, Op::Param | Op::Constant | Op::Buffer) {
            return None;
        }
        let (position, bad) = first_non_finite(&value.data)?;
        let kind = ErrorKind::NonFinite { value: describe(bad), position, input: None };
        let shapes = op.inputs().map(|id| self.shape(id).to_vec()).collect();
        Some(GradError::new(op.name(), kind, shapes, location))
    }

    /// After node `id`'s backward rule ran: the error for the first of its
    /// inputs whose gradient is now non-finite, if one is. Each slot is
    /// checked after every rule that adds to it, so the rule named is the
    /// one that made it non-finite.
    pub(super) fn non_finite_gradient(&self, id: NodeId) -> Option<GradError> {
        let node = &self.nodes[id];
        for (input, x) in node.op.inputs().enumerate() {
            let Some(grad) = self.grad_of(x) else { continue };
            if let Some((position, bad)) = first_non_finite(grad) {
                let kind = ErrorKind::NonFinite { value: describe(bad), position, input: Some(input) };
                let shapes = node.op.inputs().map(|x| self.shape(x).to_vec()).collect();
                return Some(GradError::new(node.op.name(), kind, shapes, self.locations[id]));
            }
        }
        None
    }
}
