//! Packing: the parts of `a` and `b` one block of depth `kc` needs, copied
//! into the order the micro-kernel reads them, padded with zeros to whole
//! panels (the padding adds exact zeros to tiles that are never stored).

use rayon::prelude::*;

use super::MatRef;
use crate::{Float, parallel};

/// Packs rows `0..a.rows`, columns `pc..pc + kc` of `a` into panels of `MR`
/// rows: panel `r` holds, for each depth `p`, `a[r·MR + i, pc + p]` for `i < MR`.
pub(super) fn a_panels<T: Float, const MR: usize>(
    a: MatRef<'_, T>,
    pc: usize,
    kc: usize,
    packed: &mut [T],
    parallel: bool,
) {
    let pack = |panel: usize, out: &mut [T]| {
        let i0 = panel * MR;
        let rows = MR.min(a.rows - i0);
        for (p, column) in out.chunks_exact_mut(MR).enumerate() {
            for (i, slot) in column.iter_mut().enumerate() {
                *slot = if i < rows { *a.at(i0 + i, pc + p) } else { T::zero() };
            }
        }
    };
    each_panel(packed, MR * kc, parallel, pack);
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
        let j0 = panel * NR;
        let cols = NR.min(nc - j0);
        for (p, row) in out.chunks_exact_mut(NR).enumerate() {
            for (j, slot) in row.iter_mut().enumerate() {
                *slot = if j < cols { *b.at(pc + p, jc + j0 + j) } else { T::zero() };
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
