//! Ops that move elements without computing on them: `transpose`,
//! `reshape` (and `flatten`, a reshape), `slice`, `concat`. Each backward
//! moves the gradient back.

use std::panic::Location;

use ndarray::{ArrayViewD, ArrayViewMutD, Axis, Dimension, IxDyn, Slice};

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::axis::{AxisArg, normalize_axis};
use crate::ops::sink::GradSink;
use crate::parallel;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var};

/// Swaps the last two axes (`[m, n]` → `[n, m]`, `[b, m, n]` → `[b, n, m]`).
///
/// Gradient: `g` with its last two axes swapped back.
///
/// ```
/// use grad_runtime::{g_transpose, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 2.0, 3.0]]);
/// let y = g_transpose(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![[1.0], [2.0], [3.0]].into_dyn());
/// assert_eq!(tape.grad(x), array![[1.0, 1.0, 1.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_transpose<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    const NAME: &str = "g_transpose";
    let location = Location::caller();
    let Some([x]) = tp.resolve(NAME, [x], location) else {
        return tp.poisoned_var();
    };
    let ndim = tp.shape(x).len();
    if ndim < 2 {
        let kind = ErrorKind::Rank { expected: "2-D or higher", got: ndim };
        return tp.fail(NAME, kind, &[x], location);
    }
    let mut shape = tp.value_of(x).shape.clone();
    shape.slice_mut().swap(ndim - 2, ndim - 1);
    let Some(mut out) = tp.output(NAME, shape, &[x], location) else { return tp.poisoned_var() };
    let value = tp.value_of(x);
    transpose_last_two(value.shape(), &value.data, &mut out.data);
    tp.push(Op::Transpose(x), out)
}

/// The same elements in row-major order under a new shape with the same
/// element count.
///
/// Gradient: `g` reshaped back to `x`'s shape.
///
/// ```
/// use grad_runtime::{g_reshape, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 2.0], [3.0, 4.0]]);
/// let y = g_reshape(&mut tape, x, &[4]);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![1.0, 2.0, 3.0, 4.0].into_dyn());
/// assert_eq!(tape.grad(x), array![[1.0, 1.0], [1.0, 1.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_reshape<T: Float>(tp: &mut Tape<T>, x: Var, shape: &[usize]) -> Var {
    const NAME: &str = "g_reshape";
    let location = Location::caller();
    let Some([x]) = tp.resolve(NAME, [x], location) else {
        return tp.poisoned_var();
    };
    let from = tp.value_of(x).len();
    // A product that overflows is no element count any tensor has; a 0 makes
    // it 0 whatever the other dims (`output` then checks the shape itself).
    let product = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).unwrap_or(usize::MAX);
    let to = if shape.contains(&0) { 0 } else { product };
    if from != to {
        return tp.fail(NAME, ErrorKind::ElementCount { from, to }, &[x], location);
    }
    let Some(mut out) = tp.output(NAME, IxDyn(shape), &[x], location) else { return tp.poisoned_var() };
    parallel::copy(&mut out.data, &tp.value_of(x).data);
    tp.push(Op::Reshape(x), out)
}

/// The dims from `from_axis` on (negative counts from the end) collapsed
/// into one, as `torch.flatten(x, from_axis)`: `[b, t, d]` with
/// `from_axis = 1` gives `[b, t * d]`, with `0` all of it, `[b * t * d]`.
/// A reshape (its node is a `g_reshape`); an axis out of range is an error
/// (a scalar has none).
///
/// Gradient: `g` reshaped back to `x`'s shape.
///
/// ```
/// use grad_runtime::{g_flatten, Tape};
/// use ndarray::Array3;
///
/// let mut tape = Tape::<f32>::new();
/// let x = tape.param(Array3::<f32>::zeros((2, 3, 4)));
/// let rows = g_flatten(&mut tape, x, 1);
/// assert_eq!(tape.value(rows).shape(), &[2, 12]);
/// ```
#[track_caller]
pub fn g_flatten<T: Float>(tp: &mut Tape<T>, x: Var, from_axis: isize) -> Var {
    const NAME: &str = "g_flatten";
    let location = Location::caller();
    let Some([id]) = tp.resolve(NAME, [x], location) else {
        return tp.poisoned_var();
    };
    let shape = tp.shape(id);
    let Some(from) = normalize_axis(from_axis, shape.len()) else {
        return tp.fail(NAME, ErrorKind::Axis { axis: from_axis, ndim: shape.len() }, &[id], location);
    };
    // A tensor's non-zero dims multiply within isize::MAX; saturating anyway
    // (g_reshape would refuse the count).
    let collapsed = shape[from..].iter().try_fold(1usize, |n, &d| n.checked_mul(d)).unwrap_or(usize::MAX);
    let mut to = shape[..from].to_vec();
    to.push(collapsed);
    g_reshape(tp, x, &to)
}

