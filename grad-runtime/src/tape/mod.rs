//! The tape: a single-owner arena of nodes, appended in creation order.
//! Ops reach it through the methods at the end of this file (resolve their
//! input handles, read values, take output buffers, push a node); the
//! reverse walk is `backward.rs`, reading values and gradients out is
//! `read.rs`, writing a leaf's value is `write.rs`, anomaly mode is
//! `anomaly.rs`.

mod anomaly;
mod append;
mod backward;
mod checkpoint;
mod grad_graph;
mod grad_slot;
mod hvp;
mod inference;
mod memory;
mod precision;
mod read;
mod write;

use std::fmt;
use std::panic::Location;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use ndarray::{Dimension, IxDyn};

use crate::claims::Claims;
use crate::error::{ErrorKind, GradError, ShapeDisplay};
use crate::ops::Op;
use crate::pool::BufferPool;
use crate::size::{ALLOCATION, checked_len};
use crate::tensor::{Tensor, TensorInput, tensor_from_input};
use crate::{Float, Mark, Var};

pub(crate) use checkpoint::Segment;
pub(crate) use grad_slot::GradSlot;
pub use memory::MemoryStats;
pub use precision::Precision;

/// Position of a node on its tape. Inputs always have smaller ids than the
/// nodes made from them, so reverse id order is a topological order.
pub(crate) type NodeId = usize;

/// Tape ids: a `u64` never wraps, so two tapes never share an id (see [`Var`]).
static NEXT_TAPE_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) struct Node<T: Float> {
    op: Op<T>,
    pub(crate) value: Tensor<T>,
    /// The tape's generation when the node was made; a `Var` must match it.
    generation: u64,
    /// A parameter, or computed from one: backward visits only these.
    pub(crate) requires_grad: bool,
}

/// A single-owner arena of nodes: every op computes its value eagerly and
/// appends one node; [`backward`](Tape::backward) walks the nodes once in
/// reverse and sums each node's gradient contributions into one slot.
///
/// `T` is `f32` (the default) or `f64`.
///
/// ```
/// use grad_runtime::{g_mul, g_sum, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![1.0, -2.0, 3.0]);
/// let xx = g_mul(&mut tape, x, x);
/// let loss = g_sum(&mut tape, xx);
/// tape.backward(loss)?;
/// assert_eq!(tape.scalar(loss), 14.0);
/// assert_eq!(tape.grad(x), array![2.0, -4.0, 6.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
///
/// Errors poison the tape instead of panicking: a bad op records the first
/// [`GradError`], returns a poisoned `Var`, and every later op does nothing
/// until [`reset_to`](Tape::reset_to) drops the episode that failed;
/// [`backward`](Tape::backward) returns the error. Reading through a bad
/// handle ([`value`](Tape::value), [`grad`](Tape::grad), [`scalar`](Tape::scalar))
/// poisons the tape the same way.
///
/// A tape is `Send + Sync`: it can move to another thread, or be shared
/// read-only between threads.
pub struct Tape<T: Float = f32> {
    id: u64,
    generation: u64,
    nodes: Vec<Node<T>>,
    /// Where each node's op was called: what anomaly mode names when a
    /// node's backward rule makes a gradient non-finite. Beside `nodes`,
    /// not in `Node`: every op moves a `Node` into the arena, and W2
    /// measured each added byte. (A `Node<f32>` is 144 bytes, moved by a
    /// `memcpy` call; under 128 it would be moved inline.)
    locations: Vec<&'static Location<'static>>,
    /// A gradient slot per node, apart from `nodes` so that backward can
    /// read values while it writes gradients. A slot that is not live, or
    /// no slot yet, means zeros: slots are made by `backward`
    /// (`fit_grads`), not by every op (writing an empty slot per node, a
    /// 64-byte `None` then, cost W2 about 5%). Slots past the last node
    /// keep their buffers for the nodes a rebuilt graph puts there (see
    /// `grad_slot.rs`).
    grads: Vec<GradSlot<T>>,
    pool: BufferPool<T>,
    /// Recycled index buffers (class targets, embedding ids) of ops that keep them.
    index_pool: BufferPool<usize>,
    /// Backing store for the view `grad` returns for an untouched node.
    zeros: Vec<T>,
    error: Option<GradError>,
    /// The parameters some optimizer registered (or `freeze` fixed).
    claims: Claims,
    /// The first read through a bad handle by `value` or `scalar`, which
    /// take `&self`: kept here (a `OnceLock`, so the tape stays `Sync`)
    /// until the next op, `is_ok`, `error` or `backward` reports it.
    misuse: OnceLock<GradError>,
    /// Anomaly mode: see [`set_detect_anomaly`](Tape::set_detect_anomaly).
    detect_anomaly: bool,
    /// Inside [`inference`](Tape::inference): no node carries a gradient.
    inference: bool,
    /// Whether backward keeps the gradients of intermediate nodes (see
    /// [`set_keep_intermediate_grads`](Tape::set_keep_intermediate_grads)).
    keep_intermediate_grads: bool,
    /// How matrix products compute: see [`set_matmul_precision`](Tape::set_matmul_precision).
    matmul_precision: Precision,
    /// `grad_graph`'s working vectors, kept for the next call.
    graph_scratch: grad_graph::GraphScratch,
    /// While [`hvp`](Tape::hvp) records a gradient: the gradient products
    /// recorded without their values, each computed when the walk first
    /// reads it (see `grad_graph.rs`).
    deferred: Option<Vec<NodeId>>,
}

