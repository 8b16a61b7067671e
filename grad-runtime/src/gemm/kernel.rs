//! The micro-kernel: one `MR × NR` tile of `a @ b` over a packed block of
//! depth `kc`, held in registers, and its store into `c`.

use crate::{Float, simd};

simd::multiversion! {
    /// The `MR × NR` product of a packed `a` panel (for each depth `p`, the
    /// panel's `MR` values of column `p`) and a packed `b` panel (for each
    /// `p`, its `NR` values of row `p`), summed over `kc` with one fused
    /// multiply-add per term, written to `tile`: from zero, or, when
    /// `carry`, continuing the sums `tile` holds (each element's chain of
    /// multiply-adds goes on exactly as if it had not been cut).
    pub(super) fn tile[T: Float, const MR: usize, const NR: usize][T, MR, NR](
        kc: usize,
        a: &[T],
        b: &[T],
        tile: &mut [[T; NR]; MR],
        carry: bool,
    ) {
        // A local, not the caller's memory, so that the compiler keeps it
        // in registers from the start: returned by value, the tile was
        // zeroed in memory with `memset` and then loaded (perf: 3% of W3).
        let mut acc = if carry { *tile } else { [[T::zero(); NR]; MR] };
        // Several steps of the depth per iteration (`unroll`); each sum
        // runs over the depth in the same order either way.
        let unroll = unroll(MR, NR);
        let unrolled = kc / unroll * unroll;
        let (a_unrolled, a_rest) = a[..kc * MR].split_at(unrolled * MR);
        let (b_unrolled, b_rest) = b[..kc * NR].split_at(unrolled * NR);
        for (a, b) in a_unrolled.chunks_exact(unroll * MR).zip(b_unrolled.chunks_exact(unroll * NR)) {
            for p in 0..unroll {
                step(&mut acc, &a[p * MR..][..MR], &b[p * NR..][..NR]);
            }
        }
        for (a, b) in a_rest.chunks_exact(MR).zip(b_rest.chunks_exact(NR)) {
            step(&mut acc, a, b);
        }
        *tile = acc;
    }
}

/// Steps of the depth in one iteration of [`tile`]'s loop for an `mr ×
/// nr` tile. Four for the tiles of AVX2 (at most 96 accumulators, 12
/// vector registers): the loop's own work then comes once per 4 × 96
/// multiply-adds, and W3 on a Zen 3 ran 125 → 139 GFLOP/s, W1 811 → 776
/// µs (two unrolled ran 96 GFLOP/s and eight 66: the compiler's schedule,
/// not the arithmetic, decides). One for AVX-512's larger tiles, measured
/// at 91% of the FMA peak as they are.
const fn unroll(mr: usize, nr: usize) -> usize {
    if mr * nr <= 96 { 4 } else { 1 }
}

/// One step of the depth: `acc[i][j] += a[i] * b[j]`, each a fused
/// multiply-add.
#[inline(always)]
fn step<T: Float, const MR: usize, const NR: usize>(acc: &mut [[T; NR]; MR], a: &[T], b: &[T]) {
    for i in 0..MR {
        let ai = a[i];
        for j in 0..NR {
            acc[i][j] = ai.mul_add(b[j], acc[i][j]);
        }
    }
}

simd::multiversion! {
    /// Writes (or, when `add`, adds) the top-left `rows × cols` of `tile`
    /// into the row-major `c_rows` (rows of `n` elements), from column
    /// `col`. Compiled for each SIMD level like [`tile`]: in the baseline's
    /// 16-byte moves, storing the tiles was 9% of a GPT training step on
    /// an AVX-512 CPU, a quarter of the time of the multiply-adds themselves.
    pub(super) fn store[T: Float, const MR: usize, const NR: usize][T, MR, NR](
        tile: &[[T; NR]; MR],
        c_rows: &mut [T],
        n: usize,
        col: usize,
        rows: usize,
        cols: usize,
        add: bool,
    ) {
        for (i, tile_row) in tile.iter().enumerate().take(rows) {
            let c = &mut c_rows[i * n + col..i * n + col + cols];
            // A whole row of the tile has a length the compiler knows, so it
            // moves it in vector registers instead of calling `memcpy`.
            if let Ok(c) = <&mut [T; NR]>::try_from(&mut *c) {
                if add {
                    c.iter_mut().zip(tile_row).for_each(|(c, &t)| *c += t);
                } else {
                    *c = *tile_row;
                }
            } else if add {
                c.iter_mut().zip(tile_row).for_each(|(c, &t)| *c += t);
            } else {
                c.copy_from_slice(&tile_row[..cols]);
            }
        }
    }
}
