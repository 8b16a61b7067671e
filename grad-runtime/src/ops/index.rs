//! Indexing along an axis by integer indices: `gather` (one index per
//! output element, PyTorch's `gather`) and `index_select` (whole slices
//! picked along an axis). Both keep their indices in the node (the tape's
//! index pool) and scatter the gradient back, repeated indices accumulating.

use std::panic::Location;

use ndarray::{ArrayBase, Data, Dimension, IxDyn};

use crate::broadcast::for_each_offset;
use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::axis::{AxisLanes, normalize_axis};
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var};

/// `out[i][j][k] = x[i][indices[i][j][k]][k]` for `axis = 1` (PyTorch's
/// `torch.gather(x, axis, indices)`): the output has the shape of
/// `indices`, which has `x`'s rank; along `axis` each index picks an
/// element in `0..x.shape[axis]`, and every other dim of `indices` is at
/// most `x`'s. `axis` may count from the end (`-1` = last).
///
/// Errors: an axis out of range, `indices` of another rank, a dim of
/// `indices` larger than `x`'s, an index out of range (naming its
/// row-major position in `indices` and its value).
///
/// Gradient: `g[p]` added into the element of `x` that output position `p`
/// read (an element read several times accumulates every use).
///
/// ```
/// use grad_runtime::{g_gather, g_sum, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
/// let picked = g_gather(&mut tape, x, -1, &array![[2, 2], [0, 1]]);
/// assert_eq!(tape.value(picked), array![[3.0, 3.0], [4.0, 5.0]].into_dyn());
/// let loss = g_sum(&mut tape, picked);
/// tape.backward(loss)?;
/// assert_eq!(tape.grad(x), array![[0.0, 0.0, 2.0], [1.0, 1.0, 0.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_gather<T: Float, S: Data<Elem = usize>, D: Dimension>(
    tp: &mut Tape<T>,
    x: Var,
    axis: isize,
    indices: &ArrayBase<S, D>,
) -> Var {
    const NAME: &str = "g_gather";
    let location = Location::caller();
    let Some([x]) = tp.resolve(NAME, [x], location) else {
        return tp.poisoned_var();
    };
    let shape = tp.shape(x);
    let Some(axis) = normalize_axis(axis, shape.len()) else {
        return tp.fail(NAME, ErrorKind::Axis { axis, ndim: shape.len() }, &[x], location);
    };
    if indices.ndim() != shape.len() {
        let kind = ErrorKind::RankMismatch { left: shape.len(), right: indices.ndim() };
        return tp.fail(NAME, kind, &[x], location);
    }
    let too_long = (0..shape.len()).find(|&d| d != axis && indices.shape()[d] > shape[d]);
    if let Some(dim) = too_long {
        let kind = ErrorKind::IndexShape { dim, index: indices.shape()[dim], len: shape[dim] };
        return tp.fail(NAME, kind, &[x], location);
    }
    let len = shape[axis];
    if let Some((position, &index)) = indices.iter().enumerate().find(|&(_, &i)| i >= len) {
        let kind = ErrorKind::IndexOutOfRange { what: "index", position, index, len };
        return tp.fail(NAME, kind, &[x], location);
    }
    let Some(mut out) = tp.output(NAME, IxDyn(indices.shape()), &[x], location) else { return tp.poisoned_var() };
    let copy = match indices.as_slice() {
        Some(contiguous) => tp.copy_indices(contiguous),
        None => tp.copy_indices(&indices.iter().copied().collect::<Vec<_>>()),
    };
    let input = &tp.value_of(x).data;
    let shape = out.shape.clone();
    walk_gather(tp.shape(x), shape.slice(), axis, &copy, |p, at| out.data[p] = input[at]);
    tp.push(Op::Gather { x, axis, indices: copy }, out)
}

pub(crate) fn gather_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    x: NodeId,
    axis: usize,
    indices: &[usize],
) {
    let shape = sink.value(x).shape();
    sink.contribute_zeroed(x, |c| walk_gather(shape, g.shape(), axis, indices, |p, at| c[at] += g.data[p]));
}

/// For `grad_graph`: the offset in `x` each output element of a gather reads.
pub(crate) fn gather_sources(x: &[usize], out: &[usize], axis: usize, indices: &[usize], sources: &mut Vec<usize>) {
    walk_gather(x, out, axis, indices, |_, at| sources.push(at));
}

