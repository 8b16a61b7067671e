//! `Tape::checkpoint`: a segment of the graph (a function of handles, one
//! transformer block, say) whose intermediates are dropped after its
//! forward and recomputed by backward when it reaches the segment's
//! output. The output is one node, `Op::Checkpoint`, that keeps the
//! segment's body; backward runs the body again on the tape, walks the
//! recomputed nodes with the output's gradient, and drops them
//! (`backward.rs`); `grad_graph` replays it like a fused region.
//!
//! The recomputed ops are the first run's, in the same order, on the
//! same values, and backward visits them in the same order as the nodes
//! of a run without the segment: every gradient is bit-identical. A
//! segment that draws random numbers (dropout) takes its generator from
//! [`checkpoint_with_rng`](Tape::checkpoint_with_rng), which keeps the
//! generator's state at the segment's start, so a recompute draws the
//! same mask.

use std::fmt;
use std::panic::Location;
use std::sync::Arc;

use ndarray::Dimension;

use crate::error::{ErrorKind, GradError};
use crate::ops::Op;
use crate::tape::NodeId;
use crate::tensor::Tensor;
use crate::{Float, Rng, Tape, Var};

/// What a segment computes: the body a user passed, given the tape and
/// the generator it draws from.
type Body<T> = dyn Fn(&mut Tape<T>, &mut Rng) -> Var + Send + Sync;

const OP: &str = "Tape::checkpoint";

/// A checkpointed segment's output node: how to compute it again.
#[derive(Clone)]
pub(crate) struct Segment<T: Float> {
    body: Arc<Body<T>>,
    /// The generator as the first run found it; each recompute draws from a copy.
    rng: Rng,
    /// The nodes before the segment that its ops read (its inputs and the
    /// parameters it captured), sorted: what the tape's walks see as the
    /// output's inputs.
    pub(crate) inputs: Vec<NodeId>,
}

impl<T: Float> fmt::Debug for Segment<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segment").field("inputs", &self.inputs).finish()
    }
}

impl<T: Float> Segment<T> {
    /// Runs the body again on `tp` (appending its nodes) and checks that
    /// it computed a value of `shape` after `start`: the replayed output,
    /// or `None` after recording why not (the tape is then poisoned).
    pub(crate) fn replay(
        &self,
        tp: &mut Tape<T>,
        shape: &[usize],
        location: &'static Location<'static>,
    ) -> Option<Var> {
        let start = tp.nodes.len();
        let y = (self.body)(tp, &mut self.rng.clone());
        if !tp.is_ok() {
            return None;
        }
        let (reason, got) = match tp.check(y) {
            Err(_) => ("returned a handle it did not compute", Vec::new()),
            Ok(id) if id < start => ("returned a node from before it when recomputed", tp.shape(id).to_vec()),
            Ok(id) if tp.shape(id) != shape => {
                ("computed a value of another shape when recomputed", tp.shape(id).to_vec())
            }
            Ok(_) => return Some(y),
        };
        let shapes = vec![shape.to_vec(), got];
        tp.record(GradError::new(OP, ErrorKind::Segment { reason }, shapes, location));
        None
    }
}

