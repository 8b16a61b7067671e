//! `attention`: scaled dot-product attention, `softmax(q kᵀ / √d + mask) v`,
//! as one op: one pass over each (batch, head) forward and one backward,
//! instead of a product, a scale, a mask, a softmax and a second product,
//! each a pass over the `[.., T, T]` scores with its own node.
//!
//! What the backward rule gets: the probabilities `[.., Tq, Tk]` when they
//! are no larger than the inputs `q`, `k`, `v` together (short contexts,
//! where recomputing them would cost more than keeping them), else each
//! query's softmax statistics (its largest score and the sum of its
//! exponentials), from which backward recomputes the probabilities with
//! the forward's own arithmetic, bit for bit (FlashAttention's trade:
//! memory linear in the context instead of quadratic). Each (batch, head)
//! is independent, so they are shared out to threads whole and the result
//! does not depend on the thread count.
//!
//! Within a head, queries go by blocks of [`QUERY_BLOCK`] over the keys
//! the block's last query sees (a causal block skips the keys after it),
//! and the block's products (scores, weighted values, and backward's four)
//! run on the GEMM's micro-kernel; only the softmax and its gradient go
//! row by row.

use std::panic::Location;

use ndarray::{Dimension, IxDyn};
use rayon::prelude::*;

use crate::error::ErrorKind;
use crate::gemm::{self, MatRef, Precision};
use crate::ops::Op;
use crate::ops::reduce::lane_sum;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var, parallel, simd};

/// Scaled dot-product attention of queries `q: [..., Tq, d]` over keys
/// `k: [..., Tk, d]` and values `v: [..., Tk, dv]` (the same leading dims,
/// e.g. `[batch, heads]`): `softmax(q @ kᵀ / √d + mask, -1) @ v`,
/// `[..., Tq, dv]`. With `causal`, query `i` sees keys `j <= i` only (the
/// mask is `-inf` above the diagonal, PyTorch's `is_causal=True`).
/// PyTorch's `F.scaled_dot_product_attention(q, k, v, is_causal=causal)`.
///
/// Gradient, with `P` the probabilities and `g` the output's gradient:
/// `v` gets `Pᵀ g`; with `dS = P ∘ (g vᵀ - rowsum(P ∘ g vᵀ)) / √d`, `q`
/// gets `dS k` and `k` gets `dSᵀ q`.
///
/// ```
/// use grad_runtime::{g_attention, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let q = tape.param(array![[[1.0, 0.0], [0.0, 1.0]]]);
/// let k = tape.param(array![[[1.0, 0.0], [0.0, 1.0]]]);
/// let v = tape.param(array![[[1.0, 2.0], [3.0, 4.0]]]);
/// let y = g_attention(&mut tape, q, k, v, true);
/// // The first query sees only the first key: its output is v's first row.
/// assert_eq!(tape.value(y).slice(ndarray::s![0, 0, ..]), array![1.0, 2.0]);
/// tape.backward(y)?;
/// // sum(y)'s gradient in v[1] is the second query's weight on the second key.
/// let weight = 1.0 / (1.0 + (-(0.5f64).sqrt()).exp());
/// assert!((tape.grad(v)[[0, 1, 0]] - weight).abs() < 1e-15);
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_attention<T: Float>(tp: &mut Tape<T>, q: Var, k: Var, v: Var, causal: bool) -> Var {
    const NAME: &str = "g_attention";
    let location = Location::caller();
    let Some(ids) = tp.resolve(NAME, [q, k, v], location) else {
        return tp.poisoned_var();
    };
    let shapes = [tp.shape(ids[0]), tp.shape(ids[1]), tp.shape(ids[2])];
    let dims = match Dims::of(shapes, tp.matmul_precision()) {
        Ok(dims) => dims,
        Err(kind) => return tp.fail(NAME, kind, &ids, location),
    };
    // The query's shape with its last two dims replaced (no `Vec`: a
    // steady state allocates nothing here).
    let with_last_two = |tp: &Tape<T>, rows: usize, cols: usize| {
        let mut shape = IxDyn(tp.shape(ids[0]));
        let dims = shape.slice_mut();
        let n = dims.len();
        (dims[n - 2], dims[n - 1]) = (rows, cols);
        shape
    };
    let Some(mut out) = tp.output(NAME, with_last_two(tp, dims.tq, dims.dv), &ids, location) else {
        return tp.poisoned_var();
    };
    let Some((mut probs, mut stats)) = saved_buffers(tp, NAME, dims, &ids, location) else {
        tp.recycle(out.data);
        return tp.poisoned_var();
    };
    let (probs_len, stats_len) = (dims.weights_len(), dims.stats_len());
    let (out_len, scratch_len) = (dims.tq * dims.dv, forward_scratch_len::<T>(dims).max(1));
    let mut scratch = tp.scratch(dims.heads * scratch_len);
    let [q, k, v] = ids.map(|id| &tp.value_of(id).data[..]);
    let heads = |i: usize, scratch: &mut [T], (probs, stats): (&mut [T], &mut [T]), out: &mut [T]| {
        attend(dims.head_inputs([q, k, v], i), dims, causal, scratch, [probs, stats], out);
    };
    if dims.tq * dims.tk == 0 || out_len == 0 {
        // No query, or values of no width: nothing to weigh (the gradients are zeros too).
        probs.fill(T::zero());
        stats.fill(T::zero());
        out.data.fill(T::zero());
    } else if dims.worth_sharing() {
        let chunks = scratch.par_chunks_mut(scratch_len);
        let chunks = chunks.zip(probs.par_chunks_mut(probs_len).zip(stats.par_chunks_mut(stats_len)));
        let chunks = chunks.zip(out.data.par_chunks_mut(out_len)).enumerate();
        parallel::run(true, || chunks.for_each(|(i, ((s, saved), o))| heads(i, s, saved, o)));
    } else {
        let chunks = scratch.chunks_mut(scratch_len).zip(probs.chunks_mut(probs_len).zip(stats.chunks_mut(stats_len)));
        let chunks = chunks.zip(out.data.chunks_mut(out_len));
        chunks.enumerate().for_each(|(i, ((s, saved), o))| heads(i, s, saved, o));
    }
    tp.recycle(scratch);
    let [q, k, v] = ids;
    let saved = kept_for_backward(tp, dims, probs, stats);
    tp.push(Op::Attention { q, k, v, causal, saved, precision: dims.precision }, out)
}

