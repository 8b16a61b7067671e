//! `take` and `scatter_add`: the two linear maps by a flat index list that
//! the recorded gradients of indexing and pooling are made of
//! (`backward_graph.rs`). Each is the other's adjoint, so both are
//! differentiable to any order. Internal: no `g_*` function, no DSL name.

use std::panic::Location;

use ndarray::IxDyn;

use crate::ops::Op;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::{Tensor, TensorRef};
use crate::{Float, Tape, Var};

/// `out[i] = x[indices[i]]` (flat), `out` of `shape` (as many elements as
/// `indices`). `indices` is a pooled buffer the node keeps.
#[track_caller]
pub(crate) fn take<T: Float>(tp: &mut Tape<T>, x: Var, indices: Vec<usize>, shape: IxDyn) -> Var {
    let Some((id, mut out, indices)) = prepare(tp, "take", x, indices, shape, Location::caller()) else {
        return tp.poisoned_var();
    };
    let data = &tp.value_of(id).data;
    out.data.iter_mut().zip(&indices).for_each(|(o, &i)| *o = data[i]);
    tp.push(Op::Take { x: id, indices }, out)
}

/// `out = zeros(shape)`, then `out[indices[i]] += x[i]` for every element
/// of `x` (flat). `indices` is a pooled buffer the node keeps.
#[track_caller]
pub(crate) fn scatter_add<T: Float>(tp: &mut Tape<T>, x: Var, indices: Vec<usize>, shape: IxDyn) -> Var {
    let Some((id, mut out, indices)) = prepare(tp, "scatter_add", x, indices, shape, Location::caller()) else {
        return tp.poisoned_var();
    };
    out.data.fill(T::zero());
    let data = &tp.value_of(id).data;
    data.iter().zip(&indices).for_each(|(&v, &i)| out.data[i] += v);
    tp.push(Op::ScatterAdd { x: id, indices }, out)
}

/// The input's node and an output of `shape`, or `None` (the index buffer
/// recycled, the tape holding why) for a bad handle or a refused allocation.
fn prepare<T: Float>(
    tp: &mut Tape<T>,
    name: &'static str,
    x: Var,
    indices: Vec<usize>,
    shape: IxDyn,
    location: &'static Location<'static>,
) -> Option<(NodeId, Tensor<T>, Vec<usize>)> {
    let prepared =
        tp.resolve(name, [x], location).and_then(|[id]| Some((id, tp.output(name, shape, &[id], location)?)));
    match prepared {
        Some((id, out)) => Some((id, out, indices)),
        None => {
            tp.recycle_indices(indices);
            None
        }
    }
}

/// `take`'s gradient: `g` scattered back (`x[indices[i]] += g[i]`).
pub(crate) fn take_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, x: NodeId, indices: &[usize]) {
    sink.contribute_zeroed(x, |c| g.data.iter().zip(indices).for_each(|(&v, &i)| c[i] += v));
}

/// `scatter_add`'s gradient: `g` taken at the indices (`x[i] += g[indices[i]]`).
pub(crate) fn scatter_add_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    x: NodeId,
    indices: &[usize],
) {
    sink.contribute(x, |c| c.iter_mut().zip(indices).for_each(|(c, &i)| *c = g.data[i]));
}