/// For `grad_graph`: the offset in `x` each output element of an
/// index_select reads.
pub(crate) fn index_select_sources(x: &[usize], axis: usize, indices: &[usize], sources: &mut Vec<usize>) {
    // The slices come in output order.
    let lanes = AxisLanes::new(x, axis);
    walk_slices(lanes, indices, |_, from| sources.extend(from..from + lanes.inner));
}

/// Calls `f(p, at)` for every output position `p` (row-major over `out`)
/// with the offset `at` in `x` (shape `x`) it reads.
fn walk_gather(x: &[usize], out: &[usize], axis: usize, indices: &[usize], mut f: impl FnMut(usize, usize)) {
    let mut strides = row_major_strides(x);
    let step = std::mem::replace(&mut strides[axis], 0);
    for_each_offset(out, [&strides], |p, [base]| f(p, base + indices[p] * step));
}

fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// The slices of `x` at `indices` along `axis` (negative counts from the
/// end), in that order: `x: [a, n, b]` with `axis = 1` gives
/// `[a, indices.len(), b]` (PyTorch's `index_select`). Each index must be
/// in `0..n`; an index out of range is an error naming its position and
/// value, as is an axis out of range.
///
/// Gradient: each slice of `g` added into the slice of `x` it came from
/// (a repeated index accumulates every use).
///
/// ```
/// use grad_runtime::{g_index_select, g_sum, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
/// let columns = g_index_select(&mut tape, x, 1, &[2, 0, 2]);
/// assert_eq!(tape.value(columns), array![[3.0, 1.0, 3.0], [6.0, 4.0, 6.0]].into_dyn());
/// let loss = g_sum(&mut tape, columns);
/// tape.backward(loss)?;
/// assert_eq!(tape.grad(x), array![[1.0, 0.0, 2.0], [1.0, 0.0, 2.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_index_select<T: Float>(tp: &mut Tape<T>, x: Var, axis: isize, indices: &[usize]) -> Var {
    const NAME: &str = "g_index_select";
    let location = Location::caller();
    let Some([x]) = tp.resolve(NAME, [x], location) else {
        return tp.poisoned_var();
    };
    let Some(axis) = normalize_axis(axis, tp.shape(x).len()) else {
        return tp.fail(NAME, ErrorKind::Axis { axis, ndim: tp.shape(x).len() }, &[x], location);
    };
    let len = tp.shape(x)[axis];
    if let Some((position, &index)) = indices.iter().enumerate().find(|&(_, &i)| i >= len) {
        let kind = ErrorKind::IndexOutOfRange { what: "index", position, index, len };
        return tp.fail(NAME, kind, &[x], location);
    }
    let mut shape = tp.value_of(x).shape.clone();
    shape[axis] = indices.len();
    let Some(mut out) = tp.output(NAME, shape, &[x], location) else { return tp.poisoned_var() };
    let lanes = AxisLanes::new(tp.shape(x), axis);
    let input = &tp.value_of(x).data;
    walk_slices(lanes, indices, |to, from| {
        out.data[to..to + lanes.inner].copy_from_slice(&input[from..from + lanes.inner])
    });
    let indices = tp.copy_indices(indices);
    tp.push(Op::IndexSelect { x, axis, indices }, out)
}

pub(crate) fn index_select_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    x: NodeId,
    axis: usize,
    indices: &[usize],
) {
    let lanes = AxisLanes::new(sink.value(x).shape(), axis);
    sink.contribute_zeroed(x, |c| {
        walk_slices(lanes, indices, |to, from| {
            c[from..from + lanes.inner].iter_mut().zip(&g.data[to..to + lanes.inner]).for_each(|(c, &v)| *c += v)
        })
    });
}

/// Calls `f(to, from)` for every slice of `inner` elements: `to` its offset
/// in the output, `from` the offset of the slice of `x` it copies. Calls
/// nothing when the output is empty (however large its other dims).
fn walk_slices(lanes: AxisLanes, indices: &[usize], mut f: impl FnMut(usize, usize)) {
    if lanes.outer == 0 || lanes.inner == 0 || indices.is_empty() {
        return;
    }
    for o in 0..lanes.outer {
        for (j, &index) in indices.iter().enumerate() {
            f((o * indices.len() + j) * lanes.inner, (o * lanes.len + index) * lanes.inner);
        }
    }
}
