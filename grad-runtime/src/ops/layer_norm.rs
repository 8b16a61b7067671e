//! `layer_norm` over the last axis, fused: one node, whose backward
//! recomputes the row statistics from the input instead of storing them.

use std::panic::Location;

use rayon::prelude::*;

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::reduce::lane_sum;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var, parallel, simd};

/// Layer normalization over the last axis of `x: [..., D]`, with a learned
/// scale `gamma: [D]` and shift `beta: [D]`:
/// `y = (x - mean) / sqrt(var + eps) * gamma + beta`, where `mean` and the
/// biased `var` are taken over each row of `D` elements (as PyTorch's
/// `layer_norm(x, [D], gamma, beta, eps)`). `eps` must be finite and >= 0.
///
/// Gradient, with `x̂ = (x - mean) / sqrt(var + eps)` and `ĝ = g · gamma`:
/// `x` gets `(ĝ - mean(ĝ) - x̂ · mean(ĝ · x̂)) / sqrt(var + eps)` per row,
/// `gamma` gets `Σ g · x̂` and `beta` gets `Σ g`, summed over rows.
///
/// ```
/// use grad_runtime::{g_layer_norm, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 3.0]]);
/// let gamma = tape.param(array![1.0, 1.0]);
/// let beta = tape.param(array![0.5, 0.5]);
/// let y = g_layer_norm(&mut tape, x, gamma, beta, 0.0);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![[-0.5, 1.5]].into_dyn());
/// assert_eq!(tape.grad(beta), array![1.0, 1.0].into_dyn());
/// assert_eq!(tape.grad(gamma), array![-1.0, 1.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_layer_norm<T: Float>(tp: &mut Tape<T>, x: Var, gamma: Var, beta: Var, eps: T) -> Var {
    const NAME: &str = "g_layer_norm";
    let location = Location::caller();
    let Some([x, gamma, beta]) = tp.resolve(NAME, [x, gamma, beta], location) else {
        return tp.poisoned_var();
    };
    let dim = tp.shape(x).last().copied();
    let fits = |id: NodeId| dim.is_some_and(|d| tp.shape(id) == [d]);
    if !fits(gamma) || !fits(beta) {
        return tp.fail(NAME, ErrorKind::ShapeMismatch, &[x, gamma, beta], location);
    }
    if !eps.is_finite() || eps < T::zero() {
        let kind = ErrorKind::InvalidArgument { name: "eps", value: eps.to_f64(), expected: "a finite value >= 0" };
        return tp.fail(NAME, kind, &[x, gamma, beta], location);
    }
    let dim = dim.unwrap_or(0).max(1);
    let Some(mut out) = tp.output(NAME, tp.value_of(x).shape.clone(), &[x, gamma, beta], location) else {
        return tp.poisoned_var();
    };
    let (input, scale, shift) = (&tp.value_of(x).data, &tp.value_of(gamma).data, &tp.value_of(beta).data);
    // Rows are independent: groups of them on several threads.
    parallel::for_each_rows(&mut out.data, dim, |first, ys| {
        for (row, y) in input[first * dim..].chunks_exact(dim).zip(ys.chunks_exact_mut(dim)) {
            row_forward(row, scale, shift, eps, y);
        }
    });
    tp.push(Op::LayerNorm { x, gamma, beta, eps }, out)
}

simd::multiversion! {
    /// One row's normalised, scaled and shifted values.
    fn row_forward[T: Float][T](row: &[T], scale: &[T], shift: &[T], eps: T, y: &mut [T]) {
        let (mean, rstd) = row_stats(row, eps);
        for (((y, &x), &gamma), &beta) in y.iter_mut().zip(row).zip(scale).zip(shift) {
            *y = (x - mean) * rstd * gamma + beta;
        }
    }
}

simd::multiversion! {
    /// One row's gradient in `x` from its gradient `g_row`.
    fn row_backward[T: Float][T](row: &[T], g_row: &[T], scale: &[T], eps: T, dx_row: &mut [T]) {
        let n = T::from_usize(scale.len());
        let (mean, rstd) = row_stats(row, eps);
        let mean_g = lane_sum([row, g_row, scale], |_, g, gamma| g * gamma) / n;
        let mean_gx = lane_sum([row, g_row, scale], |x, g, gamma| g * gamma * (x - mean) * rstd) / n;
        for (((d, &x), &g), &gamma) in dx_row.iter_mut().zip(row).zip(g_row).zip(scale) {
            let x_hat = (x - mean) * rstd;
            *d = (g * gamma - mean_g - x_hat * mean_gx) * rstd;
        }
    }
}

