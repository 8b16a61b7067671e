//! 2-D convolution on NCHW inputs and OIHW weights, PyTorch's layout and
//! output-size formula, through the GEMM of `matmul.rs`: each image (and
//! group) is unfolded into a pooled column buffer (im2col), multiplied by
//! the weight matrix, and the backward folds the columns' gradient back
//! (col2im). The geometry helpers here also serve `pool.rs`.

use std::panic::Location;

use ndarray::IxDyn;

use crate::error::ErrorKind;
use crate::gemm::{self, MatRef, scratch_len};
use crate::ops::Op;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::Tensor;
use crate::{Float, Tape, Var};

/// What a conv node keeps beyond its inputs: stride, padding and dilation
/// (rows, columns) and the group count, as `u32` so that the node stays small.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvSpec {
    stride: [u32; 2],
    padding: [u32; 2],
    dilation: [u32; 2],
    groups: u32,
}

/// The 2-D convolution (cross-correlation, as in PyTorch) of `x: [N, C, H, W]`
/// with `w: [O, C / groups, kh, kw]`, plus `b: [O]` if given, giving
/// `[N, O, OH, OW]` with
/// `OH = (H + 2 * padding[0] - dilation[0] * (kh - 1) - 1) / stride[0] + 1`
/// (rounded down; `OW` likewise with index 1): PyTorch's `conv2d`.
/// `stride`, `padding` and `dilation` are `[rows, columns]`; `padding` adds
/// zeros on both sides. With `groups = g`, the channels split into `g`
/// groups, output channels `i * O / g ..` seeing input channels
/// `i * C / g ..` only.
///
/// Gradient: to `x`, the transposed convolution of `g` with `w`; to `w`,
/// the correlation of `g` with `x`; to `b`, `g` summed over `N`, `OH`, `OW`.
///
/// Errors (never panics): inputs that are not 4-D, a stride or dilation of
/// 0, `groups` that is 0 or does not divide `C` and `O`, `C != groups *
/// w[1]`, an empty kernel, a kernel (with dilation) larger than the padded
/// input, a bias that is not `[O]`.
///
/// ```
/// use grad_runtime::{g_conv2d, g_sum, Tape};
/// use ndarray::{Array, Array4};
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.constant(Array::from_shape_vec((1, 1, 3, 3), (1..=9).map(f64::from).collect()).unwrap());
/// let w = tape.param(Array4::<f64>::ones((1, 1, 2, 2)));
/// let b = tape.param(ndarray::array![0.5]);
/// let y = g_conv2d(&mut tape, x, w, Some(b), [1, 1], [0, 0], [1, 1], 1);
/// // Each output is the sum of a 2x2 window, plus the bias.
/// assert_eq!(tape.value(y).as_slice().unwrap(), &[12.5, 16.5, 24.5, 28.5]);
/// let loss = g_sum(&mut tape, y);
/// tape.backward(loss)?;
/// assert_eq!(tape.grad(b).as_slice().unwrap(), &[4.0]);
/// assert_eq!(tape.grad(w).as_slice().unwrap(), &[12.0, 16.0, 24.0, 28.0]);
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[allow(clippy::too_many_arguments)] // PyTorch's argument list, in its order
#[track_caller]
pub fn g_conv2d<T: Float>(
    tp: &mut Tape<T>,
    x: Var,
    w: Var,
    b: Option<Var>,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
) -> Var {
    const NAME: &str = "g_conv2d";
    let location = Location::caller();
    let (x, w, b) = match b {
        Some(b) => {
            let Some([x, w, b]) = tp.resolve(NAME, [x, w, b], location) else { return tp.poisoned_var() };
            (x, w, Some(b))
        }
        None => {
            let Some([x, w]) = tp.resolve(NAME, [x, w], location) else { return tp.poisoned_var() };
            (x, w, None)
        }
    };
    let all = [x, w, b.unwrap_or(x)];
    let inputs = &all[..2 + usize::from(b.is_some())];
    let geometry = match conv_geometry(tp, x, w, b, stride, padding, dilation, groups) {
        Ok(geometry) => geometry,
        Err(kind) => return tp.fail(NAME, kind, inputs, location),
    };
    let Some(mut out) = tp.output(NAME, IxDyn(&geometry.out_shape()), inputs, location) else {
        return tp.poisoned_var();
    };
    let mut cols = tp.scratch(geometry.k * geometry.l);
    let mut packing = tp.scratch(scratch_len::<T>(geometry.og, geometry.k, geometry.l));
    let (vx, vw) = (&tp.value_of(x).data, &tp.value_of(w).data);
    let g = &geometry;
    for n in 0..g.n {
        for group in 0..g.groups {
            im2col(g, &vx[g.image_group(n, group)..], &mut cols);
            let weights = MatRef::row_major(&vw[group * g.og * g.k..(group + 1) * g.og * g.k], g.og, g.k);
            let start = (n * g.o + group * g.og) * g.l;
            let c = &mut out.data[start..start + g.og * g.l];
            gemm::gemm(weights, MatRef::row_major(&cols, g.k, g.l), c, false, &mut packing);
        }
    }
    if let Some(b) = b {
        let vb = &tp.value_of(b).data;
        for (i, plane) in out.data.chunks_exact_mut(g.l.max(1)).enumerate() {
            let bias = vb[i % g.o.max(1)];
            plane.iter_mut().for_each(|v| *v += bias);
        }
    }
    tp.recycle(cols);
    tp.recycle(packing);
    let spec = geometry.spec();
    tp.push(Op::Conv2d { x, w, b, spec }, out)
}

