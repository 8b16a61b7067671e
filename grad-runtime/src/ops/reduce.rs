//! Reductions: `sum` and `mean` over every element or over one axis,
//! `max` and `min` over one axis, and the non-differentiable `argmax`.

use std::panic::Location;

use ndarray::{ArrayD, IxDyn};

use crate::error::{ErrorKind, GradError};
use crate::ops::Op;
use crate::ops::axis::{AxisLanes, normalize_axis, reduced_shape};
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var, parallel, simd};

/// The sum of every element, as a scalar (shape `[]`).
///
/// Gradient: `g` (a scalar) broadcast to every element of `x`.
///
/// ```
/// use grad_runtime::{g_sum, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 2.0], [3.0, 4.0]]);
/// let y = g_sum(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), ndarray::arr0(10.0).into_dyn());
/// assert_eq!(tape.grad(x), array![[1.0, 1.0], [1.0, 1.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_sum<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    reduce_all(tp, "g_sum", x, Op::Sum, |total, _| total)
}

/// The mean of every element, as a scalar (shape `[]`); NaN for an empty tensor.
///
/// Gradient: `g / n` to every element of `x`, where `n` is its element count.
///
/// ```
/// use grad_runtime::{g_mean, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 2.0], [3.0, 4.0]]);
/// let y = g_mean(&mut tape, x);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), ndarray::arr0(2.5).into_dyn());
/// assert_eq!(tape.grad(x), array![[0.25, 0.25], [0.25, 0.25]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_mean<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    reduce_all(tp, "g_mean", x, Op::Mean, |total, n| total / T::from_usize(n))
}

#[track_caller]
fn reduce_all<T: Float>(
    tp: &mut Tape<T>,
    name: &'static str,
    x: Var,
    op: fn(NodeId) -> Op<T>,
    finish: impl Fn(T, usize) -> T,
) -> Var {
    let Some([x]) = tp.resolve(name, [x], Location::caller()) else {
        return tp.poisoned_var();
    };
    let input = &tp.value_of(x).data;
    let result = finish(sum_slice(input), input.len());
    let Some(mut out) = tp.output(name, IxDyn(&[]), &[x], Location::caller()) else { return tp.poisoned_var() };
    out.data[0] = result;
    tp.push(op(x), out)
}

pub(crate) fn sum_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, x: NodeId) {
    fill_backward(sink, x, g.data[0]);
}

pub(crate) fn mean_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, x: NodeId) {
    let n = sink.value(x).len();
    fill_backward(sink, x, g.data[0] / T::from_usize(n));
}

/// `x`'s gradient: `each` everywhere, written by the pool's threads when
/// large (the whole of a `sum`'s input: W3's and W8's 4 MiB of ones took
/// 5% of W8's step on one thread).
fn fill_backward<T: Float>(sink: &mut GradSink<'_, T>, x: NodeId, each: T) {
    sink.contribute(x, |c| parallel::for_each_chunk(c, |_, chunk| chunk.fill(each)));
}

/// The sum over one axis (negative counts from the end); `keepdim` keeps
/// the reduced axis as a dim of 1.
///
/// Gradient: `g` broadcast back along the reduced axis.
///
/// ```
/// use grad_runtime::{g_sum_axis, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 2.0], [3.0, 4.0]]);
/// let y = g_sum_axis(&mut tape, x, -1, false);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![3.0, 7.0].into_dyn());
/// assert_eq!(tape.grad(x), array![[1.0, 1.0], [1.0, 1.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_sum_axis<T: Float>(tp: &mut Tape<T>, x: Var, axis: isize, keepdim: bool) -> Var {
    reduce_axis(tp, Reduction::Sum, x, axis, keepdim)
}

/// The mean over one axis (negative counts from the end); `keepdim` keeps
/// the reduced axis as a dim of 1. NaN over an axis of length 0.
///
/// Gradient: `g / n` broadcast back along the reduced axis of length `n`.
///
/// ```
/// use grad_runtime::{g_mean_axis, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 2.0], [3.0, 4.0]]);
/// let y = g_mean_axis(&mut tape, x, 0, true);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![[2.0, 3.0]].into_dyn());
/// assert_eq!(tape.grad(x), array![[0.5, 0.5], [0.5, 0.5]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_mean_axis<T: Float>(tp: &mut Tape<T>, x: Var, axis: isize, keepdim: bool) -> Var {
    reduce_axis(tp, Reduction::Mean, x, axis, keepdim)
}

