//! Matrix products through grad's GEMM (`gemm/`): `matmul` with NumPy's
//! batching rules, and the strict batched product `bmm`. A batch of small
//! products is shared out over threads by product; a large product splits
//! its own rows.

use std::panic::Location;

use ndarray::{Dimension, IxDyn};
use rayon::prelude::*;

use crate::broadcast::{broadcast_shapes, broadcast_strides, for_each_offset};
use crate::error::ErrorKind;
use crate::gemm::{self, MatRef, Precision};
use crate::ops::Op;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var, pair, parallel};

/// The matrix product `a @ b` with NumPy's rules for stacks of matrices:
///
/// - `[m, k] @ [k, n]` gives `[m, n]`;
/// - `[..., m, k] @ [k, n]` applies the matrix to every row of the stack
///   (`[B, T, D] @ [D, E]` gives `[B, T, E]`, one GEMM, no reshape needed);
/// - `[..., m, k] @ [..., k, n]` multiplies matching matrices, the leading
///   (batch) dims broadcasting as in `g_add`.
///
/// 1-D operands are rejected (reshape a vector to `[1, k]` or `[k, 1]`).
///
/// Gradient: `g @ bᵀ` to `a`, `aᵀ @ g` to `b`, each summed over the batch
/// dims it was broadcast along.
///
/// The products run in the tape's [`matmul_precision`](Tape::matmul_precision)
/// (bf16 from `f32` under [`Precision::Bf16`](crate::Precision)), forward
/// and backward.
///
/// ```
/// use grad_runtime::{g_matmul, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let a = tape.param(array![[1.0, 2.0]]);
/// let b = tape.param(array![[3.0], [4.0]]);
/// let y = g_matmul(&mut tape, a, b);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![[11.0]].into_dyn());
/// assert_eq!(tape.grad(a), array![[3.0, 4.0]].into_dyn());
/// assert_eq!(tape.grad(b), array![[1.0], [2.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_matmul<T: Float>(tp: &mut Tape<T>, a: Var, b: Var) -> Var {
    const NAME: &str = "g_matmul";
    let location = Location::caller();
    let Some([a, b]) = tp.resolve(NAME, [a, b], location) else {
        return tp.poisoned_var();
    };
    product(tp, NAME, [a, b], [false; 2], Op::MatMul, location)
}

/// The batched product of `a: [batch, m, k]` and `b: [batch, k, n]`, giving
/// `[batch, m, n]`: one matrix product per batch entry. Stricter than
/// [`g_matmul`]: both must be 3-D with equal batch sizes.
///
/// Gradient: `g[i] @ b[i]ᵀ` to `a[i]`, `a[i]ᵀ @ g[i]` to `b[i]`, in the
/// tape's [`matmul_precision`](Tape::matmul_precision) as the forward.
///
/// ```
/// use grad_runtime::{g_bmm, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let a = tape.param(array![[[1.0, 2.0]], [[3.0, 4.0]]]); // [2, 1, 2]
/// let b = tape.param(array![[[1.0], [1.0]], [[2.0], [0.0]]]); // [2, 2, 1]
/// let y = g_bmm(&mut tape, a, b);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![[[3.0]], [[6.0]]].into_dyn());
/// assert_eq!(tape.grad(a), array![[[1.0, 1.0]], [[2.0, 0.0]]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_bmm<T: Float>(tp: &mut Tape<T>, a: Var, b: Var) -> Var {
    const NAME: &str = "g_bmm";
    let location = Location::caller();
    let Some([a, b]) = tp.resolve(NAME, [a, b], location) else {
        return tp.poisoned_var();
    };
    let (sa, sb) = (tp.shape(a), tp.shape(b));
    let kind = if sa.len() != 3 || sb.len() != 3 {
        let got = if sa.len() != 3 { sa.len() } else { sb.len() };
        Some(ErrorKind::Rank { expected: "3-D (batch of matrices)", got })
    } else if sa[0] != sb[0] {
        Some(ErrorKind::BatchDim { left: sa[0], right: sb[0] })
    } else {
        None
    };
    if let Some(kind) = kind {
        return tp.fail(NAME, kind, &[a, b], location);
    }
    // Beyond those checks, the shapes of a batched g_matmul: its kernels serve.
    product(tp, NAME, [a, b], [false; 2], Op::Bmm, location)
}

