//! 2-D convolution on NCHW inputs and OIHW weights, PyTorch's layout and
//! output-size formula, through the GEMM of `gemm/`: the forward multiplies
//! the weight matrix by each image's (and group's) columns, which the
//! product packs straight from the padded image ([`Windows`]); the
//! weights' gradient packs them from it the same way ([`Columns`]); the
//! image's gradient folds the columns' gradient back onto the image
//! (col2im). A batch's images are cut into chunks for the threads, each
//! chunk's products then kept on its thread. The geometry helpers here
//! also serve `pool.rs`.

use std::ops::Range;
use std::panic::Location;

use ndarray::IxDyn;
use rayon::prelude::*;

use crate::error::ErrorKind;
use crate::gemm::{self, ImageProduct, MatRef, Precision};
use crate::ops::Op;
use crate::ops::reduce::sum_slice;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var, copy, parallel, simd};

/// What a conv node keeps beyond its inputs: stride, padding and dilation
/// (rows, columns) and the group count, as `u32` so that the node stays
/// small, and the precision of its products (forward and backward).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvSpec {
    pub(crate) stride: [u32; 2],
    pub(crate) padding: [u32; 2],
    pub(crate) dilation: [u32; 2],
    pub(crate) groups: u32,
    pub(crate) precision: Precision,
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
/// The products (the forward's and both gradients') run in the tape's
/// [`matmul_precision`](Tape::matmul_precision), as `g_matmul`'s: bf16
/// from `f32` under [`Precision::Bf16`](crate::Precision).
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
    let g = &geometry;
    let chunks = ImageChunks::new(g);
    let packing_len = gemm::scratch_len_in::<T>(g.precision, g.og, g.k, g.l);
    // The columns are packed straight from the padded planes, never
    // written out whole (`Windows`), unless the planes are the larger.
    let padded_len = g.padded_len();
    let buffer_len = padded_len.unwrap_or(g.k * g.l);
    // An empty output needs no scratch, however many its empty dims imply.
    let scratch_len = if out.data.is_empty() { 0 } else { chunks.scratch_len(buffer_len + packing_len) };
    let mut scratch = tp.scratch_at_least(scratch_len);
    let (vx, vw) = (&tp.value_of(x).data, &tp.value_of(w).data);
    let vb = b.map(|b| &tp.value_of(b).data[..]);
    chunks.each(&mut out.data, chunks.images * g.o * g.l, &mut scratch[..scratch_len], |images, out, scratch| {
        let (buffer, packing) = scratch.split_at_mut(buffer_len);
        let packing = &mut packing[..packing_len];
        for (n, out) in images.zip(out.chunks_exact_mut(g.o * g.l)) {
            for group in 0..g.groups {
                let x = &vx[g.image_group(n, group)..];
                let weights = MatRef::row_major(&vw[group * g.og * g.k..(group + 1) * g.og * g.k], g.og, g.k);
                let c = &mut out[group * g.og * g.l..(group + 1) * g.og * g.l];
                if padded_len.is_some() {
                    pad_planes(g, x, buffer);
                    let product = ImageProduct::Forward(weights, Windows { g, x: buffer });
                    T::gemm_windows(g.precision, product, c, false, packing);
                } else {
                    im2col(g, x, buffer);
                    T::gemm(g.precision, weights, MatRef::row_major(buffer, g.k, g.l), c, false, packing);
                }
            }
            // The bias, while the image's output is still in cache.
            if let Some(vb) = vb {
                for (plane, &bias) in out.chunks_exact_mut(g.l.max(1)).zip(vb.iter().cycle()) {
                    plane.iter_mut().for_each(|v| *v += bias);
                }
            }
        }
    });
    tp.recycle(scratch);
    let spec = geometry.spec();
    tp.push(Op::Conv2d { x, w, b, spec }, out)
}

