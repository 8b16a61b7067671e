//! Fused regions: a chain of elementwise ops of one `grad!` expression
//! (`tanh(x * 0.9 + 0.1)`, `relu(x @ w + b)` after the product,
//! `sum(sigmoid(x) * x)`) recorded as one node, with one pass over memory
//! forward and one backward instead of one per op.
//!
//! The macro writes, for each region, a zero-sized type implementing
//! [`Kernel`]: the region's value and every input's gradient at one
//! element, derived by the macro, plus the region's plan (its ops in
//! order, `plan.rs`) and each op's source location. [`fused`] checks the
//! plan as the unfused ops would check themselves (`check.rs`), runs the
//! kernel over the inputs (`loops.rs`) and records the node, which keeps
//! the kernel's name and backward rule as a `&'static str` and a function
//! pointer (`kernel.rs`), one input inline or several in a pooled index
//! buffer, and its run-time scalars (if any) in a pooled buffer: no `Box`,
//! so a training step that rewinds its tape still allocates nothing. A
//! region whose broadcast intermediate carries a gradient runs as the
//! unfused ops (`unfused.rs`).
//!
//! Same answers: the kernels call the unfused ops' own scalar functions
//! (`scalar.rs`) in the unfused order, so values are the same bits, and so
//! are gradients of inputs used once; see the manual (`grad_macro.md`).

mod check;
mod kernel;
mod loops;
mod plan;
pub mod scalar;
mod unfused;

use std::fmt;
use std::panic::Location;

use ndarray::{Dimension, IxDyn};

pub use kernel::Kernel;
use loops::Input;
pub use plan::{Func, Src, Step, StepOp, step};

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

/// A fused node's backward rule: its kernel's [`kernel::backward`].
type Backward<T> = fn(&mut GradSink<'_, T>, &TensorRef<'_, T>, &Tensor<T>, &Fused<T>);

/// A fused node's region recorded again as the unfused ops (their root),
/// for `Tape::grad_graph`: its kernel's [`kernel::replay`].
type Replay<T> = fn(&mut Tape<T>, &Fused<T>) -> Option<Var>;

/// What a fused node keeps of its kernel, one `static` per kernel: its
/// name, its backward rule and its replay as unfused ops.
pub(crate) struct Rules<T: Float> {
    name: &'static str,
    backward: Backward<T>,
    replay: Replay<T>,
}

/// Where kernel `K`'s [`Rules`] live: an associated constant, borrowed for
/// `'static` (a constant of plain data and function pointers).
struct RulesOf<T, K, const N: usize, const P: usize>(std::marker::PhantomData<(T, K)>);

impl<T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize> RulesOf<T, K, N, P> {
    const RULES: Rules<T> =
        Rules { name: K::NAME, backward: kernel::backward::<T, K, N, P>, replay: kernel::replay::<T, K, N, P> };
}

/// A fused node: its kernel's name and backward rule, one entry per leaf
/// (a node, or [`SCALAR_LEAF`]), and its scalars: the region's
/// parameters, then the leaves that are Rust scalars, in leaf order.
#[derive(Clone)]
pub(crate) struct Fused<T: Float> {
    rules: &'static Rules<T>,
    inputs: Inputs,
    scalars: Vec<T>,
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
        self.rules.name
    }

    /// The region recorded again as its unfused ops, from the same leaves:
    /// the root of those ops (the same value), or `None` for a node whose
    /// record does not fit its kernel.
    pub(crate) fn replay(&self, tp: &mut Tape<T>) -> Option<Var> {
        (self.rules.replay)(tp, self)
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
        inputs + self.scalars.capacity() * size_of::<T>()
    }

    /// The pooled buffers, handed back when the node is dropped.
    pub(crate) fn into_buffers(self) -> (Option<Vec<NodeId>>, Vec<T>) {
        match self.inputs {
            Inputs::One(_) => (None, self.scalars),
            Inputs::Pooled(ids) => (Some(ids), self.scalars),
        }
    }
}

impl<T: Float> fmt::Debug for Fused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fused").field("name", &self.rules.name).field("inputs", &self.inputs).finish()
    }
}

