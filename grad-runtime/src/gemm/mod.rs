//! The matrix product every `matmul`, `bmm` and their gradients run on:
//! `c = a @ b` or `c += a @ b`, for operands given as strided views (a
//! transposed operand is the same buffer with its strides swapped, never a
//! copy), written in safe Rust but for two parts that use intrinsics: the
//! AVX512-BF16 micro-kernel of the bf16 products (`bf16.rs`) and the
//! AVX-512 and AVX2 transposes that pack a row-major `f32` operand's
//! panels (`transpose.rs`).
//!
//! The structure is BLIS's. `k` is cut into blocks of [`KC`]; for each
//! block the needed part of `b` is packed into panels of `NR` columns and
//! `a` into panels of `MR` rows, so the micro-kernel (`kernel.rs`) reads
//! both contiguously, and it keeps an `MR × NR` tile of `c` in registers
//! while it runs down the block. The panels of `a` go in groups sized to
//! the CPU's L2 ([`panels_in_l2`]), each panel of `b` passes over a whole
//! group, and it does so a part of the depth sized to the L1 at a time
//! ([`depth_in_l1`]), the tiles carrying their sums from part to part.
//! The tile sizes fit the vector registers of the widest instruction set
//! the CPU has (`simd.rs`): 12 × 32 for `f32` with AVX-512 (6 × 32 for a
//! product whose rows fill tiles of 6 with less padding, [`rows_for`]),
//! 6 × 16 with AVX2, smaller without.
//!
//! **Same bits, whatever the threads.** Threads share the rows of `c` (a
//! group of whole tiles each), or, for a product of few rows, its columns
//! (a group of whole panels each, [`by_columns`]); no element's sum is
//! ever split, and every element is the same chain of fused multiply-adds
//! over the same blocks of `k` in the same order whichever thread computes
//! it, whatever the tile, and whatever the vector width (an FMA rounds
//! once at every width).
//!
//! **bf16 products** (`bf16.rs`): the same blocking with other packing and
//! another micro-kernel, behind the trait [`Micro`] both implement.
//!
//! **No allocation.** The packed panels live in a buffer the caller passes
//! (`scratch_len` elements, from the tape's pool), so a training step that
//! repeats its products allocates nothing.

pub(crate) mod bf16;
mod kernel;
mod pack;
#[cfg(target_arch = "x86_64")]
mod transpose;

use rayon::prelude::*;

use crate::ops::conv::{Columns, Windows};
use crate::simd::{self, Level};
use crate::{Float, pair, parallel};

/// The depth of one packed block: part of the summation order, so fixed
/// (never derived from the thread count or the CPU). Each block ends with
/// a pass that adds the tiles into `c`, reading and writing all of it:
/// at 256, a 1024³ product made four such passes over 4 MiB of `c` and
/// spent 6% of its time in them; at 1024 it makes one, and W3 ran 180 ->
/// 190-197 GFLOP/s, W1 (k = 784) 682 -> 570-590 µs. The panels then
/// outgrow L1 (48 KiB of `a`, 128 KiB of `b` for `f32` on AVX-512), so
/// the kernel takes them a part of the depth at a time ([`depth_in_l1`]),
/// which changes no sum.
pub(crate) const KC: usize = 1024;

/// Columns of `b` packed at a time.
const NC: usize = 4096;

/// Below this many multiply-adds a product does not go to the pool:
/// handing rows to it costs more than it saves (40 µs or so; W4's
/// 512×64×64 products, 2^21, ran slower on two threads, W1's 64×784×256
/// faster; see `parallel.rs` and benches/README.md). From
/// [`MIN_PAIR_FLOPS`] it goes to the caller and the helper of `pair.rs`.
pub(crate) const MIN_PARALLEL_FLOPS: usize = 1 << 22;

/// From this many multiply-adds up to [`MIN_PARALLEL_FLOPS`], a product's
/// rows are cut in two halves for the caller and the helper thread of
/// `pair.rs` (a hand-off of about 2 µs, against 20 µs of work in a half).
pub(crate) const MIN_PAIR_FLOPS: usize = 1 << 20;

/// Below this many elements a block of `b` is packed on one thread. A
/// product shared out over the pool waits for its `b` to be packed, so the
/// pool's hand-off pays from well below the size of the blocks themselves:
/// at 2^18, the 784 × 256 block of W1's and W9's products (200K elements)
/// was packed on one thread while the other waited, and W9 ran 1478 ->
/// 1346 µs at 2^16 (Zen 3, medians of five alternated runs).
const MIN_PARALLEL_PACK: usize = 1 << 16;

/// A matrix in a buffer: element `(i, j)` at `data[i * row_stride + j * col_stride]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatRef<'a, T> {
    pub(crate) data: &'a [T],
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) row_stride: usize,
    pub(crate) col_stride: usize,
}

impl<'a, T> MatRef<'a, T> {
    /// A row-major `rows × cols` matrix.
    pub(crate) fn row_major(data: &'a [T], rows: usize, cols: usize) -> Self {
        MatRef { data, rows, cols, row_stride: cols, col_stride: 1 }
    }

    /// The same shape and strides over `data` (the `f32` view of a
    /// buffer, for the bf16 products).
    pub(crate) fn over<U>(self, data: &'a [U]) -> MatRef<'a, U> {
        MatRef { data, rows: self.rows, cols: self.cols, row_stride: self.row_stride, col_stride: self.col_stride }
    }

    /// The transpose: the same elements, strides swapped.
    pub(crate) fn t(self) -> Self {
        MatRef {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
        }
    }

    #[inline]
    fn at(&self, i: usize, j: usize) -> &T {
        &self.data[i * self.row_stride + j * self.col_stride]
    }
}

/// What the blocked product packs into panels: `a`, and `b` through its
/// transpose (the panels of `b`'s columns are those of `bᵀ`'s rows). A
/// matrix in a buffer, or a matrix never written out whole, whose panels
/// are written from where its elements come from (a convolution's columns,
/// from the image: `ops/conv.rs`).
pub(crate) trait Panels<T: Float>: Sync {
    /// Rows of the matrix.
    fn rows(&self) -> usize;

