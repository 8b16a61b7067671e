//! The bf16 matrix product: `f32` operands and result, every term computed
//! from the operands rounded to bf16 (to nearest, ties to even), summed in
//! `f32`. The rounding happens once, while packing (`pack_pairs`): a
//! panel holds, for each pair of depths `2q, 2q + 1`, the two bf16 values
//! in one 32-bit word (the even depth in the low half), which is what
//! AVX512-BF16's `vdpbf16ps` reads. Where the CPU has it, operands with
//! contiguous rows or columns are rounded by its `vcvtne2ps2bf16`, 32
//! values an instruction and the same rounding (tested on every upper
//! half of an `f32`): with the portable rounding, packing took a fifth
//! of W3's time in bf16 on a Zen 4.
//!
//! **Two paths, the same bits.** Where the CPU has it, the micro-kernel is
//! `vdpbf16ps` ([`Dot`]). Intel's definition of it, per `f32` lane, is two
//! fused multiply-adds in sequence, the odd pair first:
//!
//! ```text
//! acc = acc + a[2q + 1] · b[2q + 1]     (each: one rounding to nearest even,
//! acc = acc + a[2q]     · b[2q]          inputs denormal → 0, result denormal → 0)
//! ```
//!
//! The fallback ([`Emulated`], compiled for every vector width like the
//! `f32` kernel) computes exactly that with `f32` fused multiply-adds: a
//! bf16 widened to `f32` is exact, an FMA rounds once as the instruction
//! does, and the flushes are explicit. Packed operands are never
//! denormal (rounding flushes them) and the accumulator starts at zero and
//! is flushed after every step, so only the results need flushing. What is
//! left is where a result is tiny: `vdpbf16ps` decides after rounding (an
//! exact `2^-126 - 2^-160` rounds to `2^-126` and stays), as does the
//! check on the IEEE result here. The tests compare both on random bit
//! patterns, near underflow and overflow and on whole products. NaN
//! payloads are the one thing not promised (a NaN is a NaN on both).
//!
//! **Error.** With `u = 2^-8` (bf16's unit roundoff) each rounded operand
//! is `x(1 + δ)`, `|δ| ≤ u`, so each term is off by at most
//! `(2u + u²)|a||b|`; the `f32` sum of `k` terms adds at most
//! `k · 2^-24 · Σ|ã||b̃|` (one rounding per term and per block of `k`);
//! flushed underflows add below `2^-125` a term. Together, for every
//! element:
//!
//! ```text
//! |c − a·b| ≤ (2^-7 + (k + 2) · 2^-23) · Σₚ |a_ip| |b_pj| + k · 2^-125
//! ```
//!
//! (`tests/bf16.rs` checks it against `f64` products.) The blocking, the
//! threads and the store into `c` are those of the `f32` product, so the
//! result is the same whatever the thread count, as there.

use super::{KC, MatRef, Micro, Panels, blocked, packed_len, trivial};
use crate::simd::{self, Level};

/// Which micro-kernel computes the products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// AVX512-BF16's `vdpbf16ps`.
    Dot,
    /// Its emulation in `f32` fused multiply-adds.
    Emulated,
}

/// The path this CPU runs (see [`simd::bf16_dot`], and `GRAD_SIMD`).
pub(crate) fn path() -> Path {
    if simd::bf16_dot() { Path::Dot } else { Path::Emulated }
}

/// The tile of `c` in registers: `vdpbf16ps` as the `f32` kernel (24
/// accumulators); the emulation with half the rows at each width, as it
/// needs registers for both halves of every pair.
fn tile(path: Path, level: Level) -> (usize, usize) {
    match (path, level) {
        (Path::Dot, _) => (12, 32),
        (Path::Emulated, Level::Avx512) => (6, 32),
        (Path::Emulated, Level::Avx2) => (4, 16),
        (Path::Emulated, Level::Baseline) => (4, 8),
    }
}

/// How many `f32`s of scratch [`gemm`] needs for an `m × k` by `k × n` product.
pub(crate) fn scratch_len(m: usize, k: usize, n: usize) -> usize {
    scratch_len_on(path(), m, k, n)
}

/// [`scratch_len`] on `path`.
pub(crate) fn scratch_len_on(path: Path, m: usize, k: usize, n: usize) -> usize {
    let (mr, nr) = tile(path, simd::level());
    packed_len(mr, nr, k.min(KC).div_ceil(2), m, n)
}