impl<T: Float> Default for Tape<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Float> Tape<T> {
    /// An empty tape.
    pub fn new() -> Self {
        Tape {
            id: NEXT_TAPE_ID.fetch_add(1, Ordering::Relaxed),
            generation: 0,
            nodes: Vec::new(),
            locations: Vec::new(),
            grads: Vec::new(),
            pool: BufferPool::new(),
            index_pool: BufferPool::new(),
            zeros: Vec::new(),
            error: None,
            claims: Claims::default(),
            misuse: OnceLock::new(),
            detect_anomaly: false,
            inference: false,
            keep_intermediate_grads: true,
            matmul_precision: Precision::F32,
            graph_scratch: grad_graph::GraphScratch::default(),
            deferred: None,
        }
    }

    /// Copies `t` onto the tape as a trainable parameter: backward computes
    /// its gradient and optimizers update it in place.
    ///
    /// A [`TensorInput`] whose shape no tensor can have (see
    /// [`ErrorKind::TooLarge`]) poisons the tape and gives a poisoned `Var`.
    ///
    /// ```
    /// use grad_runtime::{g_muls, ndarray::array, Tape};
    ///
    /// let mut tape = Tape::<f32>::new();
    /// let w = tape.param(array![[1.0, 2.0]]);
    /// let y = g_muls(&mut tape, w, 3.0);
    /// tape.backward(y)?;
    /// assert_eq!(tape.grad(w), array![[3.0, 3.0]].into_dyn());
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn param(&mut self, t: impl TensorInput<T>) -> Var {
        self.copy_in("Tape::param", Op::Param, t)
    }

    /// Copies `t` onto the tape as a constant (inputs, targets): no gradient
    /// is computed for it or for anything computed from constants alone.
    ///
    /// ```
    /// use grad_runtime::{g_mul, ndarray::array, Tape};
    ///
    /// let mut tape = Tape::<f32>::new();
    /// let (w, x) = (tape.param(array![2.0]), tape.constant(array![5.0]));
    /// let y = g_mul(&mut tape, w, x);
    /// tape.backward(y)?;
    /// assert_eq!((tape.grad(w)[0], tape.grad(x)[0]), (5.0, 0.0));
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn constant(&mut self, t: impl TensorInput<T>) -> Var {
        self.copy_in("Tape::constant", Op::Constant, t)
    }

    /// Copies `t` onto the tape as a buffer: a tensor the model owns that is
    /// not trained (batch norm's running statistics, an EMA copy of the
    /// weights, a fixed mask). Like a constant it gets no gradient, and an
    /// optimizer refuses it; unlike one, a model lists it
    /// (`#[params(buffer)]` on its field, [`Params::named_buffers`](crate::Params::named_buffers)),
    /// so [`save`](crate::Params::save) and [`load`](crate::Params::load)
    /// keep it, and [`set_value`](Tape::set_value) updates it.
    ///
    /// ```
    /// use grad_runtime::{Params, Tape, Var};
    /// use grad_runtime::ndarray::array;
    ///
    /// #[derive(Params)]
    /// struct Scaler { w: Var, #[params(buffer)] count: Var }
    ///
    /// let mut tape = Tape::<f32>::new();
    /// let model = Scaler { w: tape.param(array![1.0]), count: tape.buffer(array![0.0]) };
    /// assert_eq!(model.named_params().len(), 1);
    /// assert_eq!(model.named_buffers()[0].0, "count");
    /// tape.set_value(model.count, array![1.0])?;
    /// assert_eq!(tape.value(model.count)[0], 1.0);
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn buffer(&mut self, t: impl TensorInput<T>) -> Var {
        self.copy_in("Tape::buffer", Op::Buffer, t)
    }