pub(crate) fn conv2d_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    x: NodeId,
    w: NodeId,
    b: Option<NodeId>,
    spec: ConvSpec,
) {
    if g.data.is_empty() {
        // An empty output: every gradient is zero, and its columns, however
        // many its empty dims imply, are never needed.
        return;
    }
    let (vx, vw) = (sink.value(x), sink.value(w));
    let geo = Geometry::new(vx.shape(), vw.shape(), spec);
    let chunks = ImageChunks::new(&geo);
    let packing_len = gemm::scratch_len_in::<T>(geo.precision, geo.k, geo.l, geo.og).max(gemm::scratch_len_in::<T>(
        geo.precision,
        geo.k,
        geo.og,
        geo.l,
    ));
    // One sweep over the images for both gradients, so that each image's
    // `g` is read from memory once. A chunk's scratch holds its partial sum
    // of the weights' gradient, the columns, their packing, and the padded
    // planes the image's gradient is folded onto (when the planes are no
    // larger than the columns).
    let (wants_w, wants_x) = (sink.wants(w), sink.wants(x));
    let partial_len = if wants_w { geo.o * geo.k } else { 0 };
    // The weights' gradient packs its columns from the padded planes when
    // they fit where the columns would be; the image's gradient is folded
    // through them with a stride of 1 along the rows.
    let planes_len = geo.padded_len();
    let padded_len = planes_len.filter(|_| geo.stride[1] == 1);
    let per_chunk = partial_len + geo.k * geo.l + packing_len + padded_len.unwrap_or(0);
    let scratch_len = if wants_x || wants_w { chunks.scratch_len(per_chunk) } else { 0 };
    let mut scratch_buffer = sink.scratch_at_least(scratch_len);
    let scratch = &mut scratch_buffer[..scratch_len];
    let mut gx = if wants_x { sink.scratch_for(x, vx.len()) } else { Vec::new() };
    let g_image = |n: usize| &g.data[n * geo.o * geo.l..(n + 1) * geo.o * geo.l];
    let g_block = |n: usize, group: usize| {
        MatRef::row_major(&g_image(n)[group * geo.og * geo.l..(group + 1) * geo.og * geo.l], geo.og, geo.l)
    };
    // Each chunk gets its images and its block of the image's gradient
    // (or, when that has no element to fold onto, one element standing in).
    let image_len = geo.c * geo.h * geo.w;
    let fold = wants_x && image_len > 0;
    let mut none = [T::zero(); MAX_CHUNKS];
    let (out, block_len) = if fold { (&mut gx[..], chunks.images * image_len) } else { (&mut none[..chunks.count], 1) };
    if fold || wants_w {
        chunks.each(out, block_len, scratch, |images, gx, scratch| {
            let (partial, rest) = scratch.split_at_mut(partial_len);
            let (cols, rest) = rest.split_at_mut(geo.k * geo.l);
            let (packing, planes) = rest.split_at_mut(packing_len);
            partial.fill(T::zero());
            let mut gx = gx.chunks_exact_mut(image_len.max(1));
            for n in images {
                for group in (0..geo.groups).filter(|_| wants_w) {
                    // To w: g_block @ colsᵀ summed over the images, each
                    // chunk of images into its own partial sum, the partials
                    // then added in chunk order. Each group's partial is the
                    // transpose, cols @ g_blockᵀ (`[k, og]`): the same terms
                    // in the same order (a product's operands commute
                    // exactly), but `k` rows of tiles rather than `og`,
                    // which for the usual few output channels fill the
                    // tiles' rows with less padding.
                    let x = &vx.data[geo.image_group(n, group)..];
                    let block_t = &mut partial[group * geo.og * geo.k..(group + 1) * geo.og * geo.k];
                    if planes_len.is_some() {
                        // The columns packed from the padded planes, as
                        // the forward packs them.
                        pad_planes(&geo, x, cols);
                        let product = ImageProduct::Weights(Windows { g: &geo, x: cols }, g_block(n, group).t());
                        T::gemm_windows(geo.precision, product, block_t, true, packing);
                    } else {
                        im2col(&geo, x, cols);
                        let cols = MatRef::row_major(cols, geo.k, geo.l);
                        T::gemm(geo.precision, cols, g_block(n, group).t(), block_t, true, packing);
                    }
                }
                // To x: the columns' gradient wᵀ @ g_block, folded back
                // onto the image (zeroed first, in cache, when folded
                // straight onto it).
                let Some(gx) = gx.next().filter(|_| fold) else { continue };
                if padded_len.is_none() {
                    gx.fill(T::zero());
                }
                for group in 0..geo.groups {
                    let weights = MatRef::row_major(
                        &vw.data[group * geo.og * geo.k..(group + 1) * geo.og * geo.k],
                        geo.og,
                        geo.k,
                    );
                    let gx = &mut gx[group * geo.cg * geo.h * geo.w..];
                    match padded_len {
                        Some(len) if geo.precision == Precision::F32 && gemm::fits_one_block(geo.og, geo.l) => {
                            // The columns' gradient folded onto the
                            // padded planes a band of taps at a time as the
                            // product computes it, where the whole columns
                            // went out to memory and came back.
                            let planes = &mut planes[..len];
                            planes.fill(T::zero());
                            let mut fold = Fold { g: &geo, planes, band: cols };
                            gemm::gemm_into(weights.t(), g_block(n, group), &mut fold, packing);
                            unpad(&geo, planes, gx);
                        }
                        Some(len) => {
                            T::gemm(geo.precision, weights.t(), g_block(n, group), cols, false, packing);
                            col2im_padded(&geo, cols, &mut planes[..len], gx);
                        }
                        None => {
                            T::gemm(geo.precision, weights.t(), g_block(n, group), cols, false, packing);
                            col2im(&geo, cols, gx);
                        }
                    }
                }
            }
        });
    }
    sink.contribute_zeroed(w, |gw| {
        if gw.is_empty() {
            return;
        }
        for partial in scratch.chunks_exact(per_chunk.max(1)).take(chunks.used) {
            let partial = &partial[..partial_len];
            for (gw, block_t) in gw.chunks_exact_mut(geo.og * geo.k).zip(partial.chunks_exact(geo.og * geo.k)) {
                for (o, gw) in gw.chunks_exact_mut(geo.k).enumerate() {
                    let column = block_t[o..].iter().step_by(geo.og);
                    gw.iter_mut().zip(column).for_each(|(sum, &v)| *sum += v);
                }
            }
        }
    });
    sink.recycle(scratch_buffer);
    if wants_x {
        sink.add(x, gx);
    }
    if let Some(b) = b {
        // To b: g summed over the images and the output plane: each plane
        // by the vectorised pairwise sum (the chunks' planes on their
        // threads), then the planes' sums added in order.
        let mut sums = sink.scratch(if sink.wants(b) { geo.n * geo.o } else { 0 });
        let mut none = [T::zero(); MAX_CHUNKS];
        chunks.each(&mut sums, chunks.images * geo.o, &mut none[..chunks.count], |images, sums, _| {
            let planes = g.data[images.start * geo.o * geo.l..images.end * geo.o * geo.l].chunks_exact(geo.l.max(1));
            sums.iter_mut().zip(planes).for_each(|(sum, plane)| *sum = sum_slice(plane));
        });
        sink.contribute_zeroed(b, |gb| {
            for (i, &sum) in sums.iter().enumerate() {
                gb[i % geo.o.max(1)] += sum;
            }
        });
        sink.recycle(sums);
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
    precision: Precision,
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
            precision: spec.precision,
        }
    }

    fn spec(&self) -> ConvSpec {
        let narrow = |p: [usize; 2]| p.map(|v| v as u32);
        ConvSpec {
            stride: narrow(self.stride),
            padding: narrow(self.padding),
            dilation: narrow(self.dilation),
            groups: self.groups as u32,
            precision: self.precision,
        }
    }

    /// A plane's rows and columns with the padding on both sides.
    fn padded(&self) -> [usize; 2] {
        [self.h + 2 * self.padding[0], self.w + 2 * self.padding[1]]
    }

    /// The elements of one group's padded planes ([`pad_planes`]), when
    /// there are no more of them than of its columns, as for any usual
    /// convolution; `None` when the padding outgrows what the windows read
    /// (a large padding with a large stride), and the columns are unfolded
    /// instead.
    fn padded_len(&self) -> Option<usize> {
        let [hp, wp] = [0, 1].map(|i| [self.h, self.w][i].checked_add(self.padding[i].checked_mul(2)?));
        let len = self.cg.checked_mul(hp?)?.checked_mul(wp?)?;
        (len <= self.k.saturating_mul(self.l)).then_some(len)
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
        precision: tp.matmul_precision(),
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

/// One group of a convolution seen as a product: for `grad_graph`, the
/// offset in the group's input (`x`, `[N, C / groups, H, W]`) padded by
/// `padding` on both sides of every element of the im2col matrix
/// `[N, OH·OW, (C / groups)·kh·kw]`, written to `sources`. Returns the
/// padding and `[OH, OW]`. (The group count of `spec` is not read: the
/// shapes are one group's.)
pub(crate) fn im2col_sources(
    x: &[usize; 4],
    w: &[usize; 4],
    spec: ConvSpec,
    sources: &mut Vec<usize>,
) -> ([usize; 2], [usize; 2]) {
    let widen = |p: [u32; 2]| p.map(|v| v as usize);
    let (stride, padding, dilation) = (widen(spec.stride), widen(spec.padding), widen(spec.dilation));
    let ([n, c, h, wd], [_, _, kh, kw]) = (*x, *w);
    let out = [0, 1].map(|i| {
        let (len, k) = if i == 0 { (h, kh) } else { (wd, kw) };
        window_count(len, k, stride[i], padding[i], dilation[i]).expect("invariant: checked in the forward pass")
    });
    let (hp, wp) = (h + 2 * padding[0], wd + 2 * padding[1]);
    for image in 0..n {
        for oi in 0..out[0] {
            for oj in 0..out[1] {
                for channel in 0..c {
                    for ki in 0..kh {
                        let row = oi * stride[0] + ki * dilation[0];
                        for kj in 0..kw {
                            let col = oj * stride[1] + kj * dilation[1];
                            sources.push(((image * c + channel) * hp + row) * wp + col);
                        }
                    }
                }
            }
        }
    }
    (padding, out)
}

/// How many groups the convolution has.
pub(crate) fn groups(spec: ConvSpec) -> usize {
    spec.groups as usize
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

/// The windows, of `count`, whose tap `t` falls inside the `len` input
/// positions along one dim: `o · stride + t · dilation − padding` in `0..len`.
/// Every other window reads the padding.
fn inside(count: usize, t: usize, stride: usize, padding: usize, dilation: usize, len: usize) -> Range<usize> {
    let offset = t * dilation;
    let first = padding.saturating_sub(offset).div_ceil(stride).min(count);
    // The last window inside reads position `len - 1` or one before it.
    let end = match (len + padding).checked_sub(offset + 1) {
        Some(room) if len > 0 => (room / stride + 1).min(count),
        _ => 0,
    };
    first..end.max(first)
}

/// The input position the first window of `windows` reads for tap `t`
/// (`windows` from [`inside`], not empty).
fn first_source(windows: &Range<usize>, t: usize, stride: usize, padding: usize, dilation: usize) -> usize {
    windows.start * stride + t * dilation - padding
}

/// One image's group of channels seen as the transpose of its columns,
/// `[OH · OW, cg · kh · kw]`: a row per output position (its window), a
/// column per tap. The forward's product `w @ cols` reads it as `bᵀ`, and
/// packs its panels straight from the image: no columns written out and
/// read back, one pass fewer over `k · l` elements per image. `x` is the
/// group's planes with their padding written in ([`pad_planes`]), so that
/// each tap of a row of windows is one run of the image.
#[derive(Clone, Copy)]
pub(crate) struct Windows<'a, T> {
    g: &'a Geometry,
    x: &'a [T],
}

impl<'a, T: Float> Windows<'a, T> {
    /// The same windows over `x` reinterpreted (its `f32` view, for the
    /// bf16 products).
    pub(crate) fn over<U>(&self, x: &'a [U]) -> Windows<'a, U> {
        Windows { g: self.g, x }
    }

    /// The padded planes.
    pub(crate) fn input(&self) -> &'a [T] {
        self.x
    }

    /// Taps `pc..pc + kc` of output positions `l0..l0 + count`: tap
    /// `pc + p` at `dst[p * tap_stride..][..count]`.
    fn write(&self, pc: usize, kc: usize, l0: usize, count: usize, dst: &mut [T], tap_stride: usize) {
        write_taps(self.g, self.x, pc, kc, l0, count, dst, tap_stride);
    }
}

simd::multiversion! {
    /// [`Windows::write`] of the padded planes `x`, compiled for each
    /// vector width (its runs are moved in the CPU's widest registers).
    #[allow(clippy::too_many_arguments)]
    fn write_taps[T: Float][T](
        g: &Geometry,
        x: &[T],
        pc: usize,
        kc: usize,
        l0: usize,
        count: usize,
        dst: &mut [T],
        tap_stride: usize,
    ) {
        let [kh, kw] = g.kernel;
        let [hp, wp] = g.padded();
        let ow = g.out[1];
        let (row0, col0) = (l0 / ow, l0 % ow);
        let (mut c, mut ki, mut kj) = (pc / (kh * kw), pc % (kh * kw) / kw, pc % kw);
        for p in 0..kc {
            // Window (row, col) reads this tap at `base + row·s0·wp + col·s1`.
            let base = (c * hp + ki * g.dilation[0]) * wp + kj * g.dilation[1];
            let out = &mut dst[p * tap_stride..][..count];
            let (mut row, mut col, mut done) = (row0, col0, 0);
            while done < count {
                let run = (ow - col).min(count - done);
                let out = &mut out[done..done + run];
                let from = base + row * g.stride[0] * wp + col * g.stride[1];
                if g.stride[1] == 1 {
                    copy::row(out, &x[from..from + run]);
                } else {
                    let taps = (from..).step_by(g.stride[1]);
                    out.iter_mut().zip(taps).for_each(|(v, i)| *v = x[i]);
                }
                (row, col, done) = (row + 1, 0, done + run);
            }
            kj += 1;
            if kj == kw {
                (ki, kj) = (ki + 1, 0);
                if ki == kh {
                    (c, ki) = (c + 1, 0);
                }
            }
        }
    }
}

/// The columns themselves, `[cg · kh · kw, OH · OW]`, the transpose of
/// [`Windows`]: the weights' gradient `cols @ gᵀ` reads them as `a`. A
/// panel of taps is packed from the padded planes a run of positions at a
/// time: the taps' runs written out (as [`Windows`] writes them, into a
/// block that stays in L1), then interleaved as a matrix's rows are. No
/// columns unfolded into a buffer of `k · l` elements and read back.
pub(crate) struct Columns<'a, T>(pub(crate) Windows<'a, T>);

