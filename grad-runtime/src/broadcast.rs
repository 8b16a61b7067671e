//! NumPy broadcasting: the output shape of two operands, a walk over the
//! output that yields each operand's element offset, and `reduce_into`,
//! which sums a gradient back to the shape of an operand that was stretched.

use ndarray::{Dimension, IxDyn};

use crate::Float;
use crate::{parallel, simd};

/// The broadcast shape of `a` and `b` (aligned at the right; each dim pair
/// equal, or one of them 1), or `None` when they do not broadcast.
pub(crate) fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<IxDyn> {
    let ndim = a.len().max(b.len());
    let mut out = IxDyn::zeros(ndim);
    for i in 0..ndim {
        let da = dim_from_right(a, ndim - 1 - i);
        let db = dim_from_right(b, ndim - 1 - i);
        out[i] = match (da, db) {
            _ if da == db => da,
            (1, _) => db,
            (_, 1) => da,
            _ => return None,
        };
    }
    Some(out)
}

/// The dim `k` places from the right end of `shape`, 1 when `shape` is shorter.
fn dim_from_right(shape: &[usize], k: usize) -> usize {
    if k < shape.len() { shape[shape.len() - 1 - k] } else { 1 }
}

/// Row-major strides of an operand of shape `operand`, expressed on the
/// axes of the larger shape `full` it broadcasts to: 0 on every axis the
/// operand lacks or stretches from 1.
pub(crate) fn broadcast_strides(operand: &[usize], full: &[usize]) -> IxDyn {
    let offset = full.len() - operand.len();
    let mut strides = IxDyn::zeros(full.len());
    let mut step = 1;
    for axis in (0..operand.len()).rev() {
        if operand[axis] != 1 {
            strides[offset + axis] = step;
        }
        step *= operand[axis];
    }
    strides
}

/// Calls `f(position, offsets)` for every element of `shape` in row-major
/// order: `position` counts elements, `offsets[k]` is the element's offset
/// in operand `k`, whose strides (on `shape`'s axes) are `strides[k]`.
pub(crate) fn for_each_offset<const N: usize>(
    shape: &[usize],
    strides: [&[usize]; N],
    mut f: impl FnMut(usize, [usize; N]),
) {
    if shape.contains(&0) {
        return;
    }
    if shape.is_empty() {
        f(0, [0; N]);
        return;
    }
    let mut position = 0;
    walk(0, shape, &strides, [0; N], &mut position, &mut f);
}

fn walk<const N: usize>(
    axis: usize,
    shape: &[usize],
    strides: &[&[usize]; N],
    base: [usize; N],
    position: &mut usize,
    f: &mut impl FnMut(usize, [usize; N]),
) {
    let step: [usize; N] = std::array::from_fn(|k| strides[k][axis]);
    let mut offsets = base;
    for _ in 0..shape[axis] {
        if axis + 1 == shape.len() {
            f(*position, offsets);
            *position += 1;
        } else {
            walk(axis + 1, shape, strides, offsets, position, f);
        }
        for k in 0..N {
            offsets[k] += step[k];
        }
    }
}

