//! Kernels compiled for the widest vector instructions the CPU they run on
//! has. The crate is built for the baseline of its target (SSE2 on x86-64),
//! so one binary runs everywhere; the elementwise loops are plain Rust that
//! the compiler vectorises, and [`multiversion!`] compiles each such loop
//! three times (AVX-512, AVX2 + FMA, baseline), picking one at run time from
//! what the CPU reports. The Rust is the same at every width and lanes are
//! independent (no `mul_add`, and Rust never fuses `a * b + c` on its own),
//! so every version computes the same bits.

use std::sync::OnceLock;

use crate::Float;

/// Which version of a kernel this CPU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Avx512,
    Avx2,
    Baseline,
}

/// The widest level this CPU supports, or a narrower one named by the
/// environment variable `GRAD_SIMD` (`avx2` or `baseline`: for comparing
/// versions; results are the same bits; `avx512` keeps AVX-512 but not its
/// BF16 instructions, see [`bf16_dot`]). Decided once.
#[inline]
pub(crate) fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let widest = widest();
        match std::env::var("GRAD_SIMD").as_deref() {
            Ok("baseline") => Level::Baseline,
            Ok("avx2") if widest != Level::Baseline => Level::Avx2,
            _ => widest,
        }
    })
}

/// Whether the bf16 products run on the CPU's own dot product of bf16
/// pairs (AVX512-BF16's `vdpbf16ps`) rather than on its exact emulation
/// (`gemm/bf16.rs`; the same bits): when the CPU reports the instructions
/// and [`level`] is AVX-512, unless `GRAD_SIMD=avx512` asks for AVX-512
/// without them. Decided once.
#[inline]
pub(crate) fn bf16_dot() -> bool {
    static DOT: OnceLock<bool> = OnceLock::new();
    *DOT.get_or_init(|| {
        level() == Level::Avx512 && has_bf16_dot() && std::env::var("GRAD_SIMD").as_deref() != Ok("avx512")
    })
}

/// Whether this CPU has AVX512-BF16's dot product and conversions (and
/// AVX-512F and BW, which the packing around them uses).
#[inline]
pub(crate) fn has_bf16_dot() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn widest() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") {
            return Level::Avx512;
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return Level::Avx2;
        }
    }
    Level::Baseline
}

/// Elements the compiled loops take a turn at the widest level: the
/// compiler unrolls a loop of unknown length over four vectors (four
/// AVX-512 vectors of `f32`), and runs what remains of a turn on half
/// vectors, then element by element.
pub(crate) const WIDE: usize = 64;

/// Whether `x` holds a subnormal number. A gradient that has decayed into
/// them (down a long chain of `tanh`, as W2's does) costs a microcode
/// assist for each instruction that multiplies it, on Intel CPUs: about
/// thirty times a normal multiply on an Intel Xeon, at every vector width
/// (`benches/peers/denormal_cost.c`). A run shorter than [`WIDE`] then
/// pays one per half vector, and [`padded`] one per vector.
#[inline]
pub(crate) fn has_subnormal<T: Float>(x: &[T]) -> bool {
    x.iter().any(|v| v.is_subnormal())
}

/// `run(ins, out)` on copies of `ins` and `out` padded with zeros to
/// [`WIDE`] elements, the first `out.len()` then copied back into `out`:
/// a run shorter than a turn of the compiled loops (`out.len() <= WIDE`,
/// every input at least as long) goes through them in whole vectors. The
/// padding's lanes are computed and dropped; the others are the same
/// arithmetic, so the same bits.
#[inline]
pub(crate) fn padded<T: Float, const I: usize>(ins: [&[T]; I], out: &mut [T], run: impl FnOnce([&[T]; I], &mut [T])) {
    let n = out.len();
    let mut copies = [[T::zero(); WIDE]; I];
    for (copy, x) in copies.iter_mut().zip(ins) {
        copy[..n].copy_from_slice(&x[..n]);
    }
    let mut wide = [T::zero(); WIDE];
    wide[..n].copy_from_slice(out);
    run(copies.each_ref().map(|c| &c[..]), &mut wide);
    out.copy_from_slice(&wide[..n]);
}