    /// Columns of the matrix.
    fn cols(&self) -> usize;

    /// Packs panels `first_panel..` of `R` rows (as many as fit in
    /// `packed`, `R * K::depth(kc)` elements each), columns `pc..pc + kc`,
    /// in the layout of `K`'s packing, padded with zeros to whole panels.
    fn pack<K: Micro<T>, const R: usize>(&self, pc: usize, kc: usize, first_panel: usize, packed: &mut [T]);
}

impl<T: Float> Panels<T> for MatRef<'_, T> {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    #[inline]
    fn pack<K: Micro<T>, const R: usize>(&self, pc: usize, kc: usize, first_panel: usize, packed: &mut [T]) {
        K::pack::<R>(*self, pc, kc, first_panel, packed);
    }
}

/// The tile of `c` the micro-kernel keeps in registers on this CPU, for
/// elements of `bytes` bytes: `(MR, NR)`.
fn tile(level: Level, bytes: usize) -> (usize, usize) {
    match (level, bytes) {
        (Level::Avx512, 4) => (12, 32),
        (Level::Avx512, _) => (12, 16),
        (Level::Avx2, 4) => (6, 16),
        (Level::Avx2, _) => (6, 8),
        (Level::Baseline, 4) => (4, 8),
        (Level::Baseline, _) => (4, 4),
    }
}

/// The rows of the tile for a product of `m` rows, given the CPU's tile
/// of `mr` rows: `mr`, or half of it when that leaves at least 4% fewer
/// rows of padding to compute. The kernel computes whole tiles, so with 12
/// rows a product of 64 computes 72, with 6 rows 66. Only for the tiles of
/// AVX-512, whose halves keep twelve vector accumulators (enough to hide
/// the latency of the multiply-adds); AVX2's half would keep six. The rows
/// of a tile do not change any element's sum (each is the same chain of
/// multiply-adds), only how many padding rows are computed and thrown away.
fn rows_for(level: Level, mr: usize, m: usize) -> usize {
    let half = mr / 2;
    // In u128: a shape's `m` may be near `usize::MAX` when it has no elements.
    let padded = |rows: usize| (m as u128).div_ceil(rows as u128) * rows as u128;
    if level == Level::Avx512 && padded(half) * 25 <= padded(mr) * 24 { half } else { mr }
}

/// How many elements of scratch [`gemm`] needs for an `m × k` by `k × n` product.
pub(crate) fn scratch_len<T>(m: usize, k: usize, n: usize) -> usize {
    let level = simd::level();
    let (mr, nr) = tile(level, std::mem::size_of::<T>());
    let depth = k.min(KC);
    let by_rows = packed_len(mr, nr, depth, m, n);
    let rows = rows_for(level, mr, m);
    let pieces = split_of(m, k, n, rows).pieces();
    if pieces > 1 && by_columns(m, n, rows, nr, pieces) {
        by_rows.max(pieces.saturating_mul(piece_len(rows, nr, depth, m, n, pieces)))
    } else {
        by_rows
    }
}

/// The scratch of a blocked product with an `mr × nr` tile whose packed
/// panels hold `depth` elements per row for a block of `k` (saturated: no
/// buffer of that length is ever made).
fn packed_len(mr: usize, nr: usize, depth: usize, m: usize, n: usize) -> usize {
    let [mr, nr, depth, m, n] = [mr, nr, depth, m, n.min(NC)].map(|x| x as u128);
    usize::try_from(m.div_ceil(mr) * mr * depth + n.div_ceil(nr) * nr * depth).unwrap_or(usize::MAX)
}

/// How the products of a node are computed: see [`Precision`](crate::Precision).
pub(crate) use crate::tape::Precision;

/// [`scratch_len`] for a product in `precision` (bf16 applies to `f32` only).
pub(crate) fn scratch_len_in<T: Float>(precision: Precision, m: usize, k: usize, n: usize) -> usize {
    match precision {
        Precision::Bf16 if T::is_f32() => bf16::scratch_len(m, k, n),
        _ => scratch_len::<T>(m, k, n),
    }
}

/// [`gemm`] in `precision`: with [`Precision::Bf16`] on `f32` operands, the
/// bf16 product of `bf16.rs`; otherwise (and always for `f64`) [`gemm`].
/// `scratch` holds at least [`scratch_len_in`] elements.
pub(crate) fn gemm_in<T: Float>(
    precision: Precision,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: &mut [T],
    accumulate: bool,
    scratch: &mut [T],
) {
    if precision == Precision::Bf16
        && let (Some(a32), Some(b32)) = (T::f32_slice(a.data), T::f32_slice(b.data))
        && let (Some(c32), Some(scratch32)) = (T::f32_slice_mut(c), T::f32_slice_mut(scratch))
    {
        return bf16::gemm(a.over(a32), b.over(b32), c32, accumulate, scratch32);
    }
    gemm(a, b, c, accumulate, scratch)
}

/// A convolution's product whose columns are packed straight from the
/// image ([`Windows`]) rather than unfolded into a buffer.
#[derive(Clone, Copy)]
pub(crate) enum ImageProduct<'p, T> {
    /// `c = a @ cols` (the forward: the weights by the columns, read as
    /// `colsᵀ`).
    Forward(MatRef<'p, T>, Windows<'p, T>),
    /// `c += cols @ b` (the weights' gradient, transposed: the columns by
    /// the output's gradient transposed, read as [`Columns`]).
    Weights(Windows<'p, T>, MatRef<'p, T>),
}