/// The maximum over one axis (negative counts from the end); `keepdim`
/// keeps the reduced axis as a dim of 1. A NaN in a lane makes its maximum
/// NaN, as in PyTorch. An axis of length 0 is an error.
///
/// Gradient: `g` to the lane's arg-max, 0 elsewhere. Among tied maxima the
/// FIRST one gets the whole gradient (PyTorch's `max(dim)` picks an
/// unspecified one; `amax` would split it evenly).
///
/// ```
/// use grad_runtime::{g_max_axis, ndarray::array, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[1.0, 5.0], [3.0, 4.0]]);
/// let y = g_max_axis(&mut tape, x, -1, false);
/// tape.backward(y)?; // the gradient of sum(y)
/// assert_eq!(tape.value(y), array![5.0, 4.0].into_dyn());
/// assert_eq!(tape.grad(x), array![[0.0, 1.0], [0.0, 1.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_max_axis<T: Float>(tp: &mut Tape<T>, x: Var, axis: isize, keepdim: bool) -> Var {
    reduce_axis(tp, Reduction::Max, x, axis, keepdim)
}

/// The minimum over one axis (negative counts from the end); `keepdim`
/// keeps the reduced axis as a dim of 1. A NaN in a lane makes its minimum
/// NaN, as in PyTorch. An axis of length 0 is an error.
///
/// Gradient: `g` to the lane's arg-min, 0 elsewhere; among tied minima the
/// FIRST one gets the whole gradient, as in [`g_max_axis`].
///
/// ```
/// use grad_runtime::{g_min_axis, g_sum, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![[3.0, -1.0, -1.0], [0.5, 2.0, 4.0]]);
/// let smallest = g_min_axis(&mut tape, x, -1, false);
/// assert_eq!(tape.value(smallest), array![-1.0, 0.5].into_dyn());
/// let loss = g_sum(&mut tape, smallest);
/// tape.backward(loss)?;
/// assert_eq!(tape.grad(x), array![[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_min_axis<T: Float>(tp: &mut Tape<T>, x: Var, axis: isize, keepdim: bool) -> Var {
    reduce_axis(tp, Reduction::Min, x, axis, keepdim)
}

/// The index of the maximum along `axis` for every lane (the first one
/// among ties, the first NaN if any): the predicted class of each row of
/// logits with `axis = -1`. Not differentiable; reads the tape only.
///
/// ```
/// use grad_runtime::{argmax, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f32>::new();
/// let logits = tape.constant(array![[0.1, 2.0, -1.0], [3.0, 0.0, 3.0]]);
/// assert_eq!(argmax(&tape, logits, -1)?, array![1, 0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn argmax<T: Float>(tp: &Tape<T>, x: Var, axis: isize) -> Result<ArrayD<usize>, GradError> {
    const NAME: &str = "argmax";
    let location = Location::caller();
    let id = tp.check_or_error(NAME, x, location)?;
    let value = tp.value_of(id);
    let shape = value.shape();
    let error = |kind| GradError::new(NAME, kind, vec![shape.to_vec()], location);
    let axis_index =
        normalize_axis(axis, shape.len()).ok_or_else(|| error(ErrorKind::Axis { axis, ndim: shape.len() }))?;
    if shape[axis_index] == 0 {
        return Err(error(ErrorKind::EmptyReduction { axis: axis_index }));
    }
    let lanes = AxisLanes::new(shape, axis_index);
    let mut indices = vec![0; lanes.outer * lanes.inner];
    lanes.for_each(|lane, start| indices[lane] = argmax_lane(&value.data, lanes, start));
    let reduced = reduced_shape(shape, axis_index, false);
    Ok(ArrayD::from_shape_vec(reduced, indices).expect("invariant: one index per lane"))
}

#[derive(Clone, Copy, PartialEq)]
enum Reduction {
    Sum,
    Mean,
    Max,
    Min,
}

