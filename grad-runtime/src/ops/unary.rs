//! Elementwise functions of one tensor. Each is a small type with its value
//! `f(x)` and its derivative `df(x, y)` side by side (`y = f(x)` is passed
//! too, so sigmoid and tanh reuse their output); one generic loop runs each
//! forward and one runs each backward.

use std::panic::Location;

use crate::backward::GradSink;
use crate::ops::Op;
use crate::tape::NodeId;
use crate::tensor::Tensor;
use crate::{Float, Tape, Var};

/// An elementwise function and its derivative.
trait Elementwise<T> {
    fn f(&self, x: T) -> T;
    /// `dy/dx` at `x`, where `y = f(x)`.
    fn df(&self, x: T, y: T) -> T;
}

struct Neg;
impl<T: Float> Elementwise<T> for Neg {
    fn f(&self, x: T) -> T {
        -x
    }
    fn df(&self, _: T, _: T) -> T {
        -T::one()
    }
}

struct AddScalar<T>(T);
impl<T: Float> Elementwise<T> for AddScalar<T> {
    fn f(&self, x: T) -> T {
        x + self.0
    }
    fn df(&self, _: T, _: T) -> T {
        T::one()
    }
}

struct MulScalar<T>(T);
impl<T: Float> Elementwise<T> for MulScalar<T> {
    fn f(&self, x: T) -> T {
        x * self.0
    }
    fn df(&self, _: T, _: T) -> T {
        self.0
    }
}

struct Relu;
impl<T: Float> Elementwise<T> for Relu {
    fn f(&self, x: T) -> T {
        if x > T::zero() { x } else { T::zero() }
    }
    /// 0 at the kink, as PyTorch.
    fn df(&self, x: T, _: T) -> T {
        if x > T::zero() { T::one() } else { T::zero() }
    }
}

struct Sigmoid;
impl<T: Float> Elementwise<T> for Sigmoid {
    /// Never forms `exp` of a large positive number, so never overflows.
    fn f(&self, x: T) -> T {
        if x >= T::zero() {
            T::one() / (T::one() + (-x).exp())
        } else {
            let e = x.exp();
            e / (T::one() + e)
        }
    }
    fn df(&self, _: T, y: T) -> T {
        y * (T::one() - y)
    }
}

struct Tanh;
impl<T: Float> Elementwise<T> for Tanh {
    fn f(&self, x: T) -> T {
        x.tanh()
    }
    fn df(&self, _: T, y: T) -> T {
        T::one() - y * y
    }
}

struct Exp;
impl<T: Float> Elementwise<T> for Exp {
    fn f(&self, x: T) -> T {
        x.exp()
    }
    fn df(&self, _: T, y: T) -> T {
        y
    }
}

struct Log;
impl<T: Float> Elementwise<T> for Log {
    fn f(&self, x: T) -> T {
        x.ln()
    }
    fn df(&self, x: T, _: T) -> T {
        T::one() / x
    }
}

struct Sqrt;
impl<T: Float> Elementwise<T> for Sqrt {
    fn f(&self, x: T) -> T {
        x.sqrt()
    }
    fn df(&self, _: T, y: T) -> T {
        T::one() / (y + y)
    }
}

/// Which elementwise function a node applied (with its scalar, if any).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Unary<T> {
    Neg,
    AddScalar(T),
    MulScalar(T),
    Relu,
    Sigmoid,
    Tanh,
    Exp,
    Log,
    Sqrt,
}

/// Runs `$body` with `$f` bound to the function type of `$unary`, so each
/// loop is compiled once per function instead of matching per element.
macro_rules! with_function {
    ($unary:expr, $f:ident => $body:expr) => {
        match $unary {
            Unary::Neg => {
                let $f = Neg;
                $body
            }
            Unary::AddScalar(s) => {
                let $f = AddScalar(s);
                $body
            }
            Unary::MulScalar(s) => {
                let $f = MulScalar(s);
                $body
            }
            Unary::Relu => {
                let $f = Relu;
                $body
            }
            Unary::Sigmoid => {
                let $f = Sigmoid;
                $body
            }
            Unary::Tanh => {
                let $f = Tanh;
                $body
            }
            Unary::Exp => {
                let $f = Exp;
                $body
            }
            Unary::Log => {
                let $f = Log;
                $body
            }
            Unary::Sqrt => {
                let $f = Sqrt;
                $body
            }
        }
    };
}

fn forward<T: Float>(f: impl Elementwise<T>, x: &[T], out: &mut [T]) {
    for (o, &x) in out.iter_mut().zip(x) {
        *o = f.f(x);
    }
}

fn gradient<T: Float>(f: impl Elementwise<T>, g: &[T], x: &[T], y: &[T], out: &mut [T]) {
    for (((o, &g), &x), &y) in out.iter_mut().zip(g).zip(x).zip(y) {
        *o = g * f.df(x, y);
    }
}

/// `-x`. Gradient: `-g`.
#[track_caller]
pub fn g_neg<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, "g_neg", x, Unary::Neg)
}

/// `x + s` for a scalar `s`. Gradient: `g`.
#[track_caller]
pub fn g_adds<T: Float>(tp: &mut Tape<T>, x: Var, s: T) -> Var {
    unary(tp, "g_adds", x, Unary::AddScalar(s))
}

/// `x * s` for a scalar `s`. Gradient: `g * s`.
#[track_caller]
pub fn g_muls<T: Float>(tp: &mut Tape<T>, x: Var, s: T) -> Var {
    unary(tp, "g_muls", x, Unary::MulScalar(s))
}

/// `max(x, 0)`. Gradient: `g` where `x > 0`, else 0 (0 at the kink, as PyTorch).
#[track_caller]
pub fn g_relu<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, "g_relu", x, Unary::Relu)
}

/// `1 / (1 + exp(-x))`, computed without overflow. Gradient: `g * y * (1 - y)`.
#[track_caller]
pub fn g_sigmoid<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, "g_sigmoid", x, Unary::Sigmoid)
}

/// `tanh(x)`. Gradient: `g * (1 - y²)`.
#[track_caller]
pub fn g_tanh<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, "g_tanh", x, Unary::Tanh)
}

/// `exp(x)`. Gradient: `g * y`.
#[track_caller]
pub fn g_exp<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, "g_exp", x, Unary::Exp)
}

/// Natural logarithm (NaN below 0, `-inf` at 0, as IEEE). Gradient: `g / x`.
#[track_caller]
pub fn g_log<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, "g_log", x, Unary::Log)
}

/// Square root (NaN below 0). Gradient: `g / (2 y)`.
#[track_caller]
pub fn g_sqrt<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, "g_sqrt", x, Unary::Sqrt)
}

#[track_caller]
fn unary<T: Float>(tp: &mut Tape<T>, name: &'static str, x: Var, function: Unary<T>) -> Var {
    let Some([x]) = tp.resolve(name, [x], Location::caller()) else {
        return tp.poisoned_var();
    };
    let mut out = tp.output(tp.value_of(x).shape.clone());
    with_function!(function, f => forward(f, &tp.value_of(x).data, &mut out.data));
    tp.push(Op::Unary(x, function), out)
}

pub(crate) fn backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &Tensor<T>,
    out: &Tensor<T>,
    x: NodeId,
    function: Unary<T>,
) {
    if !sink.wants(x) {
        return;
    }
    let mut contribution = sink.pool.take(g.len());
    let input = &sink.value(x).data;
    with_function!(function, f => gradient(f, &g.data, input, &out.data, &mut contribution));
    sink.add(x, contribution);
}
