//! Matrix products through an optimised GEMM (ndarray's `general_mat_mul`,
//! backed by matrixmultiply): `matmul` of two matrices and `bmm` of two
//! stacks of matrices.

use std::panic::Location;

use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, IxDyn};

use crate::backward::GradSink;
use crate::error::ErrorKind;
use crate::ops::Op;
use crate::tape::NodeId;
use crate::tensor::Tensor;
use crate::{Float, Tape, Var};

/// The matrix product `a @ b` of `a: [m, k]` and `b: [k, n]`, giving `[m, n]`.
///
/// Gradient: `g @ bᵀ` to `a`, `aᵀ @ g` to `b`.
#[track_caller]
pub fn g_matmul<T: Float>(tp: &mut Tape<T>, a: Var, b: Var) -> Var {
    const NAME: &str = "g_matmul";
    let location = Location::caller();
    let Some([a, b]) = tp.resolve(NAME, [a, b], location) else {
        return tp.poisoned_var();
    };
    let Some((m, k, n)) = check_product(tp, NAME, a, b, 2, location) else {
        return tp.poisoned_var();
    };
    let mut out = tp.output(IxDyn(&[m, n]));
    let (va, vb) = (&tp.nodes[a].value.data, &tp.nodes[b].value.data);
    gemm(matrix(va, m, k), matrix(vb, k, n), &mut out.data);
    tp.push(Op::MatMul(a, b), out)
}

/// The batched product of `a: [batch, m, k]` and `b: [batch, k, n]`, giving
/// `[batch, m, n]`: one matrix product per batch entry.
///
/// Gradient: `g[i] @ b[i]ᵀ` to `a[i]`, `a[i]ᵀ @ g[i]` to `b[i]`.
#[track_caller]
pub fn g_bmm<T: Float>(tp: &mut Tape<T>, a: Var, b: Var) -> Var {
    const NAME: &str = "g_bmm";
    let location = Location::caller();
    let Some([a, b]) = tp.resolve(NAME, [a, b], location) else {
        return tp.poisoned_var();
    };
    let (batch_a, batch_b) = (tp.shape(a).first().copied(), tp.shape(b).first().copied());
    let Some((m, k, n)) = check_product(tp, NAME, a, b, 3, location) else {
        return tp.poisoned_var();
    };
    let (batch_a, batch_b) = (batch_a.unwrap_or(0), batch_b.unwrap_or(0));
    if batch_a != batch_b {
        let kind = ErrorKind::BatchDim { left: batch_a, right: batch_b };
        return tp.fail(NAME, kind, &[a, b], location);
    }
    let mut out = tp.output(IxDyn(&[batch_a, m, n]));
    let (va, vb) = (&tp.nodes[a].value.data, &tp.nodes[b].value.data);
    if m * k * n == 0 {
        // Some matrix is empty: the products are empty or all zeros.
        out.data.fill(T::zero());
        return tp.push(Op::Bmm(a, b), out);
    }
    for ((a, b), out) in va.chunks_exact(m * k).zip(vb.chunks_exact(k * n)).zip(out.data.chunks_exact_mut(m * n)) {
        gemm(matrix(a, m, k), matrix(b, k, n), out);
    }
    tp.push(Op::Bmm(a, b), out)
}

/// Checks that both operands have `rank` dims and matching inner dims;
/// returns `(m, k, n)` of the last two axes.
fn check_product<T: Float>(
    tp: &mut Tape<T>,
    name: &'static str,
    a: NodeId,
    b: NodeId,
    rank: usize,
    location: &'static Location<'static>,
) -> Option<(usize, usize, usize)> {
    let expected = if rank == 2 { "2-D (matrix)" } else { "3-D (batch of matrices)" };
    for x in [a, b] {
        let got = tp.shape(x).len();
        if got != rank {
            tp.fail(name, ErrorKind::Rank { expected, got }, &[a, b], location);
            return None;
        }
    }
    let (sa, sb) = (tp.shape(a), tp.shape(b));
    let (m, k) = (sa[rank - 2], sa[rank - 1]);
    let (k2, n) = (sb[rank - 2], sb[rank - 1]);
    if k != k2 {
        tp.fail(name, ErrorKind::InnerDim { left: k, right: k2 }, &[a, b], location);
        return None;
    }
    Some((m, k, n))
}

pub(crate) fn matmul_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &Tensor<T>, a: NodeId, b: NodeId) {
    let (va, vb) = (sink.value(a), sink.value(b));
    let (m, k, n) = (va.shape()[0], va.shape()[1], vb.shape()[1]);
    if sink.wants(a) {
        let mut ga = sink.pool.take(m * k);
        gemm(matrix(&g.data, m, n), matrix(&vb.data, k, n).t(), &mut ga);
        sink.add(a, ga);
    }
    if sink.wants(b) {
        let mut gb = sink.pool.take(k * n);
        gemm(matrix(&va.data, m, k).t(), matrix(&g.data, m, n), &mut gb);
        sink.add(b, gb);
    }
}

pub(crate) fn bmm_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &Tensor<T>, a: NodeId, b: NodeId) {
    let (va, vb) = (sink.value(a), sink.value(b));
    let (m, k, n) = (va.shape()[1], va.shape()[2], vb.shape()[2]);
    if m * k * n == 0 {
        for x in [a, b] {
            if sink.wants(x) {
                let zeros = sink.pool.take_zeroed(sink.value(x).len());
                sink.add(x, zeros);
            }
        }
        return;
    }
    let batches = || va.data.chunks_exact(m * k).zip(vb.data.chunks_exact(k * n)).zip(g.data.chunks_exact(m * n));
    if sink.wants(a) {
        let mut ga = sink.pool.take(va.len());
        for (((_, b), g), ga) in batches().zip(ga.chunks_exact_mut(m * k)) {
            gemm(matrix(g, m, n), matrix(b, k, n).t(), ga);
        }
        sink.add(a, ga);
    }
    if sink.wants(b) {
        let mut gb = sink.pool.take(vb.len());
        for (((a, _), g), gb) in batches().zip(gb.chunks_exact_mut(k * n)) {
            gemm(matrix(a, m, k).t(), matrix(g, m, n), gb);
        }
        sink.add(b, gb);
    }
}

/// Views a row-major buffer as a `rows × cols` matrix.
fn matrix<T>(data: &[T], rows: usize, cols: usize) -> ArrayView2<'_, T> {
    ArrayView2::from_shape((rows, cols), data).expect("invariant: shapes were checked against the buffer")
}

/// `out = a @ b`, overwriting `out` (a row-major buffer of the product's shape).
fn gemm<T: Float>(a: ArrayView2<'_, T>, b: ArrayView2<'_, T>, out: &mut [T]) {
    let shape = (a.nrows(), b.ncols());
    let mut out = ArrayViewMut2::from_shape(shape, out).expect("invariant: output sized to the product");
    if a.ncols() == 0 {
        // An empty inner dimension: the product is all zeros.
        out.fill(T::zero());
        return;
    }
    general_mat_mul(T::one(), &a, &b, T::zero(), &mut out);
}