impl Reduction {
    fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "g_sum_axis",
            Reduction::Mean => "g_mean_axis",
            Reduction::Max => "g_max_axis",
            Reduction::Min => "g_min_axis",
        }
    }

    fn op<T: Float>(self, x: NodeId, axis: usize) -> Op<T> {
        match self {
            Reduction::Sum => Op::SumAxis { x, axis },
            Reduction::Mean => Op::MeanAxis { x, axis },
            Reduction::Max => Op::MaxAxis { x, axis },
            Reduction::Min => Op::MinAxis { x, axis },
        }
    }

    fn forward<T: Float>(self, x: &[T], lanes: AxisLanes, out: &mut [T]) {
        match self {
            Reduction::Sum => sum_lanes(x, lanes, out, T::one()),
            Reduction::Mean => sum_lanes(x, lanes, out, T::one() / T::from_usize(lanes.len)),
            Reduction::Max => {
                lanes.for_each(|lane, start| out[lane] = x[start + argmax_lane(x, lanes, start) * lanes.inner])
            }
            Reduction::Min => {
                lanes.for_each(|lane, start| out[lane] = x[start + argmin_lane(x, lanes, start) * lanes.inner])
            }
        }
    }
}

/// Shared by the axis reductions: checks the axis, sizes the output, runs the kernel.
#[track_caller]
fn reduce_axis<T: Float>(tp: &mut Tape<T>, reduction: Reduction, x: Var, axis: isize, keepdim: bool) -> Var {
    let (name, location) = (reduction.name(), Location::caller());
    let Some([x]) = tp.resolve(name, [x], location) else {
        return tp.poisoned_var();
    };
    let ndim = tp.shape(x).len();
    let Some(axis_index) = normalize_axis(axis, ndim) else {
        return tp.fail(name, ErrorKind::Axis { axis, ndim }, &[x], location);
    };
    if matches!(reduction, Reduction::Max | Reduction::Min) && tp.shape(x)[axis_index] == 0 {
        return tp.fail(name, ErrorKind::EmptyReduction { axis: axis_index }, &[x], location);
    }
    let lanes = AxisLanes::new(tp.shape(x), axis_index);
    let shape = reduced_shape(tp.shape(x), axis_index, keepdim);
    let Some(mut out) = tp.output(name, shape, &[x], location) else { return tp.poisoned_var() };
    reduction.forward(&tp.value_of(x).data, lanes, &mut out.data);
    tp.push(reduction.op(x, axis_index), out)
}

/// `out[lane] = scale * sum of the lane`; contiguous lanes are summed pairwise.
fn sum_lanes<T: Float>(x: &[T], lanes: AxisLanes, out: &mut [T], scale: T) {
    if lanes.inner == 1 {
        for (o, row) in out.iter_mut().zip(x.chunks_exact(lanes.len.max(1))) {
            *o = sum_slice(row) * scale;
        }
        if lanes.len == 0 {
            out.fill(T::zero() * scale);
        }
        return;
    }
    // Strided lanes: accumulate whole rows of `inner` elements (vectorizes).
    // No lanes, nothing to write: never walk `outer` and `len` for nothing.
    if out.is_empty() {
        return;
    }
    out.fill(T::zero());
    for o in 0..lanes.outer {
        let out_row = &mut out[o * lanes.inner..(o + 1) * lanes.inner];
        for j in 0..lanes.len {
            let start = (o * lanes.len + j) * lanes.inner;
            for (acc, &v) in out_row.iter_mut().zip(&x[start..start + lanes.inner]) {
                *acc += v;
            }
        }
        out_row.iter_mut().for_each(|v| *v *= scale);
    }
}

/// The position along the lane of its maximum: the first among ties, the
/// first NaN if there is one.
pub(crate) fn argmax_lane<T: Float>(x: &[T], lanes: AxisLanes, start: usize) -> usize {
    arg_extreme_lane(x, lanes, start, |v, best| v > best)
}

/// The position along the lane of its minimum: the first among ties, the
/// first NaN if there is one.
pub(crate) fn argmin_lane<T: Float>(x: &[T], lanes: AxisLanes, start: usize) -> usize {
    arg_extreme_lane(x, lanes, start, |v, best| v < best)
}

fn arg_extreme_lane<T: Float>(x: &[T], lanes: AxisLanes, start: usize, beats: impl Fn(T, T) -> bool) -> usize {
    let mut best = 0;
    for j in 0..lanes.len {
        let v = x[start + j * lanes.inner];
        if v.is_nan() {
            return j;
        }
        if beats(v, x[start + best * lanes.inner]) {
            best = j;
        }
    }
    best
}