/// [`gemm_in`] of an [`ImageProduct`] in `precision`, adding into `c` when
/// `accumulate`; `scratch` holds [`scratch_len_in`] elements.
pub(crate) fn gemm_windows<T: Float>(
    precision: Precision,
    product: ImageProduct<'_, T>,
    c: &mut [T],
    accumulate: bool,
    scratch: &mut [T],
) {
    if precision == Precision::Bf16
        && let (Some(c32), Some(scratch32)) = (T::f32_slice_mut(c), T::f32_slice_mut(scratch))
    {
        match product {
            ImageProduct::Forward(a, windows) => {
                if let (Some(a32), Some(x32)) = (T::f32_slice(a.data), T::f32_slice(windows.input())) {
                    return bf16::gemm_panels(&a.over(a32), &windows.over(x32), c32, accumulate, scratch32);
                }
            }
            ImageProduct::Weights(windows, b) => {
                if let (Some(b32), Some(x32)) = (T::f32_slice(b.data), T::f32_slice(windows.input())) {
                    let columns = Columns(windows.over(x32));
                    return bf16::gemm_panels(&columns, &b.over(b32).t(), c32, accumulate, scratch32);
                }
            }
        }
    }
    match product {
        ImageProduct::Forward(a, windows) => gemm_panels(&a, &windows, c, accumulate, scratch),
        ImageProduct::Weights(windows, b) => gemm_panels(&Columns(windows), &b.t(), c, accumulate, scratch),
    }
}

/// A micro-kernel and the packing it reads: the part of a blocked product
/// that depends on how its terms are computed.
pub(crate) trait Micro<T: Float> {
    /// True when a packed panel of `R` rows holds, for each depth `p`, the
    /// `R` values of column `p` as they are (no conversion, no pairing).
    const PLAIN: bool;

    /// The elements a packed panel holds per row (of `a`) or column (of
    /// `b`) for a block of depth `kc`.
    fn depth(kc: usize) -> usize;

    /// Packs panels `first_panel..` of `R` rows of `x` (as many as fit in
    /// `packed`, `R * depth(kc)` elements each), columns `pc..pc + kc`.
    fn pack<const R: usize>(x: MatRef<'_, T>, pc: usize, kc: usize, first_panel: usize, packed: &mut [T]);

    /// The `MR × NR` tile of the packed panels `a` and `b`, of `depth`
    /// elements per row: from zero, or, when `carry`, continuing the sums
    /// in `tile` exactly as one call over both depths would have.
    fn tile<const MR: usize, const NR: usize>(depth: usize, a: &[T], b: &[T], tile: &mut [[T; NR]; MR], carry: bool);
}

/// The product in `T` itself: one fused multiply-add per term.
pub(crate) struct Fma;

impl<T: Float> Micro<T> for Fma {
    const PLAIN: bool = true;

    fn depth(kc: usize) -> usize {
        kc
    }

    #[inline]
    fn pack<const R: usize>(x: MatRef<'_, T>, pc: usize, kc: usize, first_panel: usize, packed: &mut [T]) {
        pack::panels::<T, R>(x, pc, kc, first_panel, packed);
    }

