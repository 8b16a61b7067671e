//! Fused regions: a chain of elementwise ops of one `grad!` expression
//! (`tanh(x * 0.9 + 0.1)`, `relu(x @ w + b)` after the product,
//! `sum(sigmoid(x) * x)`) recorded as one node, with one pass over memory
//! forward and one backward instead of one per op.
//!
//! The macro writes, for each region, a `static` [`Plan`]: the region's
//! ops in order (`plan.rs`) and each op's source location, checked and
//! analysed when the user's crate is compiled; and most often a kernel,
//! the region as one loop of straight-line arithmetic, which a region of
//! a few dozen elements runs instead of the interpreter (`lanes.rs`).
//! [`fused`] checks the plan as the unfused ops would check themselves
//! (`check.rs`), interprets it over the inputs (`tile.rs`, laid over
//! tensors and threads by `loops.rs`) or runs the kernel, and records the
//! node, which keeps its [`Region`] (plan and kernel), one input
//! inline or several in a pooled index buffer, and its scalars inline (up
//! to two) or in a pooled buffer: no `Box`, so a training step that
//! rewinds its tape still allocates nothing. The interpreter is compiled
//! once, in this crate, for `f32` and `f64` (reached through the sealed
//! side of `Float`), so a `grad!` block costs its crate a table of data, a
//! call and (without debug assertions) one short kernel a region.
//!
//! A region in which a value that carries a gradient is broadcast to a
//! larger shape is differentiated on whole tensors instead (`whole.rs`),
//! so its gradients stay the unfused ops' bit for bit.
//!
//! Same answers: the interpreter applies the unfused ops' own scalar
//! functions in the unfused order, so values are the same bits, and so
//! are gradients of inputs used once; see the manual (`grad_macro.md`).

mod check;
mod kernels;
pub mod lanes;
mod loops;
mod plan;
mod tile;
mod unfused;
mod whole;

use std::fmt;
use std::panic::Location;

use ndarray::{Dimension, IxDyn};

pub use lanes::{BLOCK, Compiled, Kernel, Lanes, Region, kernel};
use loops::Input;
pub use plan::{Func, Plan, Src, Step, StepOp, step};
use tile::{MAX_LEAVES, Program, Source};

use crate::broadcast::{broadcast_shapes, reduce_into};
use crate::dsl::Operand;
use crate::ops::Op;
use crate::ops::reduce::sum_slice;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::{Tensor, TensorRef};
use crate::{Float, Tape, Var};

/// The entry of a node's inputs for a leaf that is a Rust scalar (its
/// value is among the node's scalars).
const SCALAR_LEAF: NodeId = NodeId::MAX;

/// A fused node: its region's plan, one entry per leaf (a node, or
/// [`SCALAR_LEAF`]), and its scalars: the region's parameters, then the
/// leaves that are Rust scalars, in leaf order.
#[derive(Clone)]
pub(crate) struct Fused<T: Float> {
    region: &'static Region<T>,
    inputs: Inputs,
    scalars: Numbers<T>,
}

/// A fused node's scalars: up to [`INLINE_NUMBERS`] inline (most regions
/// have a few: W2's `tanh(h * 0.9 + 0.1)` two), or a pooled buffer.
/// Inline, a region takes one buffer from the pool (its value) instead of
/// two of different sizes, which kept the pool's fast path from finding
/// either. How many there are is the plan's (its parameters, and its
/// leaves that are Rust scalars), so the node does not keep it: with it,
/// a `Fused<f64>` would outgrow the largest op.
#[derive(Clone, Debug)]
enum Numbers<T> {
    Inline([T; INLINE_NUMBERS]),
    Pooled(Vec<T>),
}

/// The most scalars a fused node keeps inline.
const INLINE_NUMBERS: usize = 2;