pub(crate) fn sum_axis_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, x: NodeId, axis: usize) {
    spread_backward(sink, g, x, axis, T::one());
}

pub(crate) fn mean_axis_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, x: NodeId, axis: usize) {
    let n = sink.value(x).shape()[axis];
    spread_backward(sink, g, x, axis, T::one() / T::from_usize(n));
}

/// Adds `scale * g[lane]` to every element of each lane.
fn spread_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, x: NodeId, axis: usize, scale: T) {
    let lanes = AxisLanes::new(sink.value(x).shape(), axis);
    sink.contribute(x, |c| {
        lanes.for_each(|lane, start| {
            let v = g.data[lane] * scale;
            for j in 0..lanes.len {
                c[start + j * lanes.inner] = v;
            }
        })
    });
}

pub(crate) fn max_axis_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, x: NodeId, axis: usize) {
    to_chosen_backward(sink, g, x, axis, argmax_lane);
}

pub(crate) fn min_axis_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &TensorRef<'_, T>, x: NodeId, axis: usize) {
    to_chosen_backward(sink, g, x, axis, argmin_lane);
}

/// Sends each lane's `g` to the element `choose` picked, zeros elsewhere.
fn to_chosen_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    x: NodeId,
    axis: usize,
    choose: fn(&[T], AxisLanes, usize) -> usize,
) {
    let input = sink.value(x);
    let lanes = AxisLanes::new(input.shape(), axis);
    sink.contribute_zeroed(x, |c| {
        lanes.for_each(|lane, start| c[start + choose(&input.data, lanes, start) * lanes.inner] = g.data[lane])
    });
}

/// Sums a slice pairwise (halves summed recursively) down to blocks of
/// 1024, each summed in 64 interleaved partial sums: vectorizes, and
/// the rounding error grows with `log n`, not `n` (a 16M-element f32 sum
/// stays accurate to about 1e-6). The tree is fixed, so a large sum split
/// over threads gives the same bits as on one.
pub(crate) fn sum_slice<T: Float>(x: &[T]) -> T {
    parallel::tree_sum(x, 1024, &sum_block)
}

/// `Σ term(a[i], b[i], c[i])` over slices of one length, in 16
/// interleaved partial sums added by a fixed tree of halves, then the
/// tail: a row's sums vectorise (one chain of adds would wait on each add
/// in turn), and the order is the same at every SIMD level. For the sums
/// along one row of `layer_norm` and of the attention op.
#[inline(always)]
pub(crate) fn lane_sum<T: Float>([a, b, c]: [&[T]; 3], term: impl Fn(T, T, T) -> T) -> T {
    const LANES: usize = 16;
    let mut lanes = [T::zero(); LANES];
    let (a16, b16, c16) = (a.chunks_exact(LANES), b.chunks_exact(LANES), c.chunks_exact(LANES));
    let tails = (a16.remainder(), b16.remainder(), c16.remainder());
    for ((a, b), c) in a16.zip(b16).zip(c16) {
        for l in 0..LANES {
            lanes[l] += term(a[l], b[l], c[l]);
        }
    }
    let tail = tails.0.iter().zip(tails.1).zip(tails.2).fold(T::zero(), |sum, ((&a, &b), &c)| sum + term(a, b, c));
    add_halves(lanes) + tail
}

/// The sum of `N` (a power of two) partial sums by a fixed tree of halves
/// (for 16: the upper eight added to the lower eight, then four, two,
/// one): the order [`lane_sum`]'s, `sum_block`'s and the clipping norm's
/// sums keep at every SIMD level.
#[inline(always)]
pub(crate) fn add_halves<T: Copy + std::ops::AddAssign, const N: usize>(mut lanes: [T; N]) -> T {
    let mut width = lanes.len();
    while width > 1 {
        width /= 2;
        for l in 0..width {
            let upper = lanes[l + width];
            lanes[l] += upper;
        }
    }
    lanes[0]
}