    #[inline]
    fn tile<const MR: usize, const NR: usize>(depth: usize, a: &[T], b: &[T], tile: &mut [[T; NR]; MR], carry: bool) {
        kernel::tile::<T, MR, NR>(depth, a, b, tile, carry);
    }
}

/// `c = a @ b`, or `c += a @ b` when `accumulate`; `c` is row-major
/// `a.rows × b.cols`, `scratch` at least [`scratch_len`] elements.
pub(crate) fn gemm<T: Float>(a: MatRef<'_, T>, b: MatRef<'_, T>, c: &mut [T], accumulate: bool, scratch: &mut [T]) {
    gemm_panels(&a, &b.t(), c, accumulate, scratch);
}

/// Where the tiles of a product go when they are not written into a
/// row-major `c` ([`gemm_into`]): a convolution's image gradient, onto
/// which the columns' gradient is folded as its tiles come (`Fold` in
/// `ops/conv.rs`), never written out whole.
pub(crate) trait Tiles<T> {
    /// Takes the top-left `rows × cols` of `tile`, the product's block from
    /// row `i0`, column `j0`.
    fn take<const MR: usize, const NR: usize>(
        &mut self,
        tile: &[[T; NR]; MR],
        i0: usize,
        j0: usize,
        rows: usize,
        cols: usize,
    );
}

/// Whether [`gemm_into`] takes an `m × k` by `k × n` product: one block of
/// `k` and of `n`, so that each tile it hands over is complete, and the
/// tiles come in order of their rows.
pub(crate) fn fits_one_block(k: usize, n: usize) -> bool {
    k <= KC && n <= NC
}

/// `a @ b` handed to `out` tile by tile, in order of the tiles' rows and
/// then of their columns, on this thread, each element the same chain of
/// multiply-adds as in [`gemm`] (the same bits); `scratch` at least
/// [`scratch_len`]. For a product that [`fits_one_block`].
pub(crate) fn gemm_into<T: Float>(a: MatRef<'_, T>, b: MatRef<'_, T>, out: &mut impl Tiles<T>, scratch: &mut [T]) {
    assert!(
        fits_one_block(a.cols, b.cols),
        "gemm_into: {}x{} by {}x{} is more than one block",
        a.rows,
        a.cols,
        b.rows,
        b.cols
    );
    if a.rows == 0 || b.cols == 0 || a.cols == 0 {
        return;
    }
    match tile(simd::level(), std::mem::size_of::<T>()) {
        (12, 32) => tiles_into::<T, 12, 32>(a, b.t(), out, scratch),
        (12, 16) => tiles_into::<T, 12, 16>(a, b.t(), out, scratch),
        (6, 16) => tiles_into::<T, 6, 16>(a, b.t(), out, scratch),
        (6, 8) => tiles_into::<T, 6, 8>(a, b.t(), out, scratch),
        (4, 8) => tiles_into::<T, 4, 8>(a, b.t(), out, scratch),
        _ => tiles_into::<T, 4, 4>(a, b.t(), out, scratch),
    }
}

/// [`gemm_into`] with the `MR × NR` micro-kernel; `m`, `k`, `n` are not zero.
fn tiles_into<T: Float, const MR: usize, const NR: usize>(
    a: MatRef<'_, T>,
    bt: MatRef<'_, T>,
    out: &mut impl Tiles<T>,
    scratch: &mut [T],
) {
    let (m, k, n) = (a.rows, a.cols, bt.rows);
    let (packed_a, rest) = scratch.split_at_mut(m.div_ceil(MR) * MR * k);
    let packed_b = &mut rest[..n.div_ceil(NR) * NR * k];
    pack::panels::<T, NR>(bt, 0, k, 0, packed_b);
    pack::panels::<T, MR>(a, 0, k, 0, packed_a);
    let mut tile = [[T::zero(); NR]; MR];
    for (ir, a_panel) in packed_a.chunks_exact(MR * k).enumerate() {
        for (jr, b_panel) in packed_b.chunks_exact(NR * k).enumerate() {
            kernel::tile::<T, MR, NR>(k, a_panel, b_panel, &mut tile, false);
            out.take(&tile, ir * MR, jr * NR, MR.min(m - ir * MR), NR.min(n - jr * NR));
        }
    }
}

/// [`gemm`] of operands that pack themselves: `c = a @ b` (or `+=`) with
/// `b` given as its transpose `bt`; `scratch` at least [`scratch_len`].
pub(crate) fn gemm_panels<T: Float>(
    a: &impl Panels<T>,
    bt: &impl Panels<T>,
    c: &mut [T],
    accumulate: bool,
    scratch: &mut [T],
) {
    debug_assert_eq!(bt.cols(), a.cols());
    if trivial(a.rows(), a.cols(), bt.rows(), c, accumulate) {
        return;
    }
    let level = simd::level();
    let (mr, nr) = tile(level, std::mem::size_of::<T>());
    // Never more padding than the full tile's, so the scratch sized for it suffices.
    match (rows_for(level, mr, a.rows()), nr) {
        (12, 32) => blocked::<T, Fma, 12, 32>(a, bt, c, accumulate, scratch),
        (6, 32) => blocked::<T, Fma, 6, 32>(a, bt, c, accumulate, scratch),
        (12, 16) => blocked::<T, Fma, 12, 16>(a, bt, c, accumulate, scratch),
        (6, 16) => blocked::<T, Fma, 6, 16>(a, bt, c, accumulate, scratch),
        (6, 8) => blocked::<T, Fma, 6, 8>(a, bt, c, accumulate, scratch),
        (4, 8) => blocked::<T, Fma, 4, 8>(a, bt, c, accumulate, scratch),
        _ => blocked::<T, Fma, 4, 4>(a, bt, c, accumulate, scratch),
    }
}

/// Finishes an `m × k` by `k × n` product with no term (nothing to do
/// when `c` is empty; zeros when `k` is 0): true if it was one.
fn trivial<T: Float>(m: usize, k: usize, n: usize, c: &mut [T], accumulate: bool) -> bool {
    debug_assert_eq!(c.len(), m * n);
    if m == 0 || n == 0 {
        return true;
    }
    if k == 0 {
        if !accumulate {
            c.fill(T::zero());
        }
        return true;
    }
    false
}

/// How a product's rows are shared out: over the pool's threads (how
/// many), between the caller and the helper of `pair.rs`, or not at all.
#[derive(Clone, Copy)]
enum Split {
    Pool(usize),
    Pair,
    Alone,
}

impl Split {
    /// How many threads share the product.
    fn pieces(self) -> usize {
        match self {
            Split::Pool(threads) => threads,
            Split::Pair => 2,
            Split::Alone => 1,
        }
    }
}

/// The blocked product `a @ b` (`b` given as `bt`, its transpose) with
/// the `MR × NR` micro-kernel of `K`; `m`, `n` and `k` are not zero.
fn blocked<T: Float, K: Micro<T>, const MR: usize, const NR: usize>(
    a: &impl Panels<T>,
    bt: &impl Panels<T>,
    c: &mut [T],
    accumulate: bool,
    scratch: &mut [T],
) {
    let (m, k, n) = (a.rows(), a.cols(), bt.rows());
    let split = split_of(m, k, n, MR);
    let pieces = split.pieces();
    if pieces > 1 && by_columns(m, n, MR, NR, pieces) {
        let len = pieces.saturating_mul(piece_len(MR, NR, K::depth(k.min(KC)), m, n, pieces));
        if scratch.len() >= len {
            return columns::<T, K, MR, NR>(a, bt, c, accumulate, &mut scratch[..len], split);
        }
    }
    // One hand-off to the pool for the whole product, not one for each
    // packing of `b` and each block's rows: inside it, the pool's threads
    // share those out among themselves, and a caller outside the pool
    // (which waits on a lock while they work) is woken once.
    let pooled = matches!(split, Split::Pool(_));
    parallel::run(pooled, || blocks::<T, K, MR, NR>(a, bt, c, accumulate, scratch, split));
}

/// How an `m × k` by `k × n` product in tiles of `mr` rows is shared out:
/// over the pool from [`MIN_PARALLEL_FLOPS`] multiply-adds, between the
/// caller and the helper from [`MIN_PAIR_FLOPS`], when it has the rows.
fn split_of(m: usize, k: usize, n: usize, mr: usize) -> Split {
    let threads = if parallel::may_share() { parallel::num_threads() } else { 1 };
    let flops = m.saturating_mul(n).saturating_mul(k);
    if flops >= MIN_PARALLEL_FLOPS && m > mr && threads > 1 {
        Split::Pool(threads)
    } else if flops >= MIN_PAIR_FLOPS && m >= 2 * mr && threads > 1 {
        Split::Pair
    } else {
        Split::Alone
    }
}

/// Whether `pieces` threads share an `m × n` product by its columns rather
/// than its rows: when a thread then computes at least 5% fewer elements
/// of whole tiles. A product of few rows has few panels of them: 64 rows
/// in tiles of 6 are eleven panels, six for the busier of two threads
/// (36 rows of all 256 columns), where by columns each computes 66 rows of
/// 128. Each thread then also packs only the part of `b` it reads, into
/// its own cache, where by rows every thread reads every panel of `b`,
/// half of them packed by the other.
fn by_columns(m: usize, n: usize, mr: usize, nr: usize, pieces: usize) -> bool {
    let [m, n, mr, nr, pieces] = [m, n, mr, nr, pieces].map(|x| x as u128);
    let by_rows = m.div_ceil(mr).div_ceil(pieces) * mr * n.div_ceil(nr) * nr;
    let by_columns = m.div_ceil(mr) * mr * n.div_ceil(nr).div_ceil(pieces) * nr;
    by_columns * 20 < by_rows * 19
}

/// The columns of `b` each of `pieces` pieces of a split by columns gets
/// (whole panels; the last piece may get fewer).
fn piece_width(n: usize, nr: usize, pieces: usize) -> usize {
    n.div_ceil(nr).div_ceil(pieces).saturating_mul(nr).min(n)
}

/// The scratch of one piece of a split by columns: its packing (all of
/// `a`, its panels of `b`) and its block of `c` (saturated: a product too
/// large for it is never split by columns).
fn piece_len(mr: usize, nr: usize, depth: usize, m: usize, n: usize, pieces: usize) -> usize {
    let width = piece_width(n, nr, pieces);
    packed_len(mr, nr, depth, m, width).saturating_add(m.saturating_mul(width))
}

/// Rows `first..first + count` of `bt` (columns of `b`): the part of `b`
/// one piece of a split by columns reads. `first` is a whole number of
/// panels.
struct RowsOf<'p, P> {
    bt: &'p P,
    first: usize,
    count: usize,
}