/// `out[i] = f(a[i'], b[i''])` over the broadcast shape `out_shape`, where
/// `a` has shape `a_shape` and `b` has shape `b_shape`. Equal shapes run as
/// one flat loop (shared out over threads when large); otherwise row by
/// row along the last axis, on which each operand is either contiguous or
/// one repeated element, so every inner loop is a plain slice loop.
pub(crate) fn zip_broadcast<T: Float>(
    (a, a_shape): (&[T], &[usize]),
    (b, b_shape): (&[T], &[usize]),
    out: &mut [T],
    out_shape: &[usize],
    f: impl Fn(T, T) -> T + Sync,
) {
    if a_shape == b_shape {
        parallel::for_each_chunk(out, |offset, out| {
            let n = out.len();
            zip_rows(&a[offset..offset + n], &b[offset..offset + n], out, &f);
        });
        return;
    }
    if out.is_empty() {
        // No element, however large the other dims: walking their rows would never end.
        return;
    }
    let Some((&n, outer)) = out_shape.split_last() else {
        out[0] = f(a[0], b[0]);
        return;
    };
    let last = outer.len();
    let (sa, sb) = (broadcast_strides(a_shape, out_shape), broadcast_strides(b_shape, out_shape));
    let (step_a, step_b) = (sa[last], sb[last]);
    let row_at = |row: usize, out: &mut [T]| {
        let [ja, jb] = row_offsets(row, outer, [&sa.slice()[..last], &sb.slice()[..last]]);
        match (step_a, step_b) {
            (1, 1) => zip_rows(&a[ja..ja + n], &b[jb..jb + n], out, &f),
            (1, _) => map_row(&a[ja..ja + n], out, &|x| f(x, b[jb])),
            (_, 1) => map_row(&b[jb..jb + n], out, &|y| f(a[ja], y)),
            _ => out.fill(f(a[ja], b[jb])),
        }
    };
    // Rows are independent: groups of them on several threads when large
    // (a product's bias, `x @ w + b`, is added this way).
    parallel::for_each_rows(out, n, |first, rows| {
        for (r, out) in rows.chunks_exact_mut(n).enumerate() {
            row_at(first + r, out);
        }
    });
}

/// Each operand's offset at the start of row `row` of the output, whose
/// rows are indexed by the axes `outer` (all but the last), for operands
/// with `strides` on those axes.
fn row_offsets<const N: usize>(row: usize, outer: &[usize], strides: [&[usize]; N]) -> [usize; N] {
    let mut offsets = [0; N];
    let mut rest = row;
    for axis in (0..outer.len()).rev() {
        let index = rest % outer[axis];
        rest /= outer[axis];
        for (offset, stride) in offsets.iter_mut().zip(&strides) {
            *offset += index * stride[axis];
        }
    }
    offsets
}

simd::multiversion! {
    /// `out[i] = f(a[i], b[i])`.
    fn zip_rows[T: Float, F: Fn(T, T) -> T][T, F](a: &[T], b: &[T], out: &mut [T], f: &F) {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = f(x, y);
        }
    }
}

simd::multiversion! {
    /// `out[i] = f(x[i])`.
    fn map_row[T: Float, F: Fn(T) -> T][T, F](x: &[T], out: &mut [T], f: &F) {
        for (o, &x) in out.iter_mut().zip(x) {
            *o = f(x);
        }
    }
}

/// Columns a thread of [`reduce_into`] takes a multiple of: a cache line of `f32`.
const COLUMN_BLOCK: usize = 16;

