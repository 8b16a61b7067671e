//! A region run by its compiled kernel: `grad!` writes, beside a region's
//! plan, one short function that computes the region element by element
//! ([`Kernel`]), the plan's steps as straight-line arithmetic in a single
//! loop, compiled twice: for the user's target (SSE2 on x86-64) and with
//! AVX-512 ([`WideKernel`]). The interpreter (`tile.rs`) decodes every
//! step of the plan on every call and runs one loop per step, at the
//! CPU's widest SIMD level, through tiles in the L1 cache; a kernel keeps
//! the whole chain in registers. So a region that does not end in a
//! folded sum runs:
//!
//! - its AVX-512 kernel, at any size, on a CPU that runs the runtime's
//!   AVX-512 code (`simd::level`);
//! - else its baseline kernel when it has at most `KERNEL_MAX` (64)
//!   elements, where the interpreter's decoding costs more than four lanes
//!   of arithmetic;
//! - else the interpreter.
//!
//! A kernel reads its inputs flat (each has the region's shape, or one
//! element) or, where one is broadcast, one row at a time along the last
//! axis (`loops.rs`), when the rows are long enough that padding them to
//! whole blocks (`WIDE_BLOCK`) at most doubles the work.
//!
//! The kernel applies the scalar functions below, which are the
//! interpreter's own (`Elementwise`), in the interpreter's order: each
//! step's value, then from the root down each step's gradient handed to
//! its operands, an input's contributions added in the order the
//! interpreter adds them. So it gives the interpreter's bits at every
//! level, and the unfused ops' wherever the interpreter does
//! (`tests/fused_random` compares all three).

use super::loops::{Input, is_flat};
use super::plan::{Func, Plan, reads_output};
use super::tile::Source;
use crate::Float;
use crate::ops::unary::{self as u, Elementwise};
use crate::simd::{self, Level};

/// The most elements a region runs through its baseline kernel. That one
/// is compiled in the user's crate at the SIMD level the crate is built
/// for (SSE2 by default on x86-64), and the interpreter's loops at the
/// CPU's widest, so larger regions stay with the interpreter when there
/// is no AVX-512 kernel to run. At 16 elements (W2) the kernel wins, at
/// SSE2 as at AVX-512; where the two cross between 64 and the L1 tile has
/// not been measured.
pub(crate) const KERNEL_MAX: usize = 64;

/// The AVX-512 kernel computes whole blocks of this many elements: the
/// runtime pads the lanes it hands it to a multiple, and the kernel's loop
/// counts in multiples ([`count`]). The compiler's vector loop takes four
/// 64-byte vectors a turn (64 `f32`, 32 `f64`); on a count it knows to be
/// a multiple of its turn it compiles no loops for a remainder, which
/// halves what the kernel costs to build, and a short region runs in
/// full-width vectors, which take fewer instructions (and fewer microcode
/// assists on a denormal number, see benches/README) than the half-width
/// ones of a remainder.
pub(crate) const WIDE_BLOCK: usize = 64;

/// The elements a kernel's loop runs over, of the `n` its slices hold:
/// whole blocks of `WIDE_BLOCK` (64) in the AVX-512 version (`WIDE`),
/// else all.
#[inline(always)]
pub const fn count<const WIDE: bool>(n: usize) -> usize {
    if WIDE { n / WIDE_BLOCK * WIDE_BLOCK } else { n }
}

/// A region's compiled kernel, as `grad!` writes it: one function for
/// both directions.
pub type Kernel<T> = for<'a> fn(Lanes<'a, T>);

/// The same kernel compiled with the target features of the runtime's
/// AVX-512 level (`avx512f,avx512vl,avx2,fma`). It is an `unsafe fn`
/// because those instructions must exist on the CPU it runs on, its only
/// condition: the runtime calls it only after checking that they do.
pub type WideKernel<T> = for<'a> unsafe fn(Lanes<'a, T>);

