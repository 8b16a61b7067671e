//! `Tape::backward`: one reverse walk over the nodes. Each node hands its
//! gradient to its inputs through [`Op::backward`](crate::ops::Op), whose
//! one `match` has an arm per backward rule.

use std::panic::Location;

use ndarray::{ArrayBase, Data, Dimension};

use crate::error::{ErrorKind, GradError};
use crate::finite::describe;
use crate::ops::Op;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var};

impl<T: Float> Tape<T> {
    /// Computes the gradient of `loss` with respect to every node it depends
    /// on (a non-scalar loss means its sum): the loss is seeded with ones,
    /// the tape is walked once in reverse, and each node's contributions are
    /// summed into its gradient slot.
    ///
    /// Gradients of intermediate nodes are recomputed from scratch on every
    /// call; those of parameters accumulate across calls until
    /// [`reset_to`](Tape::reset_to) clears them (as in PyTorch, which makes
    /// gradient accumulation over micro-batches one extra `backward`).
    ///
    /// Returns the tape's error if it is poisoned; parameters and their
    /// gradients are then left untouched. In anomaly mode
    /// ([`set_detect_anomaly`](Tape::set_detect_anomaly)), the first
    /// backward rule that makes a gradient non-finite stops the walk: the
    /// error names that rule's op and poisons the tape, so no optimizer
    /// step uses the partial gradients.
    ///
    /// ```
    /// use grad_runtime::{g_mul, g_sum, ndarray::array, Tape};
    ///
    /// let mut tape = Tape::<f64>::new();
    /// let w = tape.param(array![3.0]);
    /// let x = tape.constant(array![2.0]);
    /// let loss = { let wx = g_mul(&mut tape, w, x); g_sum(&mut tape, wx) };
    /// tape.backward(loss)?;
    /// assert_eq!((tape.scalar(loss), tape.grad(w)[0]), (6.0, 2.0));
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn backward(&mut self, loss: Var) -> Result<(), GradError> {
        T::tape_backward(self, loss, None, Location::caller())
    }

    /// Like [`backward`](Tape::backward) but seeds the loss's gradient with
    /// `seed` instead of ones: the vector-Jacobian product of `loss` with
    /// `seed`. `seed` must have the loss's shape.
    ///
    /// ```
    /// use grad_runtime::{g_muls, Tape};
    /// use ndarray::array;
    ///
    /// let mut tape = Tape::<f64>::new();
    /// let x = tape.param(array![1.0, 2.0]);
    /// let y = g_muls(&mut tape, x, 3.0);
    /// tape.backward_with(y, &array![10.0, 100.0])?;
    /// assert_eq!(tape.grad(x), array![30.0, 300.0].into_dyn());
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn backward_with<S: Data<Elem = T>, D: Dimension>(
        &mut self,
        loss: Var,
        seed: &ArrayBase<S, D>,
    ) -> Result<(), GradError> {
        T::tape_backward(self, loss, Some(seed.view().into_dyn()), Location::caller())
    }

    pub(crate) fn backward_seeded(
        &mut self,
        loss: Var,
        seed: Option<ndarray::ArrayViewD<'_, T>>,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        const OP: &str = "Tape::backward";
        if let Some(error) = self.error() {
            return Err(error.clone());
        }
        self.refuse_in_inference(OP, location)?;
        let loss = self.check_or_error(OP, loss, location)?;
        let loss_shape = self.shape(loss);
        if let Some(seed) = &seed
            && seed.shape() != loss_shape
        {
            let shapes = vec![loss_shape.to_vec(), seed.shape().to_vec()];
            return Err(GradError::new(OP, ErrorKind::ShapeMismatch, shapes, location));
        }
        if self.detect_anomaly()
            && let Some(seed) = &seed
            && let Some((position, &bad)) = seed.iter().enumerate().find(|(_, v)| !v.is_finite())
        {
            // The seed is the loss's gradient: anomaly mode checks it like any other.
            let kind = ErrorKind::NonFinite { value: describe(bad), position, input: None };
            return Err(GradError::new(OP, kind, vec![seed.shape().to_vec()], location));
        }

        self.fit_grads();
        self.clear_intermediate_grads();
        let mut sink = GradSink::new(&self.nodes, &mut self.grads, &mut self.pool);
        let mut seed_data = sink.scratch_for(loss, self.nodes[loss].value.len());
        match &seed {
            Some(seed) => seed_data.iter_mut().zip(seed.iter()).for_each(|(s, &v)| *s = v),
            None => seed_data.fill(T::one()),
        }
        sink.add(loss, seed_data);

        self.walk(loss, 0)
    }

