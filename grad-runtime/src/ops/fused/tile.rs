//! The interpreter of a region's plan over tiles: a run of the output is
//! cut into tiles sized so that what backward keeps of them fits the CPU's
//! L1 data cache ([`Program::tile`]), and each step of the plan is one loop
//! over the tile, reading its operands from the leaves in place, from a
//! scalar, or from an earlier step's tile (in L1). Compiled once here, at
//! each SIMD level, for `f32` and `f64`: a region costs its user's crate
//! no code at all. A region no larger than a tile is one tile of its own
//! size, without the walk over tiles and threads.
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
//! Each step is one call of a loop in `kernels.rs` over a whole number of
//! blocks of [`L`] lanes; a tile that is not one is copied in and out of
//! padded buffers.

pub(crate) use super::kernels::Val;
use super::kernels::{self, Arith, L};
use super::plan::{Bits, Src, Step, StepOp, reads_output};
use crate::{Float, cache};

/// The most leaves a region reads (the macro cuts larger expressions).
/// The interpreter is compiled for a few capacities `C` up to it, so a
/// region of one leaf moves arrays of one entry, not of sixteen (which
/// cost W2's tiny regions three times their own work).
pub(crate) const MAX_LEAVES: usize = 16;

/// The most elements a tile holds: the folded sum's block (`SUM_BLOCK`
/// in `loops.rs`), which every tile size divides.
const MAX_TILE: usize = 1024;

/// The fewest elements a tile holds: one block.
const MIN_TILE: usize = L;

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

/// Where a tile's values lie: `n` elements (a whole number of blocks),
/// step `k`'s at `k * stride` in the scratch.
#[derive(Clone, Copy)]
struct Layout {
    n: usize,
    stride: usize,
}

impl<T> Program<'_, T> {
    /// Elements per tile for a program over `leaves` leaves: the largest
    /// power of two, from [`MIN_TILE`] to [`MAX_TILE`], whose tiles that
    /// backward keeps hot (each step's value and gradient, each leaf's
    /// input and gradient, one more) fit the CPU's L1 data cache. Fewer
    /// and larger tiles mean fewer calls of the loops per element; tiles
    /// that spill out of L1 cost more than those calls.
    pub(crate) fn tile(&self, leaves: usize) -> usize {
        let tiles = 2 * (self.root + 1) + 2 * leaves + 1;
        let fit = cache::l1d_bytes() / (tiles * size_of::<T>());
        if fit < MIN_TILE { MIN_TILE } else { (1 << fit.ilog2()).min(MAX_TILE) }
    }

    /// Whether a region of `n` elements over `leaves` leaves is
    /// interpreted as one tile of its own size ([`forward_small`],
    /// [`backward_small`]): at most a tile, a whole number of blocks. Such
    /// a region costs less to compute than the walk over tiles and
    /// threads, so the walk is skipped.
    pub(crate) fn is_small(&self, n: usize, leaves: usize) -> bool {
        // Every tile holds `MIN_TILE`: up to it, no need to ask the cache.
        n > 0 && (n <= MIN_TILE || n <= self.tile(leaves)) && n.is_multiple_of(L)
    }

    /// The scratch of [`forward_small`] on `n` elements.
    pub(crate) fn small_forward_scratch(&self, n: usize) -> usize {
        (self.root + 1) * n
    }

    /// The scratch of [`backward_small`] on `n` elements.
    pub(crate) fn small_backward_scratch(&self, n: usize) -> usize {
        (2 * (self.root + 1) + 1) * n
    }

    /// The scratch one thread needs for a forward segment.
    pub(crate) fn forward_scratch(&self, leaves: usize) -> usize {
        (self.root + 1 + leaves) * self.tile(leaves)
    }

    /// The scratch one thread needs for a backward segment.
    pub(crate) fn backward_scratch(&self, leaves: usize) -> usize {
        (2 * (self.root + 1) + 2 * leaves + 3) * self.tile(leaves)
    }
}