impl<T: Float> Numbers<T> {
    /// `params` then `leaf_scalars`, inline when they fit.
    #[inline(always)]
    fn new(tp: &mut Tape<T>, params: &[T], leaf_scalars: &[T]) -> Self {
        let len = params.len() + leaf_scalars.len();
        let mut numbers = if len <= INLINE_NUMBERS {
            Numbers::Inline([T::zero(); INLINE_NUMBERS])
        } else {
            Numbers::Pooled(tp.scratch(len))
        };
        let all = match &mut numbers {
            Numbers::Inline(values) => &mut values[..len],
            Numbers::Pooled(values) => &mut values[..],
        };
        all[..params.len()].copy_from_slice(params);
        all[params.len()..].copy_from_slice(leaf_scalars);
        numbers
    }
}

/// A fused node's leaves: one inline (the node keeps no buffer), or a
/// pooled index buffer.
#[derive(Clone, Debug)]
enum Inputs {
    One(NodeId),
    Pooled(Vec<NodeId>),
}

impl Inputs {
    fn as_slice(&self) -> &[NodeId] {
        match self {
            Inputs::One(id) => std::slice::from_ref(id),
            Inputs::Pooled(ids) => ids,
        }
    }
}

impl<T: Float> Fused<T> {
    pub(crate) fn name(&self) -> &'static str {
        self.region.plan.name
    }

    /// The region recorded again as its unfused ops, from the same leaves:
    /// the root of those ops (the same value), or `None` for a node whose
    /// record does not fit its plan.
    pub(crate) fn replay(&self, tp: &mut Tape<T>) -> Option<Var> {
        let scalars = self.scalars()?;
        let params = scalars.get(..self.region.plan.params)?;
        let mut next_scalar = self.region.plan.params;
        let mut leaves = [Operand::Scalar(T::zero()); MAX_LEAVES];
        let n = self.leaves().len();
        if n > MAX_LEAVES || n != self.region.plan.leaves {
            return None;
        }
        for (leaf, &id) in leaves.iter_mut().zip(self.leaves()) {
            *leaf = if id == SCALAR_LEAF {
                let s = *scalars.get(next_scalar)?;
                next_scalar += 1;
                Operand::Scalar(s)
            } else {
                Operand::Var(tp.var_at(id))
            };
        }
        Some(unfused::run(tp, self.region.plan.steps, &leaves[..n], check::Scalars { params }))
    }

    /// The node's scalars: the plan's parameters, then the leaves that are
    /// Rust scalars; `None` for a node whose record does not fit its plan.
    fn scalars(&self) -> Option<&[T]> {
        let len = self.region.plan.params + self.leaves().iter().filter(|&&id| id == SCALAR_LEAF).count();
        match &self.scalars {
            Numbers::Inline(values) => values.get(..len),
            Numbers::Pooled(values) => values.get(..len),
        }
    }

    /// One entry per leaf: a node, or `SCALAR_LEAF`.
    pub(super) fn leaves(&self) -> &[NodeId] {
        self.inputs.as_slice()
    }

    /// The input nodes (Rust scalars are not nodes).
    pub(crate) fn inputs(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.leaves().iter().copied().filter(|&id| id != SCALAR_LEAF)
    }

    /// The bytes of the pooled buffers (inputs and scalars).
    pub(crate) fn saved_bytes(&self) -> usize {
        let inputs = match &self.inputs {
            Inputs::One(_) => 0,
            Inputs::Pooled(ids) => ids.capacity() * size_of::<NodeId>(),
        };
        let scalars = match &self.scalars {
            Numbers::Inline(_) => 0,
            Numbers::Pooled(values) => values.capacity() * size_of::<T>(),
        };
        inputs + scalars
    }

    /// The pooled buffers, handed back when the node is dropped.
    pub(crate) fn into_buffers(self) -> (Option<Vec<NodeId>>, Option<Vec<T>>) {
        let scalars = match self.scalars {
            Numbers::Inline(_) => None,
            Numbers::Pooled(values) => Some(values),
        };
        match self.inputs {
            Inputs::One(_) => (None, scalars),
            Inputs::Pooled(ids) => (Some(ids), scalars),
        }
    }
}