/// What a [`Kernel`] computes, on `n` elements: every slice holds `n`
/// values, a Rust scalar among the leaves repeated `n` times.
pub enum Lanes<'a, T> {
    /// `out[j] = root(x[..][j])`.
    Forward {
        /// The region's leaves, in the plan's order.
        x: &'a [&'a [T]],
        /// The region's scalar parameters, in the plan's order.
        p: &'a [T],
        /// The region's value.
        out: &'a mut [T],
    },
    /// Each leaf's gradient into `d[i]` (assigned), from the region's
    /// value `y` and its gradient `g`.
    Backward {
        /// The region's leaves, in the plan's order.
        x: &'a [&'a [T]],
        /// The region's scalar parameters, in the plan's order.
        p: &'a [T],
        /// The region's value.
        y: &'a [T],
        /// The gradient of the region's value.
        g: &'a [T],
        /// Each leaf's gradient.
        d: &'a mut [&'a mut [T]],
    },
}

/// A region as [`fused`](super::fused) takes it: its plan, and its
/// kernels if `grad!` wrote them. The expansion makes it in an inline
/// `const`, for the tape's type, so the node keeps one reference for all.
pub struct Region<T: 'static> {
    pub(crate) plan: &'static Plan,
    pub(crate) kernel: Option<Kernel<T>>,
    pub(crate) wide: Option<WideKernel<T>>,
}

impl<T> Region<T> {
    /// A region of `plan`, run by `kernel` or `wide` where one fits.
    ///
    /// `wide` must be a kernel that `grad!` wrote, or a function like it:
    /// one whose only safety condition is that the CPU has the target
    /// features of [`WideKernel`]. The runtime calls it on such CPUs only.
    pub const fn new(plan: &'static Plan, kernel: Option<Kernel<T>>, wide: Option<WideKernel<T>>) -> Self {
        Region { plan, kernel, wide }
    }
}

/// A region's kernel as [`Region::new`] takes it: a generic kernel
/// function coerces here to the tape's type.
pub const fn kernel<T>(k: Kernel<T>) -> Option<Kernel<T>> {
    Some(k)
}

/// A region's AVX-512 kernel as [`Region::new`] takes it (a function
/// with target features coerces to an `unsafe fn` pointer).
pub const fn wide<T>(k: WideKernel<T>) -> Option<WideKernel<T>> {
    Some(k)
}

/// The kernel a region runs here, if any (see the module docs): made only
/// by [`Compiled::pick`], so that a wide kernel is only ever held, and
/// run, on a CPU that has its instructions.
#[derive(Clone, Copy)]
pub(crate) struct Compiled<T: 'static>(Kind<T>);

#[derive(Clone, Copy)]
enum Kind<T: 'static> {
    Baseline(Kernel<T>),
    Wide(WideKernel<T>),
}

impl<T: Float> Compiled<T> {
    /// The kernel of `region` for `n` elements: its AVX-512 one where the
    /// runtime runs AVX-512 code, else its baseline one on at most
    /// [`KERNEL_MAX`] elements, else none.
    #[inline]
    pub(crate) fn pick(region: &Region<T>, n: usize) -> Option<Self> {
        if let Some(wide) = region.wide
            && simd::level() == Level::Avx512
        {
            return Some(Compiled(Kind::Wide(wide)));
        }
        region.kernel.filter(|_| n <= KERNEL_MAX).map(|k| Compiled(Kind::Baseline(k)))
    }

    #[inline]
    fn run(self, lanes: Lanes<'_, T>) {
        match self.0 {
            Kind::Baseline(k) => k(lanes),
            // SAFETY: a `Kind::Wide` is made only by `pick`, after
            // `simd::level()` returned `Avx512`, which it does only when the
            // CPU reports AVX-512F and AVX-512VL (and with them AVX2 and
            // FMA): the target features of `WideKernel`, whose kernels
            // (`Region::new`'s condition) need nothing else.
            #[allow(unsafe_code)]
            Kind::Wide(k) => unsafe { k(lanes) },
        }
    }

