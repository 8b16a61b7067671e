//! Every differentiable op: its public `g_*` function (forward) and its
//! backward rule, side by side in one module per family. [`Op`] is what a
//! node remembers of the op that made it; `backward.rs` dispatches on it.

pub(crate) mod binary;
pub(crate) mod dropout;
pub(crate) mod embedding;
pub(crate) mod layout;
pub(crate) mod loss;
pub(crate) mod matmul;
pub(crate) mod norm;
pub(crate) mod reduce;
pub(crate) mod softmax;
pub(crate) mod unary;

use ndarray::{Axis, IxDyn, RemoveAxis};

use crate::tape::NodeId;
use unary::Unary;

/// The op that made a node, with its inputs and whatever its backward rule
/// needs beyond the input and output values.
#[derive(Clone, Debug)]
pub(crate) enum Op<T> {
    Param,
    Constant,
    Add(NodeId, NodeId),
    Sub(NodeId, NodeId),
    Mul(NodeId, NodeId),
    Div(NodeId, NodeId),
    Unary(NodeId, Unary<T>),
    Sum(NodeId),
    Mean(NodeId),
    SumAxis { x: NodeId, axis: usize },
    MeanAxis { x: NodeId, axis: usize },
    MaxAxis { x: NodeId, axis: usize },
    Mse(NodeId, NodeId),
    CrossEntropy { logits: NodeId, targets: Vec<usize> },
    MatMul(NodeId, NodeId),
    Bmm(NodeId, NodeId),
    Transpose(NodeId),
    Reshape(NodeId),
    Softmax { x: NodeId, axis: usize },
    LogSoftmax { x: NodeId, axis: usize },
    Embedding { table: NodeId, ids: Vec<usize> },
    LayerNorm { x: NodeId, gamma: NodeId, beta: NodeId, eps: T },
    Slice { x: NodeId, starts: IxDyn },
    Concat { a: NodeId, b: NodeId, axis: usize },
}

impl<T> Op<T> {
    /// The op's input nodes.
    pub(crate) fn inputs(&self) -> impl Iterator<Item = NodeId> {
        let inputs: [Option<NodeId>; 3] = match *self {
            Op::Param | Op::Constant => [None, None, None],
            Op::Unary(x, _)
            | Op::Sum(x)
            | Op::Mean(x)
            | Op::SumAxis { x, .. }
            | Op::MeanAxis { x, .. }
            | Op::MaxAxis { x, .. }
            | Op::CrossEntropy { logits: x, .. }
            | Op::Transpose(x)
            | Op::Reshape(x)
            | Op::Softmax { x, .. }
            | Op::LogSoftmax { x, .. }
            | Op::Embedding { table: x, .. }
            | Op::Slice { x, .. } => [Some(x), None, None],
            Op::Add(a, b)
            | Op::Sub(a, b)
            | Op::Mul(a, b)
            | Op::Div(a, b)
            | Op::Mse(a, b)
            | Op::MatMul(a, b)
            | Op::Bmm(a, b)
            | Op::Concat { a, b, .. } => [Some(a), Some(b), None],
            Op::LayerNorm { x, gamma, beta, .. } => [Some(x), Some(gamma), Some(beta)],
        };
        inputs.into_iter().flatten()
    }

    /// The integer payload (class targets, embedding ids) a dropped node
    /// hands back to the tape's index pool.
    pub(crate) fn into_indices(self) -> Option<Vec<usize>> {
        match self {
            Op::CrossEntropy { targets, .. } => Some(targets),
            Op::Embedding { ids, .. } => Some(ids),
            _ => None,
        }
    }
}

/// Resolves an axis that may count from the end (`-1` = last).
pub(crate) fn normalize_axis(axis: isize, ndim: usize) -> Option<usize> {
    let ndim_signed = ndim as isize;
    let resolved = if axis < 0 { axis + ndim_signed } else { axis };
    (0..ndim_signed).contains(&resolved).then_some(resolved as usize)
}

/// A row-major tensor seen as `[outer, len, inner]` around one axis: the
/// elements of lane `(o, i)` along the axis sit `inner` apart.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AxisLanes {
    pub(crate) outer: usize,
    pub(crate) len: usize,
    pub(crate) inner: usize,
}

impl AxisLanes {
    pub(crate) fn new(shape: &[usize], axis: usize) -> Self {
        AxisLanes { outer: shape[..axis].iter().product(), len: shape[axis], inner: shape[axis + 1..].iter().product() }
    }

    /// Calls `f(lane, start)` for every lane: `lane` numbers the lanes in
    /// row-major order of the reduced shape, `start` is the offset of the
    /// lane's first element; its elements are at `start + j * inner`.
    pub(crate) fn for_each(&self, mut f: impl FnMut(usize, usize)) {
        for o in 0..self.outer {
            for i in 0..self.inner {
                f(o * self.inner + i, o * self.len * self.inner + i);
            }
        }
    }
}

/// The shape after reducing `axis`: the axis removed, or kept as 1.
pub(crate) fn reduced_shape(shape: &[usize], axis: usize, keepdim: bool) -> IxDyn {
    let mut dims = IxDyn(shape);
    if keepdim {
        dims[axis] = 1;
        dims
    } else {
        dims.remove_axis(Axis(axis))
    }
}
