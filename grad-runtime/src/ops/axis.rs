//! Axes: resolving an axis that may count from the end, and walking the
//! lanes of a row-major tensor along one axis (what reductions and softmax
//! work on).

use ndarray::{Axis, IxDyn, RemoveAxis};

/// Resolves an axis that may count from the end (`-1` = last).
pub(crate) fn normalize_axis(axis: isize, ndim: usize) -> Option<usize> {
    let ndim_signed = ndim as isize;
    let resolved = if axis < 0 { axis + ndim_signed } else { axis };
    (0..ndim_signed).contains(&resolved).then_some(resolved as usize)
}

/// A row-major tensor seen as `[outer, len, inner]` around one axis: the
/// elements of lane `(o, i)` along the axis sit `inner` apart.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AxisLanes {
    pub(crate) outer: usize,
    pub(crate) len: usize,
    pub(crate) inner: usize,
}

impl AxisLanes {
    pub(crate) fn new(shape: &[usize], axis: usize) -> Self {
        AxisLanes { outer: shape[..axis].iter().product(), len: shape[axis], inner: shape[axis + 1..].iter().product() }
    }

    /// Calls `f(lane, start)` for every lane: `lane` numbers the lanes in
    /// row-major order of the reduced shape, `start` is the offset of the
    /// lane's first element; its elements are at `start + j * inner`.
    ///
    /// Calls nothing when the tensor is empty (any of `outer`, `len`,
    /// `inner` is 0), so the walk is never longer than the tensor: a shape
    /// like `[2^40, 0, 2^20]` has 2^60 empty lanes, and walking them would
    /// never end. A caller that needs a result for lanes of length 0 (a sum
    /// over an empty axis) makes it itself, as `sum_lanes` does; the others
    /// (max, min, argmax) refuse an empty axis.
    pub(crate) fn for_each(&self, mut f: impl FnMut(usize, usize)) {
        if self.outer == 0 || self.len == 0 || self.inner == 0 {
            return;
        }
        for o in 0..self.outer {
            for i in 0..self.inner {
                f(o * self.inner + i, o * self.len * self.inner + i);
            }
        }
    }
}

/// The shape after reducing `axis`: the axis removed, or kept as 1.
pub(crate) fn reduced_shape(shape: &[usize], axis: usize, keepdim: bool) -> IxDyn {
    let mut dims = IxDyn(shape);
    if keepdim {
        dims[axis] = 1;
        dims
    } else {
        dims.remove_axis(Axis(axis))
    }
}
