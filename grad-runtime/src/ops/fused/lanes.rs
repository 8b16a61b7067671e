//! A small region run by its compiled kernel: `grad!` writes, beside a
//! region's plan, one short function that computes the region element by
//! element ([`Kernel`]), the plan's steps as straight-line arithmetic in a
//! single loop. The interpreter (`tile.rs`) decodes every step of the
//! plan on every call and runs one loop per step: on a region of a few
//! dozen elements that decoding costs more than the arithmetic. So a
//! region of at most `KERNEL_MAX` (64) elements whose inputs are read flat
//! runs its kernel instead, forward and backward (but for a backward
//! whose gradient holds subnormal numbers: `wider_than_kernel`); larger
//! ones, whose loops the interpreter runs at the CPU's widest SIMD level,
//! are interpreted.
//!
//! The kernel applies the scalar functions below, which are the
//! interpreter's own (`Elementwise`), in the interpreter's order: each
//! step's value, then from the root down each step's gradient handed to
//! its operands, an input's contributions added in the order the
//! interpreter adds them. So it gives the interpreter's bits, and the
//! unfused ops' wherever the interpreter does (`tests/fused_random`
//! compares all three).

use super::loops::{Input, is_flat};
use super::plan::{Func, Plan, reads_output};
use crate::Float;
use crate::ops::unary::{self as u, Elementwise};

/// The most elements a region runs through its kernel. The kernel is
/// compiled in the user's crate, at the SIMD level that crate is built
/// for (SSE2 by default on x86-64), and the interpreter's loops at the
/// CPU's widest, so larger regions stay with the interpreter. At 16
/// elements (W2) the kernel wins, at SSE2 as at AVX-512; where the two
/// cross between 64 and the L1 tile has not been measured.
pub(crate) const KERNEL_MAX: usize = 64;

/// A region's compiled kernel, as `grad!` writes it: one function for
/// both directions.
pub type Kernel<T> = for<'a> fn(Lanes<'a, T>);

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

/// A region as [`fused`](super::fused) takes it: its plan, and its kernel
/// if `grad!` wrote one. The expansion makes it in an inline `const`, for
/// the tape's type, so the node keeps one reference for both.
pub struct Region<T: 'static> {
    pub(crate) plan: &'static Plan,
    pub(crate) kernel: Option<Kernel<T>>,
}

impl<T> Region<T> {
    /// A region of `plan`, run by `kernel` where it fits one.
    pub const fn new(plan: &'static Plan, kernel: Option<Kernel<T>>) -> Self {
        Region { plan, kernel }
    }
}

/// A region's kernel as [`Region::new`] takes it: a generic kernel
/// function coerces here to the tape's type.
pub const fn kernel<T>(k: Kernel<T>) -> Option<Kernel<T>> {
    Some(k)
}

/// Whether `n` elements over `inputs` run through a kernel: few enough,
/// and every input read flat.
fn fits<T>(inputs: &[Input<'_, T>], n: usize) -> bool {
    n > 0 && n <= KERNEL_MAX && inputs.iter().all(|x| is_flat(x.data.len(), n))
}

/// Whether the interpreter's loops run on wider vectors than the kernel,
/// which is compiled for the user's crate's target: the same as this
/// crate's, SSE2 by default on x86-64 (four `f32` lanes), where the
/// interpreter runs at the CPU's widest (sixteen with AVX-512).
///
/// Then a backward whose gradient holds subnormal numbers is interpreted
/// ([`simd::has_subnormal`](crate::simd::has_subnormal)): each
/// instruction that multiplies one takes a microcode assist on Intel
/// CPUs, and the kernel takes four instructions to the interpreter's
/// one. On W2 (Intel Xeon, AVX-512) the kernel spent four fifths of its
/// time in those assists. Both compute the same bits.
fn wider_than_kernel() -> bool {
    crate::simd::level().vector_bytes() > crate::simd::TARGET_VECTOR_BYTES
}

/// The leaves as `n` values each: a one-element leaf (a Rust scalar, or a
/// one-element tensor, whose gradient along the region the caller sums
/// back) repeated into the next `n` of `spare`.
fn leaves<'a, T: Float, const C: usize>(inputs: &[Input<'a, T>], n: usize, spare: &'a mut [T]) -> [&'a [T]; C] {
    let mut x: [&[T]; C] = [&[]; C];
    let mut spare = spare.chunks_exact_mut(n);
    for (x, input) in x.iter_mut().zip(inputs) {
        if input.data.len() == n {
            *x = input.data;
        } else if let (Some(lane), Some(&v)) = (spare.next(), input.data.first()) {
            lane.fill(v);
            *x = lane;
        }
    }
    x
}

/// `out = root(inputs)` by `kernel`, when the region fits one
/// ([`KERNEL_MAX`], inputs read flat); `false` (nothing written) if not.
pub(crate) fn forward<T: Float, const C: usize>(
    kernel: Kernel<T>,
    inputs: &[Input<'_, T>],
    params: &[T],
    out: &mut [T],
) -> bool {
    let n = out.len();
    if !fits(inputs, n) {
        return false;
    }
    let mut run = |spare: &mut [T]| {
        let x = leaves::<T, C>(inputs, n, spare);
        kernel(Lanes::Forward { x: &x[..inputs.len()], p: params, out });
    };
    // The thread's scratch only when a leaf is repeated: reaching it
    // costs a small region a tenth of its time.
    match inputs.iter().filter(|x| x.data.len() != n).count() {
        0 => run(&mut []),
        splats => T::with_scratch(splats * n, run),
    }
    true
}

/// Each leaf's gradient by `kernel` into `outs[i]` (empty for a leaf
/// whose gradient is not wanted), from the region's value `y` and its
/// gradient `g`, when the region fits one; `false` (nothing written) if
/// not.
pub(crate) fn backward<T: Float, const C: usize>(
    kernel: Kernel<T>,
    inputs: &[Input<'_, T>],
    params: &[T],
    y: &[T],
    g: &[T],
    outs: &mut [&mut [T]; C],
) -> bool {
    let (n, leaves_n) = (y.len(), inputs.len());
    if !fits(inputs, n) || g.len() != n || outs.iter().any(|d| !d.is_empty() && d.len() != n) {
        return false;
    }
    if wider_than_kernel() && crate::simd::has_subnormal(g) {
        return false;
    }
    // A leaf of one element is repeated; a leaf whose gradient is not
    // wanted still has one computed, into spare lanes.
    let splats = inputs.iter().filter(|x| x.data.len() != n).count();
    let unwanted = outs[..leaves_n].iter().filter(|d| d.is_empty()).count();
    let mut run = |spare: &mut [T]| {
        let (splat_lanes, d_lanes) = spare.split_at_mut(splats * n);
        let x = leaves::<T, C>(inputs, n, splat_lanes);
        let mut d_lanes = d_lanes.chunks_exact_mut(n);
        let mut d: [&mut [T]; C] = std::array::from_fn(|_| Default::default());
        for (d, out) in d.iter_mut().zip(outs.iter_mut()).take(leaves_n) {
            *d = if out.is_empty() { d_lanes.next().unwrap_or_default() } else { &mut **out };
        }
        kernel(Lanes::Backward { x: &x[..leaves_n], p: params, y, g, d: &mut d[..leaves_n] });
    };
    match (splats + unwanted) * n {
        0 => run(&mut []),
        spare => T::with_scratch(spare, run),
    }
    true
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
