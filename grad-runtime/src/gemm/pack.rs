//! Packing: the parts of `a` and `b` one block of depth `kc` needs, copied
//! into the order the micro-kernel reads them, padded with zeros to whole
//! panels (the padding adds exact zeros to tiles that are never stored).

use rayon::prelude::*;

use super::MatRef;
use crate::{Float, parallel};

/// Packs panels `first_panel..` of `MR` rows of `a` (as many as fit in
/// `packed`), columns `pc..pc + kc`: panel `r` holds, for each depth `p`,
/// `a[r·MR + i, pc + p]` for `i < MR`. Each thread packs the panels of the
/// rows of `c` it computes, inside its own piece of work.
pub(super) fn a_panels<T: Float, const MR: usize>(
    a: MatRef<'_, T>,
    pc: usize,
    kc: usize,
    first_panel: usize,
    packed: &mut [T],
) {
    for (index, out) in packed.chunks_exact_mut(MR * kc).enumerate() {
        let i0 = (first_panel + index) * MR;
        let rows = MR.min(a.rows - i0);
        if rows < MR {
            out.fill(T::zero());
        }
        if a.row_stride == 1 {
            // A transposed operand: the panel's rows are adjacent for each `p`.
            for (p, column) in out.chunks_exact_mut(MR).enumerate() {
                column[..rows].copy_from_slice(&a.data[(pc + p) * a.col_stride + i0..][..rows]);
            }
        } else if a.col_stride == 1 {
            // Row-major: read each row once, front to back, down its slot of the panel.
            for i in 0..rows {
                let row = &a.data[(i0 + i) * a.row_stride + pc..][..kc];
                for (column, &v) in out.chunks_exact_mut(MR).zip(row) {
                    column[i] = v;
                }
            }
        } else {
            for (p, column) in out.chunks_exact_mut(MR).enumerate() {
                for (i, slot) in column[..rows].iter_mut().enumerate() {
                    *slot = *a.at(i0 + i, pc + p);
                }
            }
        }
    }
}

/// Packs rows `pc..pc + kc`, columns `jc..jc + nc` of `b` into panels of
/// `NR` columns: panel `c` holds, for each depth `p`, `b[pc + p, jc + c·NR + j]`
/// for `j < NR`.
pub(super) fn b_panels<T: Float, const NR: usize>(
    b: MatRef<'_, T>,
    pc: usize,
    kc: usize,
    jc: usize,
    nc: usize,
    packed: &mut [T],
    parallel: bool,
) {
    let pack = |panel: usize, out: &mut [T]| {
        let j0 = jc + panel * NR;
        let cols = NR.min(jc + nc - j0);
        if cols < NR {
            out.fill(T::zero());
        }
        if b.col_stride == 1 {
            // Row-major: the panel's columns are adjacent in each row `p`.
            for (p, row) in out.chunks_exact_mut(NR).enumerate() {
                let from = &b.data[(pc + p) * b.row_stride + j0..][..cols];
                // A whole row copied as an array: vector moves, not a `memcpy` call.
                match (<&mut [T; NR]>::try_from(&mut *row), <&[T; NR]>::try_from(from)) {
                    (Ok(to), Ok(from)) => *to = *from,
                    _ => row[..cols].copy_from_slice(from),
                }
            }
        } else if b.row_stride == 1 {
            // A transposed operand: read each column once, down its slot of the panel.
            for j in 0..cols {
                let column = &b.data[(j0 + j) * b.col_stride + pc..][..kc];
                for (row, &v) in out.chunks_exact_mut(NR).zip(column) {
                    row[j] = v;
                }
            }
        } else {
            for (p, row) in out.chunks_exact_mut(NR).enumerate() {
                for (j, slot) in row[..cols].iter_mut().enumerate() {
                    *slot = *b.at(pc + p, j0 + j);
                }
            }
        }
    };
    each_panel(packed, NR * kc, parallel, pack);
}

/// `pack(index, panel)` for each panel of `panel_len` elements of `packed`.
fn each_panel<T: Float>(packed: &mut [T], panel_len: usize, parallel: bool, pack: impl Fn(usize, &mut [T]) + Sync) {
    if parallel {
        parallel::run(true, || packed.par_chunks_mut(panel_len).enumerate().for_each(|(i, p)| pack(i, p)));
    } else {
        packed.chunks_mut(panel_len).enumerate().for_each(|(i, p)| pack(i, p));
    }
}