impl<T: Float> gemm::Panels<T> for Columns<'_, T> {
    fn rows(&self) -> usize {
        self.0.g.k
    }

    fn cols(&self) -> usize {
        self.0.g.l
    }

    fn pack<K: gemm::Micro<T>, const R: usize>(&self, pc: usize, kc: usize, first_panel: usize, packed: &mut [T]) {
        /// Positions written out at a time: `R` taps of them fill 12 KiB
        /// of `f32` for the widest tile.
        const RUN: usize = 256;
        // A layout other than the plain one (bf16 pairs) is packed whole.
        let step = if K::PLAIN { RUN.min(kc) } else { kc };
        for (index, out) in packed.chunks_exact_mut(R * K::depth(kc)).enumerate() {
            let t0 = (first_panel + index) * R;
            let taps = R.min(self.0.g.k - t0);
            T::with_scratch(taps * step, |rows| {
                for p0 in (0..kc).step_by(step.max(1)) {
                    let len = step.min(kc - p0);
                    let rows = &mut rows[..taps * len];
                    self.0.write(t0, taps, pc + p0, len, rows, len);
                    let out = if K::PLAIN { &mut out[p0 * R..(p0 + len) * R] } else { &mut *out };
                    K::pack::<R>(MatRef::row_major(rows, taps, len), 0, len, 0, out);
                }
            });
        }
    }
}