/// Adds `g` (shape `from`) into `out` (shape `to`, which broadcasts to
/// `from`), row by row along the last axis. Each element of `out` receives
/// its terms one at a time in row-major order of `from`.
pub(crate) fn reduce_into<T: Float>(g: &[T], from: &[usize], to: &[usize], out: &mut [T]) {
    if g.is_empty() {
        // Nothing to add, however large the other dims: walking their rows would never end.
        return;
    }
    let Some((&n, outer)) = from.split_last() else {
        out[0] += g[0];
        return;
    };
    let last = outer.len();
    let strides = broadcast_strides(to, from);
    let step = strides[last];
    if step == 1 && out.len() == n && parallel::worth_it(g.len()) && n >= 2 * COLUMN_BLOCK {
        // Every row adds into the one row of `out` (a bias's gradient):
        // its columns in two halves on two threads, each half summed over
        // the rows in order, so the bits are those of one thread.
        let mid = n / 2 / COLUMN_BLOCK * COLUMN_BLOCK;
        let (left, right) = out.split_at_mut(mid);
        let add_rows = |first: usize, out: &mut [T]| {
            for g_row in g.chunks_exact(n) {
                out.iter_mut().zip(&g_row[first..]).for_each(|(o, &v)| *o += v);
            }
        };
        parallel::run(true, || rayon::join(|| add_rows(0, left), || add_rows(mid, right)));
        return;
    }
    for_each_offset(outer, [&strides.slice()[..last]], |row, [j]| {
        let g_row = &g[row * n..(row + 1) * n];
        if step == 1 {
            out[j..j + n].iter_mut().zip(g_row).for_each(|(o, &v)| *o += v);
        } else {
            out[j] = g_row.iter().fold(out[j], |acc, &v| acc + v);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_broadcast_as_numpy() {
        type Case = (&'static [usize], &'static [usize], Option<&'static [usize]>);
        let cases: [Case; 7] = [
            (&[64, 10], &[10], Some(&[64, 10])),
            (&[2, 1, 3], &[4, 1], Some(&[2, 4, 3])),
            (&[3], &[4, 3], Some(&[4, 3])),
            (&[5], &[1], Some(&[5])),
            (&[], &[2, 2], Some(&[2, 2])),
            (&[0, 3], &[1, 3], Some(&[0, 3])),
            (&[2, 3], &[4], None),
        ];
        for (a, b, want) in cases {
            let got = broadcast_shapes(a, b);
            assert_eq!(got.as_ref().map(|s| s.slice()), want, "{a:?} with {b:?}");
        }
    }

    #[test]
    fn zip_broadcast_matches_hand_indexing() {
        // a: [2, 1, 3], b: [4, 1] -> [2, 4, 3]
        let a: Vec<f64> = (0..6).map(f64::from).collect();
        let b: Vec<f64> = (0..4).map(|v| 10.0 * f64::from(v)).collect();
        let mut out = vec![0.0; 24];
        zip_broadcast((&a, &[2, 1, 3]), (&b, &[4, 1]), &mut out, &[2, 4, 3], |x, y| x + y);
        for i in 0..2 {
            for j in 0..4 {
                for k in 0..3 {
                    assert_eq!(out[i * 12 + j * 3 + k], a[i * 3 + k] + b[j]);
                }
            }
        }
    }

    #[test]
    fn reduce_into_sums_stretched_and_missing_axes() {
        let g: Vec<f64> = (0..24).map(f64::from).collect();
        let unbroadcast = |to: &[usize]| {
            let mut out = vec![0.0; to.iter().product()];
            reduce_into(&g, &[2, 4, 3], to, &mut out);
            out
        };
        let to_bias = unbroadcast(&[3]);
        let want: Vec<f64> = (0..3).map(|k| (0..8).map(|r| g[r * 3 + k]).sum()).collect();
        assert_eq!(to_bias, want);
        let to_column = unbroadcast(&[4, 1]);
        let want: Vec<f64> = (0..4)
            .map(|j| (0..2).flat_map(|i| (0..3).map(move |k| (i, k))).map(|(i, k)| g[i * 12 + j * 3 + k]).sum())
            .collect();
        assert_eq!(to_column, want);
        let to_scalar = unbroadcast(&[]);
        assert_eq!(to_scalar, vec![g.iter().sum::<f64>()]);
    }

    #[test]
    fn large_broadcasts_shared_out_by_rows_and_columns_keep_each_element_and_sum() {
        // Large enough for threads: a bias added to [8, 64, 384] rows and a
        // [64, 1] column to the same shape, each element as if alone; then
        // the bias's gradient summed over rows in row order (the bits of
        // one thread), with values whose sums round.
        let shape = [8, 64, 384];
        let len: usize = shape.iter().product();
        let x: Vec<f32> = (0..len).map(|i| ((i * 37) % 101) as f32 * 0.013 - 0.6).collect();
        let bias: Vec<f32> = (0..384).map(|i| i as f32 * 0.25).collect();
        let column: Vec<f32> = (0..64).map(|i| i as f32 * -0.5).collect();
        let mut out = vec![0.0; len];
        zip_broadcast((&x, &shape), (&bias, &[384]), &mut out, &shape, |a, b| a * 1.5 + b);
        assert!((0..len).all(|i| out[i] == x[i] * 1.5 + bias[i % 384]));
        zip_broadcast((&column, &[64, 1]), (&x, &shape), &mut out, &shape, |a, b| a - b);
        assert!((0..len).all(|i| out[i] == column[i / 384 % 64] - x[i]));
        let mut sums = vec![0.0f32; 384];
        reduce_into(&x, &shape, &[384], &mut sums);
        for (k, &sum) in sums.iter().enumerate() {
            let want = (0..len / 384).fold(0.0f32, |acc, r| acc + x[r * 384 + k]);
            assert_eq!(sum.to_bits(), want.to_bits(), "column {k}");
        }
    }
}