/// `c = a @ b` (or `c += a @ b` when `accumulate`) from bf16-rounded
/// operands: as [`super::gemm`], on the path this CPU runs.
pub(crate) fn gemm(a: MatRef<'_, f32>, b: MatRef<'_, f32>, c: &mut [f32], accumulate: bool, scratch: &mut [f32]) {
    gemm_on(path(), a, b, c, accumulate, scratch);
}

/// [`gemm`] of operands that pack themselves (`b` given as its transpose
/// `bt`), as [`super::gemm_panels`].
pub(crate) fn gemm_panels(
    a: &impl Panels<f32>,
    bt: &impl Panels<f32>,
    c: &mut [f32],
    accumulate: bool,
    scratch: &mut [f32],
) {
    gemm_panels_on(path(), a, bt, c, accumulate, scratch);
}

/// [`gemm`] on `path` (scratch of [`scratch_len_on`]); [`Path::Dot`]
/// panics on a CPU without AVX512-BF16.
pub(crate) fn gemm_on(
    path: Path,
    a: MatRef<'_, f32>,
    b: MatRef<'_, f32>,
    c: &mut [f32],
    accumulate: bool,
    scratch: &mut [f32],
) {
    gemm_panels_on(path, &a, &b.t(), c, accumulate, scratch);
}

/// [`gemm_panels`] on `path`.
fn gemm_panels_on(
    path: Path,
    a: &impl Panels<f32>,
    bt: &impl Panels<f32>,
    c: &mut [f32],
    accumulate: bool,
    scratch: &mut [f32],
) {
    if trivial(a.rows(), a.cols(), bt.rows(), c, accumulate) {
        return;
    }
    match tile(path, simd::level()) {
        (12, 32) => blocked::<f32, Dot, 12, 32>(a, bt, c, accumulate, scratch),
        (6, 32) => blocked::<f32, Emulated, 6, 32>(a, bt, c, accumulate, scratch),
        (4, 16) => blocked::<f32, Emulated, 4, 16>(a, bt, c, accumulate, scratch),
        _ => blocked::<f32, Emulated, 4, 8>(a, bt, c, accumulate, scratch),
    }
}

/// `x` rounded to bf16, to nearest with ties to even, as the bits of the
/// bf16 in the low half: zeros and denormals give a zero of their sign
/// (what `vdpbf16ps` would read them as), a NaN a quiet NaN of its sign,
/// and a finite value beyond bf16's largest rounds to an infinity.
/// Branch-free, so the packing loops vectorise.
#[inline]
pub(crate) fn round(x: f32) -> u32 {
    let bits = x.to_bits();
    let nan = bits & 0x7fff_ffff > 0x7f80_0000;
    let tiny = bits & 0x7f80_0000 == 0;
    // Adding 0x7fff and the lowest kept bit carries into the kept half
    // exactly when the dropped half is above one half, or equal to it with
    // an odd kept half. No overflow: the largest non-NaN pattern is
    // 0xff80_0000.
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16;
    if nan {
        (bits >> 16) | 0x40
    } else if tiny {
        (bits >> 16) & 0x8000
    } else {
        rounded
    }
}

/// The bf16 (low half of `bits`) widened to `f32`: exact.
#[inline]
fn widen(bits: u32) -> f32 {
    f32::from_bits(bits << 16)
}

/// One packed word: `lo` and `hi` rounded to bf16, `lo` in the low half,
/// held as the bits of an `f32` (the scratch is the tape's `f32`s; moving
/// an `f32` never changes its bits).
#[inline]
fn pair(lo: f32, hi: f32) -> f32 {
    f32::from_bits(round(lo) | (round(hi) << 16))
}