impl<T: Float> Tape<T> {
    /// Runs `body` as a checkpointed segment: its value is kept, its
    /// intermediates are dropped at once (their buffers back to the pool),
    /// and [`backward`](Tape::backward) computes them again when it
    /// reaches the segment, then drops them again. The price is one more
    /// forward of the segment in backward; what it saves is the memory of
    /// every intermediate (PyTorch's `torch.utils.checkpoint`, JAX's
    /// `jax.checkpoint`). Gradients are bit-identical to those of the same
    /// ops run without the segment.
    ///
    /// `body` reads the handles it captures (its inputs and parameters:
    /// `Var` is `Copy`, capture them by `move`) and returns the segment's
    /// output. It must compute the same thing each time it runs (it runs
    /// once here and once per backward); a segment that draws random
    /// numbers takes its generator from
    /// [`checkpoint_with_rng`](Tape::checkpoint_with_rng). Segments nest.
    ///
    /// - Under [`inference`](Tape::inference) the segment only drops its
    ///   intermediates: the output is a leaf and nothing is kept to
    ///   recompute, so a model checkpointed per block holds one block's
    ///   intermediates at a time when it evaluates.
    /// - [`grad_graph`](Tape::grad_graph) records the segment's ops again
    ///   (they stay on the tape, as every node `grad_graph` records) and
    ///   differentiates through them, to any order.
    /// - An intermediate of a segment has no handle outside it: read a
    ///   value inside the body, or return it.
    ///
    /// A body that fails poisons the tape as its op would; one that
    /// returns a handle it did not make (another tape's, a stale one)
    /// poisons it with [`ErrorKind::Segment`].
    ///
    /// ```
    /// use grad_runtime::{grad, ndarray::array, Tape};
    ///
    /// let mut tape = Tape::<f64>::new();
    /// let (x, w) = (tape.param(array![[1.0, 2.0]]), tape.param(array![[0.5], [-1.0]]));
    /// let before = tape.len();
    /// let h = tape.checkpoint(move |t| grad!(t; tanh(x @ w) * 3.0));
    /// assert_eq!(tape.len(), before + 1); // the intermediates are gone
    /// let loss = grad!(tape; sum(h * h));
    /// tape.backward(loss)?;
    /// let (gx, gw) = (tape.grad(x).to_owned(), tape.grad(w).to_owned());
    ///
    /// // The same ops without the segment: the same gradients, bit for bit.
    /// let mark = tape.mark();
    /// tape.reset_to(mark);
    /// let h = grad!(tape; tanh(x @ w) * 3.0);
    /// let loss = grad!(tape; sum(h * h));
    /// tape.backward(loss)?;
    /// assert_eq!(tape.grad(x), gx);
    /// assert_eq!(tape.grad(w), gw);
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn checkpoint<F>(&mut self, body: F) -> Var
    where
        F: Fn(&mut Tape<T>) -> Var + Send + Sync + 'static,
    {
        let location = Location::caller();
        if self.inference {
            let start = self.nodes.len();
            let y = body(self);
            return self.keep_only(start, y, location);
        }
        let body: Arc<Body<T>> = Arc::new(move |tp: &mut Tape<T>, _: &mut Rng| body(tp));
        self.record_segment(body, &mut Rng::new(0), location)
    }

    /// [`checkpoint`](Tape::checkpoint) for a segment that draws random
    /// numbers (dropout): `body` draws from `rng`, which advances as if
    /// the body had run once, and a recompute draws from a copy of the
    /// state `rng` had here, so it draws the same numbers.
    ///
    /// ```
    /// use grad_runtime::{g_dropout, g_sum, ndarray::Array1, Rng, Tape};
    ///
    /// let mut tape = Tape::<f64>::new();
    /// let x = tape.param(Array1::<f64>::from_elem(100, 2.0));
    /// let mut rng = Rng::new(3);
    /// let y = tape.checkpoint_with_rng(&mut rng, move |t, rng| g_dropout(t, x, 0.5, rng, true));
    /// let loss = g_sum(&mut tape, y);
    /// tape.backward(loss)?;
    /// // Each element's gradient is its mask: 0 where the first run dropped it.
    /// let kept = tape.value(y).mapv(|v| if v != 0.0 { 2.0 } else { 0.0 });
    /// assert_eq!(tape.grad(x), kept);
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn checkpoint_with_rng<F>(&mut self, rng: &mut Rng, body: F) -> Var
    where
        F: Fn(&mut Tape<T>, &mut Rng) -> Var + Send + Sync + 'static,
    {
        let location = Location::caller();
        if self.inference {
            let start = self.nodes.len();
            let y = body(self, rng);
            return self.keep_only(start, y, location);
        }
        self.record_segment(Arc::new(body), rng, location)
    }