/// The buffers a forward writes besides its output: the probabilities
/// (every head's, or one row a head) and the statistics, through the size
/// checks of every output (a row of `tk` keys of no width holds no
/// memory, but `heads · tk` probabilities do).
pub(super) fn saved_buffers<T: Float>(
    tp: &mut Tape<T>,
    name: &'static str,
    dims: Dims,
    inputs: &[NodeId],
    location: &'static Location<'static>,
) -> Option<(Vec<T>, Vec<T>)> {
    let (probs_len, stats_len) = (dims.weights_len(), dims.stats_len());
    let probs = tp.output(name, IxDyn(&[dims.heads, probs_len]), inputs, location)?;
    let Some(stats) = tp.output(name, IxDyn(&[dims.heads, stats_len]), inputs, location) else {
        tp.recycle(probs.data);
        return None;
    };
    Some((probs.data, stats.data))
}

/// What backward reads of the forward's probabilities and statistics (the
/// other goes back to the pool); under inference nothing is kept.
pub(super) fn kept_for_backward<T: Float>(tp: &mut Tape<T>, dims: Dims, probs: Vec<T>, stats: Vec<T>) -> Vec<T> {
    let (saved, spare) = if dims.keeps_weights() { (probs, stats) } else { (stats, probs) };
    tp.recycle(spare);
    if tp.is_inference() {
        tp.recycle(saved);
        return Vec::new();
    }
    saved
}

