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

/// Lanes of a block: one AVX-512 vector of `f32`, two of AVX2.
pub(crate) const L: usize = 16;

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
    if add { zip(dst, a, b, |o, a, b| o + f(a, b)) } else { zip(dst, a, b, |_, a, b| f(a, b)) }
}

/// `dst[j] = f(dst[j], a[j], b[j])` block by block, for arithmetic:
/// each block is read into locals, computed, then stored, and the
/// compiler turns a block into whole vectors. (It cannot tell the output
/// from the operands apart; with loads after stores it left the block as
/// sixteen scalar operations.) A function with branches, as most
/// built-ins have, is not vectorised in this form: see [`each`].
#[inline(always)]
fn zip<T: Float>(dst: &mut [T], a: Val<'_, T>, b: Val<'_, T>, f: impl Fn(T, T, T) -> T) {
    let (dst, _) = dst.as_chunks_mut::<L>();
    /// One loop per case: `$a` and `$b` give block `c`.
    macro_rules! blocks {
        (|$c:ident| $a:expr, $b:expr) => {
            for ($c, o) in dst.iter_mut().enumerate() {
                let (a, b, d): ([T; L], [T; L], [T; L]) = ($a, $b, *o);
                let mut r = [T::zero(); L];
                for j in 0..L {
                    r[j] = f(d[j], a[j], b[j]);
                }
                *o = r;
            }
        };
    }
    match (a, b) {
        (Val::Each(a), Val::Each(b)) => {
            let (a, b) = (a.as_chunks::<L>().0, b.as_chunks::<L>().0);
            blocks!(|c| a[c], b[c]);
        }
        (Val::Each(a), Val::All(b)) => {
            let a = a.as_chunks::<L>().0;
            blocks!(|c| a[c], [b; L]);
        }
        (Val::All(a), Val::Each(b)) => {
            let b = b.as_chunks::<L>().0;
            blocks!(|c| [a; L], b[c]);
        }
        (Val::All(a), Val::All(b)) => blocks!(|_c| [a; L], [b; L]),
    }
}

/// `dst[j] = f(dst[j], a[j], b[j])` as plain loops over slices, for the
/// built-ins: the slices reach [`each2`] and [`each1`] as references of
/// their own, which tells the compiler they do not overlap, and the loop
/// vectoriser turns the built-in's branches into selects. (A loop over
/// blocks of fixed length is unrolled before it is vectorised, and the
/// unrolled block of a branching function stays scalar.)
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
