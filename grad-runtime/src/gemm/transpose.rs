//! The transposing part of the `f32` packing with AVX-512 or AVX2: a
//! block of a panel's rows by 16 columns of a row-major operand,
//! transposed in registers. The portable loop of `pack.rs` moves one
//! element per load and store (two instructions an element, 384 for a
//! panel of 12 rows by 16 columns). With AVX-512 each row is one load,
//! the transpose 64 shuffles of 16 rows at a time, and each column of the
//! panel one masked store; with AVX2 the same by blocks of 8 rows by 8
//! columns (24 shuffles a block). The values are the same (a copy), so
//! no bit of any product changes.

// Intrinsics that take pointers are `unsafe`, and so is calling a function
// compiled for AVX-512 or AVX2: each use below states why it is sound, and
// `tests` compare every panel height with the portable loop at each level.
#![allow(unsafe_code)]

use crate::simd::{self, Level};
use std::arch::x86_64::{
    __m256, __m512, __mmask16, _mm256_cmpgt_epi32, _mm256_loadu_ps, _mm256_maskstore_ps, _mm256_permute2f128_ps,
    _mm256_set1_epi32, _mm256_setr_epi32, _mm256_setzero_ps, _mm256_shuffle_ps, _mm256_storeu_ps, _mm256_unpackhi_ps,
    _mm256_unpacklo_ps, _mm512_castpd_ps, _mm512_castps_pd, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps,
    _mm512_setzero_ps, _mm512_shuffle_f32x4, _mm512_unpackhi_pd, _mm512_unpackhi_ps, _mm512_unpacklo_pd,
    _mm512_unpacklo_ps,
};

/// Columns of the operand a block takes: one 512-bit load of a row.
pub(super) const WIDTH: usize = 16;

/// `out[p·R + i] = x[start + i·row_stride + p]` for `p <` [`WIDTH`] and
/// `i < R`: rows `start`, `start + row_stride`, ... of `x`, each
/// [`WIDTH`] long, written as the [`WIDTH`] columns of a panel of `R`
/// rows, and `true`; or nothing written, and `false`, on a CPU whose
/// kernels run at neither AVX-512 nor AVX2 ([`simd::level`]). Panics
/// unless every row lies in `x` and `out` is `WIDTH · R` long.
pub(super) fn block<const R: usize>(x: &[f32], row_stride: usize, start: usize, out: &mut [f32]) -> bool {
    match simd::level() {
        // SAFETY: `level()` is `Avx512` only when the CPU reports AVX-512F
        // (and VL), all that `block_avx512` enables.
        Level::Avx512 => unsafe { block_avx512::<R>(x, row_stride, start, out) },
        // SAFETY: `level()` is `Avx2` only when the CPU reports AVX2 (and
        // FMA), all that `block_avx2` enables.
        Level::Avx2 => unsafe { block_avx2::<R>(x, row_stride, start, out) },
        Level::Baseline => return false,
    }
    true
}

/// [`block`] on a CPU with AVX-512F.
///
/// # Safety
///
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn block_avx512<const R: usize>(x: &[f32], row_stride: usize, start: usize, out: &mut [f32]) {
    assert_eq!(out.len(), WIDTH * R, "a block of {R} rows");
    for first in (0..R).step_by(WIDTH) {
        let rows = (R - first).min(WIDTH);
        let mut v = [_mm512_setzero_ps(); WIDTH];
        for (i, v) in v.iter_mut().enumerate().take(rows) {
            *v = load(&x[start + (first + i) * row_stride..][..WIDTH]);
        }
        transpose(&mut v);
        for (p, &column) in v.iter().enumerate() {
            store(&mut out[p * R + first..][..rows], column);
        }
    }
}

/// [`block`] on a CPU with AVX2: for each 8 rows, two 8 × 8 transposes.
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn block_avx2<const R: usize>(x: &[f32], row_stride: usize, start: usize, out: &mut [f32]) {
    assert_eq!(out.len(), WIDTH * R, "a block of {R} rows");
    for first in (0..R).step_by(8) {
        let rows = (R - first).min(8);
        for half in [0, 8] {
            let mut v = [_mm256_setzero_ps(); 8];
            for (i, v) in v.iter_mut().enumerate().take(rows) {
                *v = load8(&x[start + (first + i) * row_stride + half..][..8]);
            }
            transpose8(&mut v);
            for (p, &column) in v.iter().enumerate() {
                store8(&mut out[(half + p) * R + first..][..rows], column);
            }
        }
    }
}