pub(crate) fn conv2d_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &Tensor<T>,
    x: NodeId,
    w: NodeId,
    b: Option<NodeId>,
    spec: ConvSpec,
) {
    let (vx, vw) = (sink.value(x), sink.value(w));
    let geo = Geometry::new(vx.shape(), vw.shape(), spec);
    let (wants_x, wants_w) = (sink.wants(x), sink.wants(w));
    let mut cols = sink.scratch(if wants_x || wants_w { geo.k * geo.l } else { 0 });
    let packing_len = scratch_len::<T>(geo.og, geo.l, geo.k).max(scratch_len::<T>(geo.k, geo.og, geo.l));
    let mut packing = sink.scratch(if wants_x || wants_w { packing_len } else { 0 });
    let g_block = |n: usize, group: usize| {
        let start = (n * geo.o + group * geo.og) * geo.l;
        MatRef::row_major(&g.data[start..start + geo.og * geo.l], geo.og, geo.l)
    };
    // To w: g_block @ colsᵀ, summed over the images.
    sink.contribute_zeroed(w, |gw| {
        for n in 0..geo.n {
            for group in 0..geo.groups {
                im2col(&geo, &vx.data[geo.image_group(n, group)..], &mut cols);
                let block = &mut gw[group * geo.og * geo.k..(group + 1) * geo.og * geo.k];
                gemm::gemm(g_block(n, group), MatRef::row_major(&cols, geo.k, geo.l).t(), block, true, &mut packing);
            }
        }
    });
    // To x: the columns' gradient wᵀ @ g_block, folded back onto the image.
    sink.contribute_zeroed(x, |gx| {
        for n in 0..geo.n {
            for group in 0..geo.groups {
                let weights =
                    MatRef::row_major(&vw.data[group * geo.og * geo.k..(group + 1) * geo.og * geo.k], geo.og, geo.k);
                gemm::gemm(weights.t(), g_block(n, group), &mut cols, false, &mut packing);
                col2im(&geo, &cols, &mut gx[geo.image_group(n, group)..]);
            }
        }
    });
    sink.recycle(cols);
    sink.recycle(packing);
    if let Some(b) = b {
        // To b: g summed over the images and the output plane.
        sink.contribute_zeroed(b, |gb| {
            for (i, plane) in g.data.chunks_exact(geo.l.max(1)).enumerate() {
                gb[i % geo.o.max(1)] += plane.iter().copied().fold(T::zero(), |a, v| a + v);
            }
        });
    }
}

