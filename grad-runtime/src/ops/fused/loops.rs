//! The loops that run a kernel over tensors: the output is walked flat
//! when every input is the output's shape or a single element, else row
//! by row along the last axis (on which each input is contiguous or one
//! repeated element, as in `broadcast::zip_broadcast`). Each segment is
//! cut into tiles: every input is copied (or splatted) into a small array
//! on the stack, and the kernel runs over the tile's arrays, a loop the
//! compiler vectorises whatever the inputs' layouts.
//!
//! Work is shared over threads in pieces whose results do not depend on
//! where they are cut (every element is computed alone), and a folded sum
//! uses the fixed pairwise tree of `ops::reduce::sum_slice`: results are
//! the same bits on any number of threads.

use ndarray::IxDyn;

use super::kernel::Kernel;
use crate::Float;
use crate::broadcast::broadcast_strides;
use crate::ops::reduce::sum_slice;
use crate::parallel::{self, CHUNK, MIN_PAIR_ELEMENTS, worth_it};
use crate::simd;

/// Elements a kernel runs over at a time.
const TILE: usize = 64;

/// Short runs are computed in blocks of this many elements, each a loop of
/// fixed trip count that the compiler turns into whole vectors: a plain
/// loop over 16 elements ran as 16 scalar iterations (its vector form
/// needs more). One AVX-512 vector of `f32`.
const LANES: usize = 16;

/// The starts of the blocks of `LANES` that cover `from..len` (`len >=
/// LANES`), the last one moved back to end at `len`: it recomputes a few
/// elements, which an elementwise kernel writes again with the same bits.
#[inline(always)]
fn blocks(from: usize, len: usize) -> impl Iterator<Item = usize> {
    (from..len).step_by(LANES).map(move |start| start.min(len - LANES))
}

/// The block of `sum_slice`'s pairwise tree (`ops/reduce.rs`): a folded
/// sum forms the same tree to give the same bits.
const SUM_BLOCK: usize = 1024;

/// A region input: its values and shape.
#[derive(Clone, Copy)]
pub(crate) struct Input<'a, T> {
    pub(crate) data: &'a [T],
    pub(crate) shape: &'a [usize],
}

/// An input along one segment of the output.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a, T> {
    /// One value per element of the segment.
    Slice(&'a [T]),
    /// The same value for every element.
    Splat(T),
}

/// Whether an input of `len` elements is read flat along an output of
/// `total`: it has the output's shape (broadcasting with equal counts
/// only adds or drops dims of 1), or one element.
pub(crate) fn is_flat(len: usize, total: usize) -> bool {
    len == total || len == 1
}

/// The inputs along the whole output of `total` elements, when each is
/// read flat (see [`is_flat`]).
#[inline(always)]
fn flat_sources<'a, T: Copy, const N: usize>(inputs: &[Input<'a, T>; N], total: usize) -> Option<[Source<'a, T>; N]> {
    let mut sources = [Source::Slice(&[][..]); N];
    for (source, input) in sources.iter_mut().zip(inputs) {
        *source = match input.data {
            [one] => Source::Splat(*one),
            data if data.len() == total => Source::Slice(data),
            _ => return None,
        };
    }
    Some(sources)
}

/// How each input is read along the output.
struct Walk<'a, T, const N: usize> {
    inputs: &'a [Input<'a, T>; N],
    shape: &'a [usize],
    /// Each input's strides on the output's axes; `None` for a flat walk.
    strides: Option<[IxDyn; N]>,
}

