//! The micro-kernel: one `MR × NR` tile of `a @ b` over a packed block of
//! depth `kc`, held in registers, and its store into `c`.

use crate::{Float, simd};

simd::multiversion! {
    /// The `MR × NR` product of a packed `a` panel (for each depth `p`, the
    /// panel's `MR` values of column `p`) and a packed `b` panel (for each
    /// `p`, its `NR` values of row `p`), summed over `kc` with one fused
    /// multiply-add per term, from zero, written to `tile`.
    pub(super) fn tile[T: Float, const MR: usize, const NR: usize][T, MR, NR](
        kc: usize,
        a: &[T],
        b: &[T],
        tile: &mut [[T; NR]; MR],
    ) {
        // A local, not the caller's memory, so that the compiler keeps it
        // in registers from the start: returned by value, the tile was
        // zeroed in memory with `memset` and then loaded (perf: 3% of W3).
        let mut acc = [[T::zero(); NR]; MR];
        for (a, b) in a[..kc * MR].chunks_exact(MR).zip(b[..kc * NR].chunks_exact(NR)) {
            for i in 0..MR {
                let ai = a[i];
                for j in 0..NR {
                    acc[i][j] = ai.mul_add(b[j], acc[i][j]);
                }
            }
        }
        *tile = acc;
    }
}

/// Writes (or, when `add`, adds) the top-left `rows × cols` of `tile` into
/// the row-major `c_rows` (rows of `n` elements), from column `col`.
#[inline]
pub(super) fn store<T: Float, const MR: usize, const NR: usize>(
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
