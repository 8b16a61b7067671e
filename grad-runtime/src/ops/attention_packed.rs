//! `attention_packed`: attention over queries, keys and values packed in
//! one tensor, as a fused projection writes them (nanoGPT's `c_attn`,
//! FlashAttention's "qkvpacked" layout): `qkv: [..., T, 3 · H · d]` in,
//! `[..., T, H · d]` out. Each head is read where it lies in `qkv` and its
//! output written where it lies in the result, where the same attention
//! through [`g_attention`](crate::g_attention) slices, reshapes and
//! permutes the heads out (six copies forward, six of their gradients
//! backward) and the result back.
//!
//! The heads run on `attention.rs`'s kernels, which read their operands
//! through strides; each head's output block (and backward, its three
//! gradient blocks) lands in a scratch in L1 first and is copied into its
//! columns. The arithmetic is `g_attention`'s, so values and gradients are
//! those of the sliced, reshaped and permuted form, bit for bit.
//!
//! Threads take whole batches (the rows of a batch interleave its heads'
//! columns); a single sequence shares out its heads instead, each into
//! blocks of its own, copied into their columns once all are done.

use std::panic::Location;

use ndarray::{Dimension, IxDyn};
use rayon::prelude::*;

use super::attention::{
    Dims, attend, attend_backward, backward_scratch_len, forward_scratch_len, kept_for_backward, saved_buffers,
};
use crate::error::ErrorKind;
use crate::gemm::{MatRef, Precision};
use crate::ops::Op;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var, copy, parallel};