impl<'a, T: Float, const N: usize> Walk<'a, T, N> {
    fn new(inputs: &'a [Input<'a, T>; N], shape: &'a [usize]) -> Self {
        let total: usize = shape.iter().product();
        let flat = inputs.iter().all(|x| is_flat(x.data.len(), total));
        let strides = (!flat).then(|| std::array::from_fn(|k| broadcast_strides(inputs[k].shape, shape)));
        Walk { inputs, shape, strides }
    }

    /// The elements of a unit of work: 1 on a flat walk, else a row.
    fn unit(&self) -> usize {
        match self.strides {
            None => 1,
            Some(_) => self.shape.last().copied().unwrap_or(1),
        }
    }

    /// The inputs along `len` elements from output position `start`; on a
    /// walk by rows the positions are one row.
    fn sources(&self, start: usize, len: usize) -> [Source<'a, T>; N] {
        let Some(strides) = &self.strides else {
            return std::array::from_fn(|k| {
                let data = self.inputs[k].data;
                if data.len() == 1 { Source::Splat(data[0]) } else { Source::Slice(&data[start..start + len]) }
            });
        };
        let last = self.shape.len() - 1;
        let mut offsets = [0usize; N];
        let mut row = start / len.max(1);
        for axis in (0..last).rev() {
            let index = row % self.shape[axis];
            row /= self.shape[axis];
            offsets.iter_mut().zip(strides).for_each(|(o, s)| *o += index * s[axis]);
        }
        std::array::from_fn(|k| {
            let (data, offset) = (self.inputs[k].data, offsets[k]);
            if strides[k][last] == 1 { Source::Slice(&data[offset..offset + len]) } else { Source::Splat(data[offset]) }
        })
    }
}

/// `out = forward(inputs)` over the output's `shape`.
pub(crate) fn forward<T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize>(
    inputs: &[Input<'_, T>; N],
    p: [T; P],
    shape: &[usize],
    out: &mut [T],
) {
    if out.len() < MIN_PAIR_ELEMENTS
        && let Some(x) = flat_sources(inputs, out.len())
    {
        // One segment on this thread: nothing between the call and the kernel.
        return forward_segment::<T, K, N, P>(x, p, out);
    }
    let walk = Walk::new(inputs, shape);
    match walk.unit() {
        1 if walk.strides.is_none() => parallel::for_each_chunk(out, |offset, chunk| {
            forward_segment::<T, K, N, P>(walk.sources(offset, chunk.len()), p, chunk)
        }),
        0 => {}
        n => parallel::for_each_rows(out, n, |first, rows| {
            for (r, row) in rows.chunks_mut(n).enumerate() {
                forward_segment::<T, K, N, P>(walk.sources((first + r) * n, n), p, row);
            }
        }),
    }
}

/// The sum of `forward(inputs)` over the output's `shape`, in the tree of
/// `sum_slice`, computed tile by tile without storing the values; `None`
/// when the inputs are broadcast (the caller then sums a stored copy).
pub(crate) fn sum<T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize>(
    inputs: &[Input<'_, T>; N],
    p: [T; P],
    shape: &[usize],
) -> Option<T> {
    let walk = Walk::new(inputs, shape);
    if walk.strides.is_some() {
        return None;
    }
    let total = shape.iter().product();
    let parallel = worth_it(total);
    Some(parallel::run(parallel, || sum_tree::<T, K, N, P>(&walk, p, 0, total, parallel)))
}

/// `tree_sum`'s recursion (`parallel.rs`) over positions `lo..hi`.
fn sum_tree<T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize>(
    walk: &Walk<'_, T, N>,
    p: [T; P],
    lo: usize,
    hi: usize,
    parallel: bool,
) -> T {
    if hi - lo <= SUM_BLOCK {
        let mut block = [T::zero(); SUM_BLOCK];
        let block = &mut block[..hi - lo];
        forward_segment::<T, K, N, P>(walk.sources(lo, hi - lo), p, block);
        return sum_slice(block);
    }
    let mid = lo + (hi - lo) / 2;
    if parallel && worth_it(hi - lo) {
        let (a, b) = rayon::join(
            || sum_tree::<T, K, N, P>(walk, p, lo, mid, true),
            || sum_tree::<T, K, N, P>(walk, p, mid, hi, true),
        );
        a + b
    } else {
        sum_tree::<T, K, N, P>(walk, p, lo, mid, false) + sum_tree::<T, K, N, P>(walk, p, mid, hi, false)
    }
}

/// The inputs as plain slices, when none is splatted.
#[inline(always)]
fn slices<'a, T, const N: usize>(x: &[Source<'a, T>; N]) -> Option<[&'a [T]; N]> {
    let mut out = [&[][..]; N];
    for (o, source) in out.iter_mut().zip(x) {
        match source {
            Source::Slice(s) => *o = s,
            Source::Splat(_) => return None,
        }
    }
    Some(out)
}