/// Writes one image's group of channels (`x` from its first channel) into
/// `padded` with the convolution's padding around each plane: `cg` planes
/// of [`Geometry::padded`], zeros in the border.
fn pad_planes<T: Float>(g: &Geometry, x: &[T], padded: &mut [T]) {
    let [hp, wp] = g.padded();
    let [top, left] = g.padding;
    for (plane, out) in x.chunks_exact(g.h * g.w).take(g.cg).zip(padded.chunks_exact_mut(hp * wp)) {
        out[..top * wp].fill(T::zero());
        out[(top + g.h) * wp..].fill(T::zero());
        for (line, out) in plane.chunks_exact(g.w).zip(out[top * wp..].chunks_exact_mut(wp)) {
            out[..left].fill(T::zero());
            out[left..left + g.w].copy_from_slice(line);
            out[left + g.w..].fill(T::zero());
        }
    }
}

impl<T: Float> gemm::Panels<T> for Windows<'_, T> {
    fn rows(&self) -> usize {
        self.g.l
    }

    fn cols(&self) -> usize {
        self.g.k
    }

    fn pack<K: gemm::Micro<T>, const R: usize>(&self, pc: usize, kc: usize, first_panel: usize, packed: &mut [T]) {
        let depth = K::depth(kc);
        for (index, out) in packed.chunks_exact_mut(R * depth).enumerate() {
            let l0 = (first_panel + index) * R;
            let count = R.min(self.g.l - l0);
            if K::PLAIN {
                // The panel holds, for each tap, its `R` positions: what
                // `write` writes with a tap stride of `R`.
                if count < R {
                    out.fill(T::zero());
                }
                self.write(pc, kc, l0, count, out, R);
            } else {
                // Another layout (bf16 pairs): the panel's windows written
                // out (tap by tap, as above), then packed as a matrix.
                T::with_scratch(count * kc, |rows| {
                    self.write(pc, kc, l0, count, rows, count);
                    let rows = MatRef::row_major(&*rows, kc, count).t();
                    K::pack::<R>(rows, 0, kc, 0, out);
                });
            }
        }
    }
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
                let span = inside(ow, kj, g.stride[1], g.padding[1], g.dilation[1], g.w);
                for (i, out_row) in row.chunks_exact_mut(ow.max(1)).take(oh).enumerate() {
                    let ih = source(i, ki, g.stride[0], g.padding[0], g.dilation[0], g.h);
                    let Some(ih) = ih.filter(|_| !span.is_empty()) else {
                        out_row.fill(T::zero());
                        continue;
                    };
                    let line = &plane[ih * g.w..(ih + 1) * g.w];
                    let first = first_source(&span, kj, g.stride[1], g.padding[1], g.dilation[1]);
                    out_row[..span.start].fill(T::zero());
                    out_row[span.end..].fill(T::zero());
                    if g.stride[1] == 1 {
                        out_row[span.clone()].copy_from_slice(&line[first..first + span.len()]);
                    } else {
                        let taps = (first..).step_by(g.stride[1]);
                        out_row[span.clone()].iter_mut().zip(taps).for_each(|(v, iw)| *v = line[iw]);
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
                let span = inside(ow, kj, g.stride[1], g.padding[1], g.dilation[1], g.w);
                if span.is_empty() {
                    continue;
                }
                let first = first_source(&span, kj, g.stride[1], g.padding[1], g.dilation[1]);
                for (i, in_row) in row.chunks_exact(ow.max(1)).take(oh).enumerate() {
                    let Some(ih) = source(i, ki, g.stride[0], g.padding[0], g.dilation[0], g.h) else { continue };
                    let line = &mut plane[ih * g.w..(ih + 1) * g.w];
                    let from = &in_row[span.clone()];
                    if g.stride[1] == 1 {
                        // Adjacent taps: a loop over two slices, which the
                        // compiler vectorises (through `step_by` it stayed
                        // one bounds-checked scalar add per element).
                        let to = &mut line[first..first + from.len()];
                        to.iter_mut().zip(from).for_each(|(x, &v)| *x += v);
                    } else {
                        let taps = (first..).step_by(g.stride[1]);
                        from.iter().zip(taps).for_each(|(&v, iw)| line[iw] += v);
                    }
                }
            }
        }
    }
}