/// The block `x[starts[0]..stops[0], starts[1]..stops[1], ...]`: one start
/// and one (exclusive) stop per axis, step 1.
///
/// Gradient: `g` placed back at the block's position, zeros elsewhere.
///
/// ```
/// use grad_runtime::{g_slice, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
/// let y = g_slice(&mut tape, x, &[0, 1], &[1, 3]);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![[2.0, 3.0]].into_dyn());
/// assert_eq!(tape.grad(x), array![[0.0, 1.0, 1.0], [0.0, 0.0, 0.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_slice<T: Float>(tp: &mut Tape<T>, x: Var, starts: &[usize], stops: &[usize]) -> Var {
    const NAME: &str = "g_slice";
    let location = Location::caller();
    let Some([x]) = tp.resolve(NAME, [x], location) else {
        return tp.poisoned_var();
    };
    let shape = tp.shape(x);
    if starts.len() != shape.len() || stops.len() != shape.len() {
        let kind = ErrorKind::SliceArity { starts: starts.len(), stops: stops.len(), ndim: shape.len() };
        return tp.fail(NAME, kind, &[x], location);
    }
    let bad_axis = (0..shape.len()).find(|&i| starts[i] > stops[i] || stops[i] > shape[i]);
    if let Some(axis) = bad_axis {
        let kind = ErrorKind::SliceRange { axis, start: starts[axis], stop: stops[axis], len: shape[axis] };
        return tp.fail(NAME, kind, &[x], location);
    }
    // An `IxDyn` holds up to 4 axes inline: a training step's slices allocate nothing.
    let mut out_shape = IxDyn::zeros(starts.len());
    out_shape.slice_mut().iter_mut().zip(starts.iter().zip(stops)).for_each(|(n, (a, b))| *n = b - a);
    let Some(mut out) = tp.output(NAME, out_shape, &[x], location) else { return tp.poisoned_var() };
    let input = tp.value_of(x);
    match (input.shape().last(), out.shape().last()) {
        (Some(&x_width), Some(&width)) if width > 0 => {
            // Row by row along the last axis, groups of rows on several threads.
            let (x_shape, out_shape, last) = (input.shape(), out.shape.clone(), starts.len() - 1);
            parallel::for_each_rows(&mut out.data, width, |first, rows| {
                for (r, row) in rows.chunks_exact_mut(width).enumerate() {
                    let from = source_row(first + r, x_shape, out_shape.slice(), starts) * x_width + starts[last];
                    row.copy_from_slice(&input.data[from..from + width]);
                }
            });
        }
        _ => copy_view(input.view().slice_each_axis(|ax| block_of(starts, stops, ax.axis)), &mut out.data),
    }
    tp.push(Op::Slice { x, starts: IxDyn(starts) }, out)
}