impl<T: Float> fmt::Debug for Fused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fused").field("name", &self.region.plan.name).field("inputs", &self.inputs).finish()
    }
}

/// Records a fused region of a `grad!` block (what its expansion calls):
/// `leaves` are the region's inputs, `params` its scalars (the numbers
/// written in it and the Rust scalars it reads), in the order of the
/// region's plan.
///
/// The tape is poisoned as the first failing unfused op would poison it,
/// with that op's name, shapes and location.
#[track_caller]
#[inline]
pub fn fused<T: Float, const N: usize, const P: usize>(
    tp: &mut Tape<T>,
    region: &'static Region<T>,
    leaves: [Operand<T>; N],
    params: [T; P],
) -> Var {
    T::record_fused(tp, region, &leaves, &params, Location::caller())
}

/// What [`fused`] runs, compiled here for `f32` and `f64` (`float.rs`).
/// Inlined there, so that the arguments the user's crate passed on the
/// stack are read where they lie, not copied into another call's.
#[inline(always)]
pub(crate) fn record<T: Float>(
    tp: &mut Tape<T>,
    region: &'static Region<T>,
    leaves: &[Operand<T>],
    params: &[T],
    caller: &'static Location<'static>,
) -> Var {
    if !tp.is_ok() {
        return tp.poisoned_var();
    }
    match leaves.len() {
        0 | 1 => record_in::<T, 1>(tp, region, leaves, params, caller),
        2..=4 => record_in::<T, 4>(tp, region, leaves, params, caller),
        _ => record_in::<T, MAX_LEAVES>(tp, region, leaves, params, caller),
    }
}

/// [`record`] with arrays of `C` entries for the leaves.
fn record_in<T: Float, const C: usize>(
    tp: &mut Tape<T>,
    region: &'static Region<T>,
    leaves: &[Operand<T>],
    params: &[T],
    caller: &'static Location<'static>,
) -> Var {
    let plan = region.plan;
    let n = leaves.len();
    let mut ids = [SCALAR_LEAF; C];
    let well_formed = plan.well_formed && n == plan.leaves && params.len() == plan.params && n <= C;
    let scalars = check::Scalars { params };
    let ids = &mut ids[..n.min(C)];
    let Some(checked) = check::check(tp, well_formed, plan.steps, plan.sites, leaves, scalars, ids) else {
        return tp.poisoned_var();
    };
    // The Rust scalars among the leaves, in leaf order.
    let (mut leaf_scalars, mut count) = ([T::zero(); C], 0);
    for leaf in leaves {
        if let Operand::Scalar(s) = *leaf {
            leaf_scalars[count] = s;
            count += 1;
        }
    }
    let leaf_scalars = &leaf_scalars[..count];
    let node_scalars = Numbers::new(tp, params, leaf_scalars);
    let inputs = match &*ids {
        &[id] => Inputs::One(id),
        ids => Inputs::Pooled(tp.copy_indices(ids)),
    };
    // Made before the value, so that the stores that make it have landed
    // by the time `push` copies it (see `tape/append.rs`).
    let op = Op::Fused(Fused { region, inputs, scalars: node_scalars });
    // The region's last step is its root, where a failure is reported.
    let site = plan.sites.last().copied().unwrap_or(caller);
    let prog = Program {
        steps: plan.steps,
        root: plan.root(),
        params,
        needed: plan.needed,
        live: plan::Bits::NONE,
        wanted: 0,
    };
    let out = compute::<T, C>(tp, plan, region.kernel, &prog, ids, leaf_scalars, checked, site);
    tp.push_output(op, out)
}

