//! Elementwise functions of one tensor. Each is a small type with its value
//! `f(x)` and its derivative `df(x, y)` side by side (`y = f(x)` is passed
//! too, so sigmoid and tanh reuse their output); one generic loop runs each
//! forward and one runs each backward.

use std::panic::Location;

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::{Tensor, TensorRef};
use crate::{Float, Tape, Var, parallel, simd};

/// An elementwise function and its derivative. `Sync` so that one value
/// serves every thread of a large pass.
pub(crate) trait Elementwise<T>: Sync {
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

pub(crate) struct Relu;
impl<T: Float> Elementwise<T> for Relu {
    fn f(&self, x: T) -> T {
        if x > T::zero() { x } else { T::zero() }
    }
    /// 0 at the kink, as PyTorch.
    fn df(&self, x: T, _: T) -> T {
        if x > T::zero() { T::one() } else { T::zero() }
    }
}

pub(crate) struct Sigmoid;
impl<T: Float> Elementwise<T> for Sigmoid {
    /// Never forms `exp` of a large positive number, so never overflows.
    fn f(&self, x: T) -> T {
        x.tape_sigmoid()
    }
    fn df(&self, _: T, y: T) -> T {
        y * (T::one() - y)
    }
}

pub(crate) struct Tanh;
impl<T: Float> Elementwise<T> for Tanh {
    fn f(&self, x: T) -> T {
        x.tape_tanh()
    }
    fn df(&self, _: T, y: T) -> T {
        T::one() - y * y
    }
}

pub(crate) struct Exp;
impl<T: Float> Elementwise<T> for Exp {
    fn f(&self, x: T) -> T {
        x.tape_exp()
    }
    fn df(&self, _: T, y: T) -> T {
        y
    }
}

pub(crate) struct Log;
impl<T: Float> Elementwise<T> for Log {
    fn f(&self, x: T) -> T {
        x.ln()
    }
    fn df(&self, x: T, _: T) -> T {
        T::one() / x
    }
}

pub(crate) struct Sqrt;
impl<T: Float> Elementwise<T> for Sqrt {
    fn f(&self, x: T) -> T {
        x.sqrt()
    }
    fn df(&self, _: T, y: T) -> T {
        T::one() / (y + y)
    }
}

pub(crate) struct Pow<T>(pub(crate) T);
impl<T: Float> Elementwise<T> for Pow<T> {
    fn f(&self, x: T) -> T {
        x.powf(self.0)
    }
    fn df(&self, x: T, _: T) -> T {
        self.0 * x.powf(self.0 - T::one())
    }
}

pub(crate) struct Abs;
impl<T: Float> Elementwise<T> for Abs {
    fn f(&self, x: T) -> T {
        x.abs()
    }
    /// `sign(x)`, 0 at 0 (as PyTorch).
    fn df(&self, x: T, _: T) -> T {
        if x > T::zero() {
            T::one()
        } else if x < T::zero() {
            -T::one()
        } else {
            T::zero()
        }
    }
}

pub(crate) struct LeakyRelu<T>(pub(crate) T);
impl<T: Float> Elementwise<T> for LeakyRelu<T> {
    fn f(&self, x: T) -> T {
        if x > T::zero() { x } else { x * self.0 }
    }
    /// The slope at and below 0 (as PyTorch).
    fn df(&self, x: T, _: T) -> T {
        if x > T::zero() { T::one() } else { self.0 }
    }
}

/// GELU's tanh approximation (PyTorch's `gelu(x, approximate="tanh")`):
/// `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`. Its functions (and
/// `Silu`'s and `Softplus`'s) are always inlined: left to the compiler,
/// `df` stayed a call per element and the backward loop was not
/// vectorised.
pub(crate) struct Gelu;
impl Gelu {
    pub(crate) const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
    pub(crate) const CUBIC: f64 = 0.044_715;
}
impl<T: Float> Elementwise<T> for Gelu {
    #[inline(always)]
    fn f(&self, x: T) -> T {
        let (k, c) = (T::from_f64(Self::SQRT_2_OVER_PI), T::from_f64(Self::CUBIC));
        let half = T::from_f64(0.5);
        half * x * (T::one() + (k * (x + c * x * x * x)).tape_tanh())
    }
    #[inline(always)]
    fn df(&self, x: T, _: T) -> T {
        let (k, c) = (T::from_f64(Self::SQRT_2_OVER_PI), T::from_f64(Self::CUBIC));
        let half = T::from_f64(0.5);
        let t = (k * (x + c * x * x * x)).tape_tanh();
        let inner = k * (T::one() + T::from_f64(3.0) * c * x * x);
        half * (T::one() + t) + half * x * (T::one() - t * t) * inner
    }
}

/// `x · sigmoid(x)` (also called swish).
pub(crate) struct Silu;
impl<T: Float> Elementwise<T> for Silu {
    #[inline(always)]
    fn f(&self, x: T) -> T {
        x * Sigmoid.f(x)
    }
    #[inline(always)]
    fn df(&self, x: T, _: T) -> T {
        let s = Sigmoid.f(x);
        s * (T::one() + x * (T::one() - s))
    }
}

/// `log(1 + exp(x))`, as `max(x, 0) + log1p(exp(-|x|))`: exact for large
/// |x| without PyTorch's switch to `x` above a threshold of 20.
pub(crate) struct Softplus;
impl<T: Float> Elementwise<T> for Softplus {
    #[inline(always)]
    fn f(&self, x: T) -> T {
        x.max(T::zero()) + (-x.abs()).tape_exp().ln_1p()
    }
    #[inline(always)]
    fn df(&self, x: T, _: T) -> T {
        Sigmoid.f(x)
    }
}

pub(crate) struct Clamp<T>(pub(crate) T, pub(crate) T);
impl<T: Float> Elementwise<T> for Clamp<T> {
    fn f(&self, x: T) -> T {
        x.max(self.0).min(self.1)
    }
    /// 1 inside `[lo, hi]`, bounds included (as PyTorch), 0 outside.
    fn df(&self, x: T, _: T) -> T {
        if x >= self.0 && x <= self.1 { T::one() } else { T::zero() }
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
    Pow(T),
    Abs,
    LeakyRelu(T),
    Gelu,
    Silu,
    Softplus,
    Clamp(T, T),
}

impl<T> Unary<T> {
    /// The public function that applies it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Unary::Neg => "g_neg",
            Unary::AddScalar(_) => "g_adds",
            Unary::MulScalar(_) => "g_muls",
            Unary::Relu => "g_relu",
            Unary::Sigmoid => "g_sigmoid",
            Unary::Tanh => "g_tanh",
            Unary::Exp => "g_exp",
            Unary::Log => "g_log",
            Unary::Sqrt => "g_sqrt",
            Unary::Pow(_) => "g_pow",
            Unary::Abs => "g_abs",
            Unary::LeakyRelu(_) => "g_leaky_relu",
            Unary::Gelu => "g_gelu",
            Unary::Silu => "g_silu",
            Unary::Softplus => "g_softplus",
            Unary::Clamp(..) => "g_clamp",
        }
    }
}