/// `a` and `b` joined along `axis`; every other dim must be equal. The axis
/// is a `usize` or a signed integer that counts from the end (`-1` = last),
/// as in [`g_softmax`](crate::g_softmax).
///
/// Gradient: `g` split along `axis` at `a`'s length.
///
/// ```
/// use grad_runtime::{g_concat, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let a = tape.param(array![[1.0, 2.0]]);
/// let b = tape.param(array![[3.0]]);
/// let y = g_concat(&mut tape, a, b, -1);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![[1.0, 2.0, 3.0]].into_dyn());
/// assert_eq!(tape.grad(a), array![[1.0, 1.0]].into_dyn());
/// assert_eq!(tape.grad(b), array![[1.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_concat<T: Float>(tp: &mut Tape<T>, a: Var, b: Var, axis: impl AxisArg) -> Var {
    const NAME: &str = "g_concat";
    let location = Location::caller();
    let Some([a, b]) = tp.resolve(NAME, [a, b], location) else {
        return tp.poisoned_var();
    };
    let (sa, sb) = (tp.shape(a), tp.shape(b));
    if sa.len() != sb.len() {
        let kind = ErrorKind::RankMismatch { left: sa.len(), right: sb.len() };
        return tp.fail(NAME, kind, &[a, b], location);
    }
    let signed = axis.signed();
    let Some(axis) = signed.and_then(|axis| normalize_axis(axis, sa.len())) else {
        let kind = ErrorKind::Axis { axis: signed.unwrap_or(isize::MAX), ndim: sa.len() };
        return tp.fail(NAME, kind, &[a, b], location);
    };
    if let Some(other) = (0..sa.len()).find(|&i| i != axis && sa[i] != sb[i]) {
        let kind = ErrorKind::ConcatDim { axis: other, left: sa[other], right: sb[other] };
        return tp.fail(NAME, kind, &[a, b], location);
    }
    let split = sa[axis];
    let mut shape = tp.value_of(a).shape.clone();
    // Saturates instead of overflowing: `output` then refuses the shape.
    shape[axis] = split.saturating_add(sb[axis]);
    let Some(mut out) = tp.output(NAME, shape, &[a, b], location) else { return tp.poisoned_var() };
    let mut view = out.view_mut();
    view.slice_axis_mut(Axis(axis), Slice::from(..split)).assign(&tp.value_of(a).view());
    view.slice_axis_mut(Axis(axis), Slice::from(split..)).assign(&tp.value_of(b).view());
    tp.push(Op::Concat { a, b, axis }, out)
}

pub(crate) fn transpose_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, x: NodeId) {
    sink.contribute(x, |c| transpose_last_two(g.shape(), g.data, c));
}

pub(crate) fn reshape_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, x: NodeId) {
    sink.contribute(x, |c| parallel::copy(c, g.data));
}

pub(crate) fn slice_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, x: NodeId, starts: &IxDyn) {
    let shape = sink.value(x).shape.clone();
    let width = shape.slice().last().copied().unwrap_or(0);
    if width > 0 && !g.data.is_empty() {
        return sink.contribute_elementwise(x, |c, accumulate| {
            // Row by row along `x`'s last axis, groups of rows on several
            // threads: a row in the block gets its row of `g` (`0 + g` for
            // the first contribution, the bits of adding into zeros), a row
            // outside it nothing (zeros for the first).
            parallel::for_each_rows(c, width, |first, rows| {
                for (r, row) in rows.chunks_exact_mut(width).enumerate() {
                    slice_row_backward(row, first + r, shape.slice(), g, starts.slice(), accumulate);
                }
            });
        });
    }
    let mut stops = starts.clone();
    stops.slice_mut().iter_mut().zip(g.shape()).for_each(|(s, n)| *s += n);
    sink.contribute_into(x, |c| {
        let mut whole = ArrayViewMutD::from_shape(shape, c).expect("invariant: the buffer has x's shape");
        let mut block = whole.slice_each_axis_mut(|ax| block_of(starts.slice(), stops.slice(), ax.axis));
        block += &g.view();
    });
}

pub(crate) fn concat_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    a: NodeId,
    b: NodeId,
    axis: usize,
) {
    let split = sink.value(a).shape()[axis];
    let g = g.view();
    for (x, part) in [(a, Slice::from(..split)), (b, Slice::from(split..))] {
        sink.contribute(x, |c| copy_view(g.slice_axis(Axis(axis), part), c));
    }
}