    #[track_caller]
    fn copy_in(&mut self, name: &'static str, op: Op<T>, t: impl TensorInput<T>) -> Var {
        match tensor_from_input(t, &mut self.pool) {
            Ok(value) => self.push(op, value),
            Err(kind) => self.fail(name, kind, &[], Location::caller()),
        }
    }

    /// The number of nodes on the tape.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the tape holds no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A point to rewind to: typically taken after the parameters are
    /// registered, and passed to [`reset_to`](Tape::reset_to) after every
    /// training step.
    pub fn mark(&self) -> Mark {
        Mark { tape: self.id, len: self.nodes.len(), generation: self.generation, poisoned: !self.is_ok() }
    }

    /// Rewinds the tape to `mark`: drops every later node (their buffers are
    /// kept for reuse, and the arena keeps its capacity), clears every
    /// surviving gradient, and clears an error raised after the mark (a
    /// failed op, a read through a bad handle, a non-finite value found by
    /// anomaly mode). Values of surviving nodes (the parameters) are untouched.
    ///
    /// Handles to dropped nodes become stale: using one is an error, never
    /// a read of whichever node later takes its place. A mark from another
    /// tape, or one whose nodes an earlier `reset_to` already dropped,
    /// poisons the tape and changes nothing else.
    #[track_caller]
    pub fn reset_to(&mut self, mark: Mark) {
        let kind = if mark.tape != self.id {
            Some(ErrorKind::ForeignMark)
        } else if !self.mark_is_live(mark) {
            Some(ErrorKind::StaleMark)
        } else {
            None
        };
        if let Some(kind) = kind {
            self.record(GradError::new("Tape::reset_to", kind, Vec::new(), Location::caller()));
            return;
        }
        let keep = mark.len();
        self.drop_nodes_from(keep);
        // The gradient slots past `keep` stay, with their buffers: the graph
        // rebuilt after the mark will need the same ones.
        self.clear_grads();
        // A u64: no program resets 2^64 times (see `Var`), so a handle to a
        // dropped node can never match a later one.
        self.generation += 1;
        if !mark.poisoned {
            self.error = None;
            self.misuse.take();
        }
    }

    /// Drops every node from `keep` on, their buffers back to the pools
    /// (what `reset_to` and a refused `grad_graph` do).
    pub(crate) fn drop_nodes_from(&mut self, keep: usize) {
        // Each node's buffers are taken where it lies: moved out whole by
        // `drain`, the 144-byte node was copied to the stack and read back
        // before the copy's wide stores had landed (perf: 45% of `reset_to`
        // in W2 as `g_*` calls; see `append.rs`).
        for node in &mut self.nodes[keep..] {
            self.pool.give(std::mem::take(&mut node.value.data));
            recycle_op(std::mem::replace(&mut node.op, Op::Constant), &mut self.pool, &mut self.index_pool);
        }
        self.nodes.truncate(keep);
        self.locations.truncate(keep);
    }

    /// True until an op fails or a handle is misused; see [`error`](Tape::error).
    pub fn is_ok(&self) -> bool {
        self.error().is_none()
    }

    /// The first error raised since the tape was last reset past it: a
    /// failed op, a read of [`value`](Tape::value), [`grad`](Tape::grad) or
    /// [`scalar`](Tape::scalar) through a bad handle, or a non-finite value
    /// found by anomaly mode.
    pub fn error(&self) -> Option<&GradError> {
        self.error.as_ref().or_else(|| self.misuse.get())
    }

    /// Records `error` unless the tape already holds one (the first error
    /// is the one worth reading). Used by the `grad!` macro's run-time
    /// shape checks; ops poison the tape themselves.
    pub fn poison(&mut self, error: GradError) {
        self.record(error);
    }