simd::multiversion! {
    /// Packs panels `first_panel..` of `R` rows of `x`, columns `pc..pc + kc`:
    /// panel `r` holds, for each pair `q < ⌈kc / 2⌉`, the words
    /// `pair(x[r·R + i, pc + 2q], x[r·R + i, pc + 2q + 1])` for `i < R`, zeros
    /// past the rows of `x` and past depth `kc`. Compiled for each vector
    /// width, as the rounding is arithmetic (a third of W3's time in bf16
    /// when compiled for the baseline only).
    fn pack_pairs[const R: usize][R](x: MatRef<'_, f32>, pc: usize, kc: usize, first_panel: usize, packed: &mut [f32]) {
        each_panel::<R>(x, kc, first_panel, packed, |i0, rows, out| {
            if x.row_stride == 1 {
                // The panel's rows are adjacent for each depth: two runs per word.
                for (q, words) in out.chunks_exact_mut(R).enumerate() {
                    let lo = &x.data[(pc + 2 * q) * x.col_stride + i0..][..rows];
                    if 2 * q + 1 < kc {
                        let hi = &x.data[(pc + 2 * q + 1) * x.col_stride + i0..][..rows];
                        words.iter_mut().zip(lo.iter().zip(hi)).for_each(|(w, (&l, &h))| *w = pair(l, h));
                    } else {
                        words.iter_mut().zip(lo).for_each(|(w, &l)| *w = pair(l, 0.0));
                    }
                }
            } else if x.col_stride == 1 {
                // Each row is contiguous: `DEPTH` words of a row converted at a
                // time, then spread over the panel (as in the `f32` packing, a
                // few cache lines of the panel at a time).
                const DEPTH: usize = 16;
                for (chunk, out) in out.chunks_mut(DEPTH * R).enumerate() {
                    let (q0, words) = (chunk * DEPTH, out.len() / R);
                    let len = (2 * words).min(kc - 2 * q0);
                    let mut converted = [0.0f32; DEPTH];
                    for i in 0..rows {
                        let row = &x.data[(i0 + i) * x.row_stride + pc + 2 * q0..][..len];
                        let (whole, last) = row.split_at(len & !1);
                        converted.iter_mut().zip(whole.chunks_exact(2)).for_each(|(w, two)| *w = pair(two[0], two[1]));
                        if let [l] = *last {
                            converted[len / 2] = pair(l, 0.0);
                        }
                        for (q, &w) in converted[..words].iter().enumerate() {
                            out[q * R + i] = w;
                        }
                    }
                }
            } else {
                for (q, words) in out.chunks_exact_mut(R).enumerate() {
                    for (i, w) in words[..rows].iter_mut().enumerate() {
                        let hi = if 2 * q + 1 < kc { *x.at(i0 + i, pc + 2 * q + 1) } else { 0.0 };
                        *w = pair(*x.at(i0 + i, pc + 2 * q), hi);
                    }
                }
            }
        });
    }
}

/// Calls `fill(i0, rows, panel)` on each panel of `R` rows of `x` and
/// `⌈kc / 2⌉` words a row in `packed`, from panel `first_panel`: `i0` is
/// its first row of `x`, `rows` how many of its rows `x` has (the panel
/// is zeroed first when fewer than `R`). Inlined into each packing, so
/// that `fill` is compiled at its SIMD level.
#[inline(always)]
fn each_panel<const R: usize>(
    x: MatRef<'_, f32>,
    kc: usize,
    first_panel: usize,
    packed: &mut [f32],
    mut fill: impl FnMut(usize, usize, &mut [f32]),
) {
    for (index, out) in packed.chunks_exact_mut(R * kc.div_ceil(2)).enumerate() {
        let i0 = (first_panel + index) * R;
        let rows = R.min(x.rows - i0);
        if rows < R {
            out.fill(0.0);
        }
        fill(i0, rows, out);
    }
}

/// The micro-kernel of `vdpbf16ps`.
pub(crate) struct Dot;

impl Micro<f32> for Dot {
    const PLAIN: bool = false;

    fn depth(kc: usize) -> usize {
        kc.div_ceil(2)
    }

    fn pack<const R: usize>(x: MatRef<'_, f32>, pc: usize, kc: usize, first_panel: usize, packed: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if (x.row_stride == 1 || x.col_stride == 1) && simd::has_bf16_dot() {
            // SAFETY: `dot::pack_pairs` only enables target features, and
            // the CPU reports them (checked just above).
            #[allow(unsafe_code)]
            unsafe {
                dot::pack_pairs::<R>(x, pc, kc, first_panel, packed)
            };
            return;
        }
        pack_pairs::<R>(x, pc, kc, first_panel, packed);
    }

    fn tile<const MR: usize, const NR: usize>(
        pairs: usize,
        a: &[f32],
        b: &[f32],
        tile: &mut [[f32; NR]; MR],
        carry: bool,
    ) {
        assert!(NR == 32, "the vdpbf16ps kernel is 32 columns wide");
        #[cfg(target_arch = "x86_64")]
        if simd::has_bf16_dot() {
            // SAFETY: `dot::tile` only enables target features, and the CPU
            // reports them (checked just above), so every instruction in it
            // exists here.
            #[allow(unsafe_code)]
            unsafe {
                dot::tile::<MR>(pairs, a, b, tile.as_flattened_mut(), carry)
            };
            return;
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (pairs, a, b, tile, carry);
        panic!("this CPU has no AVX512-BF16: the bf16 products take Path::Emulated");
    }
}