/// Runs `$body` with `$f` bound to the function type of `$unary`, so each
/// loop is compiled once per function instead of matching per element.
#[rustfmt::skip]
macro_rules! with_function {
    ($unary:expr, $f:ident => $body:expr) => {
        match $unary {
            Unary::Neg => { let $f = Neg; $body }
            Unary::AddScalar(s) => { let $f = AddScalar(s); $body }
            Unary::MulScalar(s) => { let $f = MulScalar(s); $body }
            Unary::Relu => { let $f = Relu; $body }
            Unary::Sigmoid => { let $f = Sigmoid; $body }
            Unary::Tanh => { let $f = Tanh; $body }
            Unary::Exp => { let $f = Exp; $body }
            Unary::Log => { let $f = Log; $body }
            Unary::Sqrt => { let $f = Sqrt; $body }
            Unary::Pow(p) => { let $f = Pow(p); $body }
            Unary::Abs => { let $f = Abs; $body }
            Unary::LeakyRelu(slope) => { let $f = LeakyRelu(slope); $body }
            Unary::Gelu => { let $f = Gelu; $body }
            Unary::Silu => { let $f = Silu; $body }
            Unary::Softplus => { let $f = Softplus; $body }
            Unary::Clamp(lo, hi) => { let $f = Clamp(lo, hi); $body }
        }
    };
}

