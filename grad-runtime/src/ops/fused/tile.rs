//! The interpreter of a region's plan over tiles: a run of the output is
//! cut into tiles of a few hundred elements, and each step of the plan is
//! one loop over the tile, reading its operands from the leaves in place,
//! from a scalar, or from an earlier step's tile (in L1, as the compiled
//! kernels' registers were). Compiled once here, at each SIMD level, for
//! `f32` and `f64`: a region costs its user's crate no code at all.
//!
//! Forward evaluates the steps in order. Backward recomputes the values
//! its rules read ([`Plan::needed`](super::plan::Plan)), then walks the
//! steps from the root down, as the tape walks the unfused nodes: each
//! step hands its gradient to its operands with the unfused rule's own
//! arithmetic (`g * b` for `a * b`, `-g * (y / b)` for a divisor, `g *
//! df`), an inner step's gradient assigned, an input's added to what it
//! already holds, in the order the tape would add them. So values are the
//! unfused ops' bits, and so are the gradients of inputs read once.
//!
//! Every loop runs over whole blocks of [`L`] lanes, which the compiler
//! turns into whole vectors (a loop of unknown length ran a short tile as
//! scalar iterations); a tile that is not a whole number of blocks is
//! copied in and out of padded buffers.

use super::plan::{Bits, Src, Step, StepOp, reads_output, with_func};
use crate::Float;
use crate::ops::unary::Elementwise;
use crate::simd;

/// Lanes of a block: one AVX-512 vector of `f32`, two of AVX2.
const L: usize = 16;

/// The most leaves a region reads (the macro cuts larger expressions).
/// The interpreter is compiled for a few capacities `C` up to it, so a
/// region of one leaf moves arrays of one entry, not of sixteen (which
/// cost W2's tiny regions three times their own work).
pub(crate) const MAX_LEAVES: usize = 16;

/// Elements per tile: 1 KiB of values, a whole number of blocks and a
/// divisor of the folded sum's block (`SUM_BLOCK`).
pub(crate) const fn tile<T>() -> usize {
    1024 / size_of::<T>()
}

/// A value along a tile: one per element, or one for all.
#[derive(Clone, Copy)]
pub(crate) enum Val<'a, T> {
    Each(&'a [T]),
    All(T),
}

/// What a region's interpretation reads besides its leaves.
#[derive(Clone, Copy)]
pub(crate) struct Program<'a, T> {
    pub(crate) steps: &'a [Step],
    /// The last elementwise step.
    pub(crate) root: usize,
    /// The region's scalars: its parameters, then the leaves that are Rust scalars.
    pub(crate) params: &'a [T],
    /// The values backward reads.
    pub(crate) needed: Bits,
    /// The steps through which a wanted gradient flows (backward only).
    pub(crate) live: Bits,
    /// The leaves whose gradients are wanted (backward only).
    pub(crate) wanted: u32,
}

impl<T> Program<'_, T> {
    /// The scratch one thread needs for a forward segment.
    pub(crate) fn forward_scratch(&self, leaves: usize) -> usize {
        (self.root + 1 + leaves) * tile::<T>()
    }

    /// The scratch one thread needs for a backward segment.
    pub(crate) fn backward_scratch(&self, leaves: usize) -> usize {
        (2 * (self.root + 1) + 2 * leaves + 3) * tile::<T>()
    }
}

/// The steps a wanted gradient flows through: those reading, directly or
/// through other steps, a leaf whose gradient is wanted.
pub(crate) fn live_steps(steps: &[Step], root: usize, wanted: u32) -> Bits {
    let mut live = Bits::NONE;
    for (k, step) in steps[..=root].iter().enumerate() {
        let reaches = |src: Option<Src>| match src {
            Some(Src::Leaf(i)) => i < 32 && wanted & (1 << i) != 0,
            Some(Src::Step(j)) => live.has(j),
            _ => false,
        };
        if reaches(Some(step.a)) || reaches(step.b) {
            live.set(k);
        }
    }
    live
}

/// An input along a segment of the output.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a, T> {
    /// One value per element of the segment.
    Slice(&'a [T]),
    /// The same value for every element.
    Splat(T),
}

