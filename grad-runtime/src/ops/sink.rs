//! [`GradSink`]: what a backward rule sees. It reads every node's value and
//! sums contributions into gradient slots; [`GradSink::contribute`] does
//! the "does this input want a gradient at all" check once for every rule.

use crate::broadcast::reduce_into;
use crate::pool::BufferPool;
use crate::tape::{GradSlot, Node, NodeId};
use crate::tensor::Tensor;
use crate::{Float, parallel, simd};

/// The view of the tape a backward rule gets: every node's value (read) and
/// the gradient slots of the nodes before the rule's own (summed into: a
/// node's inputs come before it), plus the buffer pool for scratch space.
pub(crate) struct GradSink<'a, T: Float> {
    nodes: &'a [Node<T>],
    grads: &'a mut [GradSlot<T>],
    pool: &'a mut BufferPool<T>,
}

impl<'a, T: Float> GradSink<'a, T> {
    pub(crate) fn new(nodes: &'a [Node<T>], grads: &'a mut [GradSlot<T>], pool: &'a mut BufferPool<T>) -> Self {
        GradSink { nodes, grads, pool }
    }

    /// The value of a node (borrowed from the tape, not from the sink, so a
    /// rule can hold it while it contributes).
    pub(crate) fn value(&self, id: NodeId) -> &'a Tensor<T> {
        let nodes: &'a [Node<T>] = self.nodes;
        &nodes[id].value
    }

    /// Every node (borrowed from the tape, not from the sink).
    pub(crate) fn nodes(&self) -> &'a [Node<T>] {
        self.nodes
    }

    /// Whether `id` needs a gradient at all: constants, and everything
    /// computed from constants alone, do not.
    pub(crate) fn wants(&self, id: NodeId) -> bool {
        self.nodes[id].requires_grad
    }

    /// A scratch buffer of `len` elements with unspecified contents, from
    /// the pool; hand it back with [`recycle`](GradSink::recycle).
    pub(crate) fn scratch(&mut self, len: usize) -> Vec<T> {
        self.pool.take(len)
    }

    /// A scratch buffer of at least `len` elements with unspecified
    /// contents, read as `[..len]` (`BufferPool::take_at_least`).
    pub(crate) fn scratch_at_least(&mut self, len: usize) -> Vec<T> {
        self.pool.take_at_least(len)
    }

    /// A buffer of `len` elements with unspecified contents for a
    /// contribution to `x`'s gradient that is built whole and then handed
    /// to [`add`](GradSink::add): the buffer `x`'s slot kept from the last
    /// backward when `x` has no gradient yet, else one from the pool. (From
    /// the pool every time, each step would take a buffer and `add` would
    /// hand the slot's stale one back: a training loop's second step would
    /// allocate.)
    pub(crate) fn scratch_for(&mut self, x: NodeId, len: usize) -> Vec<T> {
        match self.grads[x].take_stale(len) {
            Some(buffer) => buffer,
            None => self.pool.take(len),
        }
    }

    /// Returns a scratch buffer to the pool.
    pub(crate) fn recycle(&mut self, buffer: Vec<T>) {
        self.pool.give(buffer);
    }

    /// Adds a contribution to `x`'s gradient, if `x` wants one: `fill`
    /// writes every element of a buffer laid out in `x`'s shape (its prior
    /// contents are unspecified). The first contribution is moved into the
    /// slot, later ones are added to it.
    pub(crate) fn contribute(&mut self, x: NodeId, fill: impl FnOnce(&mut [T])) {
        if !self.wants(x) {
            return;
        }
        let len = self.value(x).len();
        let slot = &mut self.grads[x];
        if slot.get().is_none() {
            // The first contribution is written where it stays.
            fill(slot.start(len, self.pool));
            return;
        }
        let mut contribution = self.pool.take(len);
        fill(&mut contribution);
        self.add(x, contribution);
    }

    /// Like [`contribute`](GradSink::contribute), for a contribution with
    /// one value per element of `x`: `write(slot, accumulate)` writes each
    /// element into a fresh buffer (`accumulate` false: the first
    /// contribution) or adds it to `x`'s gradient in place (`true`: a later
    /// one). Adding in place gives the bits of adding a written buffer
    /// (each element is the same sum of the same two rounded values) and
    /// saves that buffer's write and second read, a pass over memory for
    /// every value read by more than one op.
    ///
    /// Inlined into each rule, so that `write`'s captures stay in
    /// registers: passed to a call, they were stored to the stack and read
    /// back at once with wider loads, a stall on every elementwise rule
    /// (see `tape/append.rs`): 72% of this function's samples in W2 as
    /// `g_*` calls. Inlined: W2 as `g_*` calls 57.1 -> 49.9 ns a node, as
    /// `grad!` blocks 0.088 -> 0.085 ms, W1 3% faster (medians of 6
    /// alternated runs of `figures`).
    #[inline(always)]
    pub(crate) fn contribute_elementwise(&mut self, x: NodeId, write: impl FnOnce(&mut [T], bool)) {
        if !self.wants(x) {
            return;
        }
        let slot = &mut self.grads[x];
        match slot.get_mut() {
            Some(grad) => write(grad, true),
            // The first contribution is written where it stays: a buffer
            // handed to `add` was read back right after it was written.
            None => write(slot.start(self.nodes[x].value.len(), self.pool), false),
        }
    }

    /// Like [`contribute`](GradSink::contribute), but `fill` adds into a
    /// buffer of zeros: for rules that scatter (several output elements
    /// add into one input element).
    pub(crate) fn contribute_zeroed(&mut self, x: NodeId, fill: impl FnOnce(&mut [T])) {
        self.contribute(x, |c| {
            c.fill(T::zero());
            fill(c);
        });
    }

    /// Like [`contribute_zeroed`](GradSink::contribute_zeroed), for a
    /// contribution that is zero but at some elements (a slice's block):
    /// `add` adds those elements into a buffer of zeros for the first
    /// contribution, and into `x`'s gradient itself for a later one, where
    /// a zeroed buffer would be written and then added whole. The values
    /// are the same (`g + 0 = g`; only the sign of a zero may differ).
    /// In W7 each layer's three slices of `qkv` zeroed and added a
    /// `[1024, 384]` buffer twice.
    pub(crate) fn contribute_into(&mut self, x: NodeId, add: impl FnOnce(&mut [T])) {
        if !self.wants(x) {
            return;
        }
        let slot = &mut self.grads[x];
        match slot.get_mut() {
            Some(grad) => add(grad),
            None => {
                let c = slot.start(self.nodes[x].value.len(), self.pool);
                c.fill(T::zero());
                add(c);
            }
        }
    }

    /// Adds a contribution formed on a broadcast output of shape `on`
    /// (`fill` writes every element of a buffer of that shape) and summed
    /// back to `x`'s shape: the gradient of an operand NumPy broadcasting
    /// stretched. When `x` has the output's shape nothing is summed.
    pub(crate) fn contribute_broadcast(&mut self, x: NodeId, on: &[usize], fill: impl FnOnce(&mut [T])) {
        if !self.wants(x) {
            return;
        }
        let x_shape = self.value(x).shape();
        if x_shape == on {
            self.contribute(x, fill);
            return;
        }
        let mut on_output = self.pool.take(on.iter().product());
        fill(&mut on_output);
        self.contribute_zeroed(x, |c| reduce_into(&on_output, on, x_shape, c));
        self.pool.give(on_output);
    }

    /// Adds `g` (of the broadcast output's shape `on`) summed back to `x`'s
    /// shape, negated after the sum when `negate`: the contribution of
    /// `a + b` to each operand, and of `a - b` to `b`.
    pub(crate) fn contribute_summed(&mut self, x: NodeId, g: &[T], on: &[usize], negate: bool) {
        let x_shape = self.value(x).shape();
        let finish = |c: &mut [T]| {
            if negate {
                c.iter_mut().for_each(|c| *c = -*c);
            }
        };
        if x_shape == on {
            // A later contribution is added in place (`a - b` is `a + -b` to the bit).
            self.contribute_elementwise(x, |c, accumulate| match (accumulate, negate) {
                (false, _) => {
                    c.copy_from_slice(g);
                    finish(c);
                }
                (true, false) => parallel::for_each_chunk(c, |offset, c| add_into(c, &g[offset..])),
                (true, true) => parallel::for_each_chunk(c, |offset, c| subtract_from(c, &g[offset..])),
            });
        } else {
            self.contribute_zeroed(x, |c| {
                reduce_into(g, on, x_shape, c);
                finish(c);
            });
        }
    }

    /// Sums `contribution` (laid out in `id`'s shape) into `id`'s gradient.
    /// The first contribution is moved in, not added to zeros.
    pub(crate) fn add(&mut self, id: NodeId, contribution: Vec<T>) {
        debug_assert_eq!(contribution.len(), self.nodes[id].value.len());
        let slot = &mut self.grads[id];
        match slot.get_mut() {
            Some(grad) => {
                parallel::for_each_chunk(grad, |offset, grad| add_into(grad, &contribution[offset..]));
                self.pool.give(contribution);
            }
            None => slot.set(contribution, self.pool),
        }
    }
}

simd::multiversion! {
    /// `grad[i] -= contribution[i]`.
    fn subtract_from[T: Float][T](grad: &mut [T], contribution: &[T]) {
        grad.iter_mut().zip(contribution).for_each(|(g, &c)| *g -= c);
    }
}

simd::multiversion! {
    /// `grad[i] += contribution[i]`.
    fn add_into[T: Float][T](grad: &mut [T], contribution: &[T]) {
        grad.iter_mut().zip(contribution).for_each(|(g, &c)| *g += c);
    }
}