/// How a product node reads its operands and computes its terms: each
/// operand as it is or transposed (its last two axes swapped, read through
/// strides, never copied: the gradient products a recorded backward pass
/// builds), and the precision its backward products use too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Product {
    pub(crate) precision: Precision,
    pub(crate) transposed: [bool; 2],
}

/// `op(a) @ op(b)` recorded as `g_matmul` (`bmm` false) or `g_bmm`, with
/// `op` a transposition of the last two axes where `transposed` says: what
/// a recorded backward pass uses for its gradient products, instead of
/// copying a transposed operand. The shapes are those of a valid product.
#[track_caller]
pub(crate) fn matmul_transposed<T: Float>(
    tp: &mut Tape<T>,
    bmm: bool,
    operands: [Var; 2],
    transposed: [bool; 2],
) -> Var {
    let name = if bmm { "g_bmm" } else { "g_matmul" };
    let location = Location::caller();
    let Some(ids) = tp.resolve(name, operands, location) else {
        return tp.poisoned_var();
    };
    product(tp, name, ids, transposed, if bmm { Op::Bmm } else { Op::MatMul }, location)
}

/// An operand's shape as the product reads it: the last two axes swapped
/// when `transposed`.
fn as_read(shape: &[usize], transposed: bool) -> IxDyn {
    let mut read = IxDyn(shape);
    if transposed && shape.len() >= 2 {
        read.slice_mut().swap(shape.len() - 2, shape.len() - 1);
    }
    read
}

/// Matrix `i × j` of an operand stored from `data`, read transposed when
/// `transposed` (then stored `j × i`).
fn read<T>(data: &[T], rows: usize, cols: usize, transposed: bool) -> MatRef<'_, T> {
    if transposed { MatRef::row_major(data, cols, rows).t() } else { MatRef::row_major(data, rows, cols) }
}

/// Plans `a @ b`, records the error if the shapes do not fit, else runs
/// one GEMM per matrix product and appends the node (`#[track_caller]`, so
/// the node remembers the op's caller).
#[track_caller]
fn product<T: Float>(
    tp: &mut Tape<T>,
    name: &'static str,
    [a, b]: [NodeId; 2],
    transposed: [bool; 2],
    op: fn(NodeId, NodeId, Product) -> Op<T>,
    location: &'static Location<'static>,
) -> Var {
    let precision = tp.matmul_precision();
    let plan = match Plan::new(tp.shape(a), tp.shape(b), transposed) {
        Ok(plan) => plan,
        Err(kind) => return tp.fail(name, kind, &[a, b], location),
    };
    let Some(mut out) = tp.output(name, plan.out_shape.clone(), &[a, b], location) else { return tp.poisoned_var() };
    compute(tp, &plan, precision, [a, b], transposed, &mut out.data);
    tp.push(op(a, b, Product { precision, transposed }), out)
}

/// `out = op(a) @ op(b)` as `plan` decomposes it.
fn compute<T: Float>(
    tp: &mut Tape<T>,
    plan: &Plan,
    precision: Precision,
    [a, b]: [NodeId; 2],
    [ta, tb]: [bool; 2],
    out: &mut [T],
) {
    let pieces = plan.pieces();
    // At least `len`, not cut to it: a buffer cut here was grown back
    // with zeros by the next larger product (`memset`, 4% of W9).
    let len = pieces * gemm::scratch_len_in::<T>(precision, plan.m, plan.k, plan.n);
    let mut scratch = tp.scratch_at_least(len);
    let (va, vb) = (tp.value_of(a), tp.value_of(b));
    let [sa, sb] = &plan.read;
    plan.run(precision, sa.slice(), sb.slice(), out, (&mut scratch[..len], pieces), |ia, ib| {
        (read(&va.data[ia..], plan.m, plan.k, ta), read(&vb.data[ib..], plan.k, plan.n, tb))
    });
    tp.recycle(scratch);
}