impl<T: Float> Unary<T> {
    /// The function's derivative at `x`, as the backward rule computes it.
    pub(crate) fn df_at(self, x: T) -> T {
        with_function!(self, f => f.df(x, f.f(x)))
    }
}

fn forward<T: Float>(f: impl Elementwise<T>, x: &[T], out: &mut [T]) {
    parallel::for_each_chunk(out, |offset, out| forward_chunk(&f, &x[offset..], out));
}

simd::multiversion! {
    fn forward_chunk[T: Float, F: Elementwise<T>][T, F](f: &F, x: &[T], out: &mut [T]) {
        for (o, &x) in out.iter_mut().zip(x) {
            *o = f.f(x);
        }
    }
}

/// `out = g * f'(x, y)`, or `out += g * f'(x, y)` when `accumulate`; a
/// short run whose gradient holds subnormal numbers in whole vectors
/// ([`simd::padded`]), which take fewer microcode assists than the half
/// vectors of the loops' remainder.
fn gradient<T: Float>(f: impl Elementwise<T>, g: &[T], x: &[T], y: &[T], out: &mut [T], accumulate: bool) {
    let chunk = |[g, x, y]: [&[T]; 3], out: &mut [T]| {
        if accumulate { gradient_add_chunk(&f, g, x, y, out) } else { gradient_chunk(&f, g, x, y, out) }
    };
    if out.len() < simd::WIDE && simd::has_subnormal(g) {
        return simd::padded([g, x, y], out, chunk);
    }
    parallel::for_each_chunk(out, |offset, out| chunk([&g[offset..], &x[offset..], &y[offset..]], out));
}

simd::multiversion! {
    fn gradient_chunk[T: Float, F: Elementwise<T>][T, F](f: &F, g: &[T], x: &[T], y: &[T], out: &mut [T]) {
        for (((o, &g), &x), &y) in out.iter_mut().zip(g).zip(x).zip(y) {
            *o = g * f.df(x, y);
        }
    }
}

simd::multiversion! {
    fn gradient_add_chunk[T: Float, F: Elementwise<T>][T, F](f: &F, g: &[T], x: &[T], y: &[T], out: &mut [T]) {
        for (((o, &g), &x), &y) in out.iter_mut().zip(g).zip(x).zip(y) {
            *o += g * f.df(x, y);
        }
    }
}

/// `-x`. Gradient: `-g`.
///
/// ```
/// use grad_runtime::{g_neg, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![1.0, -2.0]);
/// let y = g_neg(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![-1.0, 2.0].into_dyn());
/// assert_eq!(tape.grad(x), array![-1.0, -1.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_neg<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, x, Unary::Neg)
}

/// `x + s` for a scalar `s`. Gradient: `g`.
///
/// ```
/// use grad_runtime::{g_adds, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![1.0, -2.0]);
/// let y = g_adds(&mut tape, x, 0.5);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![1.5, -1.5].into_dyn());
/// assert_eq!(tape.grad(x), array![1.0, 1.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_adds<T: Float>(tp: &mut Tape<T>, x: Var, s: T) -> Var {
    unary(tp, x, Unary::AddScalar(s))
}

/// `x * s` for a scalar `s`. Gradient: `g * s`.
///
/// ```
/// use grad_runtime::{g_muls, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![1.0, -2.0]);
/// let y = g_muls(&mut tape, x, 3.0);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![3.0, -6.0].into_dyn());
/// assert_eq!(tape.grad(x), array![3.0, 3.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_muls<T: Float>(tp: &mut Tape<T>, x: Var, s: T) -> Var {
    unary(tp, x, Unary::MulScalar(s))
}

