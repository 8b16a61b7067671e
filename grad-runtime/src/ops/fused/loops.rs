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

use super::lanes::{self, Compiled};
use super::tile::{self, Program, Source, Val};
use crate::Float;
use crate::broadcast::broadcast_strides;
use crate::ops::reduce::sum_slice;
use crate::parallel::{self, CHUNK, worth_it};

/// The block of `sum_slice`'s pairwise tree (`ops/reduce.rs`): a folded
/// sum forms the same tree to give the same bits.
const SUM_BLOCK: usize = 1024;

/// The most elements a kernel computes in one call on a large region: the
/// length of the lanes it copies (a repeated leaf, a gradient not
/// wanted), which stay in the L1 cache.
const PIECE: usize = 1024;

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
        let offsets = self.offsets(strides, start, len);
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

    /// The inputs as a kernel reads them along the row of `len` elements
    /// at output position `start` of a walk by rows: a row each, or one
    /// element repeated.
    fn row(&self, strides: &[IxDyn; C], start: usize, len: usize) -> [Input<'a, T>; C] {
        let last = self.shape.len() - 1;
        let offsets = self.offsets(strides, start, len);
        let mut row = [Input { data: &[][..], shape: &[][..] }; C];
        for (k, (x, input)) in row.iter_mut().zip(self.inputs).enumerate() {
            let (offset, along) = (offsets[k], if strides[k][last] == 1 { len } else { 1 });
            *x = Input { data: &input.data[offset..offset + along], shape: input.shape };
        }
        row
    }

    /// Where each input's values for the row at output position `start`
    /// begin, on a walk by rows of `len` elements.
    fn offsets(&self, strides: &[IxDyn; C], start: usize, len: usize) -> [usize; C] {
        let mut offsets = [0usize; C];
        let mut row = start / len.max(1);
        for axis in (0..self.shape.len() - 1).rev() {
            let index = row % self.shape[axis];
            row /= self.shape[axis];
            offsets.iter_mut().zip(&strides[..self.inputs.len()]).for_each(|(o, s)| *o += index * s[axis]);
        }
        offsets
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

/// The inputs along `len` elements from `start`, every input read flat
/// (a one-element input as it is).
fn along<'a, T: Copy, const C: usize>(inputs: &[Input<'a, T>], start: usize, len: usize) -> [Input<'a, T>; C] {
    let mut along = [Input { data: &[][..], shape: &[][..] }; C];
    for (a, input) in along.iter_mut().zip(inputs) {
        let data = if input.data.len() == 1 { input.data } else { &input.data[start..start + len] };
        *a = Input { data, shape: input.shape };
    }
    along
}

/// `out = root(inputs)` over the output's `shape`, by the region's
/// `kernel` when it has one that runs here: over the inputs read flat, or
/// row by row where one is broadcast and the rows are long enough
/// ([`Compiled::pays_on_rows`]).
pub(crate) fn forward<T: Float, const C: usize>(
    prog: &Program<'_, T>,
    kernel: Option<Compiled<T>>,
    inputs: &[Input<'_, T>],
    shape: &[usize],
    out: &mut [T],
) {
    let n = inputs.len();
    if let Some(kernel) = kernel.filter(|_| lanes::flat(inputs, out.len())) {
        if out.len() <= PIECE {
            return lanes::forward::<T, C>(kernel, inputs, prog.params, out);
        }
        return parallel::for_each_chunk(out, |start, chunk| {
            for (p, piece) in chunk.chunks_mut(PIECE).enumerate() {
                let x = along::<T, C>(inputs, start + p * PIECE, piece.len());
                lanes::forward::<T, C>(kernel, &x[..n], prog.params, piece);
            }
        });
    }
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
    match (walk.unit(), &walk.strides) {
        (1, None) => parallel::for_each_chunk(out, segment),
        (0, _) => {}
        (unit, strides) => {
            let kernel = kernel.zip(strides.as_ref()).filter(|(k, _)| k.pays_on_rows(unit));
            parallel::for_each_rows(out, unit, |first, rows| {
                for (r, row) in rows.chunks_mut(unit).enumerate() {
                    let start = (first + r) * unit;
                    match kernel {
                        Some((kernel, strides)) => {
                            let x = walk.row(strides, start, unit);
                            lanes::forward::<T, C>(kernel, &x[..n], prog.params, row);
                        }
                        None => segment(start, row),
                    }
                }
            })
        }
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
/// one value per element or one for all. The region's `kernel` computes
/// them when it has one that runs here and the region is not folded, as
/// in [`forward`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward<T: Float, const C: usize>(
    prog: &Program<'_, T>,
    kernel: Option<Compiled<T>>,
    inputs: &[Input<'_, T>],
    shape: &[usize],
    y: Option<&[T]>,
    g: Source<'_, T>,
    outs: [&mut [T]; C],
) {
    let total = shape.iter().product::<usize>();
    let n = inputs.len();
    if let (Some(kernel), Some(y), Source::Slice(g)) = (kernel, y, g)
        && lanes::flat(inputs, total)
    {
        return backward_compiled(kernel, prog.params, inputs, y, g, outs);
    }
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
    let row_kernel = match (kernel, &walk.strides, y, g) {
        (Some(kernel), Some(strides), Some(y), Source::Slice(g)) if kernel.pays_on_rows(unit) => {
            Some((kernel, strides, y, g))
        }
        _ => None,
    };
    let rows = |start: usize, len: usize, mut outs: [&mut [T]; C]| {
        for row in (0..len).step_by(unit) {
            let mut row_outs =
                outs.each_mut().map(|o| if o.is_empty() { &mut [][..] } else { &mut o[row..row + unit] });
            let at = start + row;
            match row_kernel {
                Some((kernel, strides, y, g)) => {
                    let x = walk.row(strides, at, unit);
                    let (y, g) = (&y[at..at + unit], &g[at..at + unit]);
                    lanes::backward::<T, C>(kernel, &x[..n], prog.params, y, g, &mut row_outs);
                }
                None => segment(at, unit, row_outs),
            }
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

/// [`backward`] by a region's kernel, from the region's value `y` and
/// its gradient `g`.
fn backward_compiled<T: Float, const C: usize>(
    kernel: Compiled<T>,
    params: &[T],
    inputs: &[Input<'_, T>],
    y: &[T],
    g: &[T],
    mut outs: [&mut [T]; C],
) {
    let (n, total) = (inputs.len(), y.len());
    if total <= PIECE {
        return lanes::backward::<T, C>(kernel, inputs, params, y, g, &mut outs);
    }
    let segment = |start: usize, len: usize, mut outs: [&mut [T]; C]| {
        for at in (0..len).step_by(PIECE) {
            let (from, piece) = (start + at, PIECE.min(len - at));
            let mut piece_outs =
                outs.each_mut().map(|o| if o.is_empty() { &mut [][..] } else { &mut o[at..at + piece] });
            let x = along::<T, C>(inputs, from, piece);
            let (y, g) = (&y[from..from + piece], &g[from..from + piece]);
            lanes::backward::<T, C>(kernel, &x[..n], params, y, g, &mut piece_outs);
        }
    };
    parallel::run(worth_it(total), || split(0, total, PIECE, worth_it(total), outs, &segment));
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