simd::multiversion! {
    /// One row's terms of the scale's and the shift's gradients, added to
    /// `d_gamma` and `d_beta`.
    fn row_params[T: Float][T](row: &[T], g_row: &[T], eps: T, d_gamma: &mut [T], d_beta: &mut [T]) {
        let (mean, rstd) = row_stats(row, eps);
        for (((d_gamma, d_beta), &x), &g) in d_gamma.iter_mut().zip(d_beta.iter_mut()).zip(row).zip(g_row) {
            *d_gamma += g * (x - mean) * rstd;
            *d_beta += g;
        }
    }
}

/// The row's mean and `1 / sqrt(biased variance + eps)`.
#[inline(always)]
fn row_stats<T: Float>(row: &[T], eps: T) -> (T, T) {
    let n = T::from_usize(row.len());
    let mean = lane_sum([row; 3], |x, _, _| x) / n;
    let var = lane_sum([row; 3], |x, _, _| (x - mean) * (x - mean)) / n;
    (mean, T::one() / (var + eps).sqrt())
}

pub(crate) fn layer_norm_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    [x, gamma, beta]: [NodeId; 3],
    eps: T,
) {
    let (input, scale) = (sink.value(x), sink.value(gamma));
    let dim = scale.len().max(1);
    sink.contribute(x, |dx| {
        // Rows are independent: groups of them on several threads.
        parallel::for_each_rows(dx, dim, |first, dx| {
            let (input, g) = (&input.data[first * dim..], &g.data[first * dim..]);
            let rows = input.chunks_exact(dim).zip(g.chunks_exact(dim));
            for ((row, g_row), dx_row) in rows.zip(dx.chunks_exact_mut(dim)) {
                row_backward(row, g_row, &scale.data, eps, dx_row);
            }
        });
    });
    if sink.wants(gamma) || sink.wants(beta) {
        params_backward(sink, &input.data, g.data, dim, eps, [gamma, beta]);
    }
}

/// Rows summed at a time into one partial gradient of the scale and shift.
const PARAM_BLOCK: usize = 64;

/// The scale's gradient `Σ g · x̂` and the shift's `Σ g` over the rows:
/// each block of [`PARAM_BLOCK`] rows summed row after row into a partial
/// of its own (shared out over the pool when there are enough rows),
/// then the partials added in block order. The blocks are fixed, so the
/// bits do not depend on the threads.
fn params_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    input: &[T],
    g: &[T],
    dim: usize,
    eps: T,
    [gamma, beta]: [NodeId; 2],
) {
    let rows = input.len() / dim;
    let blocks = rows.div_ceil(PARAM_BLOCK);
    let mut partials = sink.scratch(blocks * 2 * dim);
    let fill = |first_block: usize, partials: &mut [T]| {
        for (b, partial) in partials.chunks_exact_mut(2 * dim).enumerate() {
            let (d_gamma, d_beta) = partial.split_at_mut(dim);
            d_gamma.fill(T::zero());
            d_beta.fill(T::zero());
            let start = (first_block + b) * PARAM_BLOCK * dim;
            let end = (start + PARAM_BLOCK * dim).min(input.len());
            let rows = input[start..end].chunks_exact(dim).zip(g[start..end].chunks_exact(dim));
            for (row, g_row) in rows {
                row_params(row, g_row, eps, d_gamma, d_beta);
            }
        }
    };
    if parallel::worth_it(input.len()) {
        parallel::run(true, || partials.par_chunks_mut(2 * dim).enumerate().for_each(|(b, p)| fill(b, p)));
    } else {
        fill(0, &mut partials);
    }
    for (id, half) in [(gamma, 0), (beta, dim)] {
        if !sink.wants(id) {
            continue;
        }
        let mut sum = sink.scratch_for(id, sink.value(id).len());
        sum.fill(T::zero());
        for partial in partials.chunks_exact(2 * dim) {
            sum.iter_mut().zip(&partial[half..half + dim]).for_each(|(d, &p)| *d += p);
        }
        sink.add(id, sum);
    }
    sink.recycle(partials);
}
