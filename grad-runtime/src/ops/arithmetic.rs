//! The arithmetic operators `+ - * /`, elementwise with NumPy broadcasting
//! (`grad!` operators; their scalar forms are `g_adds`/`g_muls` in
//! `unary.rs`). Each backward rule forms its contribution on the output's
//! shape and the sink sums it back to the operand's shape.

use std::panic::Location;

use ndarray::Dimension;

use crate::broadcast::{broadcast_shapes, zip_broadcast};
use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::{Tensor, TensorRef};
use crate::{Float, Tape, Var, parallel, simd};

/// `a + b`, broadcasting as NumPy (`[64, 10] + [10]`, `[2, 1, 3] + [4, 1]`).
///
/// Gradient: `g` to both operands, summed over the axes each was broadcast along.
///
/// ```
/// use grad_runtime::{g_add, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let a = tape.param(array![1.0, 2.0]);
/// let b = tape.param(array![10.0]); // broadcast
/// let y = g_add(&mut tape, a, b);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![11.0, 12.0].into_dyn());
/// assert_eq!(tape.grad(a), array![1.0, 1.0].into_dyn());
/// assert_eq!(tape.grad(b), array![2.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_add<T: Float>(tp: &mut Tape<T>, a: Var, b: Var) -> Var {
    binary(tp, "g_add", a, b, Op::Add, |x, y| x + y)
}

/// `a - b`, broadcasting as NumPy.
///
/// Gradient: `g` to `a`, `-g` to `b`, each summed back to its own shape.
///
/// ```
/// use grad_runtime::{g_sub, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let a = tape.param(array![1.0, 2.0]);
/// let b = tape.param(array![10.0]);
/// let y = g_sub(&mut tape, a, b);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![-9.0, -8.0].into_dyn());
/// assert_eq!(tape.grad(a), array![1.0, 1.0].into_dyn());
/// assert_eq!(tape.grad(b), array![-2.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_sub<T: Float>(tp: &mut Tape<T>, a: Var, b: Var) -> Var {
    binary(tp, "g_sub", a, b, Op::Sub, |x, y| x - y)
}

/// `a * b` elementwise, broadcasting as NumPy.
///
/// Gradient: `g * b` to `a`, `g * a` to `b`, each summed back to its own shape.
///
/// ```
/// use grad_runtime::{g_mul, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let a = tape.param(array![1.0, 2.0]);
/// let b = tape.param(array![3.0, 4.0]);
/// let y = g_mul(&mut tape, a, b);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![3.0, 8.0].into_dyn());
/// assert_eq!(tape.grad(a), array![3.0, 4.0].into_dyn());
/// assert_eq!(tape.grad(b), array![1.0, 2.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_mul<T: Float>(tp: &mut Tape<T>, a: Var, b: Var) -> Var {
    binary(tp, "g_mul", a, b, Op::Mul, |x, y| x * y)
}

/// `a / b` elementwise, broadcasting as NumPy.
///
/// Gradient: `g / b` to `a`, `-g * (a / b) / b` to `b`, each summed back to its own shape.
///
/// ```
/// use grad_runtime::{g_div, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let a = tape.param(array![1.0, 2.0]);
/// let b = tape.param(array![2.0, 4.0]);
/// let y = g_div(&mut tape, a, b);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![0.5, 0.5].into_dyn());
/// assert_eq!(tape.grad(a), array![0.5, 0.25].into_dyn());
/// assert_eq!(tape.grad(b), array![-0.25, -0.125].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_div<T: Float>(tp: &mut Tape<T>, a: Var, b: Var) -> Var {
    binary(tp, "g_div", a, b, Op::Div, |x, y| x / y)
}

#[track_caller]
fn binary<T: Float>(
    tp: &mut Tape<T>,
    name: &'static str,
    a: Var,
    b: Var,
    op: fn(NodeId, NodeId) -> Op<T>,
    f: impl Fn(T, T) -> T + Sync,
) -> Var {
    let location = Location::caller();
    let Some([a, b]) = tp.resolve(name, [a, b], location) else {
        return tp.poisoned_var();
    };
    let Some(shape) = broadcast_shapes(tp.shape(a), tp.shape(b)) else {
        return tp.fail(name, ErrorKind::Broadcast, &[a, b], location);
    };
    let Some(mut out) = tp.output(name, shape, &[a, b], location) else { return tp.poisoned_var() };
    let (va, vb) = (tp.value_of(a), tp.value_of(b));
    zip_broadcast((&va.data, va.shape()), (&vb.data, vb.shape()), &mut out.data, out.shape.slice(), f);
    tp.push(op(a, b), out)
}

pub(crate) fn add_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, a: NodeId, b: NodeId) {
    sink.contribute_summed(a, g.data, g.shape(), false);
    sink.contribute_summed(b, g.data, g.shape(), false);
}

pub(crate) fn sub_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, a: NodeId, b: NodeId) {
    sink.contribute_summed(a, g.data, g.shape(), false);
    sink.contribute_summed(b, g.data, g.shape(), true);
}

pub(crate) fn mul_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, a: NodeId, b: NodeId) {
    let unbroadcast = |x: NodeId| sink.value(x).shape() == g.shape();
    if a != b && sink.wants(a) && sink.wants(b) && unbroadcast(a) && unbroadcast(b) {
        // Both gradients in one pass, which reads `g` once instead of twice.
        let (va, vb) = (&sink.value(a).data, &sink.value(b).data);
        let (mut da, mut db) = (sink.scratch_for(a, g.len()), sink.scratch_for(b, g.len()));
        parallel::for_each_chunk_of_two(&mut da, &mut db, |offset, da, db| {
            let n = da.len();
            products(&g.data[offset..offset + n], &va[offset..offset + n], &vb[offset..offset + n], da, db);
        });
        sink.add(a, da);
        sink.add(b, db);
        return;
    }
    times_other(sink, g, a, b, |g, other| g * other);
    times_other(sink, g, b, a, |g, other| g * other);
}

simd::multiversion! {
    /// `da = g * b` and `db = g * a`, element by element.
    fn products[T: Float][T](g: &[T], a: &[T], b: &[T], da: &mut [T], db: &mut [T]) {
        for ((((da, db), &g), &a), &b) in da.iter_mut().zip(db.iter_mut()).zip(g).zip(a).zip(b) {
            *da = g * b;
            *db = g * a;
        }
    }
}

pub(crate) fn div_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    out: &Tensor<T>,
    a: NodeId,
    b: NodeId,
) {
    times_other(sink, g, a, b, |g, b| g / b);
    // d(a/b)/db = -(a/b)/b: the output already holds a/b.
    let vb = sink.value(b);
    sink.contribute_broadcast(b, g.shape(), |c| {
        zip_broadcast((&out.data, out.shape()), (&vb.data, vb.shape()), c, g.shape(), |y, b| y / b);
        c.iter_mut().zip(g.data).for_each(|(c, &g)| *c = -g * *c);
    });
}

/// Adds `f(g, other)` to `x`'s gradient, where `other` is broadcast to the
/// output's shape, summed back to `x`'s shape.
fn times_other<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    x: NodeId,
    other: NodeId,
    f: impl Fn(T, T) -> T + Sync,
) {
    let vo = sink.value(other);
    sink.contribute_broadcast(x, g.shape(), |c| {
        zip_broadcast((g.data, g.shape()), (&vo.data, vo.shape()), c, g.shape(), f)
    });
}
