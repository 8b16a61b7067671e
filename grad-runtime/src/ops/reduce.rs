//! Reductions to a scalar: `sum` and `mean` over every element.

use std::panic::Location;

use ndarray::IxDyn;

use crate::backward::GradSink;
use crate::ops::Op;
use crate::tape::NodeId;
use crate::tensor::Tensor;
use crate::{Float, Tape, Var};

/// The sum of every element, as a scalar (shape `[]`).
///
/// Gradient: `g` (a scalar) broadcast to every element of `x`.
#[track_caller]
pub fn g_sum<T: Float>(tp: &mut Tape<T>, x: Var) -> Var {
    reduce_all(tp, "g_sum", x, Op::Sum, |total, _| total)
}

/// The mean of every element, as a scalar (shape `[]`); NaN for an empty tensor.
///
/// Gradient: `g / n` to every element of `x`, where `n` is its element count.
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
    let mut out = tp.output(IxDyn(&[]));
    out.data[0] = result;
    tp.push(op(x), out)
}

pub(crate) fn sum_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &Tensor<T>, x: NodeId) {
    fill_backward(sink, x, g.data[0]);
}

pub(crate) fn mean_backward<T: Float>(sink: &mut GradSink<'_, T>, g: &Tensor<T>, x: NodeId) {
    let n = sink.value(x).len();
    fill_backward(sink, x, g.data[0] / T::from_usize(n));
}

fn fill_backward<T: Float>(sink: &mut GradSink<'_, T>, x: NodeId, each: T) {
    if sink.wants(x) {
        let mut contribution = sink.pool.take(sink.value(x).len());
        contribution.fill(each);
        sink.add(x, contribution);
    }
}

/// Sums a slice pairwise (halves summed recursively) down to blocks of
/// 1024, each summed with eight independent accumulators: vectorizes, and
/// the rounding error grows with `log n`, not `n` (a 16M-element f32 sum
/// stays accurate to about 1e-6).
pub(crate) fn sum_slice<T: Float>(x: &[T]) -> T {
    const LANES: usize = 8;
    const BLOCK: usize = 1024;
    if x.len() > BLOCK {
        let (left, right) = x.split_at(x.len() / 2);
        return sum_slice(left) + sum_slice(right);
    }
    let mut lanes = [T::zero(); LANES];
    let mut chunks = x.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane += v;
        }
    }
    let tail: T = chunks.remainder().iter().copied().sum();
    ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7])) + tail
}

#[cfg(test)]
mod tests {
    use super::sum_slice;

    #[test]
    fn sum_slice_is_exact_on_integers_and_handles_every_tail_length() {
        for n in [0, 1, 7, 8, 9, 1023, 1024, 1025, 5000] {
            let x: Vec<f64> = (0..n).map(|i| f64::from(i % 17)).collect();
            assert_eq!(sum_slice(&x), x.iter().sum::<f64>(), "n = {n}");
        }
    }

    #[test]
    fn sum_slice_stays_accurate_on_a_large_f32_sum() {
        let x = vec![0.1f32; 1 << 24];
        let exact = f64::from(0.1f32) * f64::from(1u32 << 24);
        let relative = ((f64::from(sum_slice(&x)) - exact) / exact).abs();
        assert!(relative < 1e-5, "relative error {relative}");
    }
}