    // ---- crate internals: handle checks, node creation ----

    pub(crate) fn check(&self, v: Var) -> Result<NodeId, ErrorKind> {
        if v.tape != self.id {
            return Err(ErrorKind::ForeignVar);
        }
        if v.is_poisoned() {
            return Err(ErrorKind::PoisonedVar);
        }
        match self.nodes.get(v.index()) {
            Some(node) if node.generation == v.generation => Ok(v.index()),
            _ => Err(ErrorKind::StaleVar),
        }
    }

    pub(crate) fn check_or_error(
        &self,
        op: &'static str,
        v: Var,
        location: &'static Location<'static>,
    ) -> Result<NodeId, GradError> {
        self.check(v).map_err(|kind| GradError::new(op, kind, Vec::new(), location))
    }

    /// Resolves an op's input handles, or records why one is bad. `None`
    /// also when the tape is already poisoned: the op must then do nothing.
    pub(crate) fn resolve<const N: usize>(
        &mut self,
        op: &'static str,
        vars: [Var; N],
        location: &'static Location<'static>,
    ) -> Option<[NodeId; N]> {
        if !self.is_ok() {
            return None;
        }
        let mut ids = [0; N];
        for (slot, var) in ids.iter_mut().zip(vars) {
            match self.check(var) {
                Ok(id) => *slot = id,
                Err(kind) => {
                    let shapes =
                        vars.iter().filter_map(|&v| self.check(v).ok()).map(|id| self.shape(id).to_vec()).collect();
                    self.record(GradError::new(op, kind, shapes, location));
                    return None;
                }
            }
        }
        Some(ids)
    }

    /// Records an op's error (naming its inputs' shapes) and returns the poisoned handle.
    pub(crate) fn fail(
        &mut self,
        op: &'static str,
        kind: ErrorKind,
        inputs: &[NodeId],
        location: &'static Location<'static>,
    ) -> Var {
        let shapes = inputs.iter().map(|&id| self.shape(id).to_vec()).collect();
        self.record(GradError::new(op, kind, shapes, location));
        self.poisoned_var()
    }

    pub(crate) fn poisoned_var(&self) -> Var {
        Var::poisoned(self.id)
    }

    pub(crate) fn record(&mut self, error: GradError) {
        if self.is_ok() {
            self.error = Some(error);
        }
    }

    /// Appends a node and returns its handle; in anomaly mode, an output
    /// holding a NaN or an infinity poisons the tape instead. `#[track_caller]`
    /// like every op: the node remembers where its op was called.
    ///
    /// Inlined into every op, as are `push_output` and `output_like`: as
    /// calls, the op and its output were handed over in stack slots and
    /// read back right after the narrower stores that wrote them, a stall
    /// (see `append.rs`) that was half of `push`'s samples in W2 as `g_*`
    /// calls. Inlined: W2 as `g_*` calls 61.4 -> 57.9 ns a node, W1 and W4
    /// 3% faster, W2 as `grad!` blocks 6% slower (medians of 8 and 5
    /// alternated runs of `figures`).
    #[track_caller]
    #[inline(always)]
    pub(crate) fn push(&mut self, op: Op<T>, value: Tensor<T>) -> Var {
        let location = Location::caller();
        if self.detect_anomaly {
            return self.push_checked(op, value, location);
        }
        self.append_node(op, value, location)
    }

    /// [`push`](Tape::push) in anomaly mode, out of line: the common path
    /// is inlined into every op.
    #[inline(never)]
    fn push_checked(&mut self, op: Op<T>, value: Tensor<T>, location: &'static Location<'static>) -> Var {
        if let Some(error) = self.non_finite_output(&op, &value, location) {
            self.discard(op, value);
            self.record(error);
            return self.poisoned_var();
        }
        self.append_node(op, value, location)
    }

    /// Appends the node and its location; `requires_grad` from its inputs.
    #[inline(always)]
    fn append_node(&mut self, op: Op<T>, value: Tensor<T>, location: &'static Location<'static>) -> Var {
        let requires_grad =
            !self.inference && (matches!(op, Op::Param) || op.any_input(|id| self.nodes[id].requires_grad));
        let index = self.nodes.len();
        append::append(&mut self.nodes, op, value, self.generation, requires_grad);
        self.locations.push(location);
        Var { tape: self.id, generation: self.generation, index }
    }

