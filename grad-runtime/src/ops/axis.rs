//! Axes: resolving an axis that may count from the end, and walking the
//! lanes of a row-major tensor along one axis (what reductions and softmax
//! work on).

use ndarray::{Axis, IxDyn, RemoveAxis};

use crate::{Float, parallel};

/// An axis argument that may count from the end: a `usize` counts from
/// the first axis, a signed integer may be negative (`-1` is the last axis),
/// as `g_softmax` and `g_sum_axis` read theirs. [`g_concat`](crate::g_concat)
/// takes one, so `g_concat(tp, a, b, 1)`, `g_concat(tp, a, b, -1)` and a
/// `usize` variable all compile.
pub trait AxisArg: Copy {
    /// The axis as a signed number; `None` for a `usize` beyond `isize::MAX`
    /// (no tensor has that many axes: the op reports a bad axis).
    fn signed(self) -> Option<isize>;
}

impl AxisArg for usize {
    fn signed(self) -> Option<isize> {
        isize::try_from(self).ok()
    }
}

impl AxisArg for isize {
    fn signed(self) -> Option<isize> {
        Some(self)
    }
}

/// An unsuffixed literal (`-1`) is an `i32`.
impl AxisArg for i32 {
    fn signed(self) -> Option<isize> {
        isize::try_from(self).ok()
    }
}

impl AxisArg for i64 {
    fn signed(self) -> Option<isize> {
        isize::try_from(self).ok()
    }
}

impl AxisArg for u32 {
    fn signed(self) -> Option<isize> {
        isize::try_from(self).ok()
    }
}

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
        if self.is_empty() {
            return;
        }
        for o in 0..self.outer {
            for i in 0..self.inner {
                f(o * self.inner + i, o * self.len * self.inner + i);
            }
        }
    }
}

impl AxisLanes {
    /// Whether each lane's elements are adjacent (the last axis, or one
    /// followed only by dims of 1).
    pub(crate) fn contiguous(&self) -> bool {
        self.inner == 1
    }

    /// The scratch a call to [`rows`](AxisLanes::rows) with `N` inputs needs:
    /// none for contiguous lanes, one lane per input and output otherwise.
    pub(crate) fn scratch_len(&self, inputs: usize) -> usize {
        if self.contiguous() || self.is_empty() { 0 } else { (inputs + 1) * self.len }
    }

    /// Whether the tensor has no element (then it has no lane to visit,
    /// however large its other dims).
    fn is_empty(&self) -> bool {
        self.outer == 0 || self.len == 0 || self.inner == 0
    }

    /// Runs `row(inputs, out)` on every lane, each given as contiguous
    /// slices, so every lane rule is written once over slices the compiler
    /// vectorises. Contiguous lanes are used in place (groups of rows on
    /// several threads when large; each row is one call, so the thread
    /// count changes nothing); strided lanes are gathered into `scratch`
    /// ([`scratch_len`](AxisLanes::scratch_len) elements) and scattered back.
    pub(crate) fn rows<T: Float, const N: usize>(
        &self,
        inputs: [&[T]; N],
        out: &mut [T],
        scratch: &mut [T],
        row: impl Fn([&[T]; N], &mut [T]) + Sync,
    ) {
        let n = self.len;
        if self.is_empty() {
            return;
        }
        if self.contiguous() {
            parallel::for_each_rows(out, n, |first, out_rows| {
                for (r, out_row) in out_rows.chunks_exact_mut(n.max(1)).enumerate() {
                    let start = (first + r) * n;
                    row(inputs.map(|x| &x[start..start + n]), out_row);
                }
            });
            return;
        }
        let (gathered, out_lane) = scratch[..(N + 1) * n].split_at_mut(N * n);
        self.for_each(|_, start| {
            for (k, input) in inputs.iter().enumerate() {
                for j in 0..n {
                    gathered[k * n + j] = input[start + j * self.inner];
                }
            }
            let lanes: [&[T]; N] = std::array::from_fn(|k| &gathered[k * n..(k + 1) * n]);
            row(lanes, out_lane);
            for (j, &v) in out_lane.iter().enumerate() {
                out[start + j * self.inner] = v;
            }
        });
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