/// The steps a wanted gradient flows through: those reading, directly or
/// through other steps, a leaf whose gradient is wanted. A const fn, so
/// that a plan works out its usual case (every leaf wanted) when it is
/// built ([`Plan::new`](super::Plan::new)).
pub(crate) const fn live_steps(steps: &[Step], root: usize, wanted: u32) -> Bits {
    const fn reaches(src: Option<Src>, live: &Bits, wanted: u32) -> bool {
        match src {
            Some(Src::Leaf(i)) => i < 32 && wanted & (1 << i) != 0,
            Some(Src::Step(j)) => live.has(j),
            _ => false,
        }
    }
    let mut live = Bits::NONE;
    let mut k = 0;
    while k <= root {
        if reaches(Some(steps[k].a), &live, wanted) || reaches(steps[k].b, &live, wanted) {
            live.set(k);
        }
        k += 1;
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

/// `out = root(x)` over a segment (any length).
pub(crate) fn forward_segment<T: Float, const C: usize>(
    prog: &Program<'_, T>,
    x: &[Source<'_, T>],
    out: &mut [T],
    scratch: &mut [T],
) {
    let tile = prog.tile(x.len());
    let (vals, leaf_tiles) = scratch.split_at_mut((prog.root + 1) * tile);
    for start in (0..out.len()).step_by(tile) {
        let m = tile.min(out.len() - start);
        let n = m.next_multiple_of(L);
        let mut leaves = [Val::All(T::zero()); C];
        prefetch_next(out, start, tile);
        let out = &mut out[start..start + m];
        if n == m {
            for (leaf, source) in leaves.iter_mut().zip(x) {
                *leaf = along(*source, start, n);
            }
            forward_tile(prog, &leaves, Layout { n, stride: tile }, vals, Some(out));
        } else {
            for ((leaf, source), buffer) in leaves.iter_mut().zip(x).zip(leaf_tiles.chunks_mut(tile)) {
                *leaf = padded(*source, start, m, n, buffer);
            }
            forward_tile(prog, &leaves, Layout { n, stride: tile }, vals, None);
            let root = prog.root * tile;
            out.copy_from_slice(&vals[root..root + m]);
        }
    }
}

/// Each wanted leaf's gradient over a segment of `len` elements into
/// `outs[i]` (empty for a leaf not wanted), from the root's gradient `g`
/// and its value `y` (`None` for a folded region, which recomputes it).
pub(crate) fn backward_segment<T: Float, const C: usize>(
    prog: &Program<'_, T>,
    x: &[Source<'_, T>],
    y: Option<&[T]>,
    g: Source<'_, T>,
    outs: &mut [&mut [T]; C],
    len: usize,
    scratch: &mut [T],
) {
    let tile = prog.tile(x.len());
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
            for out in outs.iter() {
                prefetch_next(out, start, tile);
            }
            for (d, out) in d.iter_mut().zip(outs.iter_mut()) {
                if !out.is_empty() {
                    *d = &mut out[start..start + n];
                }
            }
            let y = y.map(|y| &y[start..start + n]);
            let g = along(g, start, n);
            backward_tile(prog, &leaves, y, g, Layout { n, stride: tile }, vals, adjs, tmp, &mut d);
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
            backward_tile(prog, &leaves, y, g, Layout { n, stride: tile }, vals, adjs, tmp, &mut d);
            for (d, out) in d.iter().zip(outs.iter_mut()) {
                if !out.is_empty() {
                    out[start..start + m].copy_from_slice(&d[..m]);
                }
            }
        }
    }
}

/// `out = root(x)` on a small region ([`Program::is_small`]) whose leaves
/// are read flat; `scratch` holds [`Program::small_forward_scratch`].
pub(crate) fn forward_small<T: Float>(prog: &Program<'_, T>, x: &[Val<'_, T>], out: &mut [T], scratch: &mut [T]) {
    let n = out.len();
    forward_tile(prog, x, Layout { n, stride: n }, scratch, Some(out));
}

/// Each wanted leaf's gradient on a small region ([`Program::is_small`])
/// whose leaves are read flat, into `d[i]` (empty for a leaf not wanted),
/// as [`backward_segment`] computes it; `scratch` holds
/// [`Program::small_backward_scratch`].
pub(crate) fn backward_small<T: Float, const C: usize>(
    prog: &Program<'_, T>,
    x: &[Val<'_, T>],
    y: Option<&[T]>,
    g: Val<'_, T>,
    d: &mut [&mut [T]; C],
    n: usize,
    scratch: &mut [T],
) {
    let nodes = (prog.root + 1) * n;
    let (vals, rest) = scratch.split_at_mut(nodes);
    let (adjs, tmp) = rest.split_at_mut(nodes);
    backward_tile(prog, x, y, g, Layout { n, stride: n }, vals, adjs, tmp, d);
}

/// Asks for the tile after the one at `start` of `out` while this one is
/// computed. Each tile of `out` (a region's value, a leaf's gradient) is
/// written in a pass that computes little, which on a region larger than
/// the caches waited on memory for every line it wrote; the leaves, only
/// read, the CPU's own prefetcher brings in time (asking for them too
/// made W5's block 9% slower). On an Intel Xeon, in alternated runs in one
/// process: W5's block (a fold: its gradient written) 10% faster, the
/// same region unfolded (its value written too) 7% more.
#[inline(always)]
fn prefetch_next<T>(out: &[T], start: usize, tile: usize) {
    if let Some(next) = out.get(start + tile..) {
        crate::simd::prefetch(&next[..tile.min(next.len())]);
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

/// Where the gradient of a step's operand `src` goes on a tile: its tile
/// of `adjs` below the step (`lower`) for an inner step, assigned; a
/// wanted leaf's gradient `d[i]`, added after the leaf's first (`seen`);
/// or nowhere.
#[inline(always)]
fn gradient_of<'t, T, const C: usize>(
    src: Src,
    prog: &Program<'_, T>,
    lower: &'t mut [T],
    d: &'t mut [&mut [T]; C],
    seen: &mut u32,
    [tile, n]: [usize; 2],
) -> Option<(&'t mut [T], bool)> {
    match src {
        Src::Step(j) if prog.live.has(j) => Some((&mut lower[j * tile..j * tile + n], false)),
        Src::Leaf(i) if i < C && prog.wanted & (1 << i) != 0 => {
            let add = *seen & (1 << i) != 0;
            *seen |= 1 << i;
            Some((&mut *d[i], add))
        }
        _ => None,
    }
}

/// An operand of a step on a tile: a leaf, a scalar, or an earlier
/// step's values (tile `j` of `vals`).
#[inline(always)]
fn operand<'v, T: Float>(src: Src, x: &[Val<'v, T>], params: &[T], vals: &'v [T], at: Layout) -> Val<'v, T> {
    match src {
        Src::Leaf(i) => x[i],
        Src::Param(i) => Val::All(params[i]),
        Src::Step(j) => Val::Each(&vals[j * at.stride..][..at.n]),
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

/// The steps up to the root on one tile: step `k` into tile `k` of
/// `vals`, the root into `out` when given.
#[inline(always)]
fn forward_tile<T: Float>(prog: &Program<'_, T>, x: &[Val<'_, T>], at: Layout, vals: &mut [T], out: Option<&mut [T]>) {
    let mut out = out;
    for k in 0..=prog.root {
        let (before, rest) = vals.split_at_mut(k * at.stride);
        let dst = match out.as_deref_mut() {
            Some(out) if k == prog.root => out,
            _ => &mut rest[..at.n],
        };
        eval(&prog.steps[k], x, prog.params, before, at, dst);
    }
}

/// One step's values on a tile into `dst`.
fn eval<T: Float>(step: &Step, x: &[Val<'_, T>], params: &[T], vals: &[T], at: Layout, dst: &mut [T]) {
    let a = operand(step.a, x, params, vals, at);
    let b = || step.b.map_or(Val::All(T::nan()), |b| operand(b, x, params, vals, at));
    let arith = match step.op {
        StepOp::Add => Arith::Add,
        StepOp::Sub => Arith::Sub,
        StepOp::Mul => Arith::Mul,
        StepOp::Div => Arith::Div,
        StepOp::Neg => Arith::Neg,
        StepOp::Apply(func) => {
            let (p, q) = (number(step.b, x, params), number(step.c, x, params));
            return kernels::apply(func, p, q, dst, a);
        }
        // Never before the root.
        StepOp::Sum | StepOp::Mean => return,
    };
    kernels::arith(arith, dst, false, a, b());
}

/// The gradients on one tile: the values backward reads
/// into `vals`, each inner step's gradient into its tile of `adjs`, each
/// wanted leaf's into `d[i]`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn backward_tile<T: Float, const C: usize>(
    prog: &Program<'_, T>,
    x: &[Val<'_, T>],
    y: Option<&[T]>,
    g: Val<'_, T>,
    at: Layout,
    vals: &mut [T],
    adjs: &mut [T],
    tmp: &mut [T],
    d: &mut [&mut [T]; C],
) {
    let (root, tile, n) = (prog.root, at.stride, at.n);
    // The root's value is given, unless the region is folded.
    let top = if y.is_some() { root } else { root + 1 };
    for k in (0..top).filter(|&k| prog.needed.has(k)) {
        let (before, rest) = vals.split_at_mut(k * tile);
        eval(&prog.steps[k], x, prog.params, before, at, &mut rest[..n]);
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
        let step = &prog.steps[k];
        let other = |src: Src| operand(src, x, prog.params, vals, at);
        let b = || step.b.map_or(Val::All(T::nan()), other);
        // A macro, not a closure: the slice it hands out borrows `lower`
        // or `d`, which a closure's result cannot.
        macro_rules! target {
            ($src:expr) => {
                gradient_of($src, prog, &mut *lower, &mut *d, &mut seen, [tile, n])
            };
        }
        match step.op {
            StepOp::Apply(func) => {
                if let Some((dst, add)) = target!(step.a) {
                    let at = if reads_output(func) { value(k) } else { other(step.a) };
                    let (p, q) = (number(step.b, x, prog.params), number(step.c, x, prog.params));
                    kernels::apply_df(func, p, q, dst, add, adj, at);
                }
            }
            StepOp::Neg => {
                if let Some((dst, add)) = target!(step.a) {
                    kernels::arith(Arith::Mul, dst, add, adj, Val::All(-T::one()));
                }
            }
            StepOp::Add | StepOp::Sub | StepOp::Mul | StepOp::Div => {
                if let Some((dst, add)) = target!(step.a) {
                    let (rule, by) = match step.op {
                        StepOp::Mul => (Arith::Mul, b()),
                        StepOp::Div => (Arith::Div, b()),
                        _ => (Arith::Copy, Val::All(T::zero())),
                    };
                    kernels::arith(rule, dst, add, adj, by);
                }
                if let Some((dst, add)) = step.b.and_then(|b| target!(b)) {
                    let (rule, by) = match step.op {
                        StepOp::Add => (Arith::Copy, Val::All(T::zero())),
                        StepOp::Sub => (Arith::Neg, Val::All(T::zero())),
                        StepOp::Mul => (Arith::Mul, other(step.a)),
                        _ => {
                            kernels::arith(Arith::Div, &mut tmp[..n], false, value(k), b());
                            (Arith::NegMul, Val::Each(&tmp[..n]))
                        }
                    };
                    kernels::arith(rule, dst, add, adj, by);
                }
            }
            StepOp::Sum | StepOp::Mean => {}
        }
    }
}