    /// [`push`](Tape::push) for an output taken with [`output`](Tape::output)
    /// and filled where it lies: the poisoned handle when there is none
    /// (`output` recorded why). An op that moved its output out of the
    /// `Option` before filling it would copy it back at once from where
    /// `output` just wrote it, a stall on every op (see `append.rs`).
    #[track_caller]
    #[inline(always)]
    pub(crate) fn push_output(&mut self, op: Op<T>, out: Option<Tensor<T>>) -> Var {
        match out {
            Some(value) => self.push(op, value),
            None => {
                self.discard_op(op);
                self.poisoned_var()
            }
        }
    }

    /// The handle of the live node `id`.
    pub(crate) fn var_at(&self, id: NodeId) -> Var {
        Var { tape: self.id, generation: self.nodes[id].generation, index: id }
    }

    /// Hands the buffers of a node that will not be pushed back to the pools.
    fn discard(&mut self, op: Op<T>, value: Tensor<T>) {
        self.pool.give(value.data);
        self.discard_op(op);
    }

    /// Hands the buffers of an op that will not be pushed back to the pools.
    pub(crate) fn discard_op(&mut self, op: Op<T>) {
        recycle_op(op, &mut self.pool, &mut self.index_pool);
    }

    pub(crate) fn shape(&self, id: NodeId) -> &[usize] {
        self.nodes[id].value.shape()
    }

    /// The value of a node: how every op reads its inputs.
    pub(crate) fn value_of(&self, id: NodeId) -> &Tensor<T> {
        &self.nodes[id].value
    }

    /// A node's value to overwrite in place (a parameter being loaded).
    pub(crate) fn value_mut(&mut self, id: NodeId) -> &mut [T] {
        &mut self.nodes[id].value.data
    }

    /// A node's value buffer, to compute in place (a deferred product).
    pub(crate) fn data_mut(&mut self, id: NodeId) -> &mut Vec<T> {
        &mut self.nodes[id].value.data
    }

    /// The generation a live node was made in.
    pub(crate) fn generation_of(&self, id: NodeId) -> u64 {
        self.nodes[id].generation
    }

    /// Whether backward computes a gradient for the node (a parameter, or
    /// computed from one).
    pub(crate) fn requires_grad(&self, id: NodeId) -> bool {
        self.nodes[id].requires_grad
    }

    /// Whether the node was made by [`param`](Tape::param).
    pub(crate) fn is_param(&self, id: NodeId) -> bool {
        matches!(self.nodes[id].op, Op::Param)
    }

    /// Whether the node is a leaf: a parameter, a buffer or a constant,
    /// whose value no op computed.
    pub(crate) fn is_leaf(&self, id: NodeId) -> bool {
        matches!(self.nodes[id].op, Op::Param | Op::Buffer | Op::Constant)
    }

    /// Which parameters optimizers registered, and which were frozen.
    pub(crate) fn claims(&self) -> &Claims {
        &self.claims
    }

    /// A gradient slot for every node, and none past the last one: the
    /// stale buffers of slots a smaller graph no longer reaches go back to
    /// the pool, for values and scratch space.
    pub(crate) fn fit_grads(&mut self) {
        let nodes = self.nodes.len();
        if self.grads.len() > nodes {
            for slot in &mut self.grads[nodes..] {
                slot.release(&mut self.pool);
            }
            self.grads.truncate(nodes);
        }
        self.grads.resize_with(nodes, GradSlot::empty);
    }

    /// The gradient of a node (laid out in its value's shape), `None` when
    /// backward did not reach it.
    pub(crate) fn grad_of(&self, id: NodeId) -> Option<&[T]> {
        self.grads.get(id).and_then(GradSlot::get)
    }

    /// A node's value to update in place, and its gradient: what an
    /// optimizer step needs of one parameter.
    pub(crate) fn value_and_grad_mut(&mut self, id: NodeId) -> (&mut [T], Option<&[T]>) {
        (&mut self.nodes[id].value.data, self.grads.get(id).and_then(GradSlot::get))
    }

