//! `Tape::grad_graph`: the gradient recorded as ops, for differentiating
//! again. A reverse walk like `backward`'s, whose rules
//! (`ops/backward_graph.rs`) append ordinary nodes instead of summing
//! into gradient slots.

use std::panic::Location;

use ndarray::Dimension;

use crate::error::{ErrorKind, GradError};
use crate::ops::{Op, backward_graph, matmul};
use crate::tape::NodeId;
use crate::{Float, Tape, Var, g_add};

impl<T: Float> Tape<T> {
    /// The gradient of the one-element `y` with respect to each of `xs`,
    /// recorded on the tape as ordinary differentiable nodes (PyTorch's
    /// `autograd.grad(y, xs, create_graph=True)`): call `backward` on a
    /// function of them (a Hessian-vector product, a gradient penalty), or
    /// `grad_graph` again (any order).
    ///
    /// - An `x` that `y` does not depend on gets zeros of its shape.
    /// - Parameters, constants and intermediate values alike can be `xs`
    ///   (a physics-informed loss differentiates in its constant inputs).
    /// - Every gradient slot is left untouched: [`grad`](Tape::grad) still
    ///   reads what the last `backward` wrote. A later `backward` through
    ///   the returned nodes adds into the parameters' slots as any
    ///   `backward` does, so reset (or read) between the two.
    /// - Fused `grad!` regions are recorded as their unfused ops, whose
    ///   gradients are written as ops.
    ///
    /// Errors, with nothing recorded: a bad handle, a `y` of more than one
    /// element ([`ErrorKind::NotScalar`]), a tape already poisoned, and a
    /// path from `y` to an `x` through a custom op without
    /// [`backward_graph`](crate::CustomOp::backward_graph)
    /// ([`ErrorKind::NoGraphBackward`], naming it). Every built-in op's
    /// backward is written as ops.
    ///
    /// ```
    /// use grad_runtime::{grad, ndarray::array, Tape};
    ///
    /// let mut tape = Tape::<f64>::new();
    /// let x = tape.param(array![1.0, 2.0]);
    /// let y = grad!(tape; sum(x * x * x));        // Σ x³
    /// let dx = tape.grad_graph(y, &[x])?[0];       // 3 x²
    /// assert_eq!(tape.value(dx), array![3.0, 12.0].into_dyn());
    /// let total = grad!(tape; sum(dx));
    /// let ddx = tape.grad_graph(total, &[x])?[0];  // 6 x
    /// assert_eq!(tape.value(ddx), array![6.0, 12.0].into_dyn());
    ///
    /// // A Hessian-vector product: backward of (∇y · v).
    /// let v = tape.constant(array![1.0, -1.0]);
    /// let gv = grad!(tape; sum(dx * v));
    /// tape.backward(gv)?;
    /// assert_eq!(tape.grad(x), array![6.0, -12.0].into_dyn()); // H v = diag(6x) v
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn grad_graph(&mut self, y: Var, xs: &[Var]) -> Result<Vec<Var>, GradError> {
        let mut grads = Vec::with_capacity(xs.len());
        self.record_gradients(y, xs, false, Location::caller(), |_, g| grads.push(g))?;
        Ok(grads)
    }

    /// [`grad_graph`](Tape::grad_graph) for one input, without the `Vec`:
    /// what `grad(y, x)` in a block calls.
    pub(crate) fn grad_graph_one(
        &mut self,
        y: Var,
        x: Var,
        location: &'static Location<'static>,
    ) -> Result<Var, GradError> {
        let mut grad = None;
        self.record_gradients(y, &[x], false, location, |_, g| grad = Some(g))?;
        Ok(grad.expect("invariant: one gradient per input"))
    }