/// Scaled dot-product attention over `heads` heads packed in `qkv: [...,
/// T, 3 · heads · d]`: along the last dim the queries, then the keys, then
/// the values, each `heads` blocks of `d` (head `h` of the queries at
/// columns `h·d..(h+1)·d`). The result is `[..., T, heads · d]`, head `h`
/// at columns `h·d..(h+1)·d`: each head's `softmax(q kᵀ / √d + mask) v`,
/// as [`g_attention`](crate::g_attention) computes it (query `i` sees keys
/// `j <= i` with `causal`). The same as PyTorch's
///
/// ```text
/// q, k, v = qkv.split(C, dim=-1)                                  # C = heads · d
/// heads_of = lambda x: x.view(B, T, heads, d).transpose(1, 2)
/// y = F.scaled_dot_product_attention(heads_of(q), heads_of(k), heads_of(v), is_causal=causal)
/// y = y.transpose(1, 2).reshape(B, T, C)
/// ```
///
/// without the copies. Gradient: `g_attention`'s, each head's `dq`, `dk`,
/// `dv` written into its columns of `qkv`'s gradient.
///
/// ```
/// use grad_runtime::{g_attention_packed, g_sum, ndarray::Array3, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// // Batch 2, 5 positions, 2 heads of 3 features: 3 · 2 · 3 = 18 columns.
/// let qkv = tape.param(Array3::from_shape_fn((2, 5, 18), |(b, t, c)| ((b * 90 + t * 18 + c) as f64).sin()));
/// let y = g_attention_packed(&mut tape, qkv, 2, true);
/// assert_eq!(tape.value(y).shape(), &[2, 5, 6]);
/// // The first position sees only itself: its output is its own values.
/// assert_eq!(tape.value(y)[[1, 0, 4]], tape.value(qkv)[[1, 0, 12 + 4]]);
/// let loss = g_sum(&mut tape, y);
/// tape.backward(loss)?;
/// assert_eq!(tape.grad(qkv).shape(), &[2, 5, 18]);
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_attention_packed<T: Float>(tp: &mut Tape<T>, qkv: Var, heads: usize, causal: bool) -> Var {
    const NAME: &str = "g_attention_packed";
    let location = Location::caller();
    let Some([x]) = tp.resolve(NAME, [qkv], location) else {
        return tp.poisoned_var();
    };
    let layout = match Packed::of(tp.shape(x), heads, tp.matmul_precision()) {
        Ok(layout) => layout,
        Err(kind) => return tp.fail(NAME, kind, &[x], location),
    };
    let Packed { dims, width, .. } = layout;
    let mut shape = IxDyn(tp.shape(x));
    if let Some(last) = shape.slice_mut().last_mut() {
        *last = width;
    }
    let Some(mut out) = tp.output(NAME, shape, &[x], location) else {
        return tp.poisoned_var();
    };
    let Some((mut probs, mut stats)) = saved_buffers(tp, NAME, dims, &[x], location) else {
        tp.recycle(out.data);
        return tp.poisoned_var();
    };
    let (probs_len, stats_len) = (dims.weights_len(), dims.stats_len());
    if layout.is_empty() {
        // No query, or heads of no width: nothing to weigh.
        probs.fill(T::zero());
        stats.fill(T::zero());
        out.data.fill(T::zero());
    } else {
        // Per batch (or per head, below): a head's output block, then its kernel's scratch.
        let block = dims.tq * dims.dv;
        let scratch_len = block + forward_scratch_len::<T>(dims);
        let sharing = layout.sharing(heads);
        let mut scratch = tp.scratch(sharing.groups(&layout, heads) * scratch_len);
        let input = &tp.value_of(x).data[..];
        let head = |b: usize, h: usize, scratch: &mut [T], saved: [&mut [T]; 2]| {
            let (out, scratch) = scratch.split_at_mut(block);
            attend(layout.head(input, b, h), dims, causal, scratch, saved, out);
        };
        let batch = |b: usize, scratch: &mut [T], (probs, stats): (&mut [T], &mut [T]), out: &mut [T]| {
            for h in 0..heads {
                head(
                    b,
                    h,
                    scratch,
                    [&mut probs[h * probs_len..][..probs_len], &mut stats[h * stats_len..][..stats_len]],
                );
                layout.scatter(&scratch[..block], out, h, 0, width);
            }
        };
        let (per_probs, per_stats, per_out) = (heads * probs_len, heads * stats_len, dims.tq * width);
        if sharing == Sharing::Heads {
            // One sequence: its heads shared out, each into a block of its own, then copied into their columns.
            let chunks = scratch.par_chunks_mut(scratch_len);
            let chunks = chunks.zip(probs.par_chunks_mut(probs_len).zip(stats.par_chunks_mut(stats_len))).enumerate();
            parallel::run(true, || chunks.for_each(|(h, (s, (p, st)))| head(0, h, s, [p, st])));
            for (h, s) in scratch.chunks(scratch_len).enumerate() {
                layout.scatter(&s[..block], &mut out.data, h, 0, width);
            }
        } else if sharing == Sharing::Batches {
            let chunks = scratch.par_chunks_mut(scratch_len);
            let chunks = chunks.zip(probs.par_chunks_mut(per_probs).zip(stats.par_chunks_mut(per_stats)));
            let chunks = chunks.zip(out.data.par_chunks_mut(per_out)).enumerate();
            parallel::run(true, || chunks.for_each(|(b, ((s, saved), o))| batch(b, s, saved, o)));
        } else {
            let chunks = scratch.chunks_mut(scratch_len);
            let chunks = chunks.zip(probs.chunks_mut(per_probs).zip(stats.chunks_mut(per_stats)));
            let chunks = chunks.zip(out.data.chunks_mut(per_out));
            chunks.enumerate().for_each(|(b, ((s, saved), o))| batch(b, s, saved, o));
        }
        tp.recycle(scratch);
    }
    let saved = kept_for_backward(tp, dims, probs, stats);
    tp.push(Op::AttentionPacked { qkv: x, heads, causal, saved, precision: dims.precision }, out)
}

/// Where the heads of a packed `qkv` lie: `batches` (the product of the
/// leading dims) of `T` rows, each row `3 · width` wide (`width = heads ·
/// d`), and each head's attention sizes ([`Dims`], over all `batches ·
/// heads` heads).
#[derive(Clone, Copy, Debug)]
struct Packed {
    dims: Dims,
    batches: usize,
    width: usize,
}

