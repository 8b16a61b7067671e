//! A small region run by its compiled kernel: `grad!` writes, beside a
//! region's plan, a kernel that computes the region element by element
//! ([`Kernel`]), the plan's steps as straight-line arithmetic in a single
//! loop over one [`BLOCK`]. The interpreter (`tile.rs`) decodes every
//! step of the plan on every call and runs one loop per step: on a region
//! of a few dozen elements that decoding costs more than the arithmetic.
//! So a region of at most `KERNEL_MAX` (64) elements whose inputs are
//! read flat runs its kernel instead, forward and backward, padded to
//! whole blocks; larger ones are interpreted.
//!
//! The kernel is compiled in the user's crate once for each SIMD level
//! the interpreter's loops run at, AVX-512 and AVX2 on x86-64
//! ([`Compiled`]), and the runtime runs the CPU's: the user's crate is
//! built for SSE2 by default, four `f32` lanes an instruction to
//! AVX-512's sixteen. On an x86-64 CPU without AVX2 (or at
//! `GRAD_SIMD=baseline`) every region is interpreted.
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
/// compiled in the user's crate for each SIMD level the interpreter's
/// loops run at ([`Compiled`]); it reads its region's plan from no
/// table, so it costs a small region less than the interpreter's
/// decoding of each step. At 16 elements (W2) the kernel wins; where the
/// two cross between 64 and the L1 tile has not been measured.
pub(crate) const KERNEL_MAX: usize = 64;

/// The elements a kernel takes in one call: its loop is bounded by this
/// count, so the compiler runs a block in whole vectors (one AVX-512
/// vector of `f32`), with no turn of four vectors to fill first. A loop
/// of unknown length would run 16 elements as two half vectors from its
/// remainder: twice the instructions, and twice the microcode assists
/// when a gradient has decayed into subnormal numbers. The runtime pads a
/// region to whole blocks with zeros and hands the kernel one at a time.
pub const BLOCK: usize = 16;

/// A region's kernel, as `grad!` writes it: the plan's steps as
/// straight-line arithmetic in one loop over a [`BLOCK`], for both
/// directions, on a unit struct the expansion declares. `run` is
/// `#[inline(always)]` there, so that [`kernel`] compiles its body once
/// for each SIMD level ([`Compiled`]), in the user's crate.
pub trait Kernel<T> {
    /// Computes `lanes` (see [`Lanes`]).
    fn run(lanes: Lanes<'_, T>);
}

/// What a [`Kernel`] computes, on one block: every slice holds [`BLOCK`]
/// values, a Rust scalar among the leaves repeated.
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

/// A region's kernel compiled for each SIMD level of this crate's loops
/// (`simd.rs`): on x86-64 with AVX-512 and with AVX2 + FMA, as the
/// interpreter's loops are (the user's crate is built for SSE2 by
/// default, four `f32` lanes an instruction where AVX-512 has sixteen);
/// elsewhere for the target. [`kernel`] makes it; the fields are
/// private, so each holds the version [`kernel`] put there.
pub struct Compiled<T: 'static> {
    #[cfg(not(target_arch = "x86_64"))]
    target: Version<T>,
    #[cfg(target_arch = "x86_64")]
    avx2: Version<T>,
    #[cfg(target_arch = "x86_64")]
    avx512: Version<T>,
}

impl<T> Clone for Compiled<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Compiled<T> {}

/// One version of a kernel: `K::run` compiled with some target features,
/// which the CPU running it must have.
type Version<T> = for<'a> unsafe fn(Lanes<'a, T>);

impl<T> Compiled<T> {
    /// The version for this CPU's [`level`](crate::simd::level), if one
    /// was compiled for it: none on an x86-64 CPU without AVX2, nor with
    /// `GRAD_SIMD=baseline`, where the interpreter runs every region (to
    /// the same bits).
    #[inline]
    pub(super) fn here(self) -> Option<Here<T>> {
        #[cfg(target_arch = "x86_64")]
        let version = match crate::simd::level() {
            crate::simd::Level::Avx512 => self.avx512,
            crate::simd::Level::Avx2 => self.avx2,
            crate::simd::Level::Baseline => return None,
        };
        #[cfg(not(target_arch = "x86_64"))]
        let version = self.target;
        Some(Here(version))
    }
}