/// The region's value on `shape` (summed, when it ends in a fold), or
/// `None` when the output cannot be made (the tape then holds why,
/// located at `site`). Values are computed element by element even where
/// a value inside the region is broadcast (the same bits as computing it
/// on its own shape first), so only backward tells the two apart.
#[allow(clippy::too_many_arguments)]
fn compute<T: Float, const C: usize>(
    tp: &mut Tape<T>,
    plan: &Plan,
    kernel: Option<Compiled<T>>,
    prog: &Program<'_, T>,
    ids: &[NodeId],
    leaf_scalars: &[T],
    checked: check::Checked,
    site: &'static Location<'static>,
) -> Option<Tensor<T>> {
    let shape = checked.shape;
    let total = shape.size();
    // The tensor leaves, for an error's shapes (on the stack: no allocation per step).
    let (mut nodes, mut count) = ([0; C], 0);
    for &id in ids.iter().filter(|&&id| id != SCALAR_LEAF) {
        nodes[count] = id;
        count += 1;
    }
    let nodes = &nodes[..count];
    let fold = plan::fold(plan.steps);
    let mut out = match fold {
        Some(_) => tp.output(plan.name, IxDyn(&[]), nodes, site)?,
        // A leaf's shape passed the size checks when the leaf was made.
        None if checked.sized => tp.output_sized(plan.name, shape.clone(), total, nodes, site)?,
        None => tp.output(plan.name, shape.clone(), nodes, site)?,
    };
    let n = ids.len();
    if fold.is_none() {
        let inputs = &inputs_of::<T, C>(ids, |id| tp.value_of(id), leaf_scalars)[..n];
        if !kernel.is_some_and(|k| lanes::forward::<T, C>(k, inputs, prog.params, &mut out.data)) {
            loops::forward::<T, C>(prog, inputs, shape.slice(), &mut out.data);
        }
    } else {
        // Broadcast inputs: the values are stored, then summed by `sum_slice`.
        let flat = ids.iter().all(|&id| id == SCALAR_LEAF || loops::is_flat(tp.value_of(id).len(), total));
        let mut stored = if flat { Vec::new() } else { tp.scratch(total) };
        let inputs = inputs_of::<T, C>(ids, |id| tp.value_of(id), leaf_scalars);
        let inputs = &inputs[..n];
        let sum = loops::sum::<T, C>(prog, inputs, shape.slice()).unwrap_or_else(|| {
            loops::forward::<T, C>(prog, inputs, shape.slice(), &mut stored);
            sum_slice(&stored)
        });
        out.data[0] = sum;
        tp.recycle(stored);
    }
    if fold == Some(StepOp::Mean) {
        out.data[0] /= T::from_usize(total);
    }
    Some(out)
}

/// The leaves as the loops read them: a node's value (`value` finds it),
/// or a Rust scalar (the next of `leaf_scalars`) as a one-element input of
/// shape `[]`.
fn inputs_of<'a, T: Float, const C: usize>(
    ids: &[NodeId],
    value: impl Fn(NodeId) -> &'a Tensor<T>,
    leaf_scalars: &'a [T],
) -> [Input<'a, T>; C] {
    let mut inputs = [Input { data: &[][..], shape: &[][..] }; C];
    let mut scalars = leaf_scalars.chunks(1);
    for (input, &id) in inputs.iter_mut().zip(ids) {
        *input = if id == SCALAR_LEAF {
            Input { data: scalars.next().unwrap_or(&[]), shape: &[] }
        } else {
            let value = value(id);
            Input { data: &value.data, shape: value.shape() }
        };
    }
    inputs
}

/// The backward rule of a fused node, compiled here for `f32` and `f64`
/// (`float.rs`): hands the node's gradient `g` to its inputs (`out` is
/// the node's value).
pub(crate) fn backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, out: &Tensor<T>, node: &Fused<T>) {
    match node.leaves().len() {
        0 | 1 => backward_in::<T, 1>(sink, g, out, node),
        2..=4 => backward_in::<T, 4>(sink, g, out, node),
        _ => backward_in::<T, MAX_LEAVES>(sink, g, out, node),
    }
}