/// A recorded backward pass's gradient product for input `of`: what
/// [`matmul_transposed`] records, except while [`Tape::hvp`] records a
/// gradient nothing but its own walk may read. Then a product of `of`'s
/// shape (its whole contribution, no batch to sum) is recorded without
/// running its GEMM and listed as deferred: the walk computes it when it
/// first reads it ([`fill_product`]), and the gradient of an input that
/// nothing reads, which `hvp` only seeds backward with, is never computed
/// (the dead product a compiler's dead-code elimination drops).
#[track_caller]
pub(crate) fn gradient_product<T: Float>(
    tp: &mut Tape<T>,
    bmm: bool,
    operands: [Var; 2],
    transposed: [bool; 2],
    of: NodeId,
) -> Var {
    if !tp.defers_products() {
        return matmul_transposed(tp, bmm, operands, transposed);
    }
    let name = if bmm { "g_bmm" } else { "g_matmul" };
    let location = Location::caller();
    let Some([a, b]) = tp.resolve(name, operands, location) else {
        return tp.poisoned_var();
    };
    let plan = match Plan::new(tp.shape(a), tp.shape(b), transposed) {
        Ok(plan) if plan.out_shape.slice() == tp.shape(of) => plan,
        _ => return matmul_transposed(tp, bmm, operands, transposed),
    };
    let Some(out) = tp.output(name, plan.out_shape, &[a, b], location) else { return tp.poisoned_var() };
    let op = if bmm { Op::Bmm } else { Op::MatMul };
    let product = tp.push(op(a, b, Product { precision: tp.matmul_precision(), transposed }), out);
    tp.defer(product);
    product
}

/// Computes the value of product node `id`, recorded deferred by
/// [`gradient_product`], where it lies.
pub(crate) fn fill_product<T: Float>(tp: &mut Tape<T>, id: NodeId) {
    let (Op::MatMul(a, b, product) | Op::Bmm(a, b, product)) = *tp.op_of(id) else {
        unreachable!("invariant: only products are deferred")
    };
    let plan = Plan::new(tp.shape(a), tp.shape(b), product.transposed)
        .expect("invariant: the shapes were checked when the product was recorded");
    let mut data = std::mem::take(tp.data_mut(id));
    compute(tp, &plan, product.precision, [a, b], product.transposed, &mut data);
    *tp.data_mut(id) = data;
}

/// How a product of two shapes decomposes into GEMMs.
struct Plan {
    m: usize,
    k: usize,
    n: usize,
    out_shape: IxDyn,
    /// The broadcast batch dims, or `None` when `b` is a single matrix and
    /// the whole of `a` folds into one `[rows, k] @ [k, n]` product.
    batch: Option<IxDyn>,
    /// The operands' shapes as the product reads them (the last two axes
    /// of a transposed one swapped).
    read: [IxDyn; 2],
}