/// The row of a slice's input (`x_shape`'s rows along its last axis) that
/// row `row` of the slice (of shape `out_shape`, from `starts`) lies in.
fn source_row(row: usize, x_shape: &[usize], out_shape: &[usize], starts: &[usize]) -> usize {
    let (mut rest, mut x_row, mut x_rows) = (row, 0, 1);
    for axis in (0..out_shape.len() - 1).rev() {
        let at = rest % out_shape[axis];
        rest /= out_shape[axis];
        x_row += (starts[axis] + at) * x_rows;
        x_rows *= x_shape[axis];
    }
    x_row
}

/// Row `index` of a slice's input gradient (`x_shape`'s rows along its last
/// axis): `g`'s row at this row's place in the block that started at
/// `starts`, added in when `accumulate`, else written with zeros around it.
fn slice_row_backward<T: Float>(
    row: &mut [T],
    index: usize,
    x_shape: &[usize],
    g: &TensorRef<'_, T>,
    starts: &[usize],
    accumulate: bool,
) {
    let last = x_shape.len() - 1;
    let (g_shape, width) = (g.shape(), g.shape()[last]);
    // This row's place in `g`, if it lies in the block.
    let (mut rest, mut g_row, mut g_rows) = (index, 0, 1);
    for axis in (0..last).rev() {
        let at = rest % x_shape[axis];
        rest /= x_shape[axis];
        let Some(inside) = at.checked_sub(starts[axis]).filter(|&i| i < g_shape[axis]) else {
            if !accumulate {
                row.fill(T::zero());
            }
            return;
        };
        g_row += inside * g_rows;
        g_rows *= g_shape[axis];
    }
    let g_row = &g.data[g_row * width..][..width];
    let start = starts[last];
    if accumulate {
        row[start..start + width].iter_mut().zip(g_row).for_each(|(c, &v)| *c += v);
    } else {
        row[..start].fill(T::zero());
        row[start..start + width].iter_mut().zip(g_row).for_each(|(c, &v)| *c = T::zero() + v);
        row[start + width..].fill(T::zero());
    }
}

fn block_of(starts: &[usize], stops: &[usize], axis: Axis) -> Slice {
    Slice::from(starts[axis.0]..stops[axis.0])
}

/// Writes `x` with its last two axes swapped into `out`: each `rows × cols`
/// matrix of the batch becomes `cols × rows`. It goes tile by tile, so that
/// the rows read and the rows written both stay in cache (element by element
/// through a strided view this was most of W4's time).
fn transpose_last_two<T: Float>(shape: &[usize], x: &[T], out: &mut [T]) {
    const TILE: usize = 16;
    let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    if rows == 0 || cols == 0 {
        return;
    }
    for (from, to) in x.chunks_exact(rows * cols).zip(out.chunks_exact_mut(rows * cols)) {
        for i0 in (0..rows).step_by(TILE) {
            for j0 in (0..cols).step_by(TILE) {
                for i in i0..(i0 + TILE).min(rows) {
                    for j in j0..(j0 + TILE).min(cols) {
                        to[j * rows + i] = from[i * cols + j];
                    }
                }
            }
        }
    }
}

/// Copies a view's elements, in its logical row-major order, into `out`:
/// whole rows at a time when the last axis is contiguous (a slice of a
/// tensor always is), else element by element.
fn copy_view<T: Float>(view: ArrayViewD<'_, T>, out: &mut [T]) {
    if let Some(contiguous) = view.as_slice() {
        out.copy_from_slice(contiguous);
        return;
    }
    let row_len = view.shape().last().copied().unwrap_or(1);
    if row_len == 0 || view.strides().last() != Some(&1) {
        out.iter_mut().zip(view.iter()).for_each(|(o, &v)| *o = v);
        return;
    }
    for (row, to) in view.rows().into_iter().zip(out.chunks_exact_mut(row_len)) {
        match row.as_slice() {
            Some(from) => to.copy_from_slice(from),
            None => to.iter_mut().zip(row.iter()).for_each(|(o, &v)| *o = v),
        }
    }
}
