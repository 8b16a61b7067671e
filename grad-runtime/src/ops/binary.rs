//! Elementwise `+ - * /` with NumPy broadcasting. Each backward rule forms
//! its contribution on the output's shape and sums it back to the operand's
//! shape with `unbroadcast`.

use std::panic::Location;

use ndarray::Dimension;

use crate::backward::GradSink;
use crate::broadcast::{broadcast_shapes, unbroadcast, zip_broadcast};
use crate::error::ErrorKind;
use crate::ops::Op;
use crate::tape::NodeId;
use crate::tensor::Tensor;
use crate::{Float, Tape, Var};

/// `a + b`, broadcasting as NumPy (`[64, 10] + [10]`, `[2, 1, 3] + [4, 1]`).
///
/// Gradient: `g` to both operands, summed over the axes each was broadcast along.
#[track_caller]
pub fn g_add<T: Float>(tp: &mut Tape<T>, a: Var, b: Var) -> Var {
    binary(tp, "g_add", a, b, Op::Add, |x, y| x + y)
}

/// `a - b`, broadcasting as NumPy.
///
/// Gradient: `g` to `a`, `-g` to `b`, each summed back to its own shape.
#[track_caller]
pub fn g_sub<T: Float>(tp: &mut Tape<T>, a: Var, b: Var) -> Var {
    binary(tp, "g_sub", a, b, Op::Sub, |x, y| x - y)
}

/// `a * b` elementwise, broadcasting as NumPy.
///
/// Gradient: `g * b` to `a`, `g * a` to `b`, each summed back to its own shape.
#[track_caller]
pub fn g_mul<T: Float>(tp: &mut Tape<T>, a: Var, b: Var) -> Var {
    binary(tp, "g_mul", a, b, Op::Mul, |x, y| x * y)
}

/// `a / b` elementwise, broadcasting as NumPy.
///
/// Gradient: `g / b` to `a`, `-g * (a / b) / b` to `b`, each summed back to its own shape.
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
    f: impl Fn(T, T) -> T,
) -> Var {
    let location = Location::caller();
    let Some([a, b]) = tp.resolve(name, [a, b], location) else {
        return tp.poisoned_var();
    };
    let Some(shape) = broadcast_shapes(tp.shape(a), tp.shape(b)) else {
        return tp.fail(name, ErrorKind::Broadcast, &[a, b], location);
    };
    let mut out = tp.output(shape);
    let (va, vb) = (tp.value_of(a), tp.value_of(b));
    zip_broadcast((&va.data, va.shape()), (&vb.data, vb.shape()), &mut out.data, out.shape.slice(), f);
    tp.push(op(a, b), out)
}

pub(crate) fn add_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &Tensor<T>, a: NodeId, b: NodeId) {
    for x in [a, b] {
        if sink.wants(x) {
            let contribution = unbroadcast(&g.data, g.shape(), sink.value(x).shape(), sink.pool);
            sink.add(x, contribution);
        }
    }
}

pub(crate) fn sub_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &Tensor<T>, a: NodeId, b: NodeId) {
    add_backward_scaled(sink, g, a, T::one());
    add_backward_scaled(sink, g, b, -T::one());
}

fn add_backward_scaled<T: Float>(sink: &mut GradSink<'_, T>, g: &Tensor<T>, x: NodeId, sign: T) {
    if sink.wants(x) {
        let mut contribution = unbroadcast(&g.data, g.shape(), sink.value(x).shape(), sink.pool);
        if sign != T::one() {
            contribution.iter_mut().for_each(|c| *c *= sign);
        }
        sink.add(x, contribution);
    }
}

pub(crate) fn mul_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &Tensor<T>, a: NodeId, b: NodeId) {
    contribute(sink, g, a, b, |g, other| g * other);
    contribute(sink, g, b, a, |g, other| g * other);
}

pub(crate) fn div_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &Tensor<T>, out: &Tensor<T>, a: NodeId, b: NodeId) {
    contribute(sink, g, a, b, |g, b| g / b);
    if sink.wants(b) {
        // d(a/b)/db = -(a/b)/b: the output already holds a/b.
        let vb = sink.value(b);
        let mut on_output = sink.pool.take(g.len());
        zip_broadcast((&out.data, out.shape()), (&vb.data, vb.shape()), &mut on_output, g.shape(), |y, b| y / b);
        on_output.iter_mut().zip(&g.data).for_each(|(c, &g)| *c = -g * *c);
        let contribution = unbroadcast(&on_output, g.shape(), vb.shape(), sink.pool);
        sink.pool.give(on_output);
        sink.add(b, contribution);
    }
}

/// Adds `unbroadcast(f(g, other))` to `x`'s gradient, where `other` is
/// broadcast to the output's shape.
fn contribute<T: Float>(sink: &mut GradSink<'_, T>, g: &Tensor<T>, x: NodeId, other: NodeId, f: impl Fn(T, T) -> T) {
    if !sink.wants(x) {
        return;
    }
    let vo = sink.value(other);
    let x_shape = sink.value(x).shape();
    let mut on_output = sink.pool.take(g.len());
    zip_broadcast((&g.data, g.shape()), (&vo.data, vo.shape()), &mut on_output, g.shape(), f);
    if x_shape == g.shape() {
        sink.add(x, on_output);
    } else {
        let contribution = unbroadcast(&on_output, g.shape(), x_shape, sink.pool);
        sink.pool.give(on_output);
        sink.add(x, contribution);
    }
}