    /// Whether the kernel pays on a region walked in rows of `unit`
    /// elements, a call a row: when padding each row to whole blocks at
    /// most doubles the elements it computes.
    #[inline]
    pub(crate) fn pays_on_rows(self, unit: usize) -> bool {
        self.padded(unit) <= 2 * unit
    }

    /// The elements the kernel computes for a piece of `n`: `n`, or for
    /// the AVX-512 kernel whole blocks ([`WIDE_BLOCK`]).
    #[inline]
    fn padded(self, n: usize) -> usize {
        match self.0 {
            Kind::Wide(_) => n.next_multiple_of(WIDE_BLOCK),
            Kind::Baseline(_) => n,
        }
    }
}

/// Whether `inputs` are read flat along `n` elements, as a kernel reads
/// them.
pub(crate) fn flat<T>(inputs: &[Input<'_, T>], n: usize) -> bool {
    inputs.iter().all(|x| is_flat(x.data.len(), n))
}

/// A lane of `m` values from `source` along `n` elements: the slice
/// itself when it holds `m`, else copied into the next of `spare` (a
/// repeated value filled, a shorter slice padded with zeros).
fn lane<'a, T: Float>(source: Source<'a, T>, m: usize, spare: &mut impl Iterator<Item = &'a mut [T]>) -> &'a [T] {
    match source {
        Source::Slice(data) if data.len() == m => data,
        source => {
            let Some(lane) = spare.next() else { return &[] };
            match source {
                Source::Splat(v) => lane.fill(v),
                Source::Slice(data) => {
                    lane[..data.len()].copy_from_slice(data);
                    lane[data.len()..].fill(T::zero());
                }
            }
            lane
        }
    }
}

/// An input as the source of a lane of `m`: a one-element input is
/// repeated (unless `m` is 1).
fn source<'a, T: Copy>(input: &Input<'a, T>, m: usize) -> Source<'a, T> {
    match input.data {
        &[v] if m != 1 => Source::Splat(v),
        data => Source::Slice(data),
    }
}

