//! The loops the interpreter (`tile.rs`) runs: one call per step and
//! tile, each a loop over whole blocks of [`L`] lanes, compiled at every
//! SIMD level for `f32` and `f64`. They are small functions of their own
//! rather than code inlined into the interpreter's walk over the steps: a
//! walk that held them all kept little in registers, and spent more on
//! its bookkeeping than a tile of a few blocks costs to compute.

use super::plan::{Func, with_func};
use crate::Float;
use crate::ops::unary::Elementwise;
use crate::simd;

/// Lanes of a block: a turn of the compiled loops ([`simd::WIDE`], four
/// AVX-512 vectors of `f32`). A tile of a region of 16 elements is
/// padded to one: in blocks of 16 the loops ran it on half vectors, and
/// where its gradient had decayed into subnormal numbers each half
/// vector cost a microcode assist (W2 on an Intel Xeon: 0.39 ms padded
/// against 0.45 in blocks of 16, all its regions interpreted).
pub(crate) const L: usize = simd::WIDE;

/// A value along a tile: one per element, or one for all.
#[derive(Clone, Copy)]
pub(crate) enum Val<'a, T> {
    Each(&'a [T]),
    All(T),
}

/// What [`arith`] computes from its operands `a` and `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arith {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `-a`.
    Neg,
    /// `a`: a sum's gradient passed on.
    Copy,
    /// `-a * b` (a divisor's gradient, `-g * (y / b)`).
    NegMul,
}

simd::multiversion! {
/// `dst[j] = op(a[j], b[j])`, or `dst[j] += op(a[j], b[j])` when `add`;
/// `dst` and each `Each` are a whole number of blocks.
pub(crate) fn arith[T: Float][T](op: Arith, dst: &mut [T], add: bool, a: Val<'_, T>, b: Val<'_, T>) {
    match op {
        Arith::Add => map2(dst, add, a, b, |a, b| a + b),
        Arith::Sub => map2(dst, add, a, b, |a, b| a - b),
        Arith::Mul => map2(dst, add, a, b, |a, b| a * b),
        Arith::Div => map2(dst, add, a, b, |a, b| a / b),
        Arith::Neg => map2(dst, add, a, b, |a, _| -a),
        Arith::Copy => map2(dst, add, a, b, |a, _| a),
        Arith::NegMul => map2(dst, add, a, b, |a, b| -a * b),
    }
}
}

simd::multiversion! {
/// `dst[j] = f(a[j])` for the built-in `func` with parameters `p`, `q`.
pub(crate) fn apply[T: Float][T](func: Func, p: T, q: T, dst: &mut [T], a: Val<'_, T>) {
    with_func!(func, p, q, f => each(dst, a, Val::All(T::zero()), |_, a, _| f.f(a)))
}
}

simd::multiversion! {
/// `dst[j] = g[j] * f'(at[j])`, or `dst[j] += ...` when `add`: the
/// built-in's gradient rule, `at` its input or its value (as the unfused
/// rule reads it).
pub(crate) fn apply_df[T: Float][T](func: Func, p: T, q: T, dst: &mut [T], add: bool, g: Val<'_, T>, at: Val<'_, T>) {
    with_func!(func, p, q, f => each_df(dst, add, g, at, &f))
}
}

/// [`apply_df`]'s loops for one built-in, calling its `df` in the loop
/// body itself. (Through a closure handed to [`each`], the compiler kept
/// GELU's derivative, whose `tanh` makes it long, as a function called
/// once per element with scalar instructions: 9% of W7's step.)
#[inline(always)]
fn each_df<T: Float, E: Elementwise<T>>(dst: &mut [T], add: bool, g: Val<'_, T>, at: Val<'_, T>, f: &E) {
    /// The four loops, with `$out(o, term)` the value stored.
    macro_rules! loops {
        ($out:expr) => {
            match (g, at) {
                (Val::Each(g), Val::Each(at)) => {
                    for ((o, &g), &v) in dst.iter_mut().zip(g).zip(at) {
                        *o = $out(*o, g * f.df(v, v));
                    }
                }
                (Val::Each(g), Val::All(v)) => {
                    let d = f.df(v, v);
                    dst.iter_mut().zip(g).for_each(|(o, &g)| *o = $out(*o, g * d));
                }
                (Val::All(g), Val::Each(at)) => {
                    for (o, &v) in dst.iter_mut().zip(at) {
                        *o = $out(*o, g * f.df(v, v));
                    }
                }
                (Val::All(g), Val::All(v)) => {
                    let term = g * f.df(v, v);
                    dst.iter_mut().for_each(|o| *o = $out(*o, term));
                }
            }
        };
    }
    if add { loops!(|o: T, term: T| o + term) } else { loops!(|_: T, term: T| term) }
}

/// `dst[j] = f(a[j], b[j])`, or `dst[j] = dst[j] + f(a[j], b[j])` when
/// `add`, the test outside the loops, for arithmetic.
#[inline(always)]
fn map2<T: Float>(dst: &mut [T], add: bool, a: Val<'_, T>, b: Val<'_, T>, f: impl Fn(T, T) -> T) {
    if add { each(dst, a, b, |o, a, b| o + f(a, b)) } else { each(dst, a, b, |_, a, b| f(a, b)) }
}

/// `dst[j] = f(dst[j], a[j], b[j])` as plain loops over slices: the
/// slices reach [`each2`] and [`each1`] as references of their own, which
/// tells the compiler they do not overlap, and the loop vectoriser turns
/// the loop into whole vectors (and a built-in's branches into selects).
/// Not a loop over blocks of [`L`] lanes as arrays: the compiler unrolls
/// such a block before it vectorises, and then either leaves a
/// branching built-in's block scalar or, where AVX-512 offers gathers
/// and scatters, vectorises across blocks with them (16 scatters a
/// block: W5's fused form ran at 6.5 GB/s on Zen 4, 14.4 without).
#[inline(always)]
fn each<T: Float>(dst: &mut [T], a: Val<'_, T>, b: Val<'_, T>, f: impl Fn(T, T, T) -> T) {
    match (a, b) {
        (Val::Each(a), Val::Each(b)) => each2(dst, a, b, f),
        (Val::Each(a), Val::All(b)) => each1(dst, a, |o, a| f(o, a, b)),
        (Val::All(a), Val::Each(b)) => each1(dst, b, |o, b| f(o, a, b)),
        (Val::All(a), Val::All(b)) => dst.iter_mut().for_each(|o| *o = f(*o, a, b)),
    }
}

#[inline(always)]
fn each2<T: Float>(dst: &mut [T], a: &[T], b: &[T], f: impl Fn(T, T, T) -> T) {
    for ((o, &a), &b) in dst.iter_mut().zip(a).zip(b) {
        *o = f(*o, a, b);
    }
}

#[inline(always)]
fn each1<T: Float>(dst: &mut [T], a: &[T], f: impl Fn(T, T) -> T) {
    for (o, &a) in dst.iter_mut().zip(a) {
        *o = f(*o, a);
    }
}