    /// A node's gradient to overwrite in place, made (zero-filled, from the
    /// pool) when backward did not reach it: where `dist` writes the
    /// gradient averaged across ranks.
    #[cfg(feature = "mpi")]
    pub(crate) fn grad_mut_or_zeros(&mut self, id: NodeId) -> &mut [T] {
        self.fit_grads();
        let len = self.nodes[id].value.len();
        let slot = &mut self.grads[id];
        if slot.get().is_none() {
            slot.start(len, &mut self.pool).fill(T::zero());
        }
        slot.get_mut().expect("invariant: started just above")
    }

    /// A scratch buffer of `len` elements with unspecified contents; hand
    /// it back with [`recycle`](Tape::recycle).
    pub(crate) fn scratch(&mut self, len: usize) -> Vec<T> {
        self.pool.take(len)
    }

    /// A scratch buffer of at least `len` elements with unspecified
    /// contents, read as `[..len]` ([`BufferPool::take_at_least`]).
    pub(crate) fn scratch_at_least(&mut self, len: usize) -> Vec<T> {
        self.pool.take_at_least(len)
    }

    /// Returns a scratch buffer to the pool.
    pub(crate) fn recycle(&mut self, buffer: Vec<T>) {
        self.pool.give(buffer);
    }

    /// An output buffer of `shape` with unspecified contents, from the pool;
    /// or, for a shape no tensor can have or memory cannot hold, `None`
    /// after recording the error ([`ErrorKind::TooLarge`], naming `op`, its
    /// `inputs`' shapes and `location`). Every op takes its output here,
    /// after its own checks and before its kernel: the one place that keeps
    /// every tensor on the tape within ndarray's and the allocator's limits.
    pub(crate) fn output(
        &mut self,
        op: &'static str,
        shape: IxDyn,
        inputs: &[NodeId],
        location: &'static Location<'static>,
    ) -> Option<Tensor<T>> {
        let len = checked_len::<T>(shape.slice());
        self.take_output(op, shape, len, inputs, location)
    }

    /// [`output`](Tape::output) for an op whose output has the shape of
    /// its input `x`: that shape passed the size checks when `x` was made,
    /// so only the allocation is left to fail. (Checking it again cost 3%
    /// of W2 as `g_*` calls.)
    #[inline(always)]
    pub(crate) fn output_like(
        &mut self,
        op: &'static str,
        x: NodeId,
        location: &'static Location<'static>,
    ) -> Option<Tensor<T>> {
        let value = &self.nodes[x].value;
        let (shape, len) = (value.shape.clone(), value.len());
        self.take_output(op, shape, Ok(len), &[x], location)
    }

    /// [`output`](Tape::output) for a shape some live node has (`len`
    /// elements): it passed the size checks when that node was made.
    #[inline(always)]
    pub(crate) fn output_sized(
        &mut self,
        op: &'static str,
        shape: IxDyn,
        len: usize,
        inputs: &[NodeId],
        location: &'static Location<'static>,
    ) -> Option<Tensor<T>> {
        self.take_output(op, shape, Ok(len), inputs, location)
    }

    /// The buffer of an output of `shape` and `len` elements (or the error
    /// of its size check), or `None` after recording why there is none.
    /// Always inlined, so that the tensor is not read back from a callee's
    /// stores; its failure is a call of its own, so that the code inlined
    /// into every op stays small.
    #[inline(always)]
    fn take_output(
        &mut self,
        op: &'static str,
        shape: IxDyn,
        len: Result<usize, ErrorKind>,
        inputs: &[NodeId],
        location: &'static Location<'static>,
    ) -> Option<Tensor<T>> {
        let data = match len {
            Ok(len) => self.pool.try_take(len),
            Err(_) => None,
        };
        match data {
            Some(data) => Some(Tensor::new(shape, data)),
            None => self.refuse_output(op, shape, len, inputs, location),
        }
    }

    /// [`take_output`](Tape::take_output)'s failure: the size check's
    /// error, or the refused allocation, recorded.
    #[cold]
    #[inline(never)]
    fn refuse_output(
        &mut self,
        op: &'static str,
        shape: IxDyn,
        len: Result<usize, ErrorKind>,
        inputs: &[NodeId],
        location: &'static Location<'static>,
    ) -> Option<Tensor<T>> {
        let kind =
            len.err().unwrap_or_else(|| ErrorKind::TooLarge { shape: shape.slice().to_vec(), reason: ALLOCATION });
        self.fail(op, kind, inputs, location);
        None
    }