/// A kernel's version that this CPU runs: only [`Compiled::here`] makes
/// one, after asking the CPU.
#[derive(Clone, Copy)]
pub(super) struct Here<T: 'static>(Version<T>);

impl<T> Here<T> {
    /// Computes one block.
    #[inline]
    fn run(self, lanes: Lanes<'_, T>) {
        // SAFETY: `Compiled::here` took this version from the field of
        // the level `simd::level()` returned, and `kernel` put there
        // `K::run` compiled with that level's target features (none for
        // `at_target`), which is otherwise safe code; `level()` returns
        // a level only when this CPU reports each of its features, so
        // every instruction compiled into the version exists here.
        #[allow(unsafe_code)]
        unsafe {
            (self.0)(lanes)
        }
    }
}

/// The kernel `K` as [`Region::new`] takes it, compiled for each SIMD
/// level ([`Compiled`]).
pub const fn kernel<T, K: Kernel<T>>() -> Option<Compiled<T>> {
    Some(Compiled {
        #[cfg(not(target_arch = "x86_64"))]
        target: at_target::<T, K>,
        #[cfg(target_arch = "x86_64")]
        avx2: at_avx2::<T, K>,
        #[cfg(target_arch = "x86_64")]
        avx512: at_avx512::<T, K>,
    })
}

/// `K::run` compiled for the target (safe to call; unsafe only to share
/// [`Version`]'s type).
#[cfg(not(target_arch = "x86_64"))]
#[allow(unsafe_code)]
unsafe fn at_target<T, K: Kernel<T>>(lanes: Lanes<'_, T>) {
    K::run(lanes)
}

/// `K::run` compiled with AVX2 and FMA (inlined: `run` is
/// `#[inline(always)]`). Unsafe to call on a CPU without them.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[target_feature(enable = "avx2,fma")]
unsafe fn at_avx2<T, K: Kernel<T>>(lanes: Lanes<'_, T>) {
    K::run(lanes)
}

/// `K::run` compiled with AVX-512 (as [`at_avx2`]).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn at_avx512<T, K: Kernel<T>>(lanes: Lanes<'_, T>) {
    K::run(lanes)
}

/// A region as [`fused`](super::fused) takes it: its plan, and its kernel
/// if `grad!` wrote one. The expansion makes it in an inline `const`, for
/// the tape's type, so the node keeps one reference for both.
pub struct Region<T: 'static> {
    pub(crate) plan: &'static Plan,
    pub(crate) kernel: Option<Compiled<T>>,
}

impl<T> Region<T> {
    /// A region of `plan`, run by `kernel` where it fits one.
    pub const fn new(plan: &'static Plan, kernel: Option<Compiled<T>>) -> Self {
        Region { plan, kernel }
    }
}

/// `kernel`'s version for this CPU when `n` elements over `inputs` run
/// through it: few enough, and every input read flat.
fn fits<T>(kernel: Compiled<T>, inputs: &[Input<'_, T>], n: usize) -> Option<Here<T>> {
    let fits = n > 0 && n <= KERNEL_MAX && inputs.iter().all(|x| is_flat(x.data.len(), n));
    if fits { kernel.here() } else { None }
}

/// Takes `np` elements (`n` padded to a [`BLOCK`]) off the front of `spare`.
fn take<'s, T>(spare: &mut &'s mut [T], np: usize) -> &'s mut [T] {
    let (mine, rest) = std::mem::take(spare).split_at_mut(np);
    *spare = rest;
    mine
}