/// [`col2im`] for a stride of 1 along the rows, into `x` (written, not
/// added to) through `padded`, planes with the padding around them (as
/// [`pad_planes`] lays them out): there every tap of a row of windows is
/// one whole run of `OW` elements, with no edge to clip, added as whole
/// vectors (clipped runs one short of a vector's multiple left a scalar
/// tail on two of every three taps of a 3 × 3 kernel). Each element gets
/// the same additions in the same order as in `col2im`, from zero.
fn col2im_padded<T: Float>(g: &Geometry, cols: &[T], padded: &mut [T], x: &mut [T]) {
    debug_assert_eq!(g.stride[1], 1);
    padded.fill(T::zero());
    for (tap, row) in cols.chunks_exact(g.l.max(1)).enumerate().take(g.k) {
        fold_tap(g, padded, tap, row);
    }
    // Every element of `x` is written, even with no columns to fold.
    unpad(g, padded, x);
}

/// Adds row `tap` of the columns' gradient (channel, kernel row, kernel
/// column, in that order of nesting) onto the padded planes: one whole
/// run of `OW` elements for each row of windows.
fn fold_tap<T: Float>(g: &Geometry, padded: &mut [T], tap: usize, row: &[T]) {
    let ([kh, kw], [oh, ow], [hp, wp]) = (g.kernel, g.out, g.padded());
    let (c, ki, kj) = (tap / (kh * kw), tap / kw % kh, tap % kw);
    let plane = &mut padded[c * hp * wp..(c + 1) * hp * wp];
    for (i, in_row) in row.chunks_exact(ow.max(1)).take(oh).enumerate() {
        let start = (i * g.stride[0] + ki * g.dilation[0]) * wp + kj * g.dilation[1];
        let to = &mut plane[start..start + ow];
        to.iter_mut().zip(in_row).for_each(|(x, &v)| *x += v);
    }
}

/// The interior of the padded planes `padded` (as [`pad_planes`] lays them
/// out) written into the image `x`.
fn unpad<T: Float>(g: &Geometry, padded: &[T], x: &mut [T]) {
    let [_, wp] = g.padded();
    let [top, left] = g.padding;
    let plane_len = g.padded().iter().product::<usize>();
    for (plane, out) in padded.chunks_exact(plane_len.max(1)).zip(x.chunks_exact_mut((g.h * g.w).max(1))).take(g.cg) {
        for (line, out) in plane[top * wp..].chunks_exact(wp.max(1)).zip(out.chunks_exact_mut(g.w.max(1))) {
            out.copy_from_slice(&line[left..left + g.w]);
        }
    }
}

/// The columns' gradient of a convolution with a stride of 1 along the
/// rows, folded onto padded planes as the product `wᵀ @ g` hands its tiles
/// over ([`gemm::gemm_into`]): a band of whole rows of the columns (taps)
/// at a time, held in `band` (`MR × l`) until its last tile comes, then
/// folded tap after tap as [`col2im_padded`] folds them (the same bits),
/// while it is still in cache; the whole columns are never written.
struct Fold<'a, T> {
    g: &'a Geometry,
    planes: &'a mut [T],
    band: &'a mut [T],
}

