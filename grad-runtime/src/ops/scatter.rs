//! `take` and `scatter_add`: the two linear maps by a flat index list that
//! the recorded gradients of indexing and pooling are made of
//! (`backward_graph.rs`). Each is the other's adjoint, so both are
//! differentiable to any order. Internal: no `g_*` function, no DSL name.

use std::panic::Location;

use ndarray::IxDyn;

use crate::ops::Op;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var};

/// `out[i] = x[indices[i]]` (flat), `out` of `shape` (as many elements as
/// `indices`). `indices` is a pooled buffer the node keeps.
#[track_caller]
pub(crate) fn take<T: Float>(tp: &mut Tape<T>, x: Var, indices: Vec<usize>, shape: IxDyn) -> Var {
    const NAME: &str = "take";
    let location = Location::caller();
    let Some([id]) = tp.resolve(NAME, [x], location) else {
        tp.recycle_indices(indices);
        return tp.poisoned_var();
    };
    let Some(mut out) = tp.output(NAME, shape, &[id], location) else {
        tp.recycle_indices(indices);
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
    const NAME: &str = "scatter_add";
    let location = Location::caller();
    let Some([id]) = tp.resolve(NAME, [x], location) else {
        tp.recycle_indices(indices);
        return tp.poisoned_var();
    };
    let Some(mut out) = tp.output(NAME, shape, &[id], location) else {
        tp.recycle_indices(indices);
        return tp.poisoned_var();
    };
    out.data.fill(T::zero());
    let data = &tp.value_of(id).data;
    data.iter().zip(&indices).for_each(|(&v, &i)| out.data[i] += v);
    tp.push(Op::ScatterAdd { x: id, indices }, out)
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
