//! `softmax` along one axis.

use std::panic::Location;

use ndarray::Axis;

use crate::backward::GradSink;
use crate::error::ErrorKind;
use crate::ops::{Op, normalize_axis};
use crate::tape::NodeId;
use crate::tensor::Tensor;
use crate::{Float, Tape, Var};

/// `exp(x - max) / sum(exp(x - max))` along `axis` (negative counts from
/// the end, `-1` = last). Subtracting the max keeps it finite for any
/// finite logits.
///
/// Gradient: `y * (g - sum(g * y))`, the sum taken along `axis`.
#[track_caller]
pub fn g_softmax<T: Float>(tp: &mut Tape<T>, x: Var, axis: isize) -> Var {
    const NAME: &str = "g_softmax";
    let location = Location::caller();
    let Some([x]) = tp.resolve(NAME, [x], location) else {
        return tp.poisoned_var();
    };
    let ndim = tp.shape(x).len();
    let Some(axis) = normalize_axis(axis, ndim) else {
        return tp.fail(NAME, ErrorKind::Axis { axis, ndim }, &[x], location);
    };
    let mut out = tp.output(tp.value_of(x).shape.clone());
    let input = tp.nodes[x].value.view();
    for (x_lane, mut y_lane) in input.lanes(Axis(axis)).into_iter().zip(out.view_mut().lanes_mut(Axis(axis))) {
        let max = x_lane.fold(T::neg_infinity(), |m, &v| m.max(v));
        let mut total = T::zero();
        for (y, &x) in y_lane.iter_mut().zip(x_lane) {
            *y = (x - max).exp();
            total += *y;
        }
        y_lane.mapv_inplace(|y| y / total);
    }
    tp.push(Op::Softmax { x, axis }, out)
}

pub(crate) fn softmax_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &Tensor<T>,
    out: &Tensor<T>,
    x: NodeId,
    axis: usize,
) {
    if !sink.wants(x) {
        return;
    }
    let mut contribution = Tensor::new(g.shape.clone(), sink.pool.take(g.len()));
    let (g, y) = (g.view(), out.view());
    let lanes = g.lanes(Axis(axis)).into_iter().zip(y.lanes(Axis(axis)));
    for ((g_lane, y_lane), mut c_lane) in lanes.zip(contribution.view_mut().lanes_mut(Axis(axis))) {
        let dot = g_lane.iter().zip(y_lane).fold(T::zero(), |s, (&g, &y)| s + g * y);
        for ((c, &g), &y) in c_lane.iter_mut().zip(g_lane).zip(y_lane) {
            *c = y * (g - dot);
        }
    }
    sink.add(x, contribution.data);
}