    /// A constant of `shape` whose elements `fill` writes (they start
    /// unspecified), its buffer from the pool: what rules recorded as ops
    /// use for ones, zeros and masks, so that they allocate nothing in a
    /// steady state. `None`-free: the shapes come from live nodes, which
    /// passed the size checks; a refused allocation poisons the tape.
    #[track_caller]
    pub(crate) fn constant_with(&mut self, shape: &[usize], fill: impl FnOnce(&mut [T])) -> Var {
        let location = Location::caller();
        match self.output("Tape::constant", IxDyn(shape), &[], location) {
            Some(mut value) => {
                fill(&mut value.data);
                self.push(Op::Constant, value)
            }
            None => self.poisoned_var(),
        }
    }

    /// A pooled copy of an op's integer payload.
    pub(crate) fn copy_indices(&mut self, indices: &[usize]) -> Vec<usize> {
        let mut copy = self.index_pool.take(indices.len());
        copy.copy_from_slice(indices);
        copy
    }

    /// A copy of `indices` (row-major) in a pooled index buffer.
    pub(crate) fn copy_indices_of<I: crate::Indices + ?Sized>(&mut self, indices: &I) -> Vec<usize> {
        let mut copy = self.index_pool.take(indices.index_shape().size());
        indices.copy_indices_into(&mut copy);
        copy
    }

    /// A pooled index buffer of `len` entries with unspecified contents;
    /// hand it back with [`recycle_indices`](Tape::recycle_indices) or keep
    /// it in a node's op (which returns it when the node is dropped).
    pub(crate) fn index_scratch(&mut self, len: usize) -> Vec<usize> {
        self.index_pool.take(len)
    }

    /// Returns an index buffer to the pool.
    pub(crate) fn recycle_indices(&mut self, buffer: Vec<usize>) {
        self.index_pool.give(buffer);
    }

    /// The op that made node `id`: what an export reads, and what a
    /// deferred product is computed from.
    pub(crate) fn op_of(&self, id: NodeId) -> &Op<T> {
        &self.nodes[id].op
    }

    /// Where node `id`'s op was called.
    pub(crate) fn location_of(&self, id: NodeId) -> &'static Location<'static> {
        self.locations[id]
    }

    /// Every node, for reading values: what a custom op's inputs borrow.
    pub(crate) fn nodes(&self) -> &[Node<T>] {
        &self.nodes
    }

    /// Sets every gradient to zeros; the slots keep their buffers.
    pub(crate) fn clear_grads(&mut self) {
        self.grads.iter_mut().for_each(GradSlot::clear);
    }

    /// Clears the gradient slots from node `start` on (dropped nodes').
    pub(crate) fn clear_grads_from(&mut self, start: usize) {
        self.grads.iter_mut().skip(start).for_each(GradSlot::clear);
    }

    fn mark_is_live(&self, mark: Mark) -> bool {
        let len = mark.len();
        len <= self.nodes.len() && (len == 0 || self.nodes[len - 1].generation <= mark.generation)
    }
}

/// Lists the nodes, one per line: index, the op that made it, its shape.
///
/// ```
/// use grad_runtime::{g_relu, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f32>::new();
/// let x = tape.param(array![[1.0, -2.0]]);
/// g_relu(&mut tape, x);
/// let listing = format!("{tape:?}");
/// assert!(listing.contains("#0 Tape::param [1, 2]"));
/// assert!(listing.contains("#1 g_relu [1, 2]"));
/// ```
impl<T: Float> fmt::Debug for Tape<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Tape {} ({} nodes, generation {}) {{", self.id, self.nodes.len(), self.generation)?;
        for (index, node) in self.nodes.iter().enumerate() {
            writeln!(f, "    #{index} {} {}", node.op.name(), ShapeDisplay(node.value.shape()))?;
        }
        if let Some(error) = self.error() {
            writeln!(f, "    poisoned: {error}")?;
        }
        write!(f, "}}")
    }
}

/// Hands an op's own buffers (indices, a fused region's scalars) back to the pools.
fn recycle_op<T: Float>(op: Op<T>, pool: &mut BufferPool<T>, index_pool: &mut BufferPool<usize>) {
    let (indices, scalars) = op.into_buffers();
    if let Some(indices) = indices {
        index_pool.give(indices);
    }
    if let Some(scalars) = scalars {
        pool.give(scalars);
    }
}