/// `v` as `np` values: itself when it holds them, else a copy into
/// `spare` (a one-element `v` repeated, a shorter one padded with zeros).
fn lane<'r, 'v: 'r, 's: 'r, T: Float>(v: &'v [T], np: usize, spare: &mut &'s mut [T]) -> &'r [T] {
    if v.len() == np {
        return v;
    }
    let copy = take(spare, np);
    match v {
        [one] => copy.fill(*one),
        _ => {
            copy[..v.len()].copy_from_slice(v);
            copy[v.len()..].fill(T::zero());
        }
    }
    copy
}

/// Each input as `np` values ([`lane`]), in the leaves' order.
fn leaf_lanes<'r, 'v: 'r, 's: 'r, T: Float, const C: usize>(
    inputs: &[Input<'v, T>],
    np: usize,
    spare: &mut &'s mut [T],
) -> [&'r [T]; C] {
    let mut x: [&[T]; C] = [&[]; C];
    for (x, input) in x.iter_mut().zip(inputs) {
        *x = lane(input.data, np, spare);
    }
    x
}

/// Whether every input holds its `np` values already ([`lane`] copies none).
fn all_whole<T>(inputs: &[Input<'_, T>], np: usize) -> bool {
    inputs.iter().all(|x| x.data.len() == np)
}

/// Block `b` of each of `x`.
#[inline]
fn block<'a, T, const C: usize>(x: &[&'a [T]; C], b: usize) -> [&'a [T]; C] {
    x.map(|x| x.get(b * BLOCK..(b + 1) * BLOCK).unwrap_or_default())
}