    /// Runs `body` once and replaces its nodes by one `Op::Checkpoint`.
    fn record_segment(&mut self, body: Arc<Body<T>>, rng: &mut Rng, location: &'static Location<'static>) -> Var {
        if !self.is_ok() {
            return self.poisoned_var();
        }
        let start = self.nodes.len();
        let first = rng.clone();
        let y = body(self, rng);
        let Some(id) = self.segment_output(start, y, location) else {
            return self.poisoned_var();
        };
        if id < start {
            // The body computed nothing new (it returned one of its inputs).
            self.drop_segment(start);
            return y;
        }
        // Taken at its largest size, so that the pool counts what it holds.
        let most = self.nodes[start..].iter().map(|node| node.op.inputs().count()).sum();
        let mut inputs = self.index_scratch(most);
        inputs.clear();
        for node in &self.nodes[start..] {
            inputs.extend(node.op.inputs().filter(|&input| input < start));
        }
        inputs.sort_unstable();
        inputs.dedup();
        let value = self.take_value(id);
        self.drop_segment(start);
        let op = Op::Checkpoint(Box::new(Segment { body, rng: first, inputs }));
        self.append_node(op, value, location)
    }

    /// Under inference: drops the segment's nodes but its output, which
    /// becomes a leaf in their place.
    fn keep_only(&mut self, start: NodeId, y: Var, location: &'static Location<'static>) -> Var {
        let Some(id) = self.segment_output(start, y, location) else {
            return self.poisoned_var();
        };
        if id < start {
            self.drop_segment(start);
            return y;
        }
        let value = self.take_value(id);
        self.drop_segment(start);
        self.append_node(Op::SegmentOutput, value, location)
    }

    /// The node of a segment's output `y` (made after `start`, or before
    /// it), or `None` after dropping the segment's nodes when the body
    /// failed or returned a handle that names no node of this tape.
    fn segment_output(&mut self, start: NodeId, y: Var, location: &'static Location<'static>) -> Option<NodeId> {
        if self.is_ok() {
            match self.check(y) {
                Ok(id) => return Some(id),
                Err(_) => {
                    let kind = ErrorKind::Segment { reason: "returned a handle it did not compute" };
                    self.record(GradError::new(OP, kind, Vec::new(), location));
                }
            }
        }
        if self.nodes.len() > start {
            self.drop_segment(start);
        }
        None
    }

    /// Moves a node's value out (the node keeps an empty one, dropped next).
    fn take_value(&mut self, id: NodeId) -> Tensor<T> {
        let empty = Tensor::new(ndarray::IxDyn(&[0]), Vec::new());
        std::mem::replace(&mut self.nodes[id].value, empty)
    }

    /// Drops a segment's nodes from `start` on. The generation moves on,
    /// as in `reset_to`, so a handle to one of them can never name a later node.
    pub(crate) fn drop_segment(&mut self, start: NodeId) {
        self.drop_nodes_from(start);
        self.generation += 1;
    }

    /// Backward through the checkpointed node `id`: its body runs again,
    /// the recomputed nodes are walked with `id`'s gradient (their
    /// contributions reach the nodes before the segment directly), and
    /// dropped with their gradient slots.
    pub(crate) fn backward_segment(&mut self, id: NodeId, segment: &Segment<T>) -> Result<(), GradError> {
        let location = self.locations[id];
        let start = self.nodes.len();
        let shape = self.nodes[id].value.shape.clone();
        let replayed = segment.replay(self, shape.slice(), location);
        let result = match replayed {
            Some(y) => {
                let y = y.index();
                self.fit_grads();
                // The output's gradient moves to the recomputed output and back.
                let g = self.grads[id].take_live();
                self.grads[y].set(g, &mut self.pool);
                let walked = self.walk(y, start);
                // Back, unless the walk handed it to the pool (a tape that
                // keeps no intermediate gradients).
                if self.grads[y].get().is_some() {
                    let g = self.grads[y].take_live();
                    self.grads[id].set(g, &mut self.pool);
                }
                walked
            }
            None => Err(self.error().cloned().expect("invariant: a failed replay records its error")),
        };
        for slot in self.grads.iter_mut().skip(start) {
            slot.release(&mut self.pool);
        }
        self.grads.truncate(start.min(self.grads.len()));
        self.drop_segment(start);
        result
    }
}
