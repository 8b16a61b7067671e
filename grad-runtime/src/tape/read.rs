//! Reading values and gradients out of the tape. A read through a handle
//! that names no node (stale, foreign, poisoned), or `scalar` of a value
//! that is not one element, still returns (an empty view, NaN: the
//! signatures are the design's contract) but is never silent: it poisons
//! the tape like a failed op, so `is_ok`, the next op, `backward` and every
//! optimizer step report it. The `try_*` forms return the error instead.

use std::panic::Location;

use ndarray::{ArrayViewD, IxDyn};

use crate::error::{ErrorKind, GradError};
use crate::tape::NodeId;
use crate::{Float, Tape, Var};

impl<T: Float> Tape<T> {
    /// The value of `v`, borrowed from the tape.
    ///
    /// A handle that names no node (poisoned, stale or from another tape)
    /// gives an empty view of shape `[0]` and poisons the tape with the
    /// reason, as a failed op would: [`is_ok`](Tape::is_ok) turns false and
    /// the next op, [`backward`](Tape::backward) and optimizer step report
    /// it. [`try_value`](Tape::try_value) returns the reason instead.
    ///
    /// ```
    /// use grad_runtime::{ErrorKind, Tape};
    /// use ndarray::array;
    ///
    /// let mut tape = Tape::<f32>::new();
    /// let mark = tape.mark();
    /// let x = tape.constant(array![1.0, 2.0]);
    /// tape.reset_to(mark); // x is now stale
    /// assert_eq!(tape.value(x).len(), 0);
    /// assert_eq!(tape.error().unwrap().kind(), &ErrorKind::StaleVar);
    /// ```
    #[track_caller]
    pub fn value(&self, v: Var) -> ArrayViewD<'_, T> {
        match self.check_or_misuse("Tape::value", v, Location::caller()) {
            Some(id) => self.nodes[id].value.view(),
            None => empty_view(),
        }
    }

    /// The value of `v`, or why the handle names no node (the tape is not poisoned).
    #[track_caller]
    pub fn try_value(&self, v: Var) -> Result<ArrayViewD<'_, T>, GradError> {
        let id = self.check_or_error("Tape::value", v, Location::caller())?;
        Ok(self.nodes[id].value.view())
    }

    /// The gradient of the last [`backward`](Tape::backward) with respect to
    /// `v`, borrowed from the tape; zeros (of `v`'s shape) if backward never
    /// reached `v`. A bad handle gives an empty view and poisons the tape,
    /// as in [`value`](Tape::value). It takes `&mut self` (the zeros are
    /// written on demand), so hold one view at a time, or read several at
    /// once with [`grads`](Tape::grads).
    ///
    /// ```
    /// use grad_runtime::{g_mul, ndarray::array, Tape};
    ///
    /// let mut tape = Tape::<f64>::new();
    /// let x = tape.param(array![1.0, 2.0]);
    /// let y = g_mul(&mut tape, x, x);
    /// tape.backward(y)?; // d sum(x²) / dx = 2x
    /// assert_eq!(tape.grad(x), array![2.0, 4.0].into_dyn());
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn grad(&mut self, v: Var) -> ArrayViewD<'_, T> {
        match self.check_grad_or_misuse("Tape::grad", v, Location::caller()) {
            Some(id) => self.grad_view(id),
            None => empty_view(),
        }
    }

    /// The gradients of several handles at once, borrowed together:
    /// [`grad`](Tape::grad) takes `&mut self` (an untouched node's zeros
    /// are written on demand), so two of its views cannot be held at the
    /// same time; this gives them all in one borrow. Each is what `grad`
    /// gives, a bad handle included (an empty view, the tape poisoned).
    ///
    /// ```
    /// use grad_runtime::{g_mul, g_sum, ndarray::array, Tape};
    ///
    /// let mut tape = Tape::<f64>::new();
    /// let (a, b) = (tape.param(array![1.0, 2.0]), tape.param(array![3.0, 4.0]));
    /// let loss = { let ab = g_mul(&mut tape, a, b); g_sum(&mut tape, ab) };
    /// tape.backward(loss)?;
    /// let [ga, gb] = tape.grads([a, b]);
    /// assert_eq!(ga, array![3.0, 4.0].into_dyn());
    /// assert_eq!(gb, array![1.0, 2.0].into_dyn());
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn grads<const N: usize>(&mut self, vars: [Var; N]) -> [ArrayViewD<'_, T>; N] {
        let location = Location::caller();
        let ids = vars.map(|v| self.check_grad_or_misuse("Tape::grads", v, location));
        // The zeros of the largest untouched node serve every untouched one.
        let untouched = ids.iter().flatten().filter(|&&id| self.grad_of(id).is_none());
        let needed = untouched.map(|&id| self.nodes[id].value.len()).max().unwrap_or(0);
        if self.zeros.len() < needed {
            self.zeros.resize(needed, T::zero());
        }
        let this = &*self;
        ids.map(|id| id.map_or_else(empty_view, |id| this.grad_or_zeros(id)))
    }

    /// The gradient of `v`, or why the handle names no node (the tape is not poisoned).
    #[track_caller]
    pub fn try_grad(&mut self, v: Var) -> Result<ArrayViewD<'_, T>, GradError> {
        let location = Location::caller();
        let id = self.check_or_error("Tape::grad", v, location)?;
        self.grad_is_kept("Tape::grad", id, location)?;
        Ok(self.grad_view(id))
    }

    /// The single element of a one-element value (a loss). NaN if `v` holds
    /// more than one element or names no node, and the tape is then
    /// poisoned with the reason, as in [`value`](Tape::value);
    /// [`try_scalar`](Tape::try_scalar) returns the reason instead.
    ///
    /// ```
    /// use grad_runtime::{g_sum, ndarray::array, Tape};
    ///
    /// let mut tape = Tape::<f32>::new();
    /// let x = tape.param(array![1.0, 2.0]);
    /// let loss = g_sum(&mut tape, x);
    /// assert_eq!(tape.scalar(loss), 3.0);
    /// ```
    #[track_caller]
    pub fn scalar(&self, v: Var) -> T {
        self.try_scalar(v).unwrap_or_else(|error| {
            self.note_misuse(error);
            T::nan()
        })
    }

    /// The single element of a one-element value, or an error naming its
    /// shape (the tape is not poisoned).
    #[track_caller]
    pub fn try_scalar(&self, v: Var) -> Result<T, GradError> {
        let location = Location::caller();
        let id = self.check_or_error("Tape::scalar", v, location)?;
        let value = &self.nodes[id].value;
        if value.len() == 1 {
            Ok(value.data[0])
        } else {
            let kind = ErrorKind::NotScalar { elements: value.len() };
            Err(GradError::new("Tape::scalar", kind, vec![value.shape().to_vec()], location))
        }
    }

    /// The node `v` names, or `None` after noting the misuse.
    fn check_or_misuse(&self, op: &'static str, v: Var, location: &'static Location<'static>) -> Option<NodeId> {
        self.check_or_error(op, v, location).map_err(|error| self.note_misuse(error)).ok()
    }

    /// `check_or_misuse` for a gradient read: also refuses an
    /// intermediate's gradient that backward did not keep.
    fn check_grad_or_misuse(&self, op: &'static str, v: Var, location: &'static Location<'static>) -> Option<NodeId> {
        let id = self.check_or_misuse(op, v, location)?;
        self.grad_is_kept(op, id, location).map_err(|error| self.note_misuse(error)).ok()?;
        Some(id)
    }

    /// `Err` for the gradient of an intermediate node (one that carries a
    /// gradient and is no leaf) when backward does not keep those.
    fn grad_is_kept(
        &self,
        op: &'static str,
        id: NodeId,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        if self.keep_intermediate_grads || self.is_leaf(id) || !self.requires_grad(id) {
            return Ok(());
        }
        Err(GradError::new(op, ErrorKind::GradNotKept, vec![self.shape(id).to_vec()], location))
    }

    /// Poisons the tape through `&self`: the first misuse is kept in a
    /// `OnceLock` (thread-safe, so the tape stays `Sync`) unless the tape
    /// already holds an earlier error.
    fn note_misuse(&self, error: GradError) {
        if self.is_ok() {
            let _ = self.misuse.set(error);
        }
    }

    fn grad_view(&mut self, id: NodeId) -> ArrayViewD<'_, T> {
        let len = self.nodes[id].value.len();
        if self.grad_of(id).is_none() && self.zeros.len() < len {
            self.zeros.resize(len, T::zero());
        }
        self.grad_or_zeros(id)
    }

    /// The node's gradient, or zeros of its shape from the zeros buffer,
    /// which the caller has sized to it.
    fn grad_or_zeros(&self, id: NodeId) -> ArrayViewD<'_, T> {
        let value = &self.nodes[id].value;
        let data = self.grad_of(id).unwrap_or_else(|| &self.zeros[..value.len()]);
        ArrayViewD::from_shape(value.shape.clone(), data)
            .expect("invariant: a gradient (or the zeros buffer, sized by the caller) has its node's elements, and the node's shape was checked when it was made")
    }
}

fn empty_view<'a, T>() -> ArrayViewD<'a, T> {
    ArrayViewD::from_shape(IxDyn(&[0]), &[]).expect("invariant: an empty shape fits an empty slice")
}