impl Plan {
    /// The plan of `op(a) @ op(b)` for operands stored with shapes `sa`
    /// and `sb`, `op` transposing where `transposed` says.
    fn new(sa: &[usize], sb: &[usize], transposed: [bool; 2]) -> Result<Plan, ErrorKind> {
        let expected = "2-D or higher (a matrix or a stack of matrices)";
        if sa.len() < 2 || sb.len() < 2 {
            return Err(ErrorKind::Rank { expected, got: sa.len().min(sb.len()) });
        }
        let read = [as_read(sa, transposed[0]), as_read(sb, transposed[1])];
        let (sa, sb) = (read[0].slice(), read[1].slice());
        let (m, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
        let (k2, n) = (sb[sb.len() - 2], sb[sb.len() - 1]);
        if k != k2 {
            return Err(ErrorKind::InnerDim { left: k, right: k2 });
        }
        // A transposed stack `a` is separate matrices, not one tall one.
        if sb.len() == 2 && (sa.len() == 2 || !transposed[0]) {
            let mut out_shape = IxDyn(sa);
            out_shape[sa.len() - 1] = n;
            let rows = sa[..sa.len() - 1].iter().product();
            return Ok(Plan { m: rows, k, n, out_shape, batch: None, read });
        }
        let (batch_a, batch_b) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
        let batch = broadcast_shapes(batch_a, batch_b).ok_or_else(|| first_batch_mismatch(batch_a, batch_b))?;
        let mut out_shape = IxDyn::zeros(batch.ndim() + 2);
        out_shape.slice_mut()[..batch.ndim()].copy_from_slice(batch.slice());
        out_shape.slice_mut()[batch.ndim()..].copy_from_slice(&[m, n]);
        Ok(Plan { m, k, n, out_shape, batch: Some(batch), read })
    }

    /// The number of matrix products.
    fn count(&self) -> usize {
        self.batch.as_ref().map_or(1, |batch| batch.size())
    }

    /// The pieces a batch is shared out in: products run one after
    /// another within a piece, pieces on several threads when each product
    /// is too small to split itself (two pieces, for the caller and the
    /// helper of `pair.rs`, when the batch is of medium size).
    fn pieces(&self) -> usize {
        let work = self.m.saturating_mul(self.n).saturating_mul(self.k);
        let total = work.saturating_mul(self.count());
        let threads = parallel::num_threads();
        if self.count() < 2 || threads < 2 {
            1
        } else if work < gemm::MIN_PARALLEL_FLOPS && total >= gemm::MIN_PARALLEL_FLOPS {
            self.count().min(2 * threads)
        } else if work < gemm::MIN_PAIR_FLOPS && total >= gemm::MIN_PAIR_FLOPS {
            2
        } else {
            1
        }
    }

    /// Whether a batch in two pieces goes to the helper of `pair.rs`
    /// rather than the pool.
    fn paired(&self, pieces: usize) -> bool {
        let total = self.m.saturating_mul(self.n).saturating_mul(self.k).saturating_mul(self.count());
        pieces == 2 && total < gemm::MIN_PARALLEL_FLOPS
    }

    /// `out[product] = a @ b` for each product, `operands(ia, ib)` giving
    /// the two matrices at those element offsets of `a` and `b`. `out` holds
    /// one `m × n` block per product in order (the forward's output), and
    /// the `pieces` run in parallel, each with its share of `scratch`
    /// (`pieces` GEMM scratches). Empty products write nothing: never walk
    /// a batch of them, which may be huge (a `[2^40, 0, 3]` stack holds no
    /// element).
    fn run<'a, T: Float>(
        &self,
        precision: Precision,
        sa: &[usize],
        sb: &[usize],
        out: &mut [T],
        (scratch, pieces): (&mut [T], usize),
        operands: impl Fn(usize, usize) -> (MatRef<'a, T>, MatRef<'a, T>) + Sync,
    ) {
        let (m, k, n) = (self.m, self.k, self.n);
        if m * n == 0 {
            return;
        }
        let per = gemm::scratch_len_in::<T>(precision, m, k, n);
        let per_piece = self.count().div_ceil(pieces);
        let work = |piece: usize, out: &mut [T], scratch: &mut [T]| {
            for (j, block) in out.chunks_exact_mut(m * n).enumerate() {
                let (ia, ib) = self.offsets(sa, sb, piece * per_piece + j);
                let (a, b) = operands(ia, ib);
                T::gemm(precision, a, b, block, false, scratch);
            }
        };
        if pieces == 1 {
            return work(0, out, &mut scratch[..per]);
        }
        if self.paired(pieces) {
            let (out_first, out_second) = out.split_at_mut(per_piece * m * n);
            let (scratch_first, scratch_second) = scratch.split_at_mut(per);
            return pair::pair(|| work(0, out_first, scratch_first), || work(1, out_second, scratch_second));
        }
        parallel::run(true, || {
            let blocks = out.par_chunks_mut(per_piece * m * n).zip(scratch.par_chunks_mut(per));
            blocks.enumerate().for_each(|(piece, (out, scratch))| work(piece, out, scratch));
        });
    }

