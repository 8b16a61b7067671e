//! 2-D pooling on NCHW inputs: the maximum or the mean of each window,
//! PyTorch's `max_pool2d` and `avg_pool2d` (no dilation, no ceil mode).

use std::panic::Location;

use ndarray::IxDyn;

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::conv::{check_window_args, window_count};
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var};

/// What a pooling node keeps: kernel, stride and padding as `[rows, columns]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolSpec {
    pub(crate) kernel: [u32; 2],
    pub(crate) stride: [u32; 2],
    pub(crate) padding: [u32; 2],
}

/// The maximum of each `kernel` window of `x: [N, C, H, W]`, windows
/// `stride` apart, over the input padded by `padding` on both sides (the
/// padding never wins: PyTorch pads with -inf), giving `[N, C, OH, OW]`
/// with `OH = (H + 2 * padding[0] - kernel[0]) / stride[0] + 1` (rounded
/// down; `OW` likewise). A NaN in a window makes its maximum NaN.
///
/// Gradient: each window's `g` to the window's FIRST maximum (in row-major
/// order), as in [`g_max_axis`](crate::g_max_axis); overlapping windows add.
///
/// Errors: `x` not 4-D, a kernel or stride of 0, `padding` more than half
/// the kernel (PyTorch's limit), a kernel larger than the padded input.
///
/// ```
/// use grad_runtime::{g_max_pool2d, g_sum, Tape};
/// use ndarray::Array;
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(Array::from_shape_vec((1, 1, 2, 4), vec![1.0, 5.0, 2.0, 0.0, 3.0, 4.0, 2.0, 1.0]).unwrap());
/// let y = g_max_pool2d(&mut tape, x, [2, 2], [2, 2], [0, 0]);
/// assert_eq!(tape.value(y).as_slice().unwrap(), &[5.0, 2.0]);
/// let loss = g_sum(&mut tape, y);
/// tape.backward(loss)?;
/// assert_eq!(tape.grad(x).as_slice().unwrap(), &[0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_max_pool2d<T: Float>(
    tp: &mut Tape<T>,
    x: Var,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> Var {
    pool(tp, "g_max_pool2d", x, kernel, stride, padding, Pooling::Max)
}

/// The mean of each `kernel` window of `x: [N, C, H, W]`, windows `stride`
/// apart, over the input padded with zeros by `padding` on both sides,
/// giving `[N, C, OH, OW]` (sizes as in [`g_max_pool2d`]). Every window is
/// divided by `kernel[0] * kernel[1]`, padding included: PyTorch's default
/// `count_include_pad=True`.
///
/// Gradient: each window's `g / (kernel[0] * kernel[1])` to each of its
/// input elements (not to the padding); overlapping windows add.
///
/// Errors: as [`g_max_pool2d`].
///
/// ```
/// use grad_runtime::{g_avg_pool2d, Tape};
/// use ndarray::Array4;
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.constant(Array4::<f64>::ones((1, 1, 2, 2)));
/// let y = g_avg_pool2d(&mut tape, x, [2, 2], [1, 1], [1, 1]);
/// // Corners see one input element and three padded zeros.
/// assert_eq!(tape.value(y).as_slice().unwrap(), &[0.25, 0.5, 0.25, 0.5, 1.0, 0.5, 0.25, 0.5, 0.25]);
/// ```
#[track_caller]
pub fn g_avg_pool2d<T: Float>(
    tp: &mut Tape<T>,
    x: Var,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> Var {
    pool(tp, "g_avg_pool2d", x, kernel, stride, padding, Pooling::Avg)
}

#[derive(Clone, Copy)]
enum Pooling {
    Max,
    Avg,
}

#[track_caller]
fn pool<T: Float>(
    tp: &mut Tape<T>,
    name: &'static str,
    x: Var,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    pooling: Pooling,
) -> Var {
    let location = Location::caller();
    let Some([x]) = tp.resolve(name, [x], location) else { return tp.poisoned_var() };
    let window = match Window::check(tp.shape(x), kernel, stride, padding) {
        Ok(window) => window,
        Err(kind) => return tp.fail(name, kind, &[x], location),
    };
    let Some(mut out) = tp.output(name, IxDyn(&window.out_shape()), &[x], location) else {
        return tp.poisoned_var();
    };
    let vx = &tp.value_of(x).data;
    match pooling {
        Pooling::Max => window.for_each(|i, plane, taps| out.data[i] = vx[plane + window.first_max(vx, plane, taps)]),
        Pooling::Avg => {
            let scale = T::one() / T::from_usize(window.kernel[0] * window.kernel[1]);
            window.for_each(|i, plane, taps| {
                out.data[i] = window.offsets(taps).fold(T::zero(), |acc, o| acc + vx[plane + o]) * scale;
            });
        }
    }
    let spec = window.spec();
    let op = match pooling {
        Pooling::Max => Op::MaxPool2d { x, spec },
        Pooling::Avg => Op::AvgPool2d { x, spec },
    };
    tp.push(op, out)
}

pub(crate) fn max_pool2d_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    x: NodeId,
    spec: PoolSpec,
) {
    let vx = sink.value(x);
    let window = Window::new(vx.shape(), spec);
    sink.contribute_zeroed(x, |gx| {
        window.for_each(|i, plane, taps| gx[plane + window.first_max(&vx.data, plane, taps)] += g.data[i]);
    });
}