/// The sizes of one convolution, checked: `k` rows of columns per group
/// (`C / groups * kh * kw`), `l` output positions (`OH * OW`).
pub(crate) struct Geometry {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    groups: usize,
    cg: usize,
    og: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    out: [usize; 2],
    k: usize,
    l: usize,
}

impl Geometry {
    /// The geometry of shapes and a spec the forward pass already checked.
    fn new(x: &[usize], w: &[usize], spec: ConvSpec) -> Geometry {
        let widen = |p: [u32; 2]| p.map(|v| v as usize);
        let (stride, padding, dilation) = (widen(spec.stride), widen(spec.padding), widen(spec.dilation));
        let kernel = [w[2], w[3]];
        let out = [0, 1].map(|i| {
            window_count(x[2 + i], kernel[i], stride[i], padding[i], dilation[i])
                .expect("invariant: checked in the forward pass")
        });
        let groups = spec.groups as usize;
        let (cg, og) = (w[1], w[0] / groups);
        Geometry {
            n: x[0],
            c: x[1],
            h: x[2],
            w: x[3],
            o: w[0],
            groups,
            cg,
            og,
            kernel,
            stride,
            padding,
            dilation,
            out,
            k: cg * kernel[0] * kernel[1],
            l: out[0] * out[1],
        }
    }

    fn spec(&self) -> ConvSpec {
        let narrow = |p: [usize; 2]| p.map(|v| v as u32);
        ConvSpec {
            stride: narrow(self.stride),
            padding: narrow(self.padding),
            dilation: narrow(self.dilation),
            groups: self.groups as u32,
        }
    }

    fn out_shape(&self) -> [usize; 4] {
        [self.n, self.o, self.out[0], self.out[1]]
    }

    /// The offset of image `n`'s first channel of `group` in `x`.
    fn image_group(&self, n: usize, group: usize) -> usize {
        (n * self.c + group * self.cg) * self.h * self.w
    }
}

/// Checks a conv's arguments against its inputs' shapes.
#[allow(clippy::too_many_arguments)]
fn conv_geometry<T: Float>(
    tp: &Tape<T>,
    x: NodeId,
    w: NodeId,
    b: Option<NodeId>,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
) -> Result<Geometry, ErrorKind> {
    let (sx, sw) = (tp.shape(x), tp.shape(w));
    if sx.len() != 4 {
        return Err(ErrorKind::Rank { expected: "4-D [N, C, H, W] image", got: sx.len() });
    }
    if sw.len() != 4 {
        return Err(ErrorKind::Rank { expected: "4-D [O, C / groups, kh, kw] weight", got: sw.len() });
    }
    check_window_args(stride, padding, dilation)?;
    if groups == 0 || groups > u32::MAX as usize {
        return Err(ErrorKind::InvalidArgument { name: "groups", value: groups as f64, expected: "at least 1" });
    }
    if sx[1] % groups != 0 || sw[0] % groups != 0 {
        return Err(ErrorKind::ConvGroups { groups, in_channels: sx[1], out_channels: sw[0] });
    }
    if sw[1].checked_mul(groups) != Some(sx[1]) {
        return Err(ErrorKind::ConvChannels { channels: sx[1], per_group: sw[1], groups });
    }
    if let Some(b) = b
        && tp.shape(b) != [sw[0]]
    {
        return Err(ErrorKind::ConvBias { out_channels: sw[0] });
    }
    for i in 0..2 {
        window_count(sx[2 + i], sw[2 + i], stride[i], padding[i], dilation[i])?;
    }
    let spec = ConvSpec {
        stride: stride.map(|v| v as u32),
        padding: padding.map(|v| v as u32),
        dilation: dilation.map(|v| v as u32),
        groups: groups as u32,
    };
    Ok(Geometry::new(sx, sw, spec))
}