/// The sizes of one attention: `heads` (batch · heads, the product of the
/// leading dims), `tq` queries and `tk` keys of `d` features, values of
/// `dv`; and the precision of its products, forward and backward (the
/// tape's when the op was recorded).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    pub(super) heads: usize,
    pub(super) tq: usize,
    pub(super) tk: usize,
    pub(super) d: usize,
    pub(super) dv: usize,
    pub(super) precision: Precision,
}

impl Dims {
    /// Checks the shapes of `q`, `k`, `v`.
    fn of([q, k, v]: [&[usize]; 3], precision: Precision) -> Result<Dims, ErrorKind> {
        let rank = q.len();
        if rank < 2 {
            return Err(ErrorKind::Rank { expected: "2-D or higher (queries [..., T, d])", got: rank });
        }
        for other in [k, v] {
            if other.len() != rank {
                return Err(ErrorKind::RankMismatch { left: rank, right: other.len() });
            }
        }
        for (&a, &b) in q[..rank - 2].iter().zip(k).chain(q[..rank - 2].iter().zip(v)) {
            if a != b {
                return Err(ErrorKind::BatchDim { left: a, right: b });
            }
        }
        let (tq, d, tk, dv) = (q[rank - 2], q[rank - 1], k[rank - 2], v[rank - 1]);
        if k[rank - 1] != d {
            return Err(ErrorKind::InnerDim { left: d, right: k[rank - 1] });
        }
        if v[rank - 2] != tk {
            return Err(ErrorKind::InnerDim { left: tk, right: v[rank - 2] });
        }
        if tk == 0 && tq > 0 {
            return Err(ErrorKind::EmptyReduction { axis: rank - 2 });
        }
        Ok(Dims { heads: q[..rank - 2].iter().product(), tq, tk, d, dv, precision })
    }

    /// Head `i`'s block of `len` elements of `data`.
    fn head<'a, T>(&self, data: &'a [T], i: usize, len: usize) -> &'a [T] {
        &data[i * len..(i + 1) * len]
    }

    /// Head `i`'s queries, keys and values in separate buffers of heads
    /// laid one after another, each row-major.
    fn head_inputs<'a, T>(&self, [q, k, v]: [&'a [T]; 3], i: usize) -> [MatRef<'a, T>; 3] {
        let (tq, tk, d, dv) = (self.tq, self.tk, self.d, self.dv);
        [
            MatRef::row_major(self.head(q, i, tq * d), tq, d),
            MatRef::row_major(self.head(k, i, tk * d), tk, d),
            MatRef::row_major(self.head(v, i, tk * dv), tk, dv),
        ]
    }

    /// How many keys query `i` sees.
    #[inline(always)]
    pub(super) fn visible(&self, i: usize, causal: bool) -> usize {
        if causal { (i + 1).min(self.tk) } else { self.tk }
    }

    /// Whether the op keeps the probabilities for backward (else their
    /// statistics, two per query): when they are no larger than the inputs.
    pub(super) fn keeps_weights(&self) -> bool {
        let weights = self.tq.saturating_mul(self.tk);
        let inputs = (self.tq * self.d).saturating_add(self.tk * self.d).saturating_add(self.tk * self.dv);
        weights <= inputs
    }

    /// One head's buffer of probabilities: all its rows when they are
    /// kept, else one row, reused (at least one element, so that every head
    /// has a buffer of its own to chunk).
    pub(super) fn weights_len(&self) -> usize {
        if self.keeps_weights() { self.tq * self.tk } else { self.tk }.max(1)
    }

    /// One head's buffer of statistics: two per query, unless the
    /// probabilities are kept (then an unused element).
    pub(super) fn stats_len(&self) -> usize {
        if self.keeps_weights() { 0 } else { 2 * self.tq }.max(1)
    }

    /// What one head keeps for backward: its probabilities or its statistics.
    pub(super) fn saved_len(&self) -> usize {
        if self.keeps_weights() { self.weights_len() } else { self.stats_len() }
    }

    /// Whether the heads are worth sharing out to threads.
    pub(super) fn worth_sharing(&self) -> bool {
        parallel::worth_it(self.heads * self.tq * self.tk * self.d.max(1))
    }

    pub(super) fn scale<T: Float>(&self) -> T {
        T::from_f64(1.0 / (self.d.max(1) as f64).sqrt())
    }
}

