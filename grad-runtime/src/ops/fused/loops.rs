//! How a region's interpretation (`tile.rs`) is laid over tensors: the
//! output is walked flat when every input is the output's shape or a
//! single element, else row by row along the last axis (on which each
//! input is contiguous or one repeated element, as in
//! `broadcast::zip_broadcast`), and the work is shared over threads in
//! pieces whose results do not depend on where they are cut (every
//! element is computed alone). A folded sum uses the fixed pairwise tree
//! of `ops::reduce::sum_slice`: results are the same bits on any number of
//! threads. Each piece borrows its thread's scratch tiles.

use ndarray::IxDyn;

use super::tile::{self, Program, Source, Val};
use crate::Float;
use crate::broadcast::broadcast_strides;
use crate::ops::reduce::sum_slice;
use crate::parallel::{self, CHUNK, worth_it};

/// The block of `sum_slice`'s pairwise tree (`ops/reduce.rs`): a folded
/// sum forms the same tree to give the same bits.
const SUM_BLOCK: usize = 1024;

/// A region input: its values and shape.
#[derive(Clone, Copy)]
pub(crate) struct Input<'a, T> {
    pub(crate) data: &'a [T],
    pub(crate) shape: &'a [usize],
}

/// Whether an input of `len` elements is read flat along an output of
/// `total`: it has the output's shape (broadcasting with equal counts
/// only adds or drops dims of 1), or one element.
pub(crate) fn is_flat(len: usize, total: usize) -> bool {
    len == total || len == 1
}

/// How each input is read along the output.
struct Walk<'a, T, const C: usize> {
    inputs: &'a [Input<'a, T>],
    shape: &'a [usize],
    /// Each input's strides on the output's axes; `None` for a flat walk.
    strides: Option<[IxDyn; C]>,
}

impl<'a, T: Float, const C: usize> Walk<'a, T, C> {
    fn new(inputs: &'a [Input<'a, T>], shape: &'a [usize]) -> Self {
        let total: usize = shape.iter().product();
        let flat = inputs.iter().all(|x| is_flat(x.data.len(), total));
        let strides = (!flat).then(|| {
            std::array::from_fn(|k| inputs.get(k).map_or_else(|| IxDyn(&[]), |x| broadcast_strides(x.shape, shape)))
        });
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
    fn sources(&self, start: usize, len: usize) -> [Source<'a, T>; C] {
        let mut sources = [Source::Splat(T::zero()); C];
        let Some(strides) = &self.strides else {
            for (source, input) in sources.iter_mut().zip(self.inputs) {
                let data = input.data;
                *source =
                    if data.len() == 1 { Source::Splat(data[0]) } else { Source::Slice(&data[start..start + len]) };
            }
            return sources;
        };
        let last = self.shape.len() - 1;
        let mut offsets = [0usize; C];
        let mut row = start / len.max(1);
        for axis in (0..last).rev() {
            let index = row % self.shape[axis];
            row /= self.shape[axis];
            offsets.iter_mut().zip(&strides[..self.inputs.len()]).for_each(|(o, s)| *o += index * s[axis]);
        }
        for (k, (source, input)) in sources.iter_mut().zip(self.inputs).enumerate() {
            let (data, offset) = (input.data, offsets[k]);
            *source = if strides[k][last] == 1 {
                Source::Slice(&data[offset..offset + len])
            } else {
                Source::Splat(data[offset])
            };
        }
        sources
    }
}

/// The inputs as values along a small region of `n` elements
/// ([`Program::is_small`]), or `None` when the region is not small or an
/// input is broadcast along it.
fn small<'a, T: Float, const C: usize>(
    prog: &Program<'_, T>,
    inputs: &[Input<'a, T>],
    n: usize,
) -> Option<[Val<'a, T>; C]> {
    if !prog.is_small(n, inputs.len()) {
        return None;
    }
    let mut x = [Val::All(T::zero()); C];
    for (x, input) in x.iter_mut().zip(inputs) {
        *x = match input.data {
            data if data.len() == n => Val::Each(data),
            &[v] => Val::All(v),
            _ => return None,
        };
    }
    Some(x)
}

