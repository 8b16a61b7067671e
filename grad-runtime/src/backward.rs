//! `Tape::backward`: one reverse walk over the nodes and one `match` over
//! the op enum, one arm per backward rule.

use std::panic::Location;

use ndarray::{ArrayBase, Data, Dimension};

use crate::error::{ErrorKind, GradError};
use crate::ops::{Op, binary, embedding, layout, loss, matmul, norm, reduce, softmax, unary};
use crate::pool::BufferPool;
use crate::tape::{Node, NodeId};
use crate::tensor::Tensor;
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
    /// gradients are then left untouched.
    #[track_caller]
    pub fn backward(&mut self, loss: Var) -> Result<(), GradError> {
        self.backward_seeded(loss, None, Location::caller())
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
        self.backward_seeded(loss, Some(seed.view().into_dyn()), Location::caller())
    }

    fn backward_seeded(
        &mut self,
        loss: Var,
        seed: Option<ndarray::ArrayViewD<'_, T>>,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        const OP: &str = "Tape::backward";
        if let Some(error) = self.error() {
            return Err(error.clone());
        }
        let loss = self.check_or_error(OP, loss, location)?;
        let loss_shape = self.shape(loss);
        if let Some(seed) = &seed
            && seed.shape() != loss_shape
        {
            let shapes = vec![loss_shape.to_vec(), seed.shape().to_vec()];
            return Err(GradError::new(OP, ErrorKind::ShapeMismatch, shapes, location));
        }

        self.clear_intermediate_grads();
        let mut seed_data = self.pool.take(self.nodes[loss].value.len());
        match &seed {
            Some(seed) => seed_data.iter_mut().zip(seed.iter()).for_each(|(s, &v)| *s = v),
            None => seed_data.fill(T::one()),
        }
        let mut sink = GradSink { nodes: &self.nodes, grads: &mut self.grads, pool: &mut self.pool };
        sink.add(loss, seed_data);

        for id in (0..=loss).rev() {
            let node = &self.nodes[id];
            if !node.requires_grad || matches!(node.op, Op::Param) {
                continue;
            }
            let Some(g) = sink.grads[id].take() else { continue };
            propagate(&mut sink, node, &g);
            sink.grads[id] = Some(g);
        }
        Ok(())
    }

    /// Clears every gradient except the parameters' (which accumulate).
    fn clear_intermediate_grads(&mut self) {
        for (node, slot) in self.nodes.iter().zip(self.grads.iter_mut()) {
            if !matches!(node.op, Op::Param)
                && let Some(grad) = slot.take()
            {
                self.pool.give(grad.data);
            }
        }
    }
}

/// Hands one node's gradient `g` to its inputs. Each arm names the rule.
fn propagate<T: Float>(sink: &mut GradSink<'_, T>, node: &Node<T>, g: &Tensor<T>) {
    let out = &node.value;
    match node.op {
        Op::Param | Op::Constant => {}
        Op::Add(a, b) => binary::add_backward(sink, g, a, b),
        Op::Sub(a, b) => binary::sub_backward(sink, g, a, b),
        Op::Mul(a, b) => binary::mul_backward(sink, g, a, b),
        Op::Div(a, b) => binary::div_backward(sink, g, out, a, b),
        Op::Unary(x, f) => unary::backward(sink, g, out, x, f),
        Op::Sum(x) => reduce::sum_backward(sink, g, x),
        Op::Mean(x) => reduce::mean_backward(sink, g, x),
        Op::SumAxis { x, axis } => reduce::sum_axis_backward(sink, g, x, axis),
        Op::MeanAxis { x, axis } => reduce::mean_axis_backward(sink, g, x, axis),
        Op::MaxAxis { x, axis } => reduce::max_axis_backward(sink, g, x, axis),
        Op::Mse(y, t) => loss::mse_backward(sink, g, y, t),
        Op::CrossEntropy { logits, ref targets } => loss::cross_entropy_backward(sink, g, logits, targets),
        Op::MatMul(a, b) | Op::Bmm(a, b) => matmul::matmul_backward(sink, g, a, b),
        Op::Transpose(x) => layout::transpose_backward(sink, g, x),
        Op::Reshape(x) => layout::reshape_backward(sink, g, x),
        Op::Softmax { x, axis } => softmax::softmax_backward(sink, g, out, x, axis),
        Op::LogSoftmax { x, axis } => softmax::log_softmax_backward(sink, g, out, x, axis),
        Op::Embedding { table, ref ids } => embedding::embedding_backward(sink, g, table, ids),
        Op::LayerNorm { x, gamma, beta, eps } => norm::layer_norm_backward(sink, g, [x, gamma, beta], eps),
        Op::Slice { x, ref starts } => layout::slice_backward(sink, g, x, starts),
        Op::Concat { a, b, axis } => layout::concat_backward(sink, g, a, b, axis),
    }
}

/// What a backward rule sees: every node's value (read) and every
/// gradient slot (summed into), plus the buffer pool for contributions.
pub(crate) struct GradSink<'a, T> {
    nodes: &'a [Node<T>],
    grads: &'a mut [Option<Tensor<T>>],
    pub(crate) pool: &'a mut BufferPool<T>,
}

impl<'a, T: Float> GradSink<'a, T> {
    /// The value of an input node (borrowed from the tape, not from the
    /// sink, so a rule can hold it while it takes buffers from the pool).
    pub(crate) fn value(&self, id: NodeId) -> &'a Tensor<T> {
        &self.nodes[id].value
    }

    /// Whether `id` needs a gradient at all (constants do not): rules skip
    /// the work of a contribution nobody reads.
    pub(crate) fn wants(&self, id: NodeId) -> bool {
        self.nodes[id].requires_grad
    }

    /// Sums `contribution` (laid out in `id`'s shape) into `id`'s gradient.
    /// The first contribution is moved in, not added to zeros.
    pub(crate) fn add(&mut self, id: NodeId, contribution: Vec<T>) {
        debug_assert_eq!(contribution.len(), self.nodes[id].value.len());
        match &mut self.grads[id] {
            Some(grad) => {
                grad.data.iter_mut().zip(&contribution).for_each(|(g, &c)| *g += c);
                self.pool.give(contribution);
            }
            slot @ None => {
                *slot = Some(Tensor::new(self.nodes[id].value.shape.clone(), contribution));
            }
        }
    }
}