/// Transposes the 8 × 8 matrix whose row `i` is `v[i]`: then `v[p]` holds
/// its column `p`. Pairs of rows are interleaved by elements, then
/// pairs of those by pairs of elements (each 128-bit lane then holds four
/// rows of one column: `p` in the low lanes, `p + 4` in the high), and
/// the lanes are exchanged.
#[inline]
#[target_feature(enable = "avx2")]
fn transpose8(v: &mut [__m256; 8]) {
    let mut t = [_mm256_setzero_ps(); 8];
    for k in 0..4 {
        t[2 * k] = _mm256_unpacklo_ps(v[2 * k], v[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_ps(v[2 * k], v[2 * k + 1]);
    }
    let mut s = [_mm256_setzero_ps(); 8];
    for half in [0, 4] {
        s[half] = _mm256_shuffle_ps::<0x44>(t[half], t[half + 2]);
        s[half + 1] = _mm256_shuffle_ps::<0xee>(t[half], t[half + 2]);
        s[half + 2] = _mm256_shuffle_ps::<0x44>(t[half + 1], t[half + 3]);
        s[half + 3] = _mm256_shuffle_ps::<0xee>(t[half + 1], t[half + 3]);
    }
    for p in 0..4 {
        v[p] = _mm256_permute2f128_ps::<0x20>(s[p], s[p + 4]);
        v[p + 4] = _mm256_permute2f128_ps::<0x31>(s[p], s[p + 4]);
    }
}

/// The 8 elements of `x`. Panics unless `x` holds 8.
#[inline]
#[target_feature(enable = "avx2")]
fn load8(x: &[f32]) -> __m256 {
    let x: &[f32; 8] = x.try_into().expect("8 elements");
    // SAFETY: `x` is 8 readable `f32`, all an unaligned 256-bit load reads.
    unsafe { _mm256_loadu_ps(x.as_ptr()) }
}

/// Writes the first `min(8, x.len())` lanes of `v` over `x`.
#[inline]
#[target_feature(enable = "avx2")]
fn store8(x: &mut [f32], v: __m256) {
    if x.len() >= 8 {
        // SAFETY: `x` holds at least 8 elements, borrowed mutably here
        // alone: all an unaligned 256-bit store writes.
        return unsafe { _mm256_storeu_ps(x.as_mut_ptr(), v) };
    }
    // Lane `k` is in the mask when `len > k`.
    let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(x.len() as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    // SAFETY: a masked store writes only the lanes of the mask, the first
    // `x.len()` elements of `x`, borrowed mutably here alone; a masked-off
    // lane touches no memory and cannot fault.
    unsafe { _mm256_maskstore_ps(x.as_mut_ptr(), mask, v) };
}

/// Transposes the 16 × 16 matrix whose row `i` is `v[i]`: then `v[p]`
/// holds its column `p`. Pairs of rows are interleaved by elements, then
/// by pairs of elements, then by 128-bit lanes twice.
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose(v: &mut [__m512; WIDTH]) {
    let mut t = [_mm512_setzero_ps(); WIDTH];
    for k in 0..8 {
        t[2 * k] = _mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]);
    }
    for k in 0..4 {
        let (a, b, c, d) = (t[4 * k], t[4 * k + 1], t[4 * k + 2], t[4 * k + 3]);
        v[4 * k] = pairs(true, a, c);
        v[4 * k + 1] = pairs(false, a, c);
        v[4 * k + 2] = pairs(true, b, d);
        v[4 * k + 3] = pairs(false, b, d);
    }
    for half in 0..2 {
        let base = 8 * half;
        for j in 0..4 {
            t[base + j] = _mm512_shuffle_f32x4::<0x88>(v[base + j], v[base + 4 + j]);
            t[base + 4 + j] = _mm512_shuffle_f32x4::<0xdd>(v[base + j], v[base + 4 + j]);
        }
    }
    for j in 0..8 {
        v[j] = _mm512_shuffle_f32x4::<0x88>(t[j], t[8 + j]);
        v[8 + j] = _mm512_shuffle_f32x4::<0xdd>(t[j], t[8 + j]);
    }
}

/// The low (`lo`) or high pairs of 32-bit elements of `x` and `y`,
/// interleaved in each 128-bit lane.
#[inline]
#[target_feature(enable = "avx512f")]
fn pairs(lo: bool, x: __m512, y: __m512) -> __m512 {
    let (x, y) = (_mm512_castps_pd(x), _mm512_castps_pd(y));
    _mm512_castpd_ps(if lo { _mm512_unpacklo_pd(x, y) } else { _mm512_unpackhi_pd(x, y) })
}

/// The mask of the first `min(16, len)` lanes.
#[inline]
fn first_lanes(len: usize) -> __mmask16 {
    ((1u32 << len.min(WIDTH)) - 1) as __mmask16
}

/// The first `min(16, x.len())` elements of `x`, zeros after.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn load(x: &[f32]) -> __m512 {
    // SAFETY: the mask selects the first `min(16, x.len())` lanes, and a
    // masked-off lane reads no memory (nor can it fault); the others
    // read elements of `x`, which exist. AVX-512F is enabled.
    unsafe { _mm512_maskz_loadu_ps(first_lanes(x.len()), x.as_ptr()) }
}