impl<T: Float, P: Panels<T>> Panels<T> for RowsOf<'_, P> {
    fn rows(&self) -> usize {
        self.count
    }

    fn cols(&self) -> usize {
        self.bt.cols()
    }

    fn pack<K: Micro<T>, const R: usize>(&self, pc: usize, kc: usize, first_panel: usize, packed: &mut [T]) {
        debug_assert_eq!(self.first % R, 0);
        self.bt.pack::<K, R>(pc, kc, self.first / R + first_panel, packed);
    }
}

/// [`blocked`] shared out by columns (see [`by_columns`]): each piece of
/// whole panels of `b` is a product of its own, all rows of `a` by its
/// columns, into a block of its own, then copied into `c`. A piece's
/// block starts as its part of `c` when accumulating, so every element is
/// the same chain of multiply-adds as by rows or on one thread: the same
/// bits. `scratch` holds one [`piece_len`] a piece.
fn columns<T: Float, K: Micro<T>, const MR: usize, const NR: usize>(
    a: &impl Panels<T>,
    bt: &impl Panels<T>,
    c: &mut [T],
    accumulate: bool,
    scratch: &mut [T],
    split: Split,
) {
    let (m, n, pieces) = (a.rows(), bt.rows(), split.pieces());
    let width = piece_width(n, NR, pieces);
    let piece_scratch = scratch.len() / pieces;
    // Where a piece's block of `c` starts in its scratch, after its packing.
    let block_at = piece_scratch - m * width;
    // Piece `index`'s columns: the first, and how many.
    let cols_of = |index: usize| (index * width, width.min(n.saturating_sub(index * width)));
    let piece = |index: usize, scratch: &mut [T], c: &[T]| {
        let (first, cols) = cols_of(index);
        if cols == 0 {
            return;
        }
        let (packing, block) = scratch.split_at_mut(block_at);
        let block = &mut block[..m * cols];
        if accumulate {
            for (row, from) in block.chunks_exact_mut(cols).zip(c.chunks_exact(n)) {
                row.copy_from_slice(&from[first..first + cols]);
            }
        }
        let part = RowsOf { bt, first, count: cols };
        blocks::<T, K, MR, NR>(a, &part, block, accumulate, packing, Split::Alone);
    };
    {
        let c = &*c;
        match split {
            Split::Pool(_) => parallel::run(true, || {
                scratch.par_chunks_mut(piece_scratch).enumerate().for_each(|(index, s)| piece(index, s, c))
            }),
            _ => {
                let (first, second) = scratch.split_at_mut(piece_scratch);
                pair::pair(|| piece(0, first, c), || piece(1, second, c));
            }
        }
    }
    for (index, s) in scratch.chunks_exact(piece_scratch).enumerate() {
        let (first, cols) = cols_of(index);
        if cols == 0 {
            continue;
        }
        let block = &s[block_at..][..m * cols];
        for (row, to) in block.chunks_exact(cols).zip(c.chunks_exact_mut(n)) {
            to[first..first + cols].copy_from_slice(row);
        }
    }
}

/// The most panels of `a` in a group of [`panels_in_l2`]: their tiles wait
/// on the stack while the depth's parts pass ([`depth_in_l1`]).
const GROUP: usize = 16;

/// How many packed panels of `a` (of `a_panel` elements each) a group
/// holds: as many as fill half of one core's L2 beside two panels of `b`
/// (of `b_panel` elements), at least one. Every panel of `b` passes over
/// a group before the next, so it comes from the shared L3 (or memory)
/// once per group and the group's panels from L2; with the panels of `a`
/// outermost, each read all of the packed `b` from L3 again, and W3 ran
/// at 40% of the FMA peak on an Intel Xeon whose cores each do two 512-bit
/// multiply-adds a cycle.
fn panels_in_l2<T>(a_panel: usize, b_panel: usize) -> usize {
    let size = std::mem::size_of::<T>();
    let room = (crate::cache::l2_bytes() / 2).saturating_sub(2 * b_panel * size);
    (room / (a_panel * size).max(1)).max(1)
}