    /// The reverse walk from node `top` down to `bottom`: each node that
    /// carries a gradient hands it to its inputs. A checkpointed segment's
    /// node is walked through its recomputed nodes (`checkpoint.rs`).
    pub(crate) fn walk(&mut self, top: NodeId, bottom: NodeId) -> Result<(), GradError> {
        for id in (bottom..=top).rev() {
            let node = &self.nodes[id];
            if !node.requires_grad {
                continue;
            }
            if let Op::Checkpoint(_) = node.op {
                if self.grads[id].get().is_none() {
                    continue;
                }
                // Taken out while the segment runs again (its body appends
                // nodes), and put back after.
                let op = std::mem::replace(&mut self.nodes[id].op, Op::Constant);
                let walked = match &op {
                    Op::Checkpoint(segment) => self.backward_segment(id, segment),
                    _ => Ok(()),
                };
                self.nodes[id].op = op;
                walked?;
                self.used_gradient(id);
                continue;
            }
            // A node's inputs come before it on the tape, so its rule gets
            // the slots before `id` to sum into and reads its own gradient
            // where it lies. (Moved out of its slot and back, the gradient
            // was read right after the previous rule's narrower stores had
            // written it, before they reached the cache: a stall on every
            // node, as in `append.rs`.)
            let (inputs, from_id) = self.grads.split_at_mut(id);
            let Some(g) = from_id[0].get() else { continue };
            let mut sink = GradSink::new(&self.nodes, inputs, &mut self.pool);
            let g = TensorRef { shape: &node.value.shape, data: g };
            node.op.backward(&mut sink, &g, &node.value);
            if self.detect_anomaly()
                && let Some(error) = self.non_finite_gradient(id)
            {
                self.record(error.clone());
                return Err(error);
            }
            self.used_gradient(id);
        }
        Ok(())
    }

    /// Node `id`'s rule with node `seed`'s value as its whole gradient,
    /// read where it lies (no slot): `hvp`'s seed at a product nothing
    /// read. Not in anomaly mode, which computes every product.
    pub(super) fn rule_with(&mut self, id: NodeId, seed: NodeId) {
        debug_assert!(!self.detect_anomaly());
        let node = &self.nodes[id];
        if !node.requires_grad {
            return;
        }
        let (inputs, _) = self.grads.split_at_mut(id);
        let mut sink = GradSink::new(&self.nodes, inputs, &mut self.pool);
        let g = TensorRef { shape: &node.value.shape, data: &self.nodes[seed].value.data };
        node.op.backward(&mut sink, &g, &node.value);
    }

    /// After node `id`'s rule ran: its gradient is no longer needed by
    /// backward, so it goes back to the pool unless the tape keeps the
    /// gradients of intermediate nodes (parameters' always stay).
    fn used_gradient(&mut self, id: NodeId) {
        if !self.keep_intermediate_grads && !self.is_leaf(id) {
            self.grads[id].release(&mut self.pool);
        }
    }

    /// Clears every gradient except the parameters' (which accumulate).
    pub(super) fn clear_intermediate_grads(&mut self) {
        for (node, slot) in self.nodes.iter().zip(self.grads.iter_mut()) {
            if !matches!(node.op, Op::Param) {
                slot.clear();
            }
        }
    }
}