/// Records a fused region of a `grad!` block (what its expansion calls):
/// `leaves` are the region's inputs, `params` its scalar parameters.
///
/// The tape is poisoned as the first failing unfused op would poison it,
/// with that op's name, shapes and location. A region in which a value
/// that carries a gradient is broadcast (see the manual) runs as the
/// unfused ops instead, so its gradients stay theirs bit for bit.
#[track_caller]
pub fn fused<T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize>(
    tp: &mut Tape<T>,
    _kernel: K,
    leaves: [Operand<T>; N],
    params: [T; P],
) -> Var {
    if !tp.is_ok() {
        return tp.poisoned_var();
    }
    let mut ids = [SCALAR_LEAF; N];
    let scalars = check::Scalars { params: &params, constant: K::constant };
    let Some(checked) = check::check(tp, K::WELL_FORMED, K::STEPS, K::SITES, &leaves, scalars, &mut ids) else {
        return tp.poisoned_var();
    };
    if !checked.exact {
        let first = tp.len();
        let out = unfused::run(tp, K::STEPS, &leaves, scalars);
        let site = K::SITES.last().copied().unwrap_or_else(Location::caller);
        tp.note_unfused(first, K::NAME, site);
        return out;
    }
    // The Rust scalars among the leaves, in leaf order.
    let (mut leaf_scalars, mut count) = ([T::zero(); N], 0);
    for leaf in &leaves {
        if let Operand::Scalar(s) = *leaf {
            leaf_scalars[count] = s;
            count += 1;
        }
    }
    let leaf_scalars = &leaf_scalars[..count];
    let mut scalars = tp.scratch(P + count);
    scalars[..P].copy_from_slice(&params);
    scalars[P..].copy_from_slice(leaf_scalars);
    let inputs = match ids.as_slice() {
        &[id] => Inputs::One(id),
        ids => Inputs::Pooled(tp.copy_indices(ids)),
    };
    // Made before the value, so that the stores that make it have landed
    // by the time `push` copies it (see `tape/append.rs`).
    let op = Op::Fused(Fused { rules: &RulesOf::<T, K, N, P>::RULES, inputs, scalars });
    // The region's last step is its root, where a failure is reported.
    let site = match K::SITES.last() {
        Some(&site) => site,
        None => Location::caller(),
    };
    let out = compute::<T, K, N, P>(tp, &ids, params, leaf_scalars, checked.shape, site);
    tp.push_output(op, out)
}

/// The region's value on `shape` (summed, when it ends in a fold), or
/// `None` when the output cannot be made (the tape then holds why,
/// located at `site`).
fn compute<T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize>(
    tp: &mut Tape<T>,
    ids: &[NodeId; N],
    params: [T; P],
    leaf_scalars: &[T],
    shape: IxDyn,
    site: &'static Location<'static>,
) -> Option<Tensor<T>> {
    let total = shape.size();
    // The tensor leaves, for an error's shapes (on the stack: no allocation per step).
    let (mut nodes, mut count) = ([0; N], 0);
    for &id in ids.iter().filter(|&&id| id != SCALAR_LEAF) {
        nodes[count] = id;
        count += 1;
    }
    let nodes = &nodes[..count];
    let Some(op) = K::FOLD else {
        // Filled where `output` put it, not moved out of the `Option` first:
        // that copy would read back stores still in flight (`tape/append.rs`).
        let mut out = tp.output(K::NAME, shape, nodes, site);
        if let Some(Tensor { shape, data }) = &mut out {
            loops::forward::<T, K, N, P>(&inputs_on(tp, ids, leaf_scalars), params, shape.slice(), data);
        }
        return out;
    };
    let mut out = tp.output(K::NAME, IxDyn(&[]), nodes, site)?;
    // Broadcast inputs: the values are stored, then summed by `sum_slice`.
    let flat = ids.iter().all(|&id| id == SCALAR_LEAF || loops::is_flat(tp.value_of(id).len(), total));
    let mut stored = if flat { Vec::new() } else { tp.scratch(total) };
    let inputs = inputs_on(tp, ids, leaf_scalars);
    let sum = loops::sum::<T, K, N, P>(&inputs, params, shape.slice()).unwrap_or_else(|| {
        loops::forward::<T, K, N, P>(&inputs, params, shape.slice(), &mut stored);
        sum_slice(&stored)
    });
    out.data[0] = if op == StepOp::Mean { sum / T::from_usize(total) } else { sum };
    tp.recycle(stored);
    Some(out)
}

/// The leaves as the loops read them: a node's value, or a Rust scalar
/// as a one-element input of shape `[]`.
fn inputs_on<'a, T: Float, const N: usize>(
    tp: &'a Tape<T>,
    ids: &[NodeId; N],
    leaf_scalars: &'a [T],
) -> [Input<'a, T>; N] {
    let mut next = 0;
    ids.map(|id| {
        if id == SCALAR_LEAF {
            next += 1;
            Input { data: &leaf_scalars[next - 1..next], shape: &[] }
        } else {
            let value = tp.value_of(id);
            Input { data: &value.data, shape: value.shape() }
        }
    })
}

/// The backward rule of a fused node: its kernel's, through one indirect call.
pub(crate) fn fused_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    out: &Tensor<T>,
    node: &Fused<T>,
) {
    (node.rules.backward)(sink, g, out, node);
}

#[cfg(test)]
mod tests;