    /// Records the gradients and hands each input's to `each(k, gradient)`,
    /// in order. Its working vectors are the tape's, kept between calls, so
    /// a steady state allocates nothing here.
    ///
    /// With `unread` (what [`hvp`](Tape::hvp) asks for), nothing may read
    /// the gradients handed over but a backward seeded at them: the
    /// gradient products the walk itself never reads are left uncomputed.
    pub(super) fn record_gradients(
        &mut self,
        y: Var,
        xs: &[Var],
        unread: bool,
        location: &'static Location<'static>,
        mut each: impl FnMut(usize, Var),
    ) -> Result<(), GradError> {
        const OP: &str = "Tape::grad_graph";
        if let Some(error) = self.error() {
            return Err(error.clone());
        }
        self.refuse_in_inference(OP, location)?;
        let y_id = self.check_or_error(OP, y, location)?;
        for &x in xs {
            self.check_or_error(OP, x, location)?;
        }
        let elements = self.nodes[y_id].value.len();
        if elements != 1 {
            let kind = ErrorKind::NotScalar { elements };
            return Err(GradError::new(OP, kind, vec![self.shape(y_id).to_vec()], location));
        }
        let mut scratch = std::mem::take(&mut self.graph_scratch);
        self.on_paths(xs, y_id, &mut scratch);
        let result = self.record_walk(y_id, xs, unread, &mut scratch, location, &mut each);
        self.graph_scratch = scratch;
        result
    }

    /// The walk of `record_gradients`, once `scratch.on_path` is known.
    fn record_walk(
        &mut self,
        y_id: NodeId,
        xs: &[Var],
        unread: bool,
        scratch: &mut GraphScratch,
        location: &'static Location<'static>,
        each: &mut impl FnMut(usize, Var),
    ) -> Result<(), GradError> {
        const OP: &str = "Tape::grad_graph";
        let before = self.nodes.len();
        let shape = self.nodes[y_id].value.shape.clone();
        let seed = self.constant_with(shape.slice(), |s| s.fill(T::one()));
        scratch.adjoints.clear();
        scratch.adjoints.resize(self.nodes.len(), None);
        scratch.adjoints[y_id] = Some(seed);
        scratch.deferred.clear();
        if unread && !self.detect_anomaly() {
            // (Anomaly mode checks every value as it is recorded.)
            self.deferred = Some(std::mem::take(&mut scratch.deferred));
        }
        let walked = self.walk_graph(y_id, 0, &scratch.on_path, &mut scratch.adjoints);
        if let Some(deferred) = self.deferred.take() {
            scratch.deferred = deferred;
        }
        if let Err(op) = walked {
            self.truncate_nodes(before);
            let kind = ErrorKind::NoGraphBackward { op };
            return Err(GradError::new(OP, kind, Vec::new(), location));
        }
        if let Some(error) = self.error() {
            return Err(error.clone());
        }
        for (k, &x) in xs.iter().enumerate() {
            let g = match scratch.adjoints[x.index()] {
                Some(g) => g,
                None => {
                    let shape = self.nodes[x.index()].value.shape.clone();
                    self.constant_with(shape.slice(), |z| z.fill(T::zero()))
                }
            };
            each(k, g);
        }
        Ok(())
    }

    /// Which nodes up to `y` lie on a path from one of `xs` to `y`: they
    /// depend on an `x` (through any op but `detach`), whether or not they
    /// carry a gradient, and `y` depends on them.
    /// Written to `scratch.on_path`, one entry per node up to `y`.
    fn on_paths(&self, xs: &[Var], y: NodeId, scratch: &mut GraphScratch) {
        let GraphScratch { on_path: depends, reaches, .. } = scratch;
        depends.clear();
        depends.resize(y + 1, false);
        for x in xs.iter().map(|x| x.index()).filter(|&x| x <= y) {
            depends[x] = true;
        }
        for id in 0..=y {
            if !depends[id] {
                depends[id] = self.nodes[id].op.any_input(|input| depends[input]);
            }
        }
        reaches.clear();
        reaches.resize(y + 1, false);
        reaches[y] = true;
        for id in (0..=y).rev() {
            if reaches[id] {
                self.nodes[id].op.any_input(|input| {
                    reaches[input] = true;
                    false
                });
            }
        }
        depends.iter_mut().zip(reaches.iter()).for_each(|(d, &r)| *d &= r);
    }