/// The emulation of `vdpbf16ps` in `f32` fused multiply-adds.
pub(crate) struct Emulated;

impl Micro<f32> for Emulated {
    const PLAIN: bool = false;

    fn depth(kc: usize) -> usize {
        kc.div_ceil(2)
    }

    fn pack<const R: usize>(x: MatRef<'_, f32>, pc: usize, kc: usize, first_panel: usize, packed: &mut [f32]) {
        pack_pairs::<R>(x, pc, kc, first_panel, packed);
    }

    fn tile<const MR: usize, const NR: usize>(
        pairs: usize,
        a: &[f32],
        b: &[f32],
        tile: &mut [[f32; NR]; MR],
        carry: bool,
    ) {
        emulated_tile::<MR, NR>(pairs, a, b, tile, carry);
    }
}

/// `x`, or a zero of its sign when it is denormal: `vdpbf16ps`'s flush.
#[inline(always)]
fn flush(x: f32) -> f32 {
    let bits = x.to_bits();
    if bits & 0x7f80_0000 == 0 { f32::from_bits(bits & 0x8000_0000) } else { x }
}

simd::multiversion! {
    /// The `MR × NR` tile of packed panels of `pairs` words per row, from
    /// zero or (when `carry`) from the sums in `tile`: for each word, the
    /// high halves' product then the low halves', each one fused
    /// multiply-add flushed as `vdpbf16ps` flushes. (The operands need no
    /// flush: packing never leaves a denormal; nor do the sums carried in,
    /// which the same flush left.)
    fn emulated_tile[const MR: usize, const NR: usize][MR, NR](
        pairs: usize,
        a: &[f32],
        b: &[f32],
        tile: &mut [[f32; NR]; MR],
        carry: bool,
    ) {
        let mut acc = if carry { *tile } else { [[0.0f32; NR]; MR] };
        for (a, b) in a[..pairs * MR].chunks_exact(MR).zip(b[..pairs * NR].chunks_exact(NR)) {
            let (mut b_lo, mut b_hi) = ([0.0f32; NR], [0.0f32; NR]);
            for j in 0..NR {
                b_lo[j] = widen(b[j].to_bits());
                b_hi[j] = widen(b[j].to_bits() >> 16);
            }
            for i in 0..MR {
                let (a_lo, a_hi) = (widen(a[i].to_bits()), widen(a[i].to_bits() >> 16));
                for j in 0..NR {
                    let high = flush(a_hi.mul_add(b_hi[j], acc[i][j]));
                    acc[i][j] = flush(a_lo.mul_add(b_lo[j], high));
                }
            }
        }
        *tile = acc;
    }
}

/// `vdpbf16ps` on one lane, for any inputs (the definition the tests hold
/// both kernels to): `acc` plus the products of the bf16 pairs `a` and `b`
/// (the low half the even element), the odd ones first, each a fused
/// multiply-add with denormal inputs read as zero and a denormal result
/// flushed.
#[cfg(test)]
pub(crate) fn dot_lane(acc: f32, a: u32, b: u32) -> f32 {
    let (a_lo, a_hi, b_lo, b_hi) = (flush(widen(a)), flush(widen(a >> 16)), flush(widen(b)), flush(widen(b >> 16)));
    let high = flush(a_hi.mul_add(b_hi, flush(acc)));
    flush(a_lo.mul_add(b_lo, high))
}

