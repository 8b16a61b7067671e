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
    pub(crate) fn for_each(&self, mut f: impl FnMut(usize, usize)) {
        // No lanes: never walk `outer` when `inner` is 0 (a shape such as
        // [huge, 0] would take forever to walk, doing nothing).
        if self.inner == 0 {
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