    /// Walks nodes `top` down to `bottom`, recording each one's backward
    /// rule from its adjoint (a node past `depends` was recorded by this
    /// walk and always depends). A fused node's unfused replay is walked
    /// at once, before the nodes below it.
    fn walk_graph(
        &mut self,
        top: NodeId,
        bottom: NodeId,
        depends: &[bool],
        adjoints: &mut Vec<Option<Var>>,
    ) -> Result<(), &'static str> {
        for id in (bottom..=top).rev() {
            let Some(g) = adjoints[id] else { continue };
            if depends.get(id) == Some(&false) {
                continue;
            }
            if self.nodes[id].op.any_input(|input| depends.get(input) != Some(&false)) {
                // Its rule reads it.
                self.materialize(g);
            }
            // Taken out while its rule records (the rule reads other
            // nodes, never this one's op), and put back after.
            let op = std::mem::replace(&mut self.nodes[id].op, Op::Constant);
            let mut add = |tape: &mut Tape<T>, input: NodeId, contribution: Var| {
                if depends.get(input) == Some(&false) {
                    return;
                }
                adjoints[input] = Some(match adjoints[input] {
                    Some(sum) => tape.sum_of(sum, contribution),
                    None => contribution,
                });
            };
            let start = self.nodes.len();
            let wants = |input: NodeId| depends.get(input) != Some(&false);
            let replayed = backward_graph::backward(self, &op, id, g, &wants, &mut add);
            self.nodes[id].op = op;
            let Some(root) = replayed? else { continue };
            if self.check(root).is_err() {
                // The replay failed (its error is on the tape): nothing to walk.
                continue;
            }
            adjoints.resize(self.nodes.len(), None);
            if root.index() < start {
                // The replay is one of the node's inputs: no op was recorded.
                let sum = adjoints[root.index()].map_or(g, |sum| self.sum_of(sum, g));
                adjoints[root.index()] = Some(sum);
            } else {
                adjoints[root.index()] = Some(g);
                self.walk_graph(root.index(), start, depends, adjoints)?;
            }
        }
        Ok(())
    }

    /// Whether gradient products are recorded deferred (see
    /// [`matmul::gradient_product`](crate::ops::matmul::gradient_product)).
    pub(crate) fn defers_products(&self) -> bool {
        self.deferred.is_some()
    }

    /// Lists `product`, recorded without its value, as deferred.
    pub(crate) fn defer(&mut self, product: Var) {
        if let Some(deferred) = &mut self.deferred {
            deferred.push(product.index());
        }
    }

    /// Computes `v`'s value if it is a deferred product: before the walk
    /// reads it.
    fn materialize(&mut self, v: Var) {
        let Some(deferred) = &mut self.deferred else { return };
        if let Some(at) = deferred.iter().position(|&id| id == v.index()) {
            deferred.swap_remove(at);
            matmul::fill_product(self, v.index());
        }
    }

    /// `a + b` recorded, two contributions to one gradient: the walk reads
    /// both, so a deferred product among them is computed first.
    fn sum_of(&mut self, a: Var, b: Var) -> Var {
        self.materialize(a);
        self.materialize(b);
        g_add(self, a, b)
    }

    /// Drops the nodes from `len` on (their buffers go back to the pools):
    /// what a failed `grad_graph` recorded. The generation moves on, as in
    /// `reset_to`, so a handle to a dropped node (a custom op's
    /// `backward_graph` saw them) can never name a later one.
    pub(super) fn truncate_nodes(&mut self, len: usize) {
        self.drop_nodes_from(len);
        self.generation += 1;
    }
}

/// The working vectors of `grad_graph`, kept by the tape between calls.
#[derive(Default)]
pub(crate) struct GraphScratch {
    /// Whether each node up to `y` lies on a path from an input to `y`.
    on_path: Vec<bool>,
    /// Whether `y` depends on each node (a step of computing `on_path`).
    reaches: Vec<bool>,
    /// Each node's gradient recorded so far, as a handle.
    adjoints: Vec<Option<Var>>,
    /// The deferred products' list, lent to the tape during a walk.
    pub(super) deferred: Vec<NodeId>,
    /// `hvp`'s seeds: each gradient's node and its vector's.
    pub(super) seeds: Vec<(NodeId, NodeId)>,
}
