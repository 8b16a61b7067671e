//! Packing: the parts of `a` and `b` one block of depth `kc` needs, copied
//! into the order the micro-kernel reads them, padded with zeros to whole
//! panels (the padding adds exact zeros to tiles that are never stored).

use rayon::prelude::*;

use super::{MatRef, Micro, Panels};
use crate::{Float, copy};

/// Packs panels `first_panel..` of `R` rows of `x` (as many as fit in
/// `packed`), columns `pc..pc + kc`: panel `r` holds, for each depth `p`,
/// `x[r·R + i, pc + p]` for `i < R`. The panels of `a` are these with
/// `R = MR`; those of `b` are the panels of `bᵀ` with `R = NR`.
pub(super) fn panels<T: Float, const R: usize>(
    x: MatRef<'_, T>,
    pc: usize,
    kc: usize,
    first_panel: usize,
    packed: &mut [T],
) {
    for (index, out) in packed.chunks_exact_mut(R * kc).enumerate() {
        let i0 = (first_panel + index) * R;
        let rows = R.min(x.rows - i0);
        if rows < R {
            out.fill(T::zero());
        }
        if x.row_stride == 1 {
            // The panel's rows are adjacent for each `p` (`a` transposed,
            // `b` row-major): whole runs, as arrays when full, so the
            // compiler moves them in registers instead of calling `memcpy`.
            for (p, column) in out.chunks_exact_mut(R).enumerate() {
                let from = &x.data[(pc + p) * x.col_stride + i0..][..rows];
                if !copy::as_array::<T, R>(column, from) {
                    column[..rows].copy_from_slice(from);
                }
            }
        } else if x.col_stride == 1 {
            // Each row is contiguous: a transpose. Done a cache line of
            // each row at a time, so the part of the panel being written
            // (`R` lines) stays in L1; row by row over the whole depth, each
            // row's pass wrote over a panel larger than L1 (48 KiB for
            // 12 rows of 1024) and fetched it again for the next row.
            const DEPTH: usize = 16;
            #[cfg(target_arch = "x86_64")]
            const _: () = assert!(DEPTH == super::transpose::WIDTH);
            for (chunk, out) in out.chunks_mut(DEPTH * R).enumerate() {
                let p0 = pc + chunk * DEPTH;
                if rows == R && out.len() == DEPTH * R && transposed::<T, R>(x, i0 * x.row_stride + p0, out) {
                    continue;
                }
                for i in 0..rows {
                    let row = &x.data[(i0 + i) * x.row_stride + p0..][..out.len() / R];
                    for (column, &v) in out.chunks_exact_mut(R).zip(row) {
                        column[i] = v;
                    }
                }
            }
        } else {
            for (p, column) in out.chunks_exact_mut(R).enumerate() {
                for (i, slot) in column[..rows].iter_mut().enumerate() {
                    *slot = *x.at(i0 + i, pc + p);
                }
            }
        }
    }
}

/// `out[p·R + i] = x.data[start + i·row_stride + p]` for `p < 16`, `i <
/// R` by the `f32` AVX-512 or AVX2 block (`transpose.rs`), and `true`; or
/// nothing written, and `false`, where that block does not run (another
/// type, a CPU without AVX2).
#[inline]
fn transposed<T: Float, const R: usize>(x: MatRef<'_, T>, start: usize, out: &mut [T]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let (Some(data), Some(out)) = (T::f32_slice(x.data), T::f32_slice_mut(out)) {
        return super::transpose::block::<R>(data, x.row_stride, start, out);
    }
    let _ = (x, start, out);
    false
}

/// Packs rows `pc..pc + kc`, columns `jc..` of `b` (given as its
/// transpose `bt`) into panels of `NR` columns, as many as fit in `packed`:
/// panel `c` holds, for each depth `p`, `b[pc + p, jc + c·NR + j]` for `j <
/// NR` (in the layout of `K`'s packing). These are the panels of `NR` rows
/// of `bᵀ` from row `jc`, a multiple of `NR`. When `parallel`, the caller
/// runs on grad's pool (`parallel::run`), whose threads share the panels.
pub(super) fn b_panels<T: Float, K: Micro<T>, const NR: usize>(
    bt: &impl Panels<T>,
    pc: usize,
    kc: usize,
    jc: usize,
    packed: &mut [T],
    parallel: bool,
) {
    debug_assert_eq!(jc % NR, 0);
    let first = jc / NR;
    if parallel {
        packed
            .par_chunks_mut(NR * K::depth(kc))
            .enumerate()
            .for_each(|(panel, out)| bt.pack::<K, NR>(pc, kc, first + panel, out));
    } else {
        bt.pack::<K, NR>(pc, kc, first, packed);
    }
}