/// `max(x, 0)`. Gradient: `g` where `x > 0`, else 0 (0 at the kink, as PyTorch).
///
/// ```
/// use grad_runtime::{g_relu, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![-1.0, 2.0]);
/// let y = g_relu(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![0.0, 2.0].into_dyn());
/// assert_eq!(tape.grad(x), array![0.0, 1.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_relu<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, x, Unary::Relu)
}

/// `1 / (1 + exp(-x))`, computed without overflow. Gradient: `g * y * (1 - y)`.
///
/// ```
/// use grad_runtime::{g_sigmoid, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![0.0]);
/// let y = g_sigmoid(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![0.5].into_dyn());
/// assert_eq!(tape.grad(x), array![0.25].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_sigmoid<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, x, Unary::Sigmoid)
}

/// `tanh(x)`. Gradient: `g * (1 - y²)`.
///
/// ```
/// use grad_runtime::{g_tanh, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![0.0]);
/// let y = g_tanh(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![0.0].into_dyn());
/// assert_eq!(tape.grad(x), array![1.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_tanh<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, x, Unary::Tanh)
}

/// `exp(x)`. Gradient: `g * y`.
///
/// ```
/// use grad_runtime::{g_exp, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![0.0]);
/// let y = g_exp(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![1.0].into_dyn());
/// assert_eq!(tape.grad(x), array![1.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_exp<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, x, Unary::Exp)
}

/// Natural logarithm (NaN below 0, `-inf` at 0, as IEEE). Gradient: `g / x`.
///
/// ```
/// use grad_runtime::{g_log, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![1.0, 4.0]);
/// let y = g_log(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![0.0, 4f64.ln()].into_dyn());
/// assert_eq!(tape.grad(x), array![1.0, 0.25].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_log<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, x, Unary::Log)
}

/// Square root (NaN below 0). Gradient: `g / (2 y)`.
///
/// ```
/// use grad_runtime::{g_sqrt, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![4.0]);
/// let y = g_sqrt(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![2.0].into_dyn());
/// assert_eq!(tape.grad(x), array![0.25].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_sqrt<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, x, Unary::Sqrt)
}

/// `x^p` for a scalar exponent `p` (IEEE `powf`: NaN for a negative `x`
/// and non-integer `p`). Gradient: `g · p · x^(p-1)`.
///
/// ```
/// use grad_runtime::{g_pow, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![3.0]);
/// let y = g_pow(&mut tape, x, 2.0);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![9.0].into_dyn());
/// assert_eq!(tape.grad(x), array![6.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_pow<T: Float>(tp: &mut Tape<T>, x: Var, p: T) -> Var {
    unary(tp, x, Unary::Pow(p))
}

/// `|x|`. Gradient: `g · sign(x)`, 0 at 0 (as PyTorch).
///
/// ```
/// use grad_runtime::{g_abs, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![-3.0, 2.0]);
/// let y = g_abs(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![3.0, 2.0].into_dyn());
/// assert_eq!(tape.grad(x), array![-1.0, 1.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_abs<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, x, Unary::Abs)
}

/// `x` above 0, `slope · x` at and below. Gradient: `g`, or `g · slope` at and below 0.
///
/// ```
/// use grad_runtime::{g_leaky_relu, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![-2.0, 3.0]);
/// let y = g_leaky_relu(&mut tape, x, 0.25);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![-0.5, 3.0].into_dyn());
/// assert_eq!(tape.grad(x), array![0.25, 1.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_leaky_relu<T: Float>(tp: &mut Tape<T>, x: Var, slope: T) -> Var {
    unary(tp, x, Unary::LeakyRelu(slope))
}

