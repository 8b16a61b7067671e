//! Choosing elements by a boolean mask: `where` (from one tensor or the
//! other) and `masked_fill` (a number where the mask is set). The mask is
//! an `ndarray` array of `bool`, not a tensor: it is data, never
//! differentiated. The op copies it onto the tape as a constant node of
//! 0s and 1s (as `g_dropout` does its mask) that its backward reads.

use std::panic::Location;

use ndarray::{ArrayBase, Data, Dimension, IxDyn};

use crate::broadcast::{broadcast_shapes, broadcast_strides, for_each_offset};
use crate::error::{ErrorKind, GradError};
use crate::ops::Op;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::{Tensor, TensorRef};
use crate::{Float, Tape, Var};

/// `a` where `mask` is `true`, `b` where it is `false` (`torch.where(mask,
/// a, b)`): `mask`, `a` and `b` broadcast together as NumPy does, and the
/// output has their broadcast shape. `mask` is any `ndarray` array of
/// `bool` (`Array2<bool>`, `ArrayD<bool>`, a view); shapes that do not
/// broadcast are an error naming the mask's, `a`'s and `b`'s shapes, in
/// that order. A NaN or infinity in the branch not taken never reaches the
/// output or the gradient.
///
/// The mask is copied onto the tape as a constant node (listed before the
/// op's own node in the tape's `Debug`).
///
/// Gradient: `g` where the mask is set to `a`, where it is not to `b`
/// (0 elsewhere), each summed back to its operand's shape.
///
/// ```
/// use grad_runtime::{g_sum, g_where, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f64>::new();
/// let a = tape.param(array![[1.0, 2.0], [3.0, 4.0]]);
/// let b = tape.param(array![-1.0, -2.0]);
/// let mask = array![[true, false], [false, true]];
/// let y = g_where(&mut tape, &mask, a, b);
/// assert_eq!(tape.value(y), array![[1.0, -2.0], [-1.0, 4.0]].into_dyn());
/// let loss = g_sum(&mut tape, y);
/// tape.backward(loss)?;
/// assert_eq!(tape.grad(a), array![[1.0, 0.0], [0.0, 1.0]].into_dyn());
/// assert_eq!(tape.grad(b), array![1.0, 1.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_where<T: Float, S: Data<Elem = bool>, D: Dimension>(
    tp: &mut Tape<T>,
    mask: &ArrayBase<S, D>,
    a: Var,
    b: Var,
) -> Var {
    const NAME: &str = "g_where";
    let location = Location::caller();
    let Some([a, b]) = tp.resolve(NAME, [a, b], location) else {
        return tp.poisoned_var();
    };
    let shape = broadcast_shapes(tp.shape(a), tp.shape(b)).and_then(|ab| broadcast_shapes(mask.shape(), ab.slice()));
    let Some(shape) = shape else {
        let shapes = vec![mask.shape().to_vec(), tp.shape(a).to_vec(), tp.shape(b).to_vec()];
        tp.record(GradError::new(NAME, ErrorKind::Broadcast, shapes, location));
        return tp.poisoned_var();
    };
    select(tp, NAME, mask, shape, Branch::Node(a), b, location)
}

/// `x` with `value` written wherever `mask` is `true`: the attention mask
/// of a causal model is `masked_fill(scores, &future, f32::NEG_INFINITY)`
/// before a softmax. `mask` is an `ndarray` array of `bool` that
/// broadcasts to `x`'s shape (the output's); any other mask shape is an
/// error naming both shapes. Sugar for [`g_where`] with a constant `value`.
///
/// Gradient: `g` where the mask is not set, 0 where it is.
///
/// ```
/// use grad_runtime::{g_masked_fill, g_softmax, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f32>::new();
/// let scores = tape.param(array![[0.5, 0.3], [0.2, 0.7]]);
/// let future = array![[false, true], [false, false]];
/// let masked = g_masked_fill(&mut tape, scores, &future, f32::NEG_INFINITY);
/// let attention = g_softmax(&mut tape, masked, -1);
/// assert_eq!(tape.value(attention)[[0, 1]], 0.0);
/// assert_eq!(tape.value(attention)[[0, 0]], 1.0);
/// ```
#[track_caller]
pub fn g_masked_fill<T: Float, S: Data<Elem = bool>, D: Dimension>(
    tp: &mut Tape<T>,
    x: Var,
    mask: &ArrayBase<S, D>,
    value: T,
) -> Var {
    const NAME: &str = "g_masked_fill";
    let location = Location::caller();
    let Some([x]) = tp.resolve(NAME, [x], location) else {
        return tp.poisoned_var();
    };
    let shape = tp.value_of(x).shape.clone();
    if broadcast_shapes(mask.shape(), shape.slice()).as_ref() != Some(&shape) {
        let shapes = vec![mask.shape().to_vec(), shape.slice().to_vec()];
        tp.record(GradError::new(NAME, ErrorKind::Broadcast, shapes, location));
        return tp.poisoned_var();
    }
    select(tp, NAME, mask, shape, Branch::Fill(value), x, location)
}