impl Packed {
    /// Checks `qkv`'s shape against `heads`.
    fn of(shape: &[usize], heads: usize, precision: Precision) -> Result<Packed, ErrorKind> {
        let rank = shape.len();
        if rank < 2 {
            return Err(ErrorKind::Rank { expected: "2-D or higher ([..., T, 3 · heads · d])", got: rank });
        }
        let (t, columns) = (shape[rank - 2], shape[rank - 1]);
        let Some(parts) = heads.checked_mul(3).filter(|&parts| parts > 0 && columns % parts == 0) else {
            let expected =
                "a head count h with the last dim a multiple of 3 · h (queries, keys, values of h heads each)";
            return Err(ErrorKind::InvalidArgument { name: "heads", value: heads as f64, expected });
        };
        let (batches, d) = (shape[..rank - 2].iter().product::<usize>(), columns / parts);
        let Some(all_heads) = batches.checked_mul(heads) else {
            let reason = "the number of batches times the heads overflows usize";
            return Err(ErrorKind::TooLarge { shape: shape.to_vec(), reason });
        };
        let dims = Dims { heads: all_heads, tq: t, tk: t, d, dv: d, precision };
        Ok(Packed { dims, batches, width: heads * d })
    }

    /// How the heads go to threads: whole batches, or a single sequence's
    /// heads, when there is work enough to share out.
    fn sharing(&self, heads: usize) -> Sharing {
        match (self.dims.worth_sharing(), self.batches) {
            (false, _) => Sharing::None,
            (true, 1) if heads > 1 => Sharing::Heads,
            (true, 1) => Sharing::None,
            (true, _) => Sharing::Batches,
        }
    }

    /// Whether there is nothing to compute: no position, or heads of no width.
    fn is_empty(&self) -> bool {
        self.dims.tq == 0 || self.width == 0 || self.batches == 0
    }

    /// Head `h` of batch `b`'s queries, keys and values in `qkv`.
    fn head<'a, T>(&self, qkv: &'a [T], b: usize, h: usize) -> [MatRef<'a, T>; 3] {
        let (t, d, row) = (self.dims.tq, self.dims.d, 3 * self.width);
        let batch = &qkv[b * t * row..(b + 1) * t * row];
        [0, 1, 2].map(|part| MatRef {
            data: &batch[part * self.width + h * d..],
            rows: t,
            cols: d,
            row_stride: row,
            col_stride: 1,
        })
    }

    /// Copies a head's block (`T × d`, row-major) into columns
    /// `offset + h·d..` of `rows` (`T` rows of `row_len`).
    fn scatter<T: Copy>(&self, block: &[T], rows: &mut [T], h: usize, offset: usize, row_len: usize) {
        let d = self.dims.d;
        for (row, values) in rows.chunks_exact_mut(row_len).zip(block.chunks_exact(d)) {
            copy::row(&mut row[offset + h * d..offset + (h + 1) * d], values);
        }
    }
}

/// How [`Packed`] heads go to threads: none (one batch after another),
/// whole batches, or a single sequence's heads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sharing {
    None,
    Batches,
    Heads,
}

impl Sharing {
    /// How many scratches the heads need at once: one a head when heads are
    /// shared out, else one a batch.
    fn groups(self, layout: &Packed, heads: usize) -> usize {
        if self == Sharing::Heads { heads } else { layout.batches }
    }
}