impl<T: Float> gemm::Tiles<T> for Fold<'_, T> {
    fn take<const MR: usize, const NR: usize>(
        &mut self,
        tile: &[[T; NR]; MR],
        i0: usize,
        j0: usize,
        rows: usize,
        cols: usize,
    ) {
        let l = self.g.l;
        for (band_row, values) in self.band.chunks_exact_mut(l).zip(tile).take(rows) {
            // A whole row of the tile moves as an array (by `memmove`, a
            // call each 32 values, it was 3% of W8's step).
            let (to, from) = (&mut band_row[j0..j0 + cols], &values[..cols]);
            if !copy::as_array::<T, NR>(to, from) {
                to.copy_from_slice(from);
            }
        }
        if j0 + cols == l {
            for (tap, row) in (i0..).zip(self.band.chunks_exact(l)).take(rows) {
                fold_tap(self.g, self.planes, tap, row);
            }
        }
    }
}

/// The images of a convolution cut into chunks that may run on different
/// threads, each with its own columns and packing scratch. The cut depends
/// on the sizes alone, never on the thread count, so that the chunks'
/// partial sums of the weights' gradient, and so every bit of every
/// result, are the same on one thread or many.
struct ImageChunks {
    /// The chunks scratch is made for: at most [`MAX_CHUNKS`], and at most
    /// [`MAX_COLUMNS`] elements of columns between them.
    count: usize,
    /// Images per chunk.
    images: usize,
    /// The chunks that hold images, at most `count`.
    used: usize,
    n: usize,
    parallel: bool,
}

/// Enough chunks to keep 8 threads busy.
const MAX_CHUNKS: usize = 8;

/// The column buffers of all chunks together: 64 MiB of f32.
const MAX_COLUMNS: usize = 1 << 24;

impl ImageChunks {
    fn new(g: &Geometry) -> ImageChunks {
        let count = g.n.min(MAX_CHUNKS).min(MAX_COLUMNS / g.k.saturating_mul(g.l).max(1)).max(1);
        let images = g.n.div_ceil(count).max(1);
        let used = g.n.div_ceil(images);
        // One product's multiply-adds: the forward's, and each backward's.
        let work = [g.n, g.o, g.k, g.l].iter().fold(1usize, |w, &d| w.saturating_mul(d));
        let parallel = used > 1 && work >= gemm::MIN_PARALLEL_FLOPS && parallel::num_threads() > 1;
        ImageChunks { count, images, used, n: g.n, parallel }
    }

    /// The scratch of all chunks, `per_chunk` elements each (at least one,
    /// so that every chunk gets its slice).
    fn scratch_len(&self, per_chunk: usize) -> usize {
        self.count * per_chunk.max(1)
    }

