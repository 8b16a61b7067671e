//! Every differentiable op: its public `g_*` function (forward) and its
//! backward rule, side by side in one module per family. [`Op`] is what a
//! node remembers of the op that made it; `backward.rs` dispatches on it.

pub(crate) mod binary;
pub(crate) mod layout;
pub(crate) mod loss;
pub(crate) mod matmul;
pub(crate) mod reduce;
pub(crate) mod softmax;
pub(crate) mod unary;

use ndarray::IxDyn;

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
    Mse(NodeId, NodeId),
    MatMul(NodeId, NodeId),
    Bmm(NodeId, NodeId),
    Transpose(NodeId),
    Reshape(NodeId),
    Softmax { x: NodeId, axis: usize },
    Slice { x: NodeId, starts: IxDyn },
    Concat { a: NodeId, b: NodeId, axis: usize },
}

impl<T> Op<T> {
    /// The op's input nodes.
    pub(crate) fn inputs(&self) -> impl Iterator<Item = NodeId> {
        let (first, second) = match *self {
            Op::Param | Op::Constant => (None, None),
            Op::Unary(x, _)
            | Op::Sum(x)
            | Op::Mean(x)
            | Op::Transpose(x)
            | Op::Reshape(x)
            | Op::Softmax { x, .. }
            | Op::Slice { x, .. } => (Some(x), None),
            Op::Add(a, b)
            | Op::Sub(a, b)
            | Op::Mul(a, b)
            | Op::Div(a, b)
            | Op::Mse(a, b)
            | Op::MatMul(a, b)
            | Op::Bmm(a, b)
            | Op::Concat { a, b, .. } => (Some(a), Some(b)),
        };
        first.into_iter().chain(second)
    }
}

/// Resolves an axis that may count from the end (`-1` = last).
pub(crate) fn normalize_axis(axis: isize, ndim: usize) -> Option<usize> {
    let ndim_signed = ndim as isize;
    let resolved = if axis < 0 { axis + ndim_signed } else { axis };
    (0..ndim_signed).contains(&resolved).then_some(resolved as usize)
}
