//! `layer_norm` over the last axis, fused: one node, whose backward
//! recomputes the row statistics from the input instead of storing them.

use std::panic::Location;

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
    /// One row's statistics, for the scale's gradient.
    fn stats_of[T: Float][T](row: &[T], eps: T) -> (T, T) {
        row_stats(row, eps)
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
    let rows = || input.data.chunks_exact(dim).zip(g.data.chunks_exact(dim));
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
    sink.contribute_zeroed(gamma, |d_gamma| {
        for (row, g_row) in rows() {
            let (mean, rstd) = stats_of(row, eps);
            for ((d, &x), &g) in d_gamma.iter_mut().zip(row).zip(g_row) {
                *d += g * (x - mean) * rstd;
            }
        }
    });
    sink.contribute_zeroed(beta, |d_beta| {
        for (_, g_row) in rows() {
            d_beta.iter_mut().zip(g_row).for_each(|(d, &g)| *d += g);
        }
    });
}