/// How much of the depth of a panel of `b` (of `nr` elements per step)
/// the kernel takes at a time: a part that fills half of one core's L1d,
/// at least 8 steps. The part stays in L1 while the group's panels of `a`
/// pass over it, and each tile's sums carry from one part to the next
/// (`Micro::tile`'s `carry`), so every element is the same chain of
/// multiply-adds whatever the CPU's caches: the same bits. A whole block's
/// panel of `b` (1024 steps of 32 `f32`, 128 KiB) fits no L1, and the
/// kernel then read both operands from L2 at every step.
fn depth_in_l1<T>(nr: usize) -> usize {
    (crate::cache::l1d_bytes() / 2 / (nr * std::mem::size_of::<T>()).max(1)).max(8)
}

/// [`blocked`]'s blocks of `n` and `k`, their rows shared out as `split`
/// says (on the pool's threads, for [`Split::Pool`]).
fn blocks<T: Float, K: Micro<T>, const MR: usize, const NR: usize>(
    a: &impl Panels<T>,
    bt: &impl Panels<T>,
    c: &mut [T],
    accumulate: bool,
    scratch: &mut [T],
    split: Split,
) {
    let (m, k, n) = (a.rows(), a.cols(), bt.rows());
    let m_padded = m.div_ceil(MR) * MR;
    for jc in (0..n).step_by(NC) {
        let nc = NC.min(n - jc);
        let nc_padded = nc.div_ceil(NR) * NR;
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            let depth = K::depth(kc);
            let (packed_a, rest) = scratch.split_at_mut(m_padded * depth);
            let packed_b = &mut rest[..nc_padded * depth];
            let parallel_pack = matches!(split, Split::Pool(_)) && nc * kc >= MIN_PARALLEL_PACK;
            pack::b_panels::<T, K, NR>(bt, pc, kc, jc, packed_b, parallel_pack);
            // The first block of k writes `c` unless accumulating; later ones add.
            let add = accumulate || pc > 0;
            let packed_b = &*packed_b;
            let group = panels_in_l2::<T>(MR * depth, NR * depth).min(GROUP);
            let part = depth_in_l1::<T>(NR);
            // The rows of `c` from panel `first_panel` on, with room to pack their panels of `a`.
            let rows = |first_panel: usize, c_rows: &mut [T], packed_a: &mut [T]| {
                let panels = c_rows.len().div_ceil(n * MR);
                let packed_a = &mut packed_a[..panels * MR * depth];
                let mut tiles = [[[T::zero(); NR]; MR]; GROUP];
                let groups = packed_a.chunks_mut(group * MR * depth).zip(c_rows.chunks_mut(group * MR * n));
                for (g, (packed_a, c_rows)) in groups.enumerate() {
                    let first = first_panel + g * group;
                    a.pack::<K, MR>(pc, kc, first, packed_a);
                    let tiles = &mut tiles[..packed_a.len() / (MR * depth)];
                    for jr in 0..nc_padded / NR {
                        let b_panel = &packed_b[jr * NR * depth..][..NR * depth];
                        for d0 in (0..depth).step_by(part) {
                            let d = part.min(depth - d0);
                            let b_part = &b_panel[d0 * NR..][..d * NR];
                            for (tile, a_panel) in tiles.iter_mut().zip(packed_a.chunks_exact(MR * depth)) {
                                K::tile::<MR, NR>(d, &a_panel[d0 * MR..][..d * MR], b_part, tile, d0 > 0);
                            }
                        }
                        let cols = NR.min(nc - jr * NR);
                        for (ir, tile) in tiles.iter().enumerate() {
                            let rows_here = MR.min(m - (first + ir) * MR);
                            let c_tile_rows = &mut c_rows[ir * MR * n..(ir * MR + rows_here) * n];
                            kernel::store::<T, MR, NR>(tile, c_tile_rows, n, jc + jr * NR, rows_here, cols, add);
                        }
                    }
                }
            };
            match split {
                Split::Pool(threads) => {
                    // Whole panels of MR rows to each piece, which packs its own
                    // panels of `a` and computes its rows of `c`. Pieces are
                    // independent rows of `c`, so the split changes no value.
                    let per_piece = (m_padded / MR).div_ceil(4 * threads).max(1);
                    c.par_chunks_mut(per_piece * MR * n)
                        .zip(packed_a.par_chunks_mut(per_piece * MR * depth))
                        .enumerate()
                        .for_each(|(piece, (c_rows, packed_a))| rows(piece * per_piece, c_rows, packed_a));
                }
                Split::Pair => {
                    // The same pieces of whole panels, two of them.
                    let top = m_padded / MR / 2;
                    let (c_top, c_bottom) = c.split_at_mut(top * MR * n);
                    let (a_top, a_bottom) = packed_a.split_at_mut(top * MR * depth);
                    pair::pair(|| rows(0, c_top, a_top), || rows(top, c_bottom, a_bottom));
                }
                Split::Alone => rows(0, c, packed_a),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small integers, so that every product and partial sum is exact and
    /// any summation order gives the same bits: results compare with `==`.
    fn integers<T: Float>(len: usize, seed: u64) -> Vec<T> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                T::from((state >> 33) % 7).expect("a small integer") - T::from(3).expect("3")
            })
            .collect()
    }

    fn naive<T: Float>(a: MatRef<'_, T>, b: MatRef<'_, T>) -> Vec<T> {
        let mut c = vec![T::zero(); a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                c[i * b.cols + j] = (0..a.cols).fold(T::zero(), |s, p| s + *a.at(i, p) * *b.at(p, j));
            }
        }
        c
    }

    /// Every layout the packing reads (row-major and transposed operands),
    /// ragged edges in every dimension, several blocks of `k` and of `n`,
    /// products large enough to be shared out (the last two with several
    /// blocks of `k` or of `n` in one hand-off), written and accumulated.
    fn agrees_with_the_naive_product<T: Float>() {
        let shapes = [
            (1, 1, 1),
            (5, 7, 3),
            (13, 300, 33),
            (40, 300, 400),
            (3, 5, NC + 5),
            (25, 2 * KC + 1, 17),
            (40, 2 * KC + 1, 60),
            (13, 90, NC + 5),
            // Multiples of 12 rows, which keep the full tile on AVX-512.
            (24, 300, 40),
            (36, 2 * KC + 1, 33),
        ];
        for (m, k, n) in shapes {
            let (a_data, b_data) = (integers::<T>(m * k, 1), integers::<T>(k * n, 2));
            let a_rows = MatRef::row_major(&a_data, m, k);
            let a_cols = MatRef::row_major(&a_data, k, m).t();
            let b_rows = MatRef::row_major(&b_data, k, n);
            let b_cols = MatRef::row_major(&b_data, n, k).t();
            for (a, b) in [(a_rows, b_rows), (a_cols, b_rows), (a_rows, b_cols), (a_cols, b_cols)] {
                let expected = naive(a, b);
                let mut scratch = vec![T::zero(); scratch_len::<T>(m, k, n)];
                let mut c = vec![T::nan(); m * n];
                gemm(a, b, &mut c, false, &mut scratch);
                let strides = [a.row_stride, a.col_stride, b.row_stride, b.col_stride];
                assert!(c == expected, "c = a @ b, {m}x{k} by {k}x{n}, strides {strides:?}");
                gemm(a, b, &mut c, true, &mut scratch);
                let doubled: Vec<T> = expected.iter().map(|&v| v + v).collect();
                assert!(c == doubled, "c += a @ b, {m}x{k} by {k}x{n}, strides {strides:?}");
            }
        }
    }

    #[test]
    fn a_tile_of_half_the_rows_is_taken_where_it_computes_fewer_padding_rows() {
        // 64 rows: 72 computed in tiles of 12, 66 in tiles of 6.
        assert_eq!(rows_for(Level::Avx512, 12, 64), 6);
        assert_eq!(rows_for(Level::Avx512, 12, 1), 6);
        // 1024 rows: 1032 against 1026, under 4% fewer; 144 and 36 fill tiles of 12.
        assert_eq!(rows_for(Level::Avx512, 12, 1024), 12);
        assert_eq!(rows_for(Level::Avx512, 12, 144), 12);
        assert_eq!(rows_for(Level::Avx512, 12, 36), 12);
        // AVX2's tile is never halved.
        assert_eq!(rows_for(Level::Avx2, 6, 64), 6);
        assert_eq!(rows_for(Level::Avx2, 6, 1), 6);
    }

    /// The same product in tiles of `MR` and of `MR / 2` rows: the same
    /// bits, on values whose sums round (any other order of terms would
    /// show), over one and several blocks of `k`, written and accumulated.
    fn half_tiles_give_the_same_bits<T: Float, const MR: usize, const HALF: usize, const NR: usize>() {
        let mut rng = crate::Rng::new(7);
        for (m, k, n) in [(1, 5, 3), (13, 300, 70), (64, 90, 33), (40, 2 * KC + 1, 45)] {
            let a_data: Vec<T> = (0..m * k).map(|_| T::from_f64(rng.normal())).collect();
            let b_data: Vec<T> = (0..k * n).map(|_| T::from_f64(rng.normal())).collect();
            let (a, b) = (MatRef::row_major(&a_data, m, k), MatRef::row_major(&b_data, k, n));
            let mut scratch = vec![T::zero(); packed_len(MR, NR, k.min(KC), m, n)];
            for accumulate in [false, true] {
                let start: Vec<T> = (0..m * n).map(|_| T::from_f64(rng.normal())).collect();
                let (mut full, mut half) = (start.clone(), start);
                blocked::<T, Fma, MR, NR>(&a, &b.t(), &mut full, accumulate, &mut scratch);
                blocked::<T, Fma, HALF, NR>(&a, &b.t(), &mut half, accumulate, &mut scratch);
                let bits = |x: &T| Float::to_f64(*x).to_bits();
                let same = full.iter().zip(&half).all(|(x, y)| bits(x) == bits(y));
                assert!(same, "{m}x{k} by {k}x{n}, accumulate {accumulate}: tiles of {MR} and {HALF} rows differ");
            }
        }
    }

    /// A product shared out by columns, over two and three pieces (on the
    /// pool and on the pair of threads): the same bits as on one thread,
    /// with ragged last pieces, a piece left with no columns, several
    /// blocks of `k`, written and accumulated.
    #[test]
    fn a_split_by_columns_gives_the_same_bits_as_one_thread() {
        let mut rng = crate::Rng::new(11);
        for (m, k, n) in [(64, 300, 256), (5, 7, 70), (13, 2 * KC + 1, 100), (7, 20, 40)] {
            let a_data: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
            let b_data: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
            let (a, b) = (MatRef::row_major(&a_data, m, k), MatRef::row_major(&b_data, k, n));
            for accumulate in [false, true] {
                let start: Vec<f32> = (0..m * n).map(|_| rng.normal() as f32).collect();
                let mut alone = start.clone();
                let mut scratch = vec![0.0; packed_len(6, 32, k.min(KC), m, n)];
                blocks::<f32, Fma, 6, 32>(&a, &b.t(), &mut alone, accumulate, &mut scratch, Split::Alone);
                for split in [Split::Pair, Split::Pool(2), Split::Pool(3)] {
                    let pieces = split.pieces();
                    let mut c = start.clone();
                    let mut scratch = vec![0.0; pieces * piece_len(6, 32, k.min(KC), m, n, pieces)];
                    columns::<f32, Fma, 6, 32>(&a, &b.t(), &mut c, accumulate, &mut scratch, split);
                    let same = c.iter().zip(&alone).all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(same, "{m}x{k} by {k}x{n} in {pieces} pieces, accumulate {accumulate}");
                }
            }
        }
    }

    /// Element `(i, j)` of `c = a @ b` (or `c += a @ b`) as the product
    /// defines it: for each block of [`KC`] terms, one chain of fused
    /// multiply-adds from zero, in order of depth, added to the sum so far.
    fn chained<T: Float>(a: MatRef<'_, T>, b: MatRef<'_, T>, start: &[T], accumulate: bool) -> Vec<T> {
        let mut c = start.to_vec();
        for i in 0..a.rows {
            for j in 0..b.cols {
                for (block, p0) in (0..a.cols).step_by(KC).enumerate() {
                    let terms = p0..(p0 + KC).min(a.cols);
                    let chain = terms.fold(T::zero(), |s, p| a.at(i, p).mul_add(*b.at(p, j), s));
                    let c = &mut c[i * b.cols + j];
                    *c = if block == 0 && !accumulate { chain } else { *c + chain };
                }
            }
        }
        c
    }

    /// The depth taken in parts that fit L1 and the rows in groups that fit
    /// L2 (both from this CPU's caches) change no bit: every element is
    /// the chain [`chained`] computes, on values whose sums round, with
    /// more panels of `a` than a group holds, several parts and blocks of
    /// the depth, ragged edges, written and accumulated, in tiles of 12
    /// and of 6 rows, on one thread and shared out.
    fn parts_and_groups_change_no_bit<T: Float>() {
        let mut rng = crate::Rng::new(5);
        assert!(depth_in_l1::<T>(32) < KC, "a block of the depth is more than one part");
        for (m, k, n) in [(GROUP * 12 + 7, 2 * KC + 1, 70), (GROUP * 6 + 13, 500, 40), (5, 3, 9)] {
            let a_data: Vec<T> = (0..m * k).map(|_| T::from_f64(rng.normal())).collect();
            let b_data: Vec<T> = (0..k * n).map(|_| T::from_f64(rng.normal())).collect();
            let (a, b) = (MatRef::row_major(&a_data, m, k), MatRef::row_major(&b_data, k, n));
            for accumulate in [false, true] {
                let start: Vec<T> = (0..m * n).map(|_| T::from_f64(rng.normal())).collect();
                let expected = chained(a, b, &start, accumulate);
                let bits = |c: &[T]| c.iter().map(|x| Float::to_f64(*x).to_bits()).collect::<Vec<_>>();
                let mut scratch = vec![T::zero(); packed_len(12, 32, k.min(KC), m, n)];
                let mut c = start.clone();
                blocks::<T, Fma, 12, 32>(&a, &b.t(), &mut c, accumulate, &mut scratch, Split::Alone);
                assert!(bits(&c) == bits(&expected), "{m}x{k} by {k}x{n} in 12 x 32 tiles, accumulate {accumulate}");
                let mut c = start.clone();
                blocks::<T, Fma, 6, 32>(&a, &b.t(), &mut c, accumulate, &mut scratch, Split::Alone);
                assert!(bits(&c) == bits(&expected), "{m}x{k} by {k}x{n} in 6 x 32 tiles, accumulate {accumulate}");
                let mut c = start.clone();
                let mut scratch = vec![T::zero(); scratch_len::<T>(m, k, n)];
                gemm(a, b, &mut c, accumulate, &mut scratch);
                assert!(bits(&c) == bits(&expected), "{m}x{k} by {k}x{n} by gemm, accumulate {accumulate}");
            }
        }
    }

    #[test]
    fn f32_parts_and_groups_change_no_bit() {
        parts_and_groups_change_no_bit::<f32>();
    }

    #[test]
    fn f64_parts_and_groups_change_no_bit() {
        parts_and_groups_change_no_bit::<f64>();
    }

    #[test]
    fn a_product_of_few_rows_is_split_by_columns() {
        // 64 rows in tiles of 6: six panels (36 rows) of all 256 columns for
        // the busier thread by rows, 66 rows of 128 by columns.
        assert!(by_columns(64, 256, 6, 32, 2));
        // As many elements either way: by rows, as before.
        assert!(!by_columns(64, 256, 12, 32, 2));
        assert!(!by_columns(1024, 384, 12, 32, 2));
        assert!(!by_columns(784, 256, 12, 32, 2));
        // One panel of columns cannot be shared.
        assert!(!by_columns(64, 10, 6, 32, 2));
    }

    #[test]
    fn a_product_inside_work_run_alone_is_not_shared_out() {
        let big = || split_of(1024, 1024, 1024, 12);
        if parallel::num_threads() > 1 {
            assert!(matches!(big(), Split::Pool(_)));
        }
        assert!(matches!(parallel::alone(big), Split::Alone));
        assert!(matches!(parallel::alone(|| split_of(64, 784, 256, 6)), Split::Alone));
    }

    #[test]
    fn f32_half_tiles_give_the_same_bits() {
        half_tiles_give_the_same_bits::<f32, 12, 6, 32>();
    }

    #[test]
    fn f64_half_tiles_give_the_same_bits() {
        half_tiles_give_the_same_bits::<f64, 12, 6, 16>();
    }

    #[test]
    fn f32_agrees_with_the_naive_product() {
        agrees_with_the_naive_product::<f32>();
    }

    #[test]
    fn f64_agrees_with_the_naive_product() {
        agrees_with_the_naive_product::<f64>();
    }
}