/// The one module of the bf16 product with `unsafe` code: the intrinsics
/// of AVX512-BF16 and the loads and stores around them.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod dot {
    use std::arch::x86_64::{
        __m512, __m512bh, __m512i, _mm512_castsi512_ps, _mm512_cvtne2ps_pbh, _mm512_dpbf16_ps, _mm512_loadu_ps,
        _mm512_permutexvar_epi16, _mm512_set_epi16, _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
    };

    use super::MatRef;
    use crate::gemm::transpose::{load as load_part, store as store_lanes};

    /// [`super::pack_pairs`] for operands whose rows or columns are
    /// contiguous, rounding with `vcvtne2ps2bf16`: the same rounding as
    /// [`super::round`] (to nearest even, denormals to a zero of their
    /// sign, a NaN to a quiet NaN of its upper bits), 32 values an
    /// instruction.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX-512F, AVX-512BW and AVX512-BF16, and `x`
    /// must have a unit row or column stride.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    pub(super) unsafe fn pack_pairs<const R: usize>(
        x: MatRef<'_, f32>,
        pc: usize,
        kc: usize,
        first_panel: usize,
        packed: &mut [f32],
    ) {
        super::each_panel::<R>(x, kc, first_panel, packed, |i0, rows, out| {
            if x.row_stride == 1 {
                // For each pair of depths, the panel's rows are two runs:
                // rounded together, then interleaved into words.
                for (q, words) in out.chunks_exact_mut(R).enumerate() {
                    let lo = &x.data[(pc + 2 * q) * x.col_stride + i0..][..rows];
                    let hi = if 2 * q + 1 < kc { &x.data[(pc + 2 * q + 1) * x.col_stride + i0..][..rows] } else { &[] };
                    for start in (0..rows).step_by(16) {
                        let (lo, hi) = (load_part(&lo[start..]), load_part(hi.get(start..).unwrap_or(&[])));
                        let rounded = _mm512_cvtne2ps_pbh(hi, lo);
                        store_part(&mut words[start..rows], interleave(rounded));
                    }
                }
            } else {
                // Each row is contiguous: 32 values are 16 words as they
                // lie, spread over the panel (a few cache lines of it at a
                // time, as in the `f32` packing).
                const DEPTH: usize = 16;
                for (chunk, out) in out.chunks_mut(DEPTH * R).enumerate() {
                    let (q0, words) = (chunk * DEPTH, out.len() / R);
                    let len = (2 * words).min(kc - 2 * q0);
                    for i in 0..rows {
                        let row = &x.data[(i0 + i) * x.row_stride + pc + 2 * q0..][..len];
                        let (lo, hi) = (load_part(row), load_part(row.get(16..).unwrap_or(&[])));
                        let mut converted = [0.0f32; DEPTH];
                        store_part(&mut converted, bits(_mm512_cvtne2ps_pbh(hi, lo)));
                        for (q, &w) in converted[..words].iter().enumerate() {
                            out[q * R + i] = w;
                        }
                    }
                }
            }
        });
    }

    /// Writes the first `min(16, x.len())` 32-bit lanes of `v` over `x`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store_part(x: &mut [f32], v: __m512i) {
        store_lanes(x, _mm512_castsi512_ps(v));
    }

    /// The 32 bf16s of `v` (16 rounded from a first vector, then 16 from
    /// a second) as 16 words: word `t` is the first vector's `t`-th in its
    /// low half and the second's in its high half.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn interleave(v: __m512bh) -> __m512i {
        let order = _mm512_set_epi16(
            31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17,
            1, 16, 0,
        );
        _mm512_permutexvar_epi16(order, bits(v))
    }

    /// The same 512 bits, as integers.
    #[inline]
    fn bits(v: __m512bh) -> __m512i {
        // SAFETY: both are 64-byte vectors of plain bits, and every bit
        // pattern is a valid value of each.
        unsafe { std::mem::transmute::<__m512bh, __m512i>(v) }
    }

    /// The `MR × 32` tile (row-major in `tile`) of packed panels of `pairs`
    /// words per row, from zero or (when `carry`) from the sums in `tile`:
    /// per word of `a` (broadcast) and the 32 words of `b`, two `vdpbf16ps`. Registers: `2·MR` accumulators, two
    /// words of `b` and one of `a` (27 of 32 for `MR = 12`).
    ///
    /// # Safety
    ///
    /// The CPU must support AVX-512F and AVX512-BF16. (Every memory access
    /// is bounds-checked: the slices are cut to their lengths first.)
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn tile<const MR: usize>(pairs: usize, a: &[f32], b: &[f32], tile: &mut [f32], carry: bool) {
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        if carry {
            for (row, acc) in tile[..MR * 32].chunks_exact(32).zip(&mut acc) {
                *acc = [load(&row[..16]), load(&row[16..])];
            }
        }
        for (a, b) in a[..pairs * MR].chunks_exact(MR).zip(b[..pairs * 32].chunks_exact(32)) {
            let (b0, b1) = (bf16s(load(&b[..16])), bf16s(load(&b[16..])));
            for (acc, &a) in acc.iter_mut().zip(a) {
                let a = bf16s(_mm512_set1_ps(a));
                acc[0] = _mm512_dpbf16_ps(acc[0], a, b0);
                acc[1] = _mm512_dpbf16_ps(acc[1], a, b1);
            }
        }
        for (row, acc) in tile[..MR * 32].chunks_exact_mut(32).zip(&acc) {
            let (left, right) = row.split_at_mut(16);
            store(left, acc[0]);
            store(right, acc[1]);
        }
    }

    /// The first 16 elements of `x`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load(x: &[f32]) -> __m512 {
        let x = &x[..16];
        // SAFETY: `x` holds 16 `f32`s, the 64 bytes an unaligned load
        // reads; AVX-512F is enabled on this function.
        unsafe { _mm512_loadu_ps(x.as_ptr()) }
    }

    /// Writes `v` over the first 16 elements of `x`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store(x: &mut [f32], v: __m512) {
        let x = &mut x[..16];
        // SAFETY: `x` holds 16 `f32`s, the 64 bytes an unaligned store
        // writes, borrowed mutably here alone.
        unsafe { _mm512_storeu_ps(x.as_mut_ptr(), v) }
    }

    /// The same 512 bits, read as 32 bf16s.
    #[inline]
    fn bf16s(v: __m512) -> __m512bh {
        // SAFETY: both are 64-byte vectors of plain bits (`__m512bh` is 32
        // `u16`s), and every bit pattern is a valid value of each.
        unsafe { std::mem::transmute::<__m512, __m512bh>(v) }
    }

    /// `vdpbf16ps` on 16 lanes: what the tests compare [`super::dot_lane`] with.
    ///
    /// # Safety
    ///
    /// As [`tile`].
    #[cfg(test)]
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn lanes(acc: &[f32; 16], a: &[u32; 16], b: &[u32; 16]) -> [f32; 16] {
        let words = |x: &[u32; 16]| bf16s(load(&x.map(f32::from_bits)));
        let mut out = [0.0; 16];
        store(&mut out, _mm512_dpbf16_ps(load(acc), words(a), words(b)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift generator: the tests' random bits.
    struct Bits(u64);

    impl Bits {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// A bf16 of sign and exponent drawn from `exponents`, mantissa at random.
        fn bf16(&mut self, exponents: std::ops::Range<u32>) -> u32 {
            let r = self.next();
            let exponent = exponents.start + (r % u64::from(exponents.end - exponents.start)) as u32;
            ((r >> 40) as u32 & 0x8000) | (exponent << 7) | ((r >> 20) as u32 & 0x7f)
        }
    }

    #[test]
    fn rounding_is_to_nearest_even_and_flushes_denormals() {
        let cases: [(u32, u32); 12] = [
            (0x3f80_0000, 0x3f80), // 1.0
            (0x3f80_8000, 0x3f80), // a tie, to the even 1.0
            (0x3f81_8000, 0x3f82), // a tie, to the even above
            (0x3f80_8001, 0x3f81), // just above a tie
            (0x3f80_7fff, 0x3f80), // just below a tie
            (0xbf80_c000, 0xbf81), // negative, above the half
            (0x7f7f_ffff, 0x7f80), // the largest f32, to +inf
            (0x0000_0001, 0x0000), // a denormal, to +0
            (0x8060_0000, 0x8000), // a negative denormal, to -0
            (0x7f80_0000, 0x7f80), // +inf
            (0x7f80_0001, 0x7fc0), // a signalling NaN, quietened
            (0xffc1_2345, 0xffc1), // a quiet NaN keeps its sign
        ];
        for (x, expected) in cases {
            assert_eq!(round(f32::from_bits(x)), expected, "{x:#010x}");
        }
    }

    /// The emulation's definition of one lane against the instruction, on
    /// random bit patterns (NaNs, infinities, denormals included) and on
    /// operands near underflow and overflow, where the flushes and the
    /// rounding of tiny results matter.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_emulation_is_the_instruction() {
        if !simd::has_bf16_dot() {
            eprintln!("skipped: this CPU has no AVX512-BF16");
            return;
        }
        let mut bits = Bits(0x9e37_79b9_7f4a_7c15);
        let mut mismatches = Vec::new();
        for round in 0..40_000 {
            let (mut acc, mut a, mut b) = ([0.0f32; 16], [0u32; 16], [0u32; 16]);
            for lane in 0..16 {
                let (exponents, acc_exponents) = match round % 4 {
                    0 => (0..256, 0..256),
                    1 => (110..140, 100..130),
                    2 => (1..70, 0..6),
                    _ => (190..255, 250..255),
                };
                a[lane] = bits.bf16(exponents.clone()) | (bits.bf16(exponents.clone()) << 16);
                b[lane] = bits.bf16(exponents.clone()) | (bits.bf16(exponents) << 16);
                acc[lane] = f32::from_bits((bits.bf16(acc_exponents) << 16) | (bits.next() as u32 & 0xffff));
            }
            // SAFETY: the CPU has AVX512-BF16 (checked above).
            #[allow(unsafe_code)]
            let hardware = unsafe { dot::lanes(&acc, &a, &b) };
            for lane in 0..16 {
                let emulated = dot_lane(acc[lane], a[lane], b[lane]);
                let same =
                    emulated.to_bits() == hardware[lane].to_bits() || (emulated.is_nan() && hardware[lane].is_nan());
                if !same && mismatches.len() < 8 {
                    mismatches.push((
                        acc[lane].to_bits(),
                        a[lane],
                        b[lane],
                        hardware[lane].to_bits(),
                        emulated.to_bits(),
                    ));
                }
            }
        }
        // The edge of tininess: exactly 2^-126 - 2^-160, which rounds to 2^-126.
        let (tiny_acc, tiny_a, tiny_b) =
            ([f32::MIN_POSITIVE; 16], [(127 - 80) << 23; 16], [(0x8000 | (127 - 80) << 7) << 16; 16]);
        #[allow(unsafe_code)]
        // SAFETY: as above.
        let hardware = unsafe { dot::lanes(&tiny_acc, &tiny_a, &tiny_b) };
        assert_eq!(hardware[0].to_bits(), dot_lane(tiny_acc[0], tiny_a[0], tiny_b[0]).to_bits());
        assert!(mismatches.is_empty(), "(acc, a, b, vdpbf16ps, emulated): {mismatches:x?}");
    }

    /// The packing with `vcvtne2ps2bf16` writes the words the portable
    /// packing writes, on every class of value: each of the 65536 upper
    /// halves (signs, exponents, infinities, NaNs, denormals) with lower
    /// halves around the rounding tie and random ones, in both contiguous
    /// layouts, both panel heights, odd depths and ragged panels.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_instructions_packing_is_the_portable_packing() {
        if !simd::has_bf16_dot() {
            eprintln!("skipped: this CPU has no AVX512-BF16");
            return;
        }
        let mut bits = Bits(11);
        let values: Vec<f32> = (0..1u32 << 16)
            .flat_map(|upper| {
                let random = bits.next() as u32 & 0xffff;
                [0, 1, 0x7fff, 0x8000, 0x8001, 0xffff, random].map(|lower| f32::from_bits(upper << 16 | lower))
            })
            .collect();
        let (rows, kc) = (37, 45);
        for (index, chunk) in values.chunks(rows * kc).enumerate() {
            let mut data = chunk.to_vec();
            data.resize(rows * kc, 1.5);
            let pc = index % 2;
            let layouts = [MatRef::row_major(&data, rows, kc), MatRef::row_major(&data, kc, rows).t()];
            for x in layouts {
                for (r, same) in [(12, same_words::<12>(x, pc, kc - pc)), (32, same_words::<32>(x, pc, kc - pc))] {
                    assert!(same, "R = {r}, strides ({}, {}), chunk {index}", x.row_stride, x.col_stride);
                }
            }
        }
    }

    /// Whether both packings of panels of `R` rows of `x` (depth `kc`
    /// from `pc`) write the same words. The CPU must have AVX512-BF16.
    #[cfg(target_arch = "x86_64")]
    fn same_words<const R: usize>(x: MatRef<'_, f32>, pc: usize, kc: usize) -> bool {
        let len = x.rows.div_ceil(R) * R * kc.div_ceil(2);
        let (mut packed, mut portable) = (vec![f32::NAN; len], vec![f32::NAN; len]);
        // SAFETY: the caller checked that the CPU has AVX512-BF16, and the
        // test's operands have a unit stride.
        #[allow(unsafe_code)]
        unsafe {
            dot::pack_pairs::<R>(x, pc, kc, 0, &mut packed)
        };
        pack_pairs::<R>(x, pc, kc, 0, &mut portable);
        packed.iter().map(|w| w.to_bits()).eq(portable.iter().map(|w| w.to_bits()))
    }

    /// The paths this CPU can run.
    fn paths() -> Vec<Path> {
        if simd::has_bf16_dot() { vec![Path::Dot, Path::Emulated] } else { vec![Path::Emulated] }
    }

    /// Small integers are bf16s, and their products and sums stay exact
    /// in `f32`: each path gives the exact product, odd depths, ragged
    /// edges and several blocks of `k` included.
    #[test]
    fn small_integers_give_the_exact_product() {
        let mut bits = Bits(3);
        for (m, k, n) in [(1, 1, 1), (7, 5, 3), (13, 301, 33), (25, 2 * KC + 1, 40)] {
            let mut integers = |len: usize| -> Vec<f32> { (0..len).map(|_| (bits.next() % 7) as f32 - 3.0).collect() };
            let (a, b) = (integers(m * k), integers(k * n));
            let expected: Vec<f32> =
                (0..m * n).map(|ij| (0..k).map(|p| a[ij / n * k + p] * b[p * n + ij % n]).sum()).collect();
            for path in paths() {
                let mut scratch = vec![0.0; scratch_len_on(path, m, k, n)];
                let mut c = vec![f32::NAN; m * n];
                gemm_on(path, MatRef::row_major(&a, m, k), MatRef::row_major(&b, k, n), &mut c, false, &mut scratch);
                assert!(c == expected, "{path:?}, {m}x{k}x{n}");
            }
        }
    }

    /// Both micro-kernels, through the whole blocked product, on every
    /// layout and ragged edge the packing reads (odd depths, several
    /// blocks of `k`): the same bits, written and accumulated.
    #[test]
    fn both_paths_give_the_same_bits() {
        if !simd::has_bf16_dot() {
            eprintln!("skipped: this CPU has no AVX512-BF16");
            return;
        }
        let mut bits = Bits(7);
        let shapes = [(1, 1, 1), (5, 7, 3), (13, 301, 33), (40, 300, 70), (3, 2 * KC + 3, 17)];
        for (m, k, n) in shapes {
            let mut random = |len: usize| -> Vec<f32> {
                (0..len).map(|_| (bits.next() >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0).collect()
            };
            let (a_data, b_data, c0) = (random(m * k), random(k * n), random(m * n));
            let a_rows = MatRef::row_major(&a_data, m, k);
            let a_cols = MatRef::row_major(&a_data, k, m).t();
            let b_rows = MatRef::row_major(&b_data, k, n);
            let b_cols = MatRef::row_major(&b_data, n, k).t();
            let a_strided = MatRef { data: &a_data, rows: m, cols: k / 2, row_stride: k, col_stride: 2 };
            let b_strided = MatRef { data: &b_data, rows: k / 2, cols: n, row_stride: 2 * n, col_stride: 1 };
            let layouts =
                [(a_rows, b_rows), (a_cols, b_rows), (a_rows, b_cols), (a_cols, b_cols), (a_strided, b_strided)];
            for (a, b) in layouts {
                let (rows, cols) = (a.rows, b.cols);
                let run = |path: Path, accumulate: bool| {
                    let mut scratch = vec![f32::NAN; scratch_len_on(path, rows, a.cols, cols)];
                    let mut c = if accumulate { c0[..rows * cols].to_vec() } else { vec![f32::NAN; rows * cols] };
                    gemm_on(path, a, b, &mut c, accumulate, &mut scratch);
                    c.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                };
                for accumulate in [false, true] {
                    let strides = [a.row_stride, a.col_stride, b.row_stride, b.col_stride];
                    assert!(
                        run(Path::Dot, accumulate) == run(Path::Emulated, accumulate),
                        "{rows}x{}x{cols}, strides {strides:?}, accumulate {accumulate}",
                        a.cols
                    );
                }
            }
        }
    }
}