/// Refuses a stride or dilation of 0, and values a node cannot keep.
pub(crate) fn check_window_args(
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
) -> Result<(), ErrorKind> {
    let limit = u32::MAX as usize;
    for (name, pair, least) in [("stride", stride, 1), ("dilation", dilation, 1), ("padding", padding, 0)] {
        if let Some(&bad) = pair.iter().find(|&&v| v < least || v > limit) {
            let expected = if least == 1 { "from 1 to 2^32 - 1" } else { "at most 2^32 - 1" };
            return Err(ErrorKind::InvalidArgument { name, value: bad as f64, expected });
        }
    }
    Ok(())
}

/// How many windows of `kernel` (spread by `dilation`) fit along a dim of
/// `len` padded by `padding` on both sides, `stride` apart: PyTorch's formula.
pub(crate) fn window_count(
    len: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Result<usize, ErrorKind> {
    if kernel == 0 {
        return Err(ErrorKind::InvalidArgument { name: "kernel size", value: 0.0, expected: "at least 1" });
    }
    let span = dilation.saturating_mul(kernel - 1).saturating_add(1);
    let padded = len.saturating_add(padding.saturating_mul(2));
    if span > padded {
        return Err(ErrorKind::WindowTooLarge { window: span, padded });
    }
    Ok((padded - span) / stride + 1)
}

/// The input position of window `o`'s tap `t` along one dim, `None` in the padding.
fn source(o: usize, t: usize, stride: usize, padding: usize, dilation: usize, len: usize) -> Option<usize> {
    (o * stride + t * dilation).checked_sub(padding).filter(|&i| i < len)
}

/// Unfolds one image's group of channels (`x` starts at its first channel)
/// into `cols: [cg * kh * kw, OH * OW]`, zeros where a tap is in the padding.
fn im2col<T: Float>(g: &Geometry, x: &[T], cols: &mut [T]) {
    let [kh, kw] = g.kernel;
    let [oh, ow] = g.out;
    let mut rows = cols.chunks_exact_mut(g.l.max(1));
    for c in 0..g.cg {
        let plane = &x[c * g.h * g.w..(c + 1) * g.h * g.w];
        for ki in 0..kh {
            for kj in 0..kw {
                let Some(row) = rows.next() else { return };
                for (i, out_row) in row.chunks_exact_mut(ow.max(1)).take(oh).enumerate() {
                    let Some(ih) = source(i, ki, g.stride[0], g.padding[0], g.dilation[0], g.h) else {
                        out_row.fill(T::zero());
                        continue;
                    };
                    let line = &plane[ih * g.w..(ih + 1) * g.w];
                    for (j, v) in out_row.iter_mut().enumerate() {
                        *v = source(j, kj, g.stride[1], g.padding[1], g.dilation[1], g.w)
                            .map_or(T::zero(), |iw| line[iw]);
                    }
                }
            }
        }
    }
}

/// The adjoint of [`im2col`]: adds every column entry back onto the image
/// position it was read from.
fn col2im<T: Float>(g: &Geometry, cols: &[T], x: &mut [T]) {
    let [kh, kw] = g.kernel;
    let [oh, ow] = g.out;
    let mut rows = cols.chunks_exact(g.l.max(1));
    for c in 0..g.cg {
        let plane = &mut x[c * g.h * g.w..(c + 1) * g.h * g.w];
        for ki in 0..kh {
            for kj in 0..kw {
                let Some(row) = rows.next() else { return };
                for (i, in_row) in row.chunks_exact(ow.max(1)).take(oh).enumerate() {
                    let Some(ih) = source(i, ki, g.stride[0], g.padding[0], g.dilation[0], g.h) else { continue };
                    let line = &mut plane[ih * g.w..(ih + 1) * g.w];
                    for (j, &v) in in_row.iter().enumerate() {
                        if let Some(iw) = source(j, kj, g.stride[1], g.padding[1], g.dilation[1], g.w) {
                            line[iw] += v;
                        }
                    }
                }
            }
        }
    }
}