/// Asks the CPU to bring the cache lines of `x` into its L2 cache: a
/// hint, which changes no value (and does nothing elsewhere than
/// x86-64). Into L2 rather than L1: a request for L1 holds one of the
/// core's few line-fill buffers, and a tile's worth of them stalled the
/// loop that asked (1-2% slower on W5's block).
#[inline]
pub(crate) fn prefetch<T>(x: &[T]) {
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
    #[cfg(target_arch = "x86_64")]
    for line in (0..size_of_val(x)).step_by(64) {
        let p = x.as_ptr().cast::<i8>().wrapping_add(line);
        // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has;
        // a prefetch is a hint that never faults and changes no memory the
        // program sees, and `p` lies within `x` anyway.
        #[allow(unsafe_code)]
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(p)
        };
    }
}

/// Defines a function whose body is compiled three times, with AVX-512,
/// with AVX2 + FMA, and for the baseline, and which runs the widest version
/// the CPU supports. Generics go in brackets, then their names for the
/// calls (`fn name[T: Float, const N: usize][T, N](x: &[T]) { ... }`); the
/// body must be the function's whole work (calls in it are inlined into
/// each version when small, `#[inline]` or generic).
macro_rules! multiversion {
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident [$($generics:tt)*] [$($names:tt)*] ($($arg:ident : $ty:ty),* $(,)?)
        $(-> $ret:ty)? $body:block
    ) => {
        $(#[$meta])*
        #[inline]
        $vis fn $name<$($generics)*>($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
            fn avx512<$($generics)*>($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            fn avx2<$($generics)*>($($arg: $ty),*) $(-> $ret)? $body
            fn baseline<$($generics)*>($($arg: $ty),*) $(-> $ret)? $body
            match $crate::simd::level() {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `avx512` only enables target features, and
                // `level()` returned `Avx512` because the CPU reports them
                // all, so every instruction compiled into it exists here.
                $crate::simd::Level::Avx512 => {
                    #[allow(unsafe_code)]
                    unsafe { avx512::<$($names)*>($($arg),*) }
                }
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as above, for AVX2 and FMA.
                $crate::simd::Level::Avx2 => {
                    #[allow(unsafe_code)]
                    unsafe { avx2::<$($names)*>($($arg),*) }
                }
                _ => baseline::<$($names)*>($($arg),*),
            }
        }
    };
}

pub(crate) use multiversion;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::{exp_f32, tanh_f32};

    multiversion! {
        fn mixed[][](x: &[f32], out: &mut [f32]) {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = tanh_f32(v) * 2.0 + exp_f32(-v.abs());
            }
        }
    }

    fn mixed_baseline(x: &[f32], out: &mut [f32]) {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = tanh_f32(v) * 2.0 + exp_f32(-v.abs());
        }
    }

    multiversion! {
        fn scaled[][](x: &[f32], out: &mut [f32]) {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = *o * 0.5 + tanh_f32(v) * 1e-30;
            }
        }
    }

    #[test]
    fn a_padded_run_computes_the_bits_of_the_run_itself() {
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for n in 0..WIDE {
            let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.37 - 3.0).collect();
            let start: Vec<f32> = (0..n).map(|i| f32::MIN_POSITIVE * i as f32 * 0.01).collect();
            let (mut direct, mut through) = (start.clone(), start.clone());
            scaled(&x, &mut direct);
            padded([&x[..]], &mut through, |[x], out| scaled(x, out));
            assert_eq!(bits(&direct), bits(&through), "n = {n}");
            assert_eq!(has_subnormal(&start), n > 1, "n = {n}");
        }
        assert!(!has_subnormal(&[0.0f64, -0.0, f64::MIN_POSITIVE, 1.0, f64::INFINITY, f64::NAN]));
        assert!(has_subnormal(&[1.0, -f64::MIN_POSITIVE / 2.0]));
    }

    #[test]
    fn a_prefetch_changes_no_value_and_takes_any_slice() {
        let x: Vec<f32> = (0..300).map(|i| i as f32 * 0.5).collect();
        let before = x.clone();
        for start in 0..=x.len() {
            for end in start..=x.len().min(start + 70) {
                prefetch(&x[start..end]);
            }
        }
        // An empty slice's pointer may be dangling: nothing is asked for.
        prefetch::<f64>(&[]);
        prefetch(&Vec::<u8>::new());
        assert_eq!(x, before);
    }

    #[test]
    fn the_dispatched_version_computes_the_baseline_bits() {
        let x: Vec<f32> = (0..10_000).map(|i| (i as f32 - 5000.0) * 0.0137).collect();
        let (mut a, mut b) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        mixed(&x, &mut a);
        mixed_baseline(&x, &mut b);
        assert!(a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()), "level {:?}", level());
    }
}