/// Writes the first `min(16, x.len())` lanes of `v` over `x`.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn store(x: &mut [f32], v: __m512) {
    // SAFETY: a masked store writes only the lanes of the mask, the first
    // `min(16, x.len())` elements of `x`, borrowed mutably here alone;
    // AVX-512F is enabled.
    unsafe { _mm512_mask_storeu_ps(x.as_mut_ptr(), first_lanes(x.len()), v) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The portable loop's result: `out[p·R + i] = x[start + i·stride + p]`.
    fn portable<const R: usize>(x: &[f32], stride: usize, start: usize) -> Vec<f32> {
        let mut out = vec![f32::NAN; WIDTH * R];
        for i in 0..R {
            for p in 0..WIDTH {
                out[p * R + i] = x[start + i * stride + p];
            }
        }
        out
    }

    /// A level's block, as [`block_avx512`] and [`block_avx2`] are.
    type Block = unsafe fn(&[f32], usize, usize, &mut [f32]);

    /// Each level's block this CPU has against the portable loop, for
    /// panels of `R` rows; the names of the levels tested.
    fn agrees<const R: usize>() -> Vec<&'static str> {
        // A distinct bit pattern in every element (a NaN, an infinity and
        // a negative zero among them), so a misplaced one cannot go unseen.
        let stride = WIDTH + 7;
        let len = 3 + R * stride + WIDTH;
        let mut x: Vec<f32> = (0..len).map(|k| f32::from_bits(0x3f80_0000 + k as u32 * 977)).collect();
        x[5] = f32::NAN;
        x[6] = f32::INFINITY;
        x[7] = -0.0;
        let mut levels: Vec<(&'static str, Block)> = Vec::new();
        if std::is_x86_feature_detected!("avx512f") {
            levels.push(("AVX-512", block_avx512::<R>));
        }
        if std::is_x86_feature_detected!("avx2") {
            levels.push(("AVX2", block_avx2::<R>));
        }
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for start in [0, 3] {
            let want = portable::<R>(&x, stride, start);
            for &(name, block) in &levels {
                let mut out = vec![f32::NAN; WIDTH * R];
                // SAFETY: the CPU reports the level's features (above).
                unsafe { block(&x, stride, start, &mut out) };
                assert_eq!(bits(&out), bits(&want), "{name}: {R} rows from {start}");
            }
            // And the dispatch, at this CPU's level.
            let mut out = vec![f32::NAN; WIDTH * R];
            if block::<R>(&x, stride, start, &mut out) {
                assert_eq!(bits(&out), bits(&want), "{:?}: {R} rows from {start}", simd::level());
            }
        }
        levels.iter().map(|&(name, _)| name).collect()
    }

    #[test]
    fn every_panel_height_is_the_portable_transpose() {
        let tested = agrees::<1>();
        agrees::<4>();
        agrees::<6>();
        agrees::<12>();
        agrees::<16>();
        agrees::<17>();
        agrees::<32>();
        if tested.is_empty() {
            eprintln!("SKIPPED: this CPU has neither AVX-512 nor AVX2; the transposing blocks are not tested here");
        }
    }
}