pub(crate) fn attention_packed_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    qkv: NodeId,
    heads: usize,
    causal: bool,
    saved: &[T],
    precision: Precision,
) {
    if !sink.wants(qkv) {
        return;
    }
    let Ok(layout) = Packed::of(sink.value(qkv).shape(), heads, precision) else { return };
    let Packed { dims, width, .. } = layout;
    let len = sink.value(qkv).len();
    let mut grad = sink.scratch_for(qkv, len);
    if layout.is_empty() {
        grad.fill(T::zero());
        sink.add(qkv, grad);
        return;
    }
    // Every head writes its three blocks of every row: the gradient is
    // written whole, no zeros first.
    let saved_len = dims.saved_len();
    let block = dims.tq * dims.d;
    let scratch_len = 3 * block + backward_scratch_len::<T>(dims);
    let sharing = layout.sharing(heads);
    let mut scratch = sink.scratch(sharing.groups(&layout, heads) * scratch_len);
    let input = &sink.value(qkv).data[..];
    let row = 3 * width;
    // Head `h` of batch `b`: its `dq`, `dk`, `dv` into the first three blocks of `scratch`.
    let head = |b: usize, h: usize, scratch: &mut [T]| {
        let (blocks, scratch) = scratch.split_at_mut(3 * block);
        let (dq, rest) = blocks.split_at_mut(block);
        let (dk, dv) = rest.split_at_mut(block);
        let [q, k, v] = layout.head(input, b, h);
        let g_rows = &g.data[b * dims.tq * width + h * dims.d..];
        let g = MatRef { data: g_rows, rows: dims.tq, cols: dims.d, row_stride: width, col_stride: 1 };
        let i = b * heads + h;
        let saved = &saved[i * saved_len..(i + 1) * saved_len];
        attend_backward([q, k, v, g], saved, dims, causal, scratch, [dq, dk, dv]);
    };
    let scatter = |h: usize, scratch: &[T], grad: &mut [T]| {
        for (part, values) in scratch[..3 * block].chunks_exact(block).enumerate() {
            layout.scatter(values, grad, h, part * width, row);
        }
    };
    let batch = |b: usize, scratch: &mut [T], grad: &mut [T]| {
        for h in 0..heads {
            head(b, h, scratch);
            scatter(h, scratch, grad);
        }
    };
    let per_batch = dims.tq * row;
    if sharing == Sharing::Heads {
        // One sequence: its heads shared out, each into blocks of its own, then copied into their columns.
        parallel::run(true, || scratch.par_chunks_mut(scratch_len).enumerate().for_each(|(h, s)| head(0, h, s)));
        for (h, s) in scratch.chunks(scratch_len).enumerate() {
            scatter(h, s, &mut grad);
        }
    } else if sharing == Sharing::Batches {
        let chunks = scratch.par_chunks_mut(scratch_len).zip(grad.par_chunks_mut(per_batch)).enumerate();
        parallel::run(true, || chunks.for_each(|(b, (s, gb))| batch(b, s, gb)));
    } else {
        let chunks = scratch.chunks_mut(scratch_len).zip(grad.chunks_mut(per_batch));
        chunks.enumerate().for_each(|(b, (s, gb))| batch(b, s, gb));
    }
    sink.recycle(scratch);
    sink.add(qkv, grad);
}

/// The packed attention recorded again as the ops it stands for (slices,
/// reshapes and permutes around [`g_attention`](crate::g_attention)'s own
/// replay): what `grad_graph` differentiates.
pub(crate) fn replay<T: Float>(tp: &mut Tape<T>, qkv: Var, heads: usize, causal: bool) -> Var {
    let shape = tp.value(qkv).shape().to_vec();
    let rank = shape.len();
    let width = shape[rank - 1] / 3;
    let mut heads_shape = shape[..rank - 1].to_vec();
    heads_shape.extend([heads, width / heads]);
    // [..., T, heads, d] -> [..., heads, T, d], and back.
    let mut order: Vec<usize> = (0..rank + 1).collect();
    order.swap(rank - 2, rank - 1);
    let [q, k, v] = [0, 1, 2].map(|part| {
        let mut starts = vec![0; rank];
        let mut stops = shape.clone();
        (starts[rank - 1], stops[rank - 1]) = (part * width, (part + 1) * width);
        let x = crate::g_slice(tp, qkv, &starts, &stops);
        let x = crate::g_reshape(tp, x, &heads_shape);
        crate::g_permute(tp, x, &order)
    });
    let y = super::attention::replay(tp, [q, k, v], causal);
    let y = crate::g_permute(tp, y, &order);
    let mut out_shape = shape;
    out_shape[rank - 1] = width;
    crate::g_reshape(tp, y, &out_shape)
}