simd::multiversion! {
    /// Sums at most a block in 64 interleaved partial sums (four AVX-512
    /// vectors of `f32`), added by a fixed tree of halves, then the tail.
    /// Each partial sum is a chain of adds, each waiting on the one before:
    /// with eight of them (one 8-lane vector) a block of 1024 took 128
    /// such waits, about half a cycle an element, and was 11% of W5's
    /// `grad!` block on an Intel Xeon; with 64, sixteen.
    fn sum_block[T: Float][T](x: &[T]) -> T {
        const LANES: usize = 64;
        let mut lanes = [T::zero(); LANES];
        let mut chunks = x.chunks_exact(LANES);
        for chunk in &mut chunks {
            for (lane, &v) in lanes.iter_mut().zip(chunk) {
                *lane += v;
            }
        }
        let tail: T = chunks.remainder().iter().copied().sum();
        add_halves(lanes) + tail
    }
}

#[cfg(test)]
mod tests {
    use super::{lane_sum, sum_slice};

    #[test]
    fn lane_sum_is_exact_on_integers_for_every_tail_and_reads_all_three_slices() {
        for n in [0, 1, 15, 16, 17, 31, 32, 33, 100] {
            let a: Vec<f64> = (0..n).map(|i| f64::from(i % 7)).collect();
            let b: Vec<f64> = (0..n).map(|i| f64::from(i % 5) - 2.0).collect();
            let c: Vec<f64> = (0..n).map(|i| f64::from(i % 3)).collect();
            let exact: f64 = (0..n as usize).map(|i| a[i] * b[i] + c[i]).sum();
            assert_eq!(lane_sum([&a, &b, &c], |a, b, c| a * b + c), exact, "n = {n}");
        }
    }

    /// `sum_block` at the CPU's widest level keeps the order it states,
    /// written out here one element at a time: element `i` of each whole
    /// run of 64 into partial sum `i % 64`, the partial sums added by
    /// halves, then the tail in order.
    #[test]
    fn a_block_sums_in_the_order_it_states() {
        fn stated(x: &[f32]) -> f32 {
            let whole = x.len() / 64 * 64;
            let mut lanes = [0.0f32; 64];
            for (i, &v) in x[..whole].iter().enumerate() {
                lanes[i % 64] += v;
            }
            let mut width = 64;
            while width > 1 {
                width /= 2;
                for l in 0..width {
                    lanes[l] += lanes[l + width];
                }
            }
            lanes[0] + x[whole..].iter().fold(0.0, |sum, &v| sum + v)
        }
        let x: Vec<f32> = (0..1024).map(|i| (i as f32 * 0.37).sin() * 10f32.powi(i % 7 - 3)).collect();
        for n in (0..=1024).step_by(7).chain([63, 64, 65, 1023, 1024]) {
            assert_eq!(super::sum_block(&x[..n]).to_bits(), stated(&x[..n]).to_bits(), "n = {n}");
        }
    }

    #[test]
    fn sum_slice_is_exact_on_integers_and_handles_every_tail_length() {
        for n in [0, 1, 7, 8, 9, 1023, 1024, 1025, 5000] {
            let x: Vec<f64> = (0..n).map(|i| f64::from(i % 17)).collect();
            assert_eq!(sum_slice(&x), x.iter().sum::<f64>(), "n = {n}");
        }
    }

    #[test]
    fn a_large_sum_and_mean_hand_every_element_its_gradient() {
        use crate::{Tape, g_mean, g_mul, g_sum};
        // Past the size at which the gradient is written by the pool's
        // threads, both as a first contribution and added to another.
        let n = (1 << 18) + 3;
        let mut tape = Tape::<f64>::new();
        let x = tape.param(ndarray::ArrayD::from_elem(ndarray::IxDyn(&[n]), 2.0));
        let s = g_sum(&mut tape, x);
        let m = g_mean(&mut tape, x);
        let both = g_mul(&mut tape, s, m);
        tape.backward(both).expect("backward");
        // d(s·m)/dx = m + s / n, the same for every element.
        let each = 2.0 + 2.0 * n as f64 / n as f64;
        assert!(tape.grad(x).iter().all(|&g| g == each));
    }

    #[test]
    fn sum_slice_stays_accurate_on_a_large_f32_sum() {
        let x = vec![0.1f32; 1 << 24];
        let exact = f64::from(0.1f32) * f64::from(1u32 << 24);
        let relative = ((f64::from(sum_slice(&x)) - exact) / exact).abs();
        assert!(relative < 1e-5, "relative error {relative}");
    }
}