    /// `f(images, block, scratch)` for each chunk: its range of images, its
    /// `block_len` elements of `out` (its images' outputs, or its partial
    /// sum) and its share of `scratch`, on the pool when worth it.
    fn each<T: Float>(
        &self,
        out: &mut [T],
        block_len: usize,
        scratch: &mut [T],
        f: impl Fn(Range<usize>, &mut [T], &mut [T]) + Sync,
    ) {
        if out.is_empty() || self.n == 0 {
            return;
        }
        let share = scratch.len() / self.count;
        // With two chunks or more a thread, the chunks keep every thread
        // busy: each chunk's products run on its own thread, not shared
        // out again (W8's step ran 4% faster on two threads).
        let alone = self.parallel && self.used >= 2 * parallel::num_threads();
        let task = |(chunk, (block, scratch)): (usize, (&mut [T], &mut [T]))| {
            let images = chunk * self.images..((chunk + 1) * self.images).min(self.n);
            if alone { parallel::alone(|| f(images, block, scratch)) } else { f(images, block, scratch) }
        };
        if self.parallel {
            parallel::run(true, || {
                out.par_chunks_mut(block_len).zip(scratch.par_chunks_mut(share)).enumerate().for_each(task)
            });
        } else {
            out.chunks_mut(block_len).zip(scratch.chunks_mut(share)).enumerate().for_each(task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::bf16::Emulated;
    use crate::gemm::{Fma, Micro, Panels};

    /// Whether `a` and `b` pack the same bits into panels of `R` rows from
    /// `first_panel` over columns `pc..pc + kc` (three panels' room) in
    /// `K`'s layout.
    fn same_panels<T: Float, K: Micro<T>, const R: usize>(
        a: &impl Panels<T>,
        b: &impl Panels<T>,
        pc: usize,
        kc: usize,
        first_panel: usize,
    ) -> bool {
        let panels = a.rows().div_ceil(R).saturating_sub(first_panel).min(3);
        let packed = |x: &dyn Fn(&mut [T])| {
            let mut out = vec![T::nan(); panels * R * K::depth(kc)];
            x(&mut out);
            out
        };
        let (pa, pb) = (
            packed(&|out| a.pack::<K, R>(pc, kc, first_panel, out)),
            packed(&|out| b.pack::<K, R>(pc, kc, first_panel, out)),
        );
        let bits = |v: &T| v.to_f64().map(f64::to_bits);
        pa.iter().zip(&pb).all(|(a, b)| bits(a) == bits(b))
    }

    /// The geometries the packing and folding tests run over (`x`, the
    /// weights, stride, padding, dilation, groups): rows of windows
    /// narrower and wider than a panel, strides along either dim,
    /// dilations, paddings, groups, a kernel as large as the padded image,
    /// a 1 × 1 kernel along a long row.
    fn geometries() -> Vec<(String, Geometry)> {
        type Case = ([usize; 4], [usize; 4], [usize; 2], [usize; 2], [usize; 2], usize);
        let cases: [Case; 7] = [
            ([1, 3, 7, 9], [4, 3, 3, 3], [1, 1], [1, 1], [1, 1], 1),
            ([1, 2, 32, 32], [2, 2, 3, 3], [1, 1], [1, 1], [1, 1], 1),
            ([1, 4, 9, 40], [4, 2, 3, 2], [2, 1], [0, 2], [1, 1], 2),
            ([1, 2, 11, 13], [2, 2, 3, 3], [3, 2], [2, 1], [2, 3], 1),
            ([1, 2, 11, 13], [2, 2, 3, 3], [3, 1], [2, 1], [2, 3], 1),
            ([1, 1, 5, 5], [1, 1, 5, 5], [1, 1], [2, 2], [1, 1], 1),
            ([1, 1, 1, 70], [1, 1, 1, 1], [1, 1], [0, 0], [1, 1], 1),
        ];
        let spec = |stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2], groups: usize| ConvSpec {
            stride: stride.map(|v| v as u32),
            padding: padding.map(|v| v as u32),
            dilation: dilation.map(|v| v as u32),
            groups: groups as u32,
            precision: Precision::F32,
        };
        cases
            .into_iter()
            .map(|(xs, ws, stride, padding, dilation, groups)| {
                let name = format!("{xs:?} {ws:?} s{stride:?} p{padding:?} d{dilation:?}");
                (name, Geometry::new(&xs, &ws, spec(stride, padding, dilation, groups)))
            })
            .collect()
    }

    /// The windows of every geometry here, packed straight from the padded
    /// planes, are the bits of the unfolded columns packed as a matrix
    /// (`colsᵀ`): the panel widths of every tile, ragged last panels, rows
    /// of windows narrower and wider than a panel, strides, dilations,
    /// paddings, groups, blocks of taps starting mid-kernel; in the plain
    /// layout and in the bf16 pairs (through the windows written out).
    fn windows_pack_as_the_columns<T: Float>() {
        for (name, g) in geometries() {
            let x: Vec<T> = (0..g.n * g.c * g.h * g.w)
                .map(|i| T::from((i * 7919) % 23).expect("small") - T::from(11).expect("11"))
                .collect();
            for group in 0..g.groups {
                let mut cols = vec![T::nan(); g.k * g.l];
                im2col(&g, &x[g.image_group(0, group)..], &mut cols);
                let mut padded = vec![T::nan(); g.cg * g.padded()[0] * g.padded()[1]];
                pad_planes(&g, &x[g.image_group(0, group)..], &mut padded);
                let windows = Windows { g: &g, x: &padded };
                let columns = MatRef::row_major(&cols, g.k, g.l).t();
                let blocks = [(0, g.k), (1, g.k - 1), (g.k / 2, g.k - g.k / 2)];
                for (pc, kc) in blocks.into_iter().filter(|&(_, kc)| kc > 0) {
                    for first in [0, 1] {
                        let case = format!("{name} group {group}, taps {pc}+{kc}, panel {first}");
                        assert!(same_panels::<T, Fma, 32>(&windows, &columns, pc, kc, first), "{case}, 32");
                        assert!(same_panels::<T, Fma, 16>(&windows, &columns, pc, kc, first), "{case}, 16");
                        assert!(same_panels::<T, Fma, 8>(&windows, &columns, pc, kc, first), "{case}, 8");
                    }
                }
                // The columns as `a` (the weights' gradient): panels of taps
                // over blocks of positions, longer and shorter than a run.
                let (unfolded, packed) = (MatRef::row_major(&cols, g.k, g.l), Columns(windows));
                let blocks = [(0, g.l), (1, g.l - 1), (g.l / 2, g.l - g.l / 2), (3, g.l.min(300) - 3)];
                for (pc, kc) in blocks.into_iter().filter(|&(_, kc)| kc > 0) {
                    for first in [0, 1] {
                        let case = format!("{name} columns, group {group}, positions {pc}+{kc}, panel {first}");
                        assert!(same_panels::<T, Fma, 12>(&packed, &unfolded, pc, kc, first), "{case}, 12");
                        assert!(same_panels::<T, Fma, 6>(&packed, &unfolded, pc, kc, first), "{case}, 6");
                        assert!(same_panels::<T, Fma, 4>(&packed, &unfolded, pc, kc, first), "{case}, 4");
                    }
                }
            }
        }
    }

    #[test]
    fn f32_windows_pack_as_the_columns() {
        windows_pack_as_the_columns::<f32>();
    }

    #[test]
    fn f64_windows_pack_as_the_columns() {
        windows_pack_as_the_columns::<f64>();
    }

    /// Folding columns onto the image through padded planes gives the bits
    /// of folding them straight on, for every geometry with a stride of 1
    /// along the rows: paddings, dilations, a row stride, groups, a kernel
    /// as large as the padded image.
    #[test]
    fn columns_fold_through_padded_planes_as_straight_onto_the_image() {
        for (name, g) in geometries().into_iter().filter(|(_, g)| g.stride[1] == 1) {
            let len = g.padded_len().expect("planes no larger than the columns");
            let cols: Vec<f64> = (0..g.k * g.l).map(|i| ((i * 7919) % 23) as f64 * 0.37 - 4.1).collect();
            let (mut straight, mut folded) = (vec![0.0; g.cg * g.h * g.w], vec![f64::NAN; g.cg * g.h * g.w]);
            col2im(&g, &cols, &mut straight);
            col2im_padded(&g, &cols, &mut vec![f64::NAN; len], &mut folded);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&straight), bits(&folded), "{name}");
        }
    }