    /// Whether the backward products giving the gradient of an operand of
    /// shape `sx` run in two halves of the batch, for the caller and the
    /// helper of `pair.rs`: a medium-sized batch in which `sx` is not
    /// broadcast, so each product writes a block of the gradient of its own.
    fn paired_backward(&self, sx: &[usize]) -> bool {
        let Some(batch) = &self.batch else { return false };
        let pieces = self.pieces();
        sx[..sx.len() - 2] == *batch.slice() && self.paired(pieces)
    }

    /// The element offsets in `a` and `b` of the operands of product `i`
    /// (row-major over the broadcast batch).
    fn offsets(&self, sa: &[usize], sb: &[usize], i: usize) -> (usize, usize) {
        let Some(batch) = &self.batch else { return (0, 0) };
        let strides_a = broadcast_strides(&sa[..sa.len() - 2], batch.slice());
        let strides_b = broadcast_strides(&sb[..sb.len() - 2], batch.slice());
        let (mut rest, mut ia, mut ib) = (i, 0, 0);
        for axis in (0..batch.ndim()).rev() {
            let coordinate = rest % batch[axis];
            rest /= batch[axis];
            ia += coordinate * strides_a[axis];
            ib += coordinate * strides_b[axis];
        }
        (ia * self.m * self.k, ib * self.k * self.n)
    }

    /// Calls `f(offset in a, offset in b, offset in out)` for each matrix
    /// product, in the output's row-major order.
    fn for_each_product(&self, sa: &[usize], sb: &[usize], mut f: impl FnMut(usize, usize, usize)) {
        let (m, k, n) = (self.m, self.k, self.n);
        let Some(batch) = &self.batch else {
            f(0, 0, 0);
            return;
        };
        if m * n == 0 {
            return;
        }
        let strides_a = broadcast_strides(&sa[..sa.len() - 2], batch.slice());
        let strides_b = broadcast_strides(&sb[..sb.len() - 2], batch.slice());
        for_each_offset(batch.slice(), [strides_a.slice(), strides_b.slice()], |i, [ia, ib]| {
            f(ia * m * k, ib * k * n, i * m * n);
        });
    }
}

/// The first pair of batch dims, from the right, that do not broadcast.
fn first_batch_mismatch(a: &[usize], b: &[usize]) -> ErrorKind {
    let pairs = a.iter().rev().zip(b.iter().rev());
    let (&left, &right) = pairs.into_iter().find(|&(&x, &y)| x != y && x != 1 && y != 1).unwrap_or((&0, &0));
    ErrorKind::BatchDim { left, right }
}