/// The branch taken where the mask is set: a node, or a number (which
/// becomes a constant node once nothing can fail).
enum Branch<T> {
    Node(NodeId),
    Fill(T),
}

/// Shared by `where` and `masked_fill` once the shapes are checked: takes
/// every buffer first (so a refused allocation appends no node), then
/// pushes the mask, the fill value if any, and the op.
fn select<T: Float, S: Data<Elem = bool>, D: Dimension>(
    tp: &mut Tape<T>,
    name: &'static str,
    mask: &ArrayBase<S, D>,
    shape: IxDyn,
    a: Branch<T>,
    b: NodeId,
    location: &'static Location<'static>,
) -> Var {
    let inputs: Vec<NodeId> = match a {
        Branch::Node(a) => vec![a, b],
        Branch::Fill(_) => vec![b],
    };
    let Some(mut mask_value) = tp.output(name, IxDyn(mask.shape()), &inputs, location) else {
        return tp.poisoned_var();
    };
    let fill = match a {
        Branch::Node(_) => None,
        Branch::Fill(value) => {
            let Some(mut fill) = tp.output(name, IxDyn(&[]), &inputs, location) else {
                tp.recycle(mask_value.data);
                return tp.poisoned_var();
            };
            fill.data[0] = value;
            Some(fill)
        }
    };
    let Some(mut out) = tp.output(name, shape, &inputs, location) else {
        tp.recycle(mask_value.data);
        if let Some(fill) = fill {
            tp.recycle(fill.data);
        }
        return tp.poisoned_var();
    };
    for (m, &set) in mask_value.data.iter_mut().zip(mask.iter()) {
        *m = if set { T::one() } else { T::zero() };
    }
    // Pushes cannot fail here but in anomaly mode, which refuses a fill of
    // `-inf` like any other infinity (and then has poisoned the tape).
    let a = match (a, fill) {
        (Branch::Node(a), _) => Ok(a),
        (Branch::Fill(_), Some(fill)) => {
            let fill = tp.push(Op::Constant, fill);
            tp.check(fill)
        }
        (Branch::Fill(_), None) => unreachable!("a fill value has its buffer"),
    };
    let mask = tp.push(Op::Constant, mask_value);
    let (Ok(a), Ok(mask)) = (a, tp.check(mask)) else {
        tp.recycle(out.data);
        return tp.poisoned_var();
    };
    let shape = out.shape.clone();
    let (vm, va, vb) = (tp.value_of(mask), tp.value_of(a), tp.value_of(b));
    walk_select(vm, va, vb, shape.slice(), |p, (set, i, j)| out.data[p] = if set { va.data[i] } else { vb.data[j] });
    tp.push(Op::Where { mask, a, b }, out)
}

pub(crate) fn where_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    mask: NodeId,
    a: NodeId,
    b: NodeId,
) {
    let (mask_value, va, vb) = (sink.value(mask), sink.value(a), sink.value(b));
    for (x, taken) in [(a, true), (b, false)] {
        sink.contribute_broadcast(x, g.shape(), |c| {
            walk_select(mask_value, va, vb, g.shape(), |p, (set, ..)| {
                c[p] = if set == taken { g.data[p] } else { T::zero() }
            })
        });
    }
}

/// Calls `f(p, [set, i, j])` for every output position `p` of `shape`:
/// whether the mask is set there, and the offsets in `a` and `b` it reads.
fn walk_select<T: Float>(
    mask: &Tensor<T>,
    a: &Tensor<T>,
    b: &Tensor<T>,
    shape: &[usize],
    mut f: impl FnMut(usize, (bool, usize, usize)),
) {
    let strides = [mask.shape(), a.shape(), b.shape()].map(|s| broadcast_strides(s, shape));
    let [sm, sa, sb] = &strides;
    for_each_offset(shape, [sm.slice(), sa.slice(), sb.slice()], |p, [m, i, j]| {
        f(p, (mask.data[m] != T::zero(), i, j))
    });
}