    /// The columns' gradient `wᵀ @ g` folded tile by tile as the product
    /// hands its tiles over gives the bits of the columns written out and
    /// folded through the padded planes, for every geometry with a stride
    /// of 1 along the rows and a training step's (taps and positions over
    /// many tiles, ragged last ones), on values whose sums round.
    fn tiles_fold_as_the_columns<T: Float>() {
        let spec = ConvSpec { stride: [1, 1], padding: [1, 1], dilation: [1, 1], groups: 1, precision: Precision::F32 };
        let wide = ("a training step's".to_string(), Geometry::new(&[1, 16, 30, 33], &[40, 16, 3, 3], spec));
        for (name, g) in geometries().into_iter().chain([wide]).filter(|(_, g)| g.stride[1] == 1) {
            let len = g.padded_len().expect("planes no larger than the columns");
            let mut rng = crate::Rng::new(5);
            let w: Vec<T> = (0..g.og * g.k).map(|_| T::from_f64(rng.normal())).collect();
            let grad: Vec<T> = (0..g.og * g.l).map(|_| T::from_f64(rng.normal())).collect();
            let (w, grad) = (MatRef::row_major(&w, g.og, g.k), MatRef::row_major(&grad, g.og, g.l));
            let mut scratch = vec![T::zero(); gemm::scratch_len::<T>(g.k, g.og, g.l)];
            let (mut written, mut folded) = (vec![T::nan(); g.cg * g.h * g.w], vec![T::nan(); g.cg * g.h * g.w]);
            let mut cols = vec![T::nan(); g.k * g.l];
            gemm::gemm(w.t(), grad, &mut cols, false, &mut scratch);
            col2im_padded(&g, &cols, &mut vec![T::nan(); len], &mut written);
            let (mut planes, mut band) = (vec![T::zero(); len], vec![T::nan(); 12 * g.l]);
            gemm::gemm_into(w.t(), grad, &mut Fold { g: &g, planes: &mut planes, band: &mut band }, &mut scratch);
            unpad(&g, &planes, &mut folded);
            let bits = |v: &[T]| v.iter().map(|x| x.to_f64().map(f64::to_bits)).collect::<Vec<_>>();
            assert_eq!(bits(&written), bits(&folded), "{name}");
        }
    }

    #[test]
    fn f32_tiles_fold_as_the_columns() {
        tiles_fold_as_the_columns::<f32>();
    }

    #[test]
    fn f64_tiles_fold_as_the_columns() {
        tiles_fold_as_the_columns::<f64>();
    }

    /// In bf16 pairs (another layout than the plain one), the windows are
    /// written out and packed: the same words as the columns'.
    #[test]
    fn windows_pack_bf16_pairs_as_the_columns() {
        let spec =
            ConvSpec { stride: [2, 1], padding: [1, 2], dilation: [1, 2], groups: 1, precision: Precision::Bf16 };
        let (xs, ws) = ([1, 3, 9, 21], [2, 3, 3, 3]);
        let g = Geometry::new(&xs, &ws, spec);
        let x: Vec<f32> = (0..xs.iter().product::<usize>()).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut cols = vec![f32::NAN; g.k * g.l];
        im2col(&g, &x, &mut cols);
        let mut padded = vec![f32::NAN; g.cg * g.padded()[0] * g.padded()[1]];
        pad_planes(&g, &x, &mut padded);
        let windows = Windows { g: &g, x: &padded };
        let columns = MatRef::row_major(&cols, g.k, g.l).t();
        for (pc, kc) in [(0, g.k), (3, g.k - 3)] {
            for first in [0, 1] {
                assert!(
                    same_panels::<f32, Emulated, 32>(&windows, &columns, pc, kc, first),
                    "taps {pc}+{kc}, panel {first}"
                );
            }
        }
        let (unfolded, packed) = (MatRef::row_major(&cols, g.k, g.l), Columns(windows));
        for (pc, kc) in [(0, g.l), (5, g.l - 5)] {
            for first in [0, 1] {
                assert!(
                    same_panels::<f32, Emulated, 12>(&packed, &unfolded, pc, kc, first),
                    "columns, positions {pc}+{kc}, panel {first}"
                );
            }
        }
    }

    /// A convolution's value and gradients, after a larger one on the same
    /// tape (whose scratch it is then given, longer than it asks for) and
    /// on a fresh tape: the same bits.
    #[test]
    fn a_convolution_reads_only_its_part_of_a_longer_scratch() {
        use crate::{Tape, g_conv2d, g_sum};
        use ndarray::ArrayD;
        let values = |shape: &[usize], scale: f32| {
            let flat = (0..shape.iter().product::<usize>()).map(|i| (i as f32 * scale).sin()).collect();
            ArrayD::from_shape_vec(IxDyn(shape), flat).expect("the shape's elements")
        };
        let run = |tape: &mut Tape<f32>, xs: &[usize], ws: &[usize]| {
            let x = tape.param(values(xs, 0.37));
            let w = tape.param(values(ws, 0.91));
            let y = g_conv2d(tape, x, w, None, [1, 1], [1, 1], [1, 1], 1);
            let loss = g_sum(tape, y);
            tape.backward(loss).expect("backward");
            [tape.value(y).to_owned(), tape.grad(x).to_owned(), tape.grad(w).to_owned()]
        };
        let (small_x, small_w) = ([2, 3, 9, 11], [4, 3, 3, 3]);
        let mut shared = Tape::<f32>::new();
        run(&mut shared, &[2, 3, 9, 14], &[4, 3, 3, 3]);
        let after = run(&mut shared, &small_x, &small_w);
        let fresh = run(&mut Tape::new(), &small_x, &small_w);
        for (a, b) in after.iter().zip(&fresh) {
            assert!(a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }
}