pub(crate) fn avg_pool2d_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    x: NodeId,
    spec: PoolSpec,
) {
    let window = Window::new(sink.value(x).shape(), spec);
    let scale = T::one() / T::from_usize(window.kernel[0] * window.kernel[1]);
    sink.contribute_zeroed(x, |gx| {
        window.for_each(|i, plane, taps| {
            let share = g.data[i] * scale;
            window.offsets(taps).for_each(|o| gx[plane + o] += share);
        });
    });
}

/// For `grad_graph`: each output element's input offset (flat), the
/// window's first maximum, which its gradient goes to.
pub(crate) fn max_pool2d_sources<T: Float>(x: &[T], shape: &[usize], spec: PoolSpec, sources: &mut Vec<usize>) {
    let window = Window::new(shape, spec);
    window.for_each(|_, plane, taps| sources.push(plane + window.first_max(x, plane, taps)));
}

/// For `grad_graph`: every (output element, input offset) pair of the
/// windows, and the share of an output's gradient each input gets.
pub(crate) fn avg_pool2d_pairs<T: Float>(
    shape: &[usize],
    spec: PoolSpec,
    outputs: &mut Vec<usize>,
    inputs: &mut Vec<usize>,
) -> T {
    let window = Window::new(shape, spec);
    window.for_each(|i, plane, taps| {
        for o in window.offsets(taps) {
            outputs.push(i);
            inputs.push(plane + o);
        }
    });
    T::one() / T::from_usize(window.kernel[0] * window.kernel[1])
}

/// A checked pooling geometry.
struct Window {
    n: usize,
    c: usize,
    planes: usize,
    h: usize,
    w: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    out: [usize; 2],
}

/// The input rows and columns one window covers, clipped to the input.
type Taps = ([usize; 2], [usize; 2]);

impl Window {
    fn check(x: &[usize], kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Result<Window, ErrorKind> {
        if x.len() != 4 {
            return Err(ErrorKind::Rank { expected: "4-D [N, C, H, W] image", got: x.len() });
        }
        check_window_args(stride, padding, [1, 1])?;
        if let Some(&bad) = kernel.iter().find(|&&k| k == 0 || k > u32::MAX as usize) {
            return Err(ErrorKind::InvalidArgument {
                name: "kernel",
                value: bad as f64,
                expected: "from 1 to 2^32 - 1",
            });
        }
        if let Some(i) = (0..2).find(|&i| padding[i] > kernel[i] / 2) {
            let value = padding[i] as f64;
            return Err(ErrorKind::InvalidArgument {
                name: "padding",
                value,
                expected: "at most half the kernel size",
            });
        }
        for i in 0..2 {
            window_count(x[2 + i], kernel[i], stride[i], padding[i], 1)?;
        }
        let narrow = |p: [usize; 2]| p.map(|v| v as u32);
        Ok(Window::new(x, PoolSpec { kernel: narrow(kernel), stride: narrow(stride), padding: narrow(padding) }))
    }

    fn new(x: &[usize], spec: PoolSpec) -> Window {
        let widen = |p: [u32; 2]| p.map(|v| v as usize);
        let (kernel, stride, padding) = (widen(spec.kernel), widen(spec.stride), widen(spec.padding));
        let out = [0, 1].map(|i| {
            window_count(x[2 + i], kernel[i], stride[i], padding[i], 1).expect("invariant: checked in the forward pass")
        });
        Window { n: x[0], c: x[1], planes: x[0] * x[1], h: x[2], w: x[3], kernel, stride, padding, out }
    }

    fn spec(&self) -> PoolSpec {
        let narrow = |p: [usize; 2]| p.map(|v| v as u32);
        PoolSpec { kernel: narrow(self.kernel), stride: narrow(self.stride), padding: narrow(self.padding) }
    }

    fn out_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.out[0], self.out[1]]
    }

    /// Calls `f(output index, offset of its input plane, its taps)` for every window.
    fn for_each(&self, mut f: impl FnMut(usize, usize, Taps)) {
        let [oh, ow] = self.out;
        let span = |o: usize, axis: usize, len: usize| {
            let start = o * self.stride[axis];
            let lo = start.saturating_sub(self.padding[axis]);
            let hi = (start + self.kernel[axis]).saturating_sub(self.padding[axis]).min(len);
            [lo, hi]
        };
        for p in 0..self.planes {
            for i in 0..oh {
                let rows = span(i, 0, self.h);
                for j in 0..ow {
                    f((p * oh + i) * ow + j, p * self.h * self.w, (rows, span(j, 1, self.w)));
                }
            }
        }
    }

    /// The offsets in its plane of a window's input elements, row-major.
    fn offsets(&self, ([r0, r1], [c0, c1]): Taps) -> impl Iterator<Item = usize> {
        let w = self.w;
        (r0..r1).flat_map(move |r| (c0..c1).map(move |c| r * w + c))
    }

    /// The offset of a window's first maximum (the first NaN if any).
    fn first_max<T: Float>(&self, x: &[T], plane: usize, taps: Taps) -> usize {
        let mut offsets = self.offsets(taps);
        let mut best = offsets.next().expect("invariant: padding <= kernel / 2 leaves every window an element");
        if x[plane + best].is_nan() {
            return best;
        }
        for o in offsets {
            let v = x[plane + o];
            if v.is_nan() {
                return o;
            }
            if v > x[plane + best] {
                best = o;
            }
        }
        best
    }
}