/// GELU, tanh approximation: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`
/// (PyTorch's `gelu(x, approximate="tanh")`, not the exact erf form).
/// Gradient: `g · (0.5 (1 + t) + 0.5 x (1 - t²) √(2/π) (1 + 3 · 0.044715 x²))`, `t` the tanh.
///
/// ```
/// use grad_runtime::{g_gelu, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![0.0]);
/// let y = g_gelu(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![0.0].into_dyn());
/// assert_eq!(tape.grad(x), array![0.5].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_gelu<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, x, Unary::Gelu)
}

/// SiLU (swish): `x · sigmoid(x)`. Gradient: `g · s (1 + x (1 - s))`, `s = sigmoid(x)`.
///
/// ```
/// use grad_runtime::{g_silu, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![0.0]);
/// let y = g_silu(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![0.0].into_dyn());
/// assert_eq!(tape.grad(x), array![0.5].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_silu<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, x, Unary::Silu)
}

/// `log(1 + exp(x))`, computed as `max(x, 0) + log1p(exp(-|x|))`: never
/// overflows, exact for large `|x|`. Gradient: `g · sigmoid(x)`.
///
/// ```
/// use grad_runtime::{g_softplus, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![0.0]);
/// let y = g_softplus(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![2f64.ln()].into_dyn());
/// assert_eq!(tape.grad(x), array![0.5].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_softplus<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    unary(tp, x, Unary::Softplus)
}

/// `min(max(x, lo), hi)`; `lo <= hi` is required (else an error).
/// Gradient: `g` where `lo <= x <= hi` (bounds included, as PyTorch), 0 elsewhere.
///
/// ```
/// use grad_runtime::{g_clamp, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![-2.0, 0.5, 3.0]);
/// let y = g_clamp(&mut tape, x, -1.0, 1.0);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![-1.0, 0.5, 1.0].into_dyn());
/// assert_eq!(tape.grad(x), array![0.0, 1.0, 0.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_clamp<T: Float>(tp: &mut Tape<T>, x: Var, lo: T, hi: T) -> Var {
    if lo.is_nan() || hi.is_nan() || lo > hi {
        let location = Location::caller();
        let Some([x]) = tp.resolve("g_clamp", [x], location) else {
            return tp.poisoned_var();
        };
        let kind =
            ErrorKind::InvalidArgument { name: "lo", value: lo.to_f64(), expected: "lo <= hi (and neither NaN)" };
        return tp.fail("g_clamp", kind, &[x], location);
    }
    unary(tp, x, Unary::Clamp(lo, hi))
}

#[track_caller]
fn unary<T: Float>(tp: &mut Tape<T>, x: Var, function: Unary<T>) -> Var {
    let Some([x]) = tp.resolve(function.name(), [x], Location::caller()) else {
        return tp.poisoned_var();
    };
    let (name, location) = (function.name(), Location::caller());
    let mut out = tp.output_like(name, x, location);
    if let Some(out) = &mut out {
        with_function!(function, f => forward(f, &tp.value_of(x).data, &mut out.data));
    }
    tp.push_output(Op::Unary(x, function), out)
}

/// Inlined into `Op::backward`'s match, always: small graphs run this once
/// per node, and left to the compiler's budget it became a call of its
/// own when other rules grew (W2 as `g_*` calls, callgrind: 17 more
/// instructions a node; 12 with it inlined, and the time of before).
#[inline(always)]
pub(crate) fn unary_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    out: &Tensor<T>,
    x: NodeId,
    function: Unary<T>,
) {
    with_function!(function, f => backward(sink, g, out, x, f));
}

/// The backward rule of one function. The `match` on the function comes
/// before it, not inside the closure: with the `match` the closure was too
/// large to inline, and the call read its captures back from the stack
/// right after they were stored, a stall on every node (see
/// `tape/append.rs`; 9% of W2 as `g_*` calls).
fn backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    out: &Tensor<T>,
    x: NodeId,
    f: impl Elementwise<T>,
) {
    let input = &sink.value(x).data;
    sink.contribute_elementwise(x, |c, accumulate| gradient(f, g.data, input, &out.data, c, accumulate));
}