/// [`backward`] with arrays of `C` entries for the leaves.
fn backward_in<T: Float, const C: usize>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    out: &Tensor<T>,
    node: &Fused<T>,
) {
    let plan = node.region.plan;
    let ids = node.leaves();
    let n = ids.len();
    let Some(scalars) = node.scalars() else { return };
    if !plan.well_formed || n != plan.leaves || n > C || scalars.len() < plan.params {
        return;
    }
    let (params, leaf_scalars) = scalars.split_at(plan.params);
    let wanted = (0..n).filter(|&k| ids[k] != SCALAR_LEAF && sink.wants(ids[k])).fold(0u32, |w, k| w | 1 << k);
    let nodes = sink.nodes();
    let inputs = inputs_of::<T, C>(ids, |id| &nodes[id].value, leaf_scalars);
    let inputs = &inputs[..n];
    let root = plan.root();
    let prog = Program {
        steps: plan.steps,
        root,
        params,
        needed: plan.needed,
        live: if wanted == (1 << n) - 1 { plan.live_all } else { tile::live_steps(plan.steps, root, wanted) },
        wanted,
    };
    let fold = plan::fold(plan.steps);
    if whole::needed_for(&prog, inputs, |k| ids[k] == SCALAR_LEAF) {
        return whole::backward(sink, &prog, inputs, ids, g.data, fold == Some(StepOp::Mean));
    }
    let folded_shape = match fold {
        None => None,
        Some(_) => match broadcast_all(inputs) {
            Some(shape) => Some(shape),
            None => return,
        },
    };
    let shape = folded_shape.as_ref().map_or(out.shape(), |s| s.slice());
    let total = shape.iter().product();
    let (y, seed) = match fold {
        Some(StepOp::Mean) => (None, Source::Splat(g.data[0] / T::from_usize(total))),
        Some(_) => (None, Source::Splat(g.data[0])),
        None => (Some(out.data.as_slice()), Source::Slice(g.data)),
    };
    let mut partials: [Vec<T>; C] = std::array::from_fn(|_| Vec::new());
    for (k, partial) in partials.iter_mut().enumerate().take(n) {
        if wanted & (1 << k) != 0 {
            *partial = sink.scratch_for(ids[k], total);
        }
    }
    let mut outs = partials.each_mut().map(|buffer| buffer.as_mut_slice());
    let compiled = match (node.region.kernel, y, seed) {
        (Some(k), Some(y), Source::Slice(g)) => lanes::backward::<T, C>(k, inputs, params, y, g, &mut outs),
        _ => false,
    };
    if !compiled {
        loops::backward::<T, C>(&prog, inputs, shape, y, seed, outs);
    }
    for (k, partial) in partials.into_iter().enumerate().take(n) {
        if wanted & (1 << k) != 0 {
            contribute(sink, ids[k], partial, shape);
        }
    }
}

/// The shape every input broadcasts to: the region's elementwise shape.
fn broadcast_all<T>(inputs: &[Input<'_, T>]) -> Option<IxDyn> {
    let largest = inputs.iter().map(|x| x.shape).max_by_key(|s| s.len()).unwrap_or(&[]);
    if inputs.iter().all(|x| x.shape == largest || x.shape.is_empty()) {
        return Some(IxDyn(largest));
    }
    inputs.iter().try_fold(IxDyn(&[]), |shape, input| broadcast_shapes(shape.slice(), input.shape))
}

/// Adds an input's partials (laid out on the region's shape `on`) to its
/// gradient, summed back to its shape if it was broadcast: what
/// `GradSink::contribute_broadcast` does for an unfused op.
fn contribute<T: Float>(sink: &mut GradSink<'_, T>, id: NodeId, partial: Vec<T>, on: &[usize]) {
    let shape = sink.value(id).shape();
    // Axis by axis, not `==`: slice equality is a call to `bcmp`, which
    // costs more than the whole comparison of a few axes.
    if shape.len() == on.len() && shape.iter().zip(on).all(|(a, b)| a == b) {
        sink.add(id, partial);
        return;
    }
    sink.contribute_zeroed(id, |c| reduce_into(&partial, on, shape, c));
    sink.recycle(partial);
}

#[cfg(test)]
mod tests;