/// `out = root(inputs)` by `kernel`, when the region fits one
/// ([`KERNEL_MAX`], inputs read flat); `false` (nothing written) if not.
pub(crate) fn forward<T: Float, const C: usize>(
    kernel: Compiled<T>,
    inputs: &[Input<'_, T>],
    params: &[T],
    out: &mut [T],
) -> bool {
    let (n, leaves) = (out.len(), inputs.len());
    let Some(kernel) = fits(kernel, inputs, n) else { return false };
    let np = n.next_multiple_of(BLOCK);
    let mut run = |mut spare: &mut [T]| {
        let x: [&[T]; C] = leaf_lanes(inputs, np, &mut spare);
        let mut padded = if np == n { None } else { Some(take(&mut spare, np)) };
        let blocks = match &mut padded {
            Some(padded) => padded.chunks_exact_mut(BLOCK),
            None => out.chunks_exact_mut(BLOCK),
        };
        for (b, out) in blocks.enumerate() {
            kernel.run(Lanes::Forward { x: &block(&x, b)[..leaves], p: params, out });
        }
        if let Some(padded) = padded {
            out.copy_from_slice(&padded[..n]);
        }
    };
    // The thread's scratch only when a leaf is repeated or the region
    // padded (reaching it costs a small region a tenth of its time), as
    // much as the most [`take`] can ask for: a copy of each leaf and the
    // padded output.
    if np == n && all_whole(inputs, np) {
        run(&mut []);
    } else {
        T::with_scratch((leaves + 1) * np, run);
    }
    true
}

/// Each leaf's gradient by `kernel` into `outs[i]` (empty for a leaf
/// whose gradient is not wanted), from the region's value `y` and its
/// gradient `g`, when the region fits one; `false` (nothing written) if
/// not.
pub(crate) fn backward<T: Float, const C: usize>(
    kernel: Compiled<T>,
    inputs: &[Input<'_, T>],
    params: &[T],
    y: &[T],
    g: &[T],
    outs: &mut [&mut [T]; C],
) -> bool {
    let (n, leaves) = (y.len(), inputs.len());
    if g.len() != n || outs.iter().any(|d| !d.is_empty() && d.len() != n) {
        return false;
    }
    let Some(kernel) = fits(kernel, inputs, n) else { return false };
    let np = n.next_multiple_of(BLOCK);
    let in_place = np == n && all_whole(inputs, np) && outs[..leaves].iter().all(|d| !d.is_empty());
    // A leaf of one element is repeated, and every slice padded to a
    // block; a leaf whose gradient is not wanted still has one computed,
    // into spare lanes, as does every leaf of a padded region.
    let mut run = |mut spare: &mut [T]| {
        let x: [&[T]; C] = leaf_lanes(inputs, np, &mut spare);
        let (y, g) = (lane(y, np, &mut spare), lane(g, np, &mut spare));
        let x = &x;
        let run_blocks = |d: &mut [&mut [T]; C]| {
            for b in 0..np / BLOCK {
                let [y, g] = block(&[y, g], b);
                let mut d = d.each_mut().map(|d| d.get_mut(b * BLOCK..(b + 1) * BLOCK).unwrap_or_default());
                kernel.run(Lanes::Backward { x: &block(x, b)[..leaves], p: params, y, g, d: &mut d[..leaves] });
            }
        };
        let mut d: [&mut [T]; C] = std::array::from_fn(|_| Default::default());
        if np == n {
            for (d, out) in d.iter_mut().zip(outs.iter_mut()).take(leaves) {
                *d = if out.is_empty() { take(&mut spare, np) } else { &mut **out };
            }
            return run_blocks(&mut d);
        }
        for d in d.iter_mut().take(leaves) {
            *d = take(&mut spare, np);
        }
        run_blocks(&mut d);
        for (d, out) in d.iter().zip(outs.iter_mut()) {
            if !out.is_empty() {
                out.copy_from_slice(&d[..n]);
            }
        }
    };
    // As forward: at most a copy of each leaf, of `y` and `g`, and a
    // gradient for each leaf.
    if in_place {
        run(&mut []);
    } else {
        T::with_scratch((2 * leaves + 2) * np, run);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `tanh(a * p) + b`, written as `grad!` writes a kernel: a loop
    /// over at most one block.
    struct Probe;

    impl<T: Float> Kernel<T> for Probe {
        #[inline(always)]
        fn run(lanes: Lanes<'_, T>) {
            match lanes {
                Lanes::Forward { x: &[a, b], p: &[p], out } => {
                    let n = out.len().min(BLOCK).min(a.len()).min(b.len());
                    for j in 0..n {
                        out[j] = tanh(a[j] * p) + b[j];
                    }
                }
                Lanes::Backward { x: &[a, _], p: &[p], y: _, g, d: [da, db] } => {
                    let n = g.len().min(BLOCK).min(a.len()).min(da.len()).min(db.len());
                    for j in 0..n {
                        let s0 = a[j] * p;
                        da[j] = g[j] * tanh_df(s0, tanh(s0)) * p;
                        db[j] = g[j];
                    }
                }
                _ => {}
            }
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|v| v.to_bits()).collect()
    }

    /// A block's inputs, its gradient partly subnormal.
    fn block_inputs(seed: f32) -> [[f32; BLOCK]; 3] {
        let a = std::array::from_fn(|j| (j as f32 * 0.37 + seed).sin() * 3.0);
        let b = std::array::from_fn(|j| (j as f32 * 0.11 - seed).cos());
        let g = std::array::from_fn(|j| if j % 3 == 0 { f32::MIN_POSITIVE * 0.25 * j as f32 } else { 1.0 - j as f32 });
        [a, b, g]
    }

    /// One block through `version`, forward and backward.
    fn through(version: impl Fn(Lanes<'_, f32>), [a, b, g]: &[[f32; BLOCK]; 3]) -> Vec<u32> {
        let (mut out, mut da, mut db) = ([0.0; BLOCK], [0.0; BLOCK], [0.0; BLOCK]);
        version(Lanes::Forward { x: &[a, b], p: &[0.7], out: &mut out });
        version(Lanes::Backward { x: &[a, b], p: &[0.7], y: &out, g, d: &mut [&mut da, &mut db] });
        [out, da, db].iter().flat_map(|v| bits(v)).collect()
    }

    #[test]
    fn every_compiled_version_computes_the_kernels_bits() {
        let Some(compiled) = kernel::<f32, Probe>() else { panic!("a kernel is compiled") };
        for seed in [0.0, 1.5, -4.0] {
            let inputs = block_inputs(seed);
            let direct = through(Probe::run, &inputs);
            #[cfg(target_arch = "x86_64")]
            {
                if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU reports AVX2 and FMA, all `at_avx2` enables.
                    #[allow(unsafe_code)]
                    let at_avx2 = through(|l| unsafe { (compiled.avx2)(l) }, &inputs);
                    assert_eq!(at_avx2, direct, "AVX2, seed {seed}");
                }
                if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") {
                    // SAFETY: the CPU reports AVX-512F and VL, and with
                    // them AVX2 and FMA: all `at_avx512` enables.
                    #[allow(unsafe_code)]
                    let at_avx512 = through(|l| unsafe { (compiled.avx512)(l) }, &inputs);
                    assert_eq!(at_avx512, direct, "AVX-512, seed {seed}");
                }
            }
            if let Some(here) = compiled.here() {
                assert_eq!(through(|l| here.run(l), &inputs), direct, "the version dispatched, seed {seed}");
            }
        }
    }

    /// Regions of 1 to 64 elements, a leaf repeated or not, a gradient
    /// wanted or not: padded to whole blocks, run block by block, they
    /// give each element's own arithmetic.
    #[test]
    fn a_region_is_padded_and_run_in_blocks() {
        let Some(compiled) = kernel::<f32, Probe>() else { panic!("a kernel is compiled") };
        let runs = compiled.here().is_some();
        for n in 1..=KERNEL_MAX {
            let a: Vec<f32> = (0..n).map(|j| (j as f32 * 0.61).sin() * 2.0).collect();
            let g: Vec<f32> = (0..n).map(|j| (j as f32 * 0.23).cos()).collect();
            for b in [(0..n).map(|j| j as f32 * 0.01).collect::<Vec<f32>>(), vec![0.25]] {
                let b_at = |j: usize| if b.len() == 1 { b[0] } else { b[j] };
                let inputs = [Input { data: &a, shape: &[] }, Input { data: &b, shape: &[] }];
                let mut out = vec![0.0; n];
                assert_eq!(forward::<f32, 2>(compiled, &inputs, &[0.7], &mut out), runs, "n = {n}");
                if !runs {
                    continue;
                }
                let expected: Vec<f32> = (0..n).map(|j| tanh(a[j] * 0.7) + b_at(j)).collect();
                assert_eq!(bits(&out), bits(&expected), "forward, n = {n}, b of {}", b.len());
                for wanted_b in [true, false] {
                    let (mut da, mut db) = (vec![f32::NAN; n], vec![f32::NAN; if wanted_b { n } else { 0 }]);
                    let mut outs: [&mut [f32]; 2] = [&mut da, &mut db];
                    assert!(backward::<f32, 2>(compiled, &inputs, &[0.7], &out, &g, &mut outs), "n = {n}");
                    let expected: Vec<f32> =
                        (0..n).map(|j| g[j] * tanh_df(a[j] * 0.7, tanh(a[j] * 0.7)) * 0.7).collect();
                    assert_eq!(bits(&da), bits(&expected), "backward, n = {n}, b of {}", b.len());
                    assert!(!wanted_b || bits(&db) == bits(&g), "n = {n}");
                }
            }
        }
        let empty = [Input { data: &[][..], shape: &[] }, Input { data: &[][..], shape: &[] }];
        assert!(!forward::<f32, 2>(compiled, &empty, &[0.7], &mut []), "no elements: not a kernel's");
        let big = vec![1.0; KERNEL_MAX + 1];
        let inputs = [Input { data: &big, shape: &[] }, Input { data: &big, shape: &[] }];
        assert!(!forward::<f32, 2>(compiled, &inputs, &[0.7], &mut big.clone()), "beyond a kernel's size");
    }
}