pub(crate) fn matmul_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    a: NodeId,
    b: NodeId,
    Product { precision, transposed: [ta, tb] }: Product,
) {
    let (va, vb) = (sink.value(a), sink.value(b));
    let plan = Plan::new(va.shape(), vb.shape(), [ta, tb]).expect("invariant: shapes were checked in the forward pass");
    let (m, k, n) = (plan.m, plan.k, plan.n);
    let (sa, sb) = (plan.read[0].slice(), plan.read[1].slice());
    // Scratch for both products (rows × depth × columns): g @ bᵀ is m × n × k
    // (b @ gᵀ, k × n × m, for a transposed a), aᵀ @ g is k × m × n (gᵀ @ a,
    // n × m × k, for a transposed b); twice that when a batch runs in two halves.
    let for_a = if ta { (k, n, m) } else { (m, n, k) };
    let for_b = if tb { (n, m, k) } else { (k, m, n) };
    let per = [for_a, for_b].map(|(rows, depth, cols)| gemm::scratch_len_in::<T>(precision, rows, depth, cols));
    let per = per[0].max(per[1]);
    let (halves_a, halves_b) = (plan.paired_backward(sa), plan.paired_backward(sb));
    let len = if halves_a || halves_b { 2 * per } else { per };
    let mut scratch = sink.scratch_at_least(len); // as in `compute`
    // Broadcast batches add several products into one block: accumulate
    // into zeros. Without a batch there is one product, written whole.
    let accumulate = plan.batch.is_some();
    let contribute = |sink: &mut GradSink<'_, T>, x: NodeId, fill: &mut dyn FnMut(&mut [T])| {
        if accumulate { sink.contribute_zeroed(x, fill) } else { sink.contribute(x, fill) }
    };
    // A product's gradient block of `a` from the block of `b` at `ib` and of
    // `g` at `io`; of `b` from the block of `a` at `ia` and of `g` at `io`.
    // A transposed operand's gradient is stored transposed too: `(g @ bᵀ)ᵀ
    // = b @ gᵀ` for `a`, `(aᵀ @ g)ᵀ = gᵀ @ a` for `b`.
    let grad_a = |ib: usize, io: usize, ga: &mut [T], scratch: &mut [T]| {
        let (b, g) = (read(&vb.data[ib..], k, n, tb), MatRef::row_major(&g.data[io..], m, n));
        let (left, right) = if ta { (b, g.t()) } else { (g, b.t()) };
        T::gemm(precision, left, right, ga, accumulate, scratch);
    };
    let grad_b = |ia: usize, io: usize, gb: &mut [T], scratch: &mut [T]| {
        let (a, g) = (read(&va.data[ia..], m, k, ta), MatRef::row_major(&g.data[io..], m, n));
        let (left, right) = if tb { (g.t(), a) } else { (a.t(), g) };
        T::gemm(precision, left, right, gb, accumulate, scratch);
    };
    // An operand's gradient, one block of `block` elements per product at its
    // own offset, from `grad(other operand's offset, g's offset, block, scratch)`.
    let operand =
        |of_a: bool, halves: bool, block: usize, gradient: &mut [T], scratch: &mut [T], grad: &BlockProduct<T>| {
            // (this operand's offset, the other's) in product `i`'s operands at `(ia, ib)`.
            let own_other = |(ia, ib): (usize, usize)| if of_a { (ia, ib) } else { (ib, ia) };
            if halves {
                let product = |i, x: &mut [T], scratch: &mut [T]| {
                    grad(own_other(plan.offsets(sa, sb, i)).1, i * m * n, x, scratch);
                };
                in_halves(plan.count(), block, gradient, scratch, per, &product);
            } else {
                plan.for_each_product(sa, sb, |ia, ib, io| {
                    let (own, other) = own_other((ia, ib));
                    grad(other, io, &mut gradient[own..own + block], &mut scratch[..per]);
                });
            }
        };
    contribute(sink, a, &mut |ga| operand(true, halves_a, m * k, ga, &mut scratch[..len], &grad_a));
    contribute(sink, b, &mut |gb| operand(false, halves_b, k * n, gb, &mut scratch[..len], &grad_b));
    sink.recycle(scratch);
}

/// One product's block of an operand's gradient: `(other, io, block,
/// scratch)`, from the other operand's block at `other` and `g`'s at `io`.
type BlockProduct<'a, T> = dyn Fn(usize, usize, &mut [T], &mut [T]) + Sync + 'a;

/// `product(i, block_i, scratch)` for the `count` products of a batch
/// whose gradient is `gradient`, one block of `block` elements per product
/// in order: the first half of the products on this thread, the second on
/// the helper of `pair.rs`, each with its own `per` of scratch.
fn in_halves<T: Float>(
    count: usize,
    block: usize,
    gradient: &mut [T],
    scratch: &mut [T],
    per: usize,
    product: &(impl Fn(usize, &mut [T], &mut [T]) + Sync),
) {
    let half = count.div_ceil(2);
    let (first, second) = gradient.split_at_mut(half * block);
    let (scratch_first, scratch_second) = scratch.split_at_mut(per);
    let run = |from: usize, blocks: &mut [T], scratch: &mut [T]| {
        for (j, out) in blocks.chunks_exact_mut(block).enumerate() {
            product(from + j, out, &mut scratch[..per]);
        }
    };
    pair::pair(|| run(0, first, scratch_first), || run(half, second, scratch_second));
}