/// `out = root(inputs)` by `kernel`, every input read flat along `out`.
pub(crate) fn forward<T: Float, const C: usize>(
    kernel: Compiled<T>,
    inputs: &[Input<'_, T>],
    params: &[T],
    out: &mut [T],
) {
    let n = out.len();
    let m = kernel.padded(n);
    let copied = inputs.iter().filter(|x| x.data.len() != m).count() + usize::from(m != n);
    let mut run = |spare: &mut [T]| {
        let mut spare = spare.chunks_exact_mut(m.max(1));
        let mut x: [&[T]; C] = [&[]; C];
        for (x, input) in x.iter_mut().zip(inputs) {
            *x = lane(source(input, m), m, &mut spare);
        }
        let x = &x[..inputs.len()];
        if m == n {
            kernel.run(Lanes::Forward { x, p: params, out });
        } else if let Some(padded) = spare.next() {
            kernel.run(Lanes::Forward { x, p: params, out: &mut *padded });
            out.copy_from_slice(&padded[..n]);
        }
    };
    // The thread's scratch only when a lane is copied: reaching it costs
    // a small region a tenth of its time.
    match copied * m {
        0 => run(&mut []),
        len => T::with_scratch(len, run),
    }
}

/// Each leaf's gradient by `kernel` into `outs[i]` (empty for a leaf
/// whose gradient is not wanted), from the region's value `y` and its
/// gradient `g`, every input read flat along them.
pub(crate) fn backward<T: Float, const C: usize>(
    kernel: Compiled<T>,
    inputs: &[Input<'_, T>],
    params: &[T],
    y: &[T],
    g: &[T],
    outs: &mut [&mut [T]; C],
) {
    let (n, leaves) = (y.len(), inputs.len());
    let m = kernel.padded(n);
    // A leaf of one element is repeated; a leaf whose gradient is not
    // wanted still has one computed, into a spare lane; padded, every
    // lane is copied in, and every gradient computed into a spare lane and
    // copied out.
    let copied_x = inputs.iter().filter(|x| x.data.len() != m).count();
    let copied_yg = if m == n { 0 } else { 2 };
    let copied_d = if m == n { outs[..leaves].iter().filter(|d| d.is_empty()).count() } else { leaves };
    let mut run = |spare: &mut [T]| {
        let (d_spare, spare) = spare.split_at_mut(copied_d * m);
        let mut spare = spare.chunks_exact_mut(m.max(1));
        let mut x: [&[T]; C] = [&[]; C];
        for (x, input) in x.iter_mut().zip(inputs) {
            *x = lane(source(input, m), m, &mut spare);
        }
        let x = &x[..leaves];
        let y = lane(Source::Slice(y), m, &mut spare);
        let g = lane(Source::Slice(g), m, &mut spare);
        let mut d: [&mut [T]; C] = std::array::from_fn(|_| Default::default());
        let mut d_lanes = d_spare.chunks_exact_mut(m.max(1));
        for (d, out) in d.iter_mut().zip(outs.iter_mut()).take(leaves) {
            *d = if out.is_empty() || m != n { d_lanes.next().unwrap_or_default() } else { &mut **out };
        }
        kernel.run(Lanes::Backward { x, p: params, y, g, d: &mut d[..leaves] });
        if m != n {
            for (d, out) in d_spare.chunks_exact(m).zip(outs.iter_mut()).filter(|(_, out)| !out.is_empty()) {
                out.copy_from_slice(&d[..n]);
            }
        }
    };
    match (copied_x + copied_yg + copied_d) * m {
        0 => run(&mut []),
        len => T::with_scratch(len, run),
    }
}

/// Each built-in as a kernel applies it: `name(x, params)` its value and
/// `name_df(x, y, params)` its derivative at input `x` with value `y`,
/// read from the one the unfused rule reads ([`reads_output`]).
macro_rules! builtins {
    ($($name:ident, $df:ident, $func:ident ($($p:ident),*) => $f:expr;)*) => {$(
        #[doc = concat!("`", stringify!($name), "` as the interpreter applies it.")]
        #[inline(always)]
        pub fn $name<T: Float>(x: T $(, $p: T)*) -> T {
            $f.f(x)
        }
        #[doc = concat!("The derivative of `", stringify!($name), "` as the interpreter forms it.")]
        #[inline(always)]
        pub fn $df<T: Float>(x: T, y: T $(, $p: T)*) -> T {
            let at = if reads_output(Func::$func) { y } else { x };
            $f.df(at, at)
        }
    )*};
}

builtins! {
    relu, relu_df, Relu() => u::Relu;
    sigmoid, sigmoid_df, Sigmoid() => u::Sigmoid;
    tanh, tanh_df, Tanh() => u::Tanh;
    exp, exp_df, Exp() => u::Exp;
    log, log_df, Log() => u::Log;
    sqrt, sqrt_df, Sqrt() => u::Sqrt;
    abs, abs_df, Abs() => u::Abs;
    gelu, gelu_df, Gelu() => u::Gelu;
    silu, silu_df, Silu() => u::Silu;
    softplus, softplus_df, Softplus() => u::Softplus;
    pow, pow_df, Pow(p) => u::Pow(p);
    leaky_relu, leaky_relu_df, LeakyRelu(p) => u::LeakyRelu(p);
    clamp, clamp_df, Clamp(p, q) => u::Clamp(p, q);
}

/// `-1`, by which the interpreter multiplies a negation's gradient.
#[inline(always)]
pub fn minus_one<T: Float>() -> T {
    -T::one()
}