simd::multiversion! {
/// `out = root(x)` over a segment (any length).
pub(crate) fn forward_segment[T: Float, const C: usize][T, C](
    prog: &Program<'_, T>,
    x: &[Source<'_, T>],
    out: &mut [T],
    scratch: &mut [T],
) {
    let tile = tile::<T>();
    let (vals, leaf_tiles) = scratch.split_at_mut((prog.root + 1) * tile);
    for (t, out) in out.chunks_mut(tile).enumerate() {
        let (start, m) = (t * tile, out.len());
        let n = m.next_multiple_of(L);
        let mut leaves = [Val::All(T::zero()); C];
        if n == m {
            for (leaf, source) in leaves.iter_mut().zip(x) {
                *leaf = along(*source, start, n);
            }
            forward_tile(prog, &leaves, n, vals, Some(out));
        } else {
            for ((leaf, source), buffer) in leaves.iter_mut().zip(x).zip(leaf_tiles.chunks_mut(tile)) {
                *leaf = padded(*source, start, m, n, buffer);
            }
            forward_tile(prog, &leaves, n, vals, None);
            let root = prog.root * tile;
            out.copy_from_slice(&vals[root..root + m]);
        }
    }
}
}

simd::multiversion! {
/// Each wanted leaf's gradient over a segment of `len` elements into
/// `outs[i]` (empty for a leaf not wanted), from the root's gradient `g`
/// and its value `y` (`None` for a folded region, which recomputes it).
pub(crate) fn backward_segment[T: Float, const C: usize][T, C](
    prog: &Program<'_, T>,
    x: &[Source<'_, T>],
    y: Option<&[T]>,
    g: Source<'_, T>,
    outs: &mut [&mut [T]; C],
    len: usize,
    scratch: &mut [T],
) {
    let tile = tile::<T>();
    let nodes = (prog.root + 1) * tile;
    let (vals, rest) = scratch.split_at_mut(nodes);
    let (adjs, rest) = rest.split_at_mut(nodes);
    let (tmp, rest) = rest.split_at_mut(tile);
    let (g_tile, rest) = rest.split_at_mut(tile);
    let (y_tile, rest) = rest.split_at_mut(tile);
    let (leaf_tiles, d_tiles) = rest.split_at_mut(x.len() * tile);
    for start in (0..len).step_by(tile) {
        let m = tile.min(len - start);
        let n = m.next_multiple_of(L);
        let mut leaves = [Val::All(T::zero()); C];
        let mut d: [&mut [T]; C] = std::array::from_fn(|_| Default::default());
        if n == m {
            for (leaf, source) in leaves.iter_mut().zip(x) {
                *leaf = along(*source, start, n);
            }
            for (d, out) in d.iter_mut().zip(outs.iter_mut()) {
                if !out.is_empty() {
                    *d = &mut out[start..start + n];
                }
            }
            let y = y.map(|y| &y[start..start + n]);
            let g = along(g, start, n);
            backward_tile(prog, &leaves, y, g, n, vals, adjs, tmp, &mut d);
        } else {
            for ((leaf, source), buffer) in leaves.iter_mut().zip(x).zip(leaf_tiles.chunks_mut(tile)) {
                *leaf = padded(*source, start, m, n, buffer);
            }
            let mut d_free = &mut d_tiles[..];
            for (d, out) in d.iter_mut().zip(outs.iter()).take(x.len()) {
                let (mine, later) = std::mem::take(&mut d_free).split_at_mut(tile);
                d_free = later;
                if !out.is_empty() {
                    *d = &mut mine[..n];
                }
            }
            let y = y.map(|y| {
                y_tile[..m].copy_from_slice(&y[start..start + m]);
                y_tile[m..n].fill(T::zero());
                &y_tile[..n]
            });
            let g = padded(g, start, m, n, g_tile);
            backward_tile(prog, &leaves, y, g, n, vals, adjs, tmp, &mut d);
            for (d, out) in d.iter().zip(outs.iter_mut()) {
                if !out.is_empty() {
                    out[start..start + m].copy_from_slice(&d[..m]);
                }
            }
        }
    }
}
}

/// A source along `n` elements from `start`, read in place.
#[inline(always)]
fn along<T: Copy>(source: Source<'_, T>, start: usize, n: usize) -> Val<'_, T> {
    match source {
        Source::Slice(s) => Val::Each(&s[start..start + n]),
        Source::Splat(v) => Val::All(v),
    }
}

/// A source along `m` elements from `start`, copied into `buffer` and
/// padded with zeros to `n`.
#[inline(always)]
fn padded<'a, T: Float>(source: Source<'_, T>, start: usize, m: usize, n: usize, buffer: &'a mut [T]) -> Val<'a, T> {
    match source {
        Source::Slice(s) => {
            buffer[..m].copy_from_slice(&s[start..start + m]);
            buffer[m..n].fill(T::zero());
            Val::Each(&buffer[..n])
        }
        Source::Splat(v) => Val::All(v),
    }
}

/// An operand of a step on a tile of `n` elements: a leaf, a scalar, or
/// an earlier step's values (tile `j` of `vals`).
#[inline(always)]
fn operand<'v, T: Float>(src: Src, x: &[Val<'v, T>], params: &[T], vals: &'v [T], n: usize) -> Val<'v, T> {
    match src {
        Src::Leaf(i) => x[i],
        Src::Param(i) => Val::All(params[i]),
        Src::Step(j) => Val::Each(&vals[j * tile::<T>()..][..n]),
    }
}

/// A scalar operand (a built-in's parameter).
#[inline(always)]
fn number<T: Float>(src: Option<Src>, x: &[Val<'_, T>], params: &[T]) -> T {
    match src {
        Some(Src::Param(i)) => params[i],
        Some(Src::Leaf(i)) => match x[i] {
            Val::All(v) => v,
            Val::Each(_) => T::nan(),
        },
        _ => T::nan(),
    }
}

/// The steps up to the root on one tile of `n` elements: step `k` into
/// tile `k` of `vals`, the root into `out` when given.
#[inline(always)]
fn forward_tile<T: Float>(prog: &Program<'_, T>, x: &[Val<'_, T>], n: usize, vals: &mut [T], out: Option<&mut [T]>) {
    let mut out = out;
    for k in 0..=prog.root {
        let (before, rest) = vals.split_at_mut(k * tile::<T>());
        let dst = match out.as_deref_mut() {
            Some(out) if k == prog.root => out,
            _ => &mut rest[..n],
        };
        eval(prog.steps[k], x, prog.params, before, n, dst);
    }
}

/// One step's values on a tile into `dst`.
#[inline(always)]
fn eval<T: Float>(step: Step, x: &[Val<'_, T>], params: &[T], vals: &[T], n: usize, dst: &mut [T]) {
    let a = operand(step.a, x, params, vals, n);
    let b = || step.b.map_or(Val::All(T::nan()), |b| operand(b, x, params, vals, n));
    match step.op {
        StepOp::Add => map2(dst, false, a, b(), |a, b| a + b),
        StepOp::Sub => map2(dst, false, a, b(), |a, b| a - b),
        StepOp::Mul => map2(dst, false, a, b(), |a, b| a * b),
        StepOp::Div => map2(dst, false, a, b(), |a, b| a / b),
        StepOp::Neg => map1(dst, false, a, |a| -a),
        StepOp::Apply(func) => {
            let (p, q) = (number(step.b, x, params), number(step.c, x, params));
            with_func!(func, p, q, f => map1(dst, false, a, |a| f.f(a)))
        }
        // Never before the root.
        StepOp::Sum | StepOp::Mean => {}
    }
}

/// The gradients on one tile of `n` elements: the values backward reads
/// into `vals`, each inner step's gradient into its tile of `adjs`, each
/// wanted leaf's into `d[i]`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn backward_tile<T: Float, const C: usize>(
    prog: &Program<'_, T>,
    x: &[Val<'_, T>],
    y: Option<&[T]>,
    g: Val<'_, T>,
    n: usize,
    vals: &mut [T],
    adjs: &mut [T],
    tmp: &mut [T],
    d: &mut [&mut [T]; C],
) {
    let (root, tile) = (prog.root, tile::<T>());
    // The root's value is given, unless the region is folded.
    let top = if y.is_some() { root } else { root + 1 };
    for k in (0..top).filter(|&k| prog.needed.has(k)) {
        let (before, rest) = vals.split_at_mut(k * tile);
        eval(prog.steps[k], x, prog.params, before, n, &mut rest[..n]);
    }
    let vals = &*vals;
    let value = |j: usize| match y {
        Some(y) if j == root => Val::Each(y),
        _ => Val::Each(&vals[j * tile..][..n]),
    };
    let mut seen = 0u32;
    for k in (0..=root).rev().filter(|&k| prog.live.has(k)) {
        let (lower, upper) = adjs.split_at_mut(k * tile);
        let adj = if k == root { g } else { Val::Each(&upper[..n]) };
        let step = prog.steps[k];
        let binary = matches!(step.op, StepOp::Add | StepOp::Sub | StepOp::Mul | StepOp::Div);
        let operands = [Some(step.a), step.b.filter(|_| binary)];
        for (position, src) in operands.into_iter().enumerate() {
            let (dst, add) = match src {
                Some(Src::Step(j)) if prog.live.has(j) => (&mut lower[j * tile..j * tile + n], false),
                Some(Src::Leaf(i)) if i < C && prog.wanted & (1 << i) != 0 => {
                    let add = seen & (1 << i) != 0;
                    seen |= 1 << i;
                    (&mut *d[i], add)
                }
                _ => continue,
            };
            let other = |src: Option<Src>| src.map_or(Val::All(T::nan()), |s| operand(s, x, prog.params, vals, n));
            match (step.op, position) {
                (StepOp::Add, _) | (StepOp::Sub, 0) => map1(dst, add, adj, |g| g),
                (StepOp::Sub, _) => map1(dst, add, adj, |g| -g),
                (StepOp::Mul, 0) => map2(dst, add, adj, other(step.b), |g, b| g * b),
                (StepOp::Mul, _) => map2(dst, add, adj, other(Some(step.a)), |g, a| g * a),
                (StepOp::Div, 0) => map2(dst, add, adj, other(step.b), |g, b| g / b),
                (StepOp::Div, _) => {
                    map2(&mut tmp[..n], false, value(k), other(step.b), |y, b| y / b);
                    map2(dst, add, adj, Val::Each(&tmp[..n]), |g, t| -g * t);
                }
                (StepOp::Neg, _) => map1(dst, add, adj, |g| g * -T::one()),
                (StepOp::Apply(func), _) => {
                    let at = if reads_output(func) { value(k) } else { other(Some(step.a)) };
                    let (p, q) = (number(step.b, x, prog.params), number(step.c, x, prog.params));
                    with_func!(func, p, q, f => map2(dst, add, adj, at, |g, v| g * f.df(v, v)))
                }
                (StepOp::Sum | StepOp::Mean, _) => {}
            }
        }
    }
}

/// `dst[j] = f(a[j])`, or `dst[j] = dst[j] + f(a[j])` when `add`.
#[inline(always)]
fn map1<T: Float>(dst: &mut [T], add: bool, a: Val<'_, T>, f: impl Fn(T) -> T) {
    map2(dst, add, a, Val::All(T::zero()), |a, _| f(a));
}

/// `dst[j] = f(a[j], b[j])`, or `dst[j] = dst[j] + f(a[j], b[j])` when
/// `add`; `dst` is a whole number of blocks, and so is each `Each`. Each
/// block is read into locals, computed, then stored: the compiler cannot
/// tell the output from the operands apart, and with loads after stores
/// it left the block as sixteen scalar operations.
#[inline(always)]
fn map2<T: Float>(dst: &mut [T], add: bool, a: Val<'_, T>, b: Val<'_, T>, f: impl Fn(T, T) -> T) {
    let (dst, _) = dst.as_chunks_mut::<L>();
    /// One loop per case, over blocks of `L`: `$a` and `$b` give block `c`.
    macro_rules! each {
        (|$c:ident| $a:expr, $b:expr) => {
            for ($c, o) in dst.iter_mut().enumerate() {
                let (a, b): ([T; L], [T; L]) = ($a, $b);
                let mut r = if add { *o } else { [T::zero(); L] };
                if add {
                    for j in 0..L {
                        r[j] += f(a[j], b[j]);
                    }
                } else {
                    for j in 0..L {
                        r[j] = f(a[j], b[j]);
                    }
                }
                *o = r;
            }
        };
    }
    match (a, b) {
        (Val::Each(a), Val::Each(b)) => {
            let (a, b) = (a.as_chunks::<L>().0, b.as_chunks::<L>().0);
            each!(|c| a[c], b[c]);
        }
        (Val::Each(a), Val::All(b)) => {
            let a = a.as_chunks::<L>().0;
            each!(|c| a[c], [b; L]);
        }
        (Val::All(a), Val::Each(b)) => {
            let b = b.as_chunks::<L>().0;
            each!(|c| [a; L], b[c]);
        }
        (Val::All(a), Val::All(b)) => each!(|_c| [a; L], [b; L]),
    }
}
