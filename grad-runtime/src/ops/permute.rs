//! `permute`: the axes of a tensor in a new order, in one copy.

use std::panic::Location;

use ndarray::IxDyn;

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var, parallel};

/// Most axes a permutation may have (the output's shape and strides are
/// then held inline: recording one allocates nothing).
const MAX_AXES: usize = 8;

/// `x` with its axes reordered: axis `d` of the output is axis `axes[d]`
/// of `x` (PyTorch's `x.permute(*axes)`, NumPy's `transpose(x, axes)`).
/// `axes` holds each of `0..x.ndim()` once. One copy: moving a sequence's
/// heads to the batch dim is `permute(x, [0, 2, 1, 3])`, not a transpose,
/// a reshape and another transpose.
///
/// Gradient: `g` permuted back by the inverse permutation.
///
/// ```
/// use grad_runtime::{g_permute, g_sum, ndarray::Array3, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(Array3::from_shape_fn((2, 3, 4), |(i, j, k)| (100 * i + 10 * j + k) as f64));
/// let y = g_permute(&mut tape, x, &[2, 0, 1]);
/// assert_eq!(tape.value(y).shape(), &[4, 2, 3]);
/// assert_eq!(tape.value(y)[[3, 1, 2]], 123.0); // x[1, 2, 3]
/// let loss = g_sum(&mut tape, y);
/// tape.backward(loss)?;
/// assert!(tape.grad(x).iter().all(|&g| g == 1.0));
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_permute<T: Float>(tp: &mut Tape<T>, x: Var, axes: &[usize]) -> Var {
    const NAME: &str = "g_permute";
    let location = Location::caller();
    let Some([x]) = tp.resolve(NAME, [x], location) else {
        return tp.poisoned_var();
    };
    let ndim = tp.shape(x).len();
    if let Some(kind) = check_axes(axes, ndim) {
        return tp.fail(NAME, kind, &[x], location);
    }
    let shape = permuted(tp.shape(x), axes);
    let Some(mut out) = tp.output(NAME, shape, &[x], location) else {
        return tp.poisoned_var();
    };
    let value = tp.value_of(x);
    copy_permuted(value.shape(), &value.data, axes, &mut out.data);
    let mut order = [0u8; MAX_AXES];
    axes.iter().zip(&mut order).for_each(|(&a, o)| *o = a as u8);
    tp.push(Op::Permute { x, order, ndim: ndim as u8 }, out)
}

/// Why `axes` is no permutation of `0..ndim`, if it is not.
fn check_axes(axes: &[usize], ndim: usize) -> Option<ErrorKind> {
    if axes.len() != ndim || ndim > MAX_AXES {
        let expected = "one entry per axis of x (at most 8), each axis once";
        return Some(ErrorKind::InvalidArgument { name: "axes (their count)", value: axes.len() as f64, expected });
    }
    let mut seen = [false; MAX_AXES];
    for &a in axes {
        if a >= ndim || std::mem::replace(&mut seen[a], true) {
            let expected = "each axis of x once: a permutation of 0..ndim";
            return Some(ErrorKind::InvalidArgument { name: "axes", value: a as f64, expected });
        }
    }
    None
}

/// `shape` with its dims in `axes`' order.
fn permuted(shape: &[usize], axes: &[usize]) -> IxDyn {
    let mut out = IxDyn::zeros(axes.len());
    for (d, &a) in axes.iter().enumerate() {
        out[d] = shape[a];
    }
    out
}

/// `out` (row-major, the permuted shape) = `x` (row-major, `shape`) read
/// through permuted strides; the last output axis is walked innermost.
fn copy_permuted<T: Float>(shape: &[usize], x: &[T], axes: &[usize], out: &mut [T]) {
    let n = axes.len();
    if out.is_empty() {
        return;
    }
    let mut strides = [0usize; MAX_AXES];
    let mut stride = 1;
    for d in (0..n).rev() {
        strides[d] = stride;
        stride *= shape[d];
    }
    let (mut dims, mut steps) = ([1usize; MAX_AXES], [0usize; MAX_AXES]);
    for (d, &a) in axes.iter().enumerate() {
        dims[d] = shape[a];
        steps[d] = strides[a];
    }
    if n == 0 {
        out[0] = x[0];
        return;
    }
    let (inner, inner_step) = (dims[n - 1], steps[n - 1]);
    if inner == 0 {
        return;
    }
    // Rows of the output are independent: groups of them on several
    // threads, each starting its odometer at its first row.
    parallel::for_each_rows(out, inner, |first, rows| {
        let (mut index, mut base) = ([0usize; MAX_AXES], 0);
        let mut rest = first;
        for d in (0..n - 1).rev() {
            index[d] = rest % dims[d];
            rest /= dims[d];
            base += index[d] * steps[d];
        }
        for row in rows.chunks_exact_mut(inner) {
            if inner_step == 1 {
                row.copy_from_slice(&x[base..base + inner]);
            } else {
                for (k, o) in row.iter_mut().enumerate() {
                    *o = x[base + k * inner_step];
                }
            }
            // The next row: an odometer over the outer output axes.
            for d in (0..n - 1).rev() {
                index[d] += 1;
                base += steps[d];
                if index[d] < dims[d] {
                    break;
                }
                base -= steps[d] * dims[d];
                index[d] = 0;
            }
        }
    });
}

/// The inverse of the first `ndim` entries of `order`.
pub(crate) fn inverse(order: &[u8; MAX_AXES], ndim: u8) -> [usize; MAX_AXES] {
    let mut inverse = [0usize; MAX_AXES];
    for (d, &a) in order[..ndim as usize].iter().enumerate() {
        inverse[a as usize] = d;
    }
    inverse
}

pub(crate) fn permute_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    x: NodeId,
    order: &[u8; MAX_AXES],
    ndim: u8,
) {
    let back = inverse(order, ndim);
    sink.contribute(x, |c| copy_permuted(g.shape(), g.data, &back[..ndim as usize], c));
}