/// The scaled scores of queries `i0..i0 + rows` (`queries`, `rows × d`)
/// over the first `seen` keys, into `out` (`rows × seen`): one product on
/// the GEMM's micro-kernel, then each query's visible scores scaled (what
/// lies past them is left as computed). The forward and the recompute of
/// backward both call it on the same blocks, so their probabilities agree
/// to the bit. Inlined into both, so its scaling loop is compiled at
/// their SIMD level.
#[inline(always)]
fn block_scores<T: Float>(
    queries: MatRef<'_, T>,
    keys: MatRef<'_, T>,
    [i0, seen]: [usize; 2],
    dims: Dims,
    causal: bool,
    out: &mut [T],
    packing: &mut [T],
) {
    T::gemm(dims.precision, queries, rows(keys, 0, seen).t(), out, false, packing);
    let scale = dims.scale::<T>();
    for (r, row) in out.chunks_exact_mut(seen).enumerate() {
        for p in &mut row[..dims.visible(i0 + r, causal)] {
            *p *= scale;
        }
    }
}

/// Rows `r0..r1` of `m`.
#[inline(always)]
fn rows<T>(m: MatRef<'_, T>, r0: usize, r1: usize) -> MatRef<'_, T> {
    MatRef { data: &m.data[r0 * m.row_stride..], rows: r1 - r0, ..m }
}

/// `exp(s - max) / total` in place: scores to probabilities.
#[inline(always)]
fn normalise<T: Float>(seen: &mut [T], max: T, total: T) {
    for p in seen.iter_mut() {
        *p = (*p - max).tape_exp();
    }
    for p in seen.iter_mut() {
        *p /= total;
    }
}

/// Query rows per block of the forward and the backward. A block's
/// products run on the GEMM's micro-kernel; the block also fixes the
/// order in which the keys' and values' gradients are summed over queries
/// (block after block), so it is a constant, never derived from the CPU
/// or the threads.
const QUERY_BLOCK: usize = 64;

/// The scratch one head's forward needs: a block's scores (`QUERY_BLOCK
/// × tk`) and the packing of its two products.
pub(super) fn forward_scratch_len<T: Float>(dims: Dims) -> usize {
    let Dims { tq, tk, d, dv, .. } = dims;
    let rows = QUERY_BLOCK.min(tq);
    let len = |m, k, n| gemm::scratch_len_in::<T>(dims.precision, m, k, n);
    rows * tk + len(rows, d, tk).max(len(rows, tk, dv))
}

simd::multiversion! {
    /// One head forward, by blocks of [`QUERY_BLOCK`] queries over the keys
    /// the block's last query sees: the scores as one product, then each
    /// query's probabilities over the keys it sees (the rest 0), then the
    /// block's weighted sums of values as a second product into `out`.
    /// `saved` is `[probs, stats]`: every row of probabilities kept (`probs`
    /// of `tq × tk`, `stats` unused), or each query's largest score and sum
    /// of exponentials written to `stats` (`probs` unused). `scratch` holds
    /// [`forward_scratch_len`]. `q`, `k`, `v` are read through their
    /// strides (a head of separate tensors, or of a packed `qkv`); `out`
    /// is the head's row-major `tq × dv`.
    pub(super) fn attend[T: Float][T](
        inputs: [MatRef<'_, T>; 3],
        dims: Dims,
        causal: bool,
        scratch: &mut [T],
        saved: [&mut [T]; 2],
        out: &mut [T],
    ) {
        let [q, k, v] = inputs;
        let [probs, stats] = saved;
        let Dims { tq, tk, dv, .. } = dims;
        let keep = dims.keeps_weights();
        let (block, packing) = scratch.split_at_mut(QUERY_BLOCK.min(tq) * tk);
        for i0 in (0..tq).step_by(QUERY_BLOCK) {
            let i1 = (i0 + QUERY_BLOCK).min(tq);
            let seen = dims.visible(i1 - 1, causal);
            let queries = rows(q, i0, i1);
            let p: &[T] = if keep && seen == tk {
                // Rows of every key: the kept probabilities themselves.
                let p = &mut probs[i0 * tk..i1 * tk];
                weigh(queries, k, [i0, seen], dims, causal, p, packing, None);
                p
            } else {
                let p = &mut block[..(i1 - i0) * seen];
                weigh(queries, k, [i0, seen], dims, causal, p, packing, (!keep).then_some(&mut *stats));
                if keep {
                    for (i, row) in (i0..).zip(p.chunks_exact(seen)) {
                        probs[i * tk..i * tk + seen].copy_from_slice(row);
                        probs[i * tk + seen..(i + 1) * tk].fill(T::zero());
                    }
                }
                p
            };
            let weights = MatRef::row_major(p, i1 - i0, seen);
            T::gemm(dims.precision, weights, rows(v, 0, seen), &mut out[i0 * dv..i1 * dv], false, packing);
        }
    }
}

/// A block of queries' probabilities over the first `seen` keys into `p`
/// (`rows × seen`, zeros past the keys each query sees), and each query's
/// largest score and sum of exponentials into `stats` when given.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn weigh<T: Float>(
    queries: MatRef<'_, T>,
    keys: MatRef<'_, T>,
    [i0, seen]: [usize; 2],
    dims: Dims,
    causal: bool,
    p: &mut [T],
    packing: &mut [T],
    mut stats: Option<&mut [T]>,
) {
    block_scores(queries, keys, [i0, seen], dims, causal, p, packing);
    for (i, row) in (i0..).zip(p.chunks_exact_mut(seen)) {
        let (seen_here, unseen) = row.split_at_mut(dims.visible(i, causal));
        let (max, total) = softmax_in_place(seen_here);
        unseen.fill(T::zero());
        if let Some(stats) = stats.as_deref_mut() {
            (stats[2 * i], stats[2 * i + 1]) = (max, total);
        }
    }
}

/// Scores to probabilities in place (`exp(s - max) / total`); returns
/// `(max, total)`, from which backward recomputes them.
#[inline(always)]
fn softmax_in_place<T: Float>(seen: &mut [T]) -> (T, T) {
    // A select, not `max()`: the same result here (scores are compared,
    // NaNs propagate through exp either way) and it vectorises.
    let mut max = [T::neg_infinity(); 16];
    for (n, &p) in seen.iter().enumerate() {
        let m = &mut max[n % 16];
        *m = if p > *m { p } else { *m };
    }
    let max = max.iter().fold(T::neg_infinity(), |a, &b| if b > a { b } else { a });
    for p in seen.iter_mut() {
        *p = (*p - max).tape_exp();
    }
    let total = lane_sum([&*seen; 3], |x, _, _| x);
    for p in seen.iter_mut() {
        *p /= total;
    }
    (max, total)
}

/// The scratch one head's backward needs: a block's probabilities and
/// their gradient (each `QUERY_BLOCK × tk`) and the packing of the block's
/// products (the scores' too, when the probabilities are recomputed).
pub(super) fn backward_scratch_len<T: Float>(dims: Dims) -> usize {
    let Dims { tq, tk, d, dv, .. } = dims;
    let rows = QUERY_BLOCK.min(tq);
    let packing = [(rows, d, tk), (rows, dv, tk), (rows, tk, d), (tk, rows, d), (tk, rows, dv)]
        .into_iter()
        .map(|(m, k, n)| gemm::scratch_len_in::<T>(dims.precision, m, k, n))
        .max()
        .unwrap_or(0);
    2 * rows * tk + packing
}

simd::multiversion! {
    /// One head backward: `g` is the output's gradient (`q`, `k`, `v`, `g`
    /// read through their strides), `saved` what the forward kept (the
    /// probabilities, or each query's statistics);
    /// `scratch` holds [`backward_scratch_len`]. `dq`, `dk`, `dv` (any
    /// contents on entry) get the head's gradients: each block of queries
    /// writes its rows of `dq`; the first block writes the rows of `dk`
    /// and `dv` of the keys it sees, later ones add to them, and the rows
    /// of keys no query of the first block sees start as zeros. (Zeroing
    /// all three first was 0.75% of W7's samples.)
    ///
    /// By blocks of [`QUERY_BLOCK`] queries, each over the keys its last query
    /// sees, as products: `dP = g vᵀ`, then `dS = P ∘ (dP - rowsum(P ∘ dP)) /
    /// √d` row by row, then `dq = dS k`, `dk += dSᵀ q`, `dv += Pᵀ g`. (Row
    /// by row, they would be three short `axpy`s per query and key, bound
    /// by loads and stores rather than by multiply-adds.)
    pub(super) fn attend_backward[T: Float][T](
        inputs: [MatRef<'_, T>; 4],
        saved: &[T],
        dims: Dims,
        causal: bool,
        scratch: &mut [T],
        grads: [&mut [T]; 3],
    ) {
        let ([q, k, v, g], [dq, dk, dv]) = (inputs, grads);
        let Dims { tq, tk, d, dv: width, .. } = dims;
        let (scale, keep) = (dims.scale::<T>(), dims.keeps_weights());
        let rows_max = QUERY_BLOCK.min(tq);
        let (probs, rest) = scratch.split_at_mut(rows_max * tk);
        let (grad_probs, packing) = rest.split_at_mut(rows_max * tk);
        let first_seen = if tq == 0 { 0 } else { dims.visible(rows_max - 1, causal) };
        dk[first_seen * d..].fill(T::zero());
        dv[first_seen * width..].fill(T::zero());
        for i0 in (0..tq).step_by(QUERY_BLOCK) {
            let i1 = (i0 + QUERY_BLOCK).min(tq);
            let count = i1 - i0;
            // The keys some query of the block sees; the others get nothing.
            let seen = dims.visible(i1 - 1, causal);
            let queries = rows(q, i0, i1);
            let p: &[T] = if keep && seen == tk {
                // Rows of every key, read where the forward kept them.
                &saved[i0 * tk..i1 * tk]
            } else {
                let p = &mut probs[..count * seen];
                if !keep {
                    // The forward's scores again, then its probabilities from its statistics.
                    block_scores(queries, k, [i0, seen], dims, causal, p, packing);
                }
                for (i, p_row) in (i0..).zip(p.chunks_exact_mut(seen)) {
                    if keep {
                        // The forward kept zeros past the keys a query sees.
                        p_row.copy_from_slice(&saved[i * tk..i * tk + seen]);
                    } else {
                        let (seen_here, unseen) = p_row.split_at_mut(dims.visible(i, causal));
                        normalise(seen_here, saved[2 * i], saved[2 * i + 1]);
                        unseen.fill(T::zero());
                    }
                }
                p
            };
            let g_block = rows(g, i0, i1);
            let ds = &mut grad_probs[..count * seen];
            T::gemm(dims.precision, g_block, rows(v, 0, seen).t(), ds, false, packing);
            for (r, (ds_row, p_row)) in ds.chunks_exact_mut(seen).zip(p.chunks_exact(seen)).enumerate() {
                let visible = dims.visible(i0 + r, causal);
                let (ds_seen, ds_unseen) = ds_row.split_at_mut(visible);
                let weighted = lane_sum([&p_row[..visible], ds_seen, ds_seen], |p, d, _| p * d);
                for (x, &p) in ds_seen.iter_mut().zip(p_row) {
                    *x = p * (*x - weighted) * scale;
                }
                ds_unseen.fill(T::zero());
            }
            let (ds, p) = (MatRef::row_major(&*ds, count, seen), MatRef::row_major(p, count, seen));
            T::gemm(dims.precision, ds, rows(k, 0, seen), &mut dq[i0 * d..i1 * d], false, packing);
            let add = i0 > 0;
            T::gemm(dims.precision, ds.t(), queries, &mut dk[..seen * d], add, packing);
            T::gemm(dims.precision, p.t(), g_block, &mut dv[..seen * width], add, packing);
        }
    }
}

pub(crate) fn attention_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    [q, k, v]: [NodeId; 3],
    causal: bool,
    saved: &[T],
    precision: Precision,
) {
    if ![q, k, v].iter().any(|&id| sink.wants(id)) {
        return;
    }
    let shapes = [q, k, v].map(|id| sink.value(id).shape());
    let Ok(dims) = Dims::of(shapes, precision) else { return };
    let lens = [dims.tq * dims.d, dims.tk * dims.d, dims.tk * dims.dv];
    // Each head writes all of its gradients (`attend_backward`); none runs
    // when there are no queries or no keys, and the gradients are zeros.
    let mut grads = [q, k, v].map(|id| {
        let len = sink.value(id).len();
        let mut buffer = sink.scratch_for(id, len);
        if dims.tq * dims.tk == 0 {
            buffer.fill(T::zero());
        }
        buffer
    });
    let saved_len = dims.saved_len();
    let scratch_len = backward_scratch_len::<T>(dims).max(1);
    let mut rows = sink.scratch(dims.heads * scratch_len);
    let values = [q, k, v].map(|id| &sink.value(id).data[..]);
    let head = |i: usize, row: &mut [T], [dq, dk, dv]: [&mut [T]; 3]| {
        let [q, k, v] = dims.head_inputs(values, i);
        let g = MatRef::row_major(dims.head(g.data, i, dims.tq * dims.dv), dims.tq, dims.dv);
        attend_backward([q, k, v, g], dims.head(saved, i, saved_len), dims, causal, row, [dq, dk, dv]);
    };
    let [dq, dk, dv] = &mut grads;
    let empty = lens.contains(&0) || dims.tq * dims.tk == 0;
    if !empty && dims.worth_sharing() {
        let chunks = dq.par_chunks_mut(lens[0]).zip(dk.par_chunks_mut(lens[1]));
        let chunks = chunks.zip(dv.par_chunks_mut(lens[2])).zip(rows.par_chunks_mut(scratch_len));
        parallel::run(true, || chunks.enumerate().for_each(|(i, (((dq, dk), dv), row))| head(i, row, [dq, dk, dv])));
    } else if dims.tq * dims.tk > 0 {
        // One head after another; by ranges, as a block may be empty (d = 0).
        for i in 0..dims.heads {
            let row = &mut rows[i * scratch_len..(i + 1) * scratch_len];
            let [l0, l1, l2] = lens;
            head(i, row, [&mut dq[i * l0..(i + 1) * l0], &mut dk[i * l1..(i + 1) * l1], &mut dv[i * l2..(i + 1) * l2]]);
        }
    }
    sink.recycle(rows);
    for (id, gradient) in [q, k, v].into_iter().zip(grads) {
        if sink.wants(id) {
            sink.add(id, gradient);
        } else {
            sink.recycle(gradient);
        }
    }
}

/// The attention recorded again as its unfused ops (a product, a scale,
/// the causal mask, softmax, a product): what `grad_graph` differentiates.
pub(crate) fn replay<T: Float>(tp: &mut Tape<T>, [q, k, v]: [Var; 3], causal: bool) -> Var {
    let shape = tp.value(q).shape().to_vec();
    let (rank, tk) = (shape.len(), tp.value(k).shape()[shape.len() - 2]);
    let scale = T::from_f64(1.0 / (shape[rank - 1].max(1) as f64).sqrt());
    let kt = crate::g_transpose(tp, k);
    let scores = crate::g_matmul(tp, q, kt);
    let scores = crate::g_muls(tp, scores, scale);
    let scores = if causal {
        let above = ndarray::Array2::from_shape_fn((shape[rank - 2], tk), |(i, j)| j > i);
        // The lowest finite number, not -inf, so that anomaly mode accepts it:
        // its exp is 0 all the same.
        crate::g_masked_fill(tp, scores, &above, T::min_value())
    } else {
        scores
    };
    let probs = crate::g_softmax(tp, scores, -1);
    crate::g_matmul(tp, probs, v)
}