simd::multiversion! {
fn forward_segment[T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize][T, K, N, P](
    x: [Source<'_, T>; N],
    p: [T; P],
    out: &mut [T],
) {
    let len = out.len();
    if let Some(x) = slices(&x)
        && len >= LANES
    {
        // Every input one value per element: read them in place, whole
        // tiles in one loop, then the rest in blocks.
        let body = len - len % TILE;
        for (i, o) in out[..body].iter_mut().enumerate() {
            *o = K::forward(gather(|k| x[k][i]), p);
        }
        for start in blocks(body, len) {
            let block = x.map(|x| lanes(x, start));
            let out = lanes_mut(out, start);
            for (j, o) in out.iter_mut().enumerate() {
                *o = K::forward(gather(|k| block[k][j]), p);
            }
        }
        return;
    }
    let mut tile = [[T::zero(); TILE]; N];
    splat(&x, &mut tile);
    for (t, out) in out.chunks_mut(TILE).enumerate() {
        fill(&x, t * TILE, &mut tile, out.len());
        let m = out.len().min(TILE);
        let out = &mut out[..m];
        for (j, o) in out.iter_mut().enumerate() {
            *o = K::forward(gather(|k| tile[k][j]), p);
        }
    }
}
}

/// Writes each input's gradient, `g` times its partial derivative, on the
/// output's `shape` into `outs[k]` (an empty `outs[k]` is skipped). `y` is
/// the output, `g` its gradient, one value per element or one for all. A
/// region without a fold must be given `y`; a folded one recomputes its
/// value (`y` is not read), so each kernel compiles one of the two loops.
pub(crate) fn backward<T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize>(
    inputs: &[Input<'_, T>; N],
    p: [T; P],
    shape: &[usize],
    y: Option<&[T]>,
    g: Source<'_, T>,
    outs: [&mut [T]; N],
) {
    let total = shape.iter().product::<usize>();
    if !worth_it(total)
        && let Some(x) = flat_sources(inputs, total)
    {
        // One segment on this thread (as `forward`).
        return backward_segment::<T, K, N, P>(x, y, g, p, outs, total);
    }
    let walk = Walk::new(inputs, shape);
    let unit = walk.unit();
    if total == 0 || unit == 0 {
        return;
    }
    let segment = |start: usize, len: usize, outs: [&mut [T]; N]| {
        let y = y.map(|y| &y[start..start + len]);
        let g = match g {
            Source::Slice(g) => Source::Slice(&g[start..start + len]),
            splat => splat,
        };
        backward_segment::<T, K, N, P>(walk.sources(start, len), y, g, p, outs, len);
    };
    let rows = |start: usize, len: usize, mut outs: [&mut [T]; N]| {
        for row in (0..len).step_by(unit) {
            let row_outs = outs.each_mut().map(|o| if o.is_empty() { &mut [][..] } else { &mut o[row..row + unit] });
            segment(start + row, unit, row_outs);
        }
    };
    let flat = walk.strides.is_none();
    let run = |start: usize, len: usize, outs: [&mut [T]; N]| {
        if flat { segment(start, len, outs) } else { rows(start, len, outs) }
    };
    if !worth_it(total) {
        return run(0, total, outs);
    }
    parallel::run(true, || split(0, total, unit, true, outs, &run));
}

/// Runs `f(start, len, outs)` over `0..total` cut into halves of whole
/// units, the halves in parallel while they are large.
fn split<T: Send, const N: usize>(
    start: usize,
    len: usize,
    unit: usize,
    parallel: bool,
    outs: [&mut [T]; N],
    f: &(impl Fn(usize, usize, [&mut [T]; N]) + Sync),
) {
    let units = len / unit;
    if !parallel || len <= CHUNK || units < 2 {
        return f(start, len, outs);
    }
    let mid = units / 2 * unit;
    let (left, right) = split_at(outs, mid);
    rayon::join(|| split(start, mid, unit, true, left, f), || split(start + mid, len - mid, unit, true, right, f));
}

/// Splits each non-empty slice at `mid`.
fn split_at<T, const N: usize>(outs: [&mut [T]; N], mid: usize) -> ([&mut [T]; N], [&mut [T]; N]) {
    let mut left: [&mut [T]; N] = std::array::from_fn(|_| Default::default());
    let mut right: [&mut [T]; N] = std::array::from_fn(|_| Default::default());
    for ((o, l), r) in outs.into_iter().zip(&mut left).zip(&mut right) {
        if !o.is_empty() {
            (*l, *r) = o.split_at_mut(mid);
        }
    }
    (left, right)
}

simd::multiversion! {
fn backward_segment[T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize][T, K, N, P](
    x: [Source<'_, T>; N],
    y: Option<&[T]>,
    g: Source<'_, T>,
    p: [T; P],
    outs: [&mut [T]; N],
    len: usize,
) {
    let mut outs = outs;
    let body = len - len % TILE;
    if let Some(x) = slices(&x)
        && len >= LANES
        && outs.iter().all(|o| o.len() == len)
        && backward_in_place::<T, K, N, P>(x, y, g, p, outs.each_mut().map(|o| &mut **o), body)
    {
        // Whole tiles in place (above), then the rest in blocks (as
        // `forward_segment`).
        let splat_g = match g {
            Source::Splat(g) => [g; LANES],
            Source::Slice(_) => [T::zero(); LANES],
        };
        for start in blocks(body, len) {
            let block = x.map(|x| lanes(x, start));
            let g_block = match g {
                Source::Slice(g) => lanes(g, start),
                Source::Splat(_) => &splat_g,
            };
            let y_block = y.map(|y| lanes(y, start));
            let gradients = outs.each_mut().map(|o| lanes_mut(o, start));
            gradients_of::<T, K, N, P, LANES>(block, y_block, g_block, p, LANES, gradients);
        }
        return;
    }
    let mut tile = [[T::zero(); TILE]; N];
    let mut gradients = [[T::zero(); TILE]; N];
    let (mut y_tile, mut g_tile) = ([T::zero(); TILE], [T::zero(); TILE]);
    splat(&x, &mut tile);
    splat(std::slice::from_ref(&g), std::slice::from_mut(&mut g_tile));
    for start in (0..len).step_by(TILE) {
        let m = TILE.min(len - start);
        fill(&x, start, &mut tile, m);
        fill(std::slice::from_ref(&g), start, std::slice::from_mut(&mut g_tile), m);
        if let Some(y) = y {
            y_tile[..m].copy_from_slice(&y[start..start + m]);
        }
        gradients_of::<T, K, N, P, TILE>(tile.each_ref(), y.map(|_| &y_tile), &g_tile, p, m, gradients.each_mut());
        for (out, gradient) in outs.iter_mut().zip(&gradients) {
            if !out.is_empty() {
                out[start..start + m].copy_from_slice(&gradient[..m]);
            }
        }
    }
}
}

/// The `LANES` elements of `s` from `start`, as an array: a block's loop
/// then has a trip count the compiler knows, and reads the data in place.
#[inline(always)]
fn lanes<T>(s: &[T], start: usize) -> &[T; LANES] {
    s[start..start + LANES].try_into().expect("invariant: a range of LANES elements")
}

/// [`lanes`], to write.
#[inline(always)]
fn lanes_mut<T>(s: &mut [T], start: usize) -> &mut [T; LANES] {
    (&mut s[start..start + LANES]).try_into().expect("invariant: a range of LANES elements")
}

/// Each input's gradient at the first `m` elements of the arrays `x`, where
/// `y` holds the root's values (`None`: recomputed, for a folded region)
/// and `g` its gradient. Inlined into both loops of `backward_segment`, so
/// a block's fixed `m` still gives whole vectors.
#[inline(always)]
fn gradients_of<T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize, const M: usize>(
    x: [&[T; M]; N],
    y: Option<&[T; M]>,
    g: &[T; M],
    p: [T; P],
    m: usize,
    mut gradients: [&mut [T; M]; N],
) {
    // One loop for each kernel: a region without a fold reads its value
    // `y`, a folded one recomputes it (see `backward`).
    match y {
        Some(y) if !K::FOLDED => {
            for j in 0..m {
                let d = K::backward(gather(|k| x[k][j]), y[j], g[j], p);
                gradients.iter_mut().zip(d).for_each(|(out, d)| out[j] = d);
            }
        }
        _ if K::FOLDED => {
            for j in 0..m {
                let xj = gather(|k| x[k][j]);
                let d = K::backward(xj, K::forward(xj, p), g[j], p);
                gradients.iter_mut().zip(d).for_each(|(out, d)| out[j] = d);
            }
        }
        // A region without a fold is always given its value (`backward`).
        _ => {}
    }
}

/// `backward_segment` when every input is read in place and every
/// gradient is wanted: no tiles. Each case is its own plain loop (no
/// closure per element), so the kernel inlines into it and vectorises.
/// Only the cases `backward` passes have a loop, one per kernel: a
/// region's value and a gradient per element, or (folded) no value and
/// one gradient for all; for any other, nothing is written and `false`
/// returned, and the caller takes the tiled path.
#[inline(always)]
fn backward_in_place<T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize>(
    x: [&[T]; N],
    y: Option<&[T]>,
    g: Source<'_, T>,
    p: [T; P],
    outs: [&mut [T]; N],
    len: usize,
) -> bool {
    if len == 0 {
        return true;
    }
    let x = x.map(|x| &x[..len]);
    let outs = outs.map(|o| &mut o[..len]);
    /// `outs[k][i] = $gradients[k]` for every position `$i < len`.
    macro_rules! each {
        ($i:ident => $gradients:expr) => {
            for $i in 0..len {
                let d: [T; N] = $gradients;
                for k in 0..N {
                    outs[k][$i] = d[k];
                }
            }
        };
    }
    match (y, g) {
        (Some(y), Source::Slice(g)) if !K::FOLDED => {
            let (y, g) = (&y[..len], &g[..len]);
            each!(i => K::backward(gather(|k| x[k][i]), y[i], g[i], p));
        }
        (_, Source::Splat(g)) if K::FOLDED => each!(i => {
            let input = gather(|k| x[k][i]);
            K::backward(input, K::forward(input, p), g, p)
        }),
        _ => return false,
    }
    true
}

/// The inputs at one element, `[f(0), .., f(N - 1)]`. A loop, not
/// `std::array::from_fn`, whose closure machinery is instantiated for
/// every kernel at every call (in a variant of these loops, `cargo
/// llvm-lines` put a fifth of what 200 `grad!` blocks compiled to there).
#[inline(always)]
fn gather<T: Float, const N: usize>(f: impl Fn(usize) -> T) -> [T; N] {
    let mut out = [T::zero(); N];
    for (k, o) in out.iter_mut().enumerate() {
        *o = f(k);
    }
    out
}

/// Fills each splatted input's tile once.
#[inline(always)]
fn splat<T: Copy>(x: &[Source<'_, T>], tile: &mut [[T; TILE]]) {
    for (source, tile) in x.iter().zip(tile) {
        if let Source::Splat(v) = *source {
            *tile = [v; TILE];
        }
    }
}

/// Copies `m` values of each sliced input from position `start` into its tile.
#[inline(always)]
fn fill<T: Copy>(x: &[Source<'_, T>], start: usize, tile: &mut [[T; TILE]], m: usize) {
    for (source, tile) in x.iter().zip(tile) {
        if let Source::Slice(s) = *source {
            tile[..m].copy_from_slice(&s[start..start + m]);
        }
    }
}