/// `out = root(inputs)` over the output's `shape`.
pub(crate) fn forward<T: Float, const C: usize>(
    prog: &Program<'_, T>,
    inputs: &[Input<'_, T>],
    shape: &[usize],
    out: &mut [T],
) {
    let n = inputs.len();
    if let Some(x) = small::<T, C>(prog, inputs, out.len()) {
        let scratch = prog.small_forward_scratch(out.len());
        return T::with_scratch(scratch, |s| tile::forward_small(prog, &x[..n], out, s));
    }
    let walk = Walk::<T, C>::new(inputs, shape);
    let scratch = prog.forward_scratch(n);
    let segment = |start: usize, out: &mut [T]| {
        let sources = walk.sources(start, out.len());
        T::with_scratch(scratch, |s| tile::forward_segment::<T, C>(prog, &sources[..n], out, s));
    };
    match walk.unit() {
        1 if walk.strides.is_none() => parallel::for_each_chunk(out, segment),
        0 => {}
        unit => parallel::for_each_rows(out, unit, |first, rows| {
            for (r, row) in rows.chunks_mut(unit).enumerate() {
                segment((first + r) * unit, row);
            }
        }),
    }
}

/// The sum of `root(inputs)` over the output's `shape`, in the tree of
/// `sum_slice`, computed block by block without storing the values;
/// `None` when the inputs are broadcast (the caller then sums a stored copy).
pub(crate) fn sum<T: Float, const C: usize>(
    prog: &Program<'_, T>,
    inputs: &[Input<'_, T>],
    shape: &[usize],
) -> Option<T> {
    let walk = Walk::<T, C>::new(inputs, shape);
    if walk.strides.is_some() {
        return None;
    }
    let total = shape.iter().product();
    let parallel = worth_it(total);
    Some(parallel::run(parallel, || sum_tree(prog, &walk, 0, total, parallel)))
}

/// `tree_sum`'s recursion (`parallel.rs`) over positions `lo..hi`.
fn sum_tree<T: Float, const C: usize>(
    prog: &Program<'_, T>,
    walk: &Walk<'_, T, C>,
    lo: usize,
    hi: usize,
    parallel: bool,
) -> T {
    if hi - lo <= SUM_BLOCK {
        let n = walk.inputs.len();
        let sources = walk.sources(lo, hi - lo);
        return T::with_scratch(SUM_BLOCK + prog.forward_scratch(n), |s| {
            let (block, s) = s.split_at_mut(SUM_BLOCK);
            let block = &mut block[..hi - lo];
            tile::forward_segment::<T, C>(prog, &sources[..n], block, s);
            sum_slice(block)
        });
    }
    let mid = lo + (hi - lo) / 2;
    if parallel && worth_it(hi - lo) {
        let (a, b) = rayon::join(|| sum_tree(prog, walk, lo, mid, true), || sum_tree(prog, walk, mid, hi, true));
        a + b
    } else {
        sum_tree(prog, walk, lo, mid, false) + sum_tree(prog, walk, mid, hi, false)
    }
}

/// Writes each wanted input's gradient on the output's `shape` into
/// `outs[k]` (empty for an input not wanted). `y` is the region's value
/// (`None` for a folded region, which recomputes it), `g` its gradient,
/// one value per element or one for all.
pub(crate) fn backward<T: Float, const C: usize>(
    prog: &Program<'_, T>,
    inputs: &[Input<'_, T>],
    shape: &[usize],
    y: Option<&[T]>,
    g: Source<'_, T>,
    outs: [&mut [T]; C],
) {
    let total = shape.iter().product::<usize>();
    let n = inputs.len();
    if let Some(x) = small::<T, C>(prog, inputs, total) {
        let g = match g {
            Source::Slice(g) => Val::Each(g),
            Source::Splat(g) => Val::All(g),
        };
        let mut outs = outs;
        let scratch = prog.small_backward_scratch(total);
        return T::with_scratch(scratch, |s| tile::backward_small(prog, &x[..n], y, g, &mut outs, total, s));
    }
    let walk = Walk::<T, C>::new(inputs, shape);
    let unit = walk.unit();
    if total == 0 || unit == 0 {
        return;
    }
    let scratch = prog.backward_scratch(n);
    let segment = |start: usize, len: usize, mut outs: [&mut [T]; C]| {
        let y = y.map(|y| &y[start..start + len]);
        let g = match g {
            Source::Slice(g) => Source::Slice(&g[start..start + len]),
            splat => splat,
        };
        let sources = walk.sources(start, len);
        T::with_scratch(scratch, |s| tile::backward_segment(prog, &sources[..n], y, g, &mut outs, len, s));
    };
    let rows = |start: usize, len: usize, mut outs: [&mut [T]; C]| {
        for row in (0..len).step_by(unit) {
            let row_outs = outs.each_mut().map(|o| if o.is_empty() { &mut [][..] } else { &mut o[row..row + unit] });
            segment(start + row, unit, row_outs);
        }
    };
    let flat = walk.strides.is_none();
    let run = |start: usize, len: usize, outs: [&mut [T]; C]| {
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
