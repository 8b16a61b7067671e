//! `exp`, `tanh` and `sigmoid` for `f32` as branch-free polynomials that
//! the compiler vectorises (libm's `expf`/`tanhf` are calls it cannot):
//! every elementwise loop over them runs several lanes at a time. Each is
//! within 2 ulp of the correctly rounded value over the whole `f32` range
//! (`tests` below sweep it against `f64` references); NaN propagates,
//! overflow gives `inf`, underflow reaches the subnormals and `0`.
//!
//! `f64` keeps the standard library's functions (see `Float`).

// The coefficients are written as Cephes publishes them; each reads as the
// f32 intended.
#![allow(clippy::excessive_precision)]

/// `ln 2` split in a part exact in `f32` (few significant bits) and the rest,
/// so `x - n ln 2` loses nothing for the `n` that occur.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const LOG2E: f32 = std::f32::consts::LOG2_E;

/// Adding and subtracting `1.5 · 2^23` rounds an `f32` below `2^22` in
/// magnitude to the nearest integer (ties to even) with two additions:
/// `f32::round` is a libm call before SSE4.1, which would stop vectorising.
const ROUNDER: f32 = 12_582_912.0;

// Plain `a * b + c` throughout, never `mul_add`: without FMA in the target
// `mul_add` is a libm call, and Rust never fuses `a * b + c` on its own,
// so these give the same bits on every x86-64 machine.

/// `e^x`.
#[inline]
pub(crate) fn exp_f32(x: f32) -> f32 {
    // Beyond these, e^x is inf or rounds to 0; inside, n stays in [-150, 129].
    let (e_r, n) = exp_parts(x.clamp(-104.0, 89.0));
    // 2^n as two factors, each a normal number, so subnormal results and
    // the overflow to inf come out right.
    let half = n >> 1;
    let scaled = e_r * pow2(half) * pow2(n - half);
    if x.is_nan() { x } else { scaled }
}

/// `e^x` as `e^r · 2^n` for an `x` in `[-104, 89]`: `n` the integer
/// nearest `x / ln 2`, and `e^r` at the rest `r`.
#[inline(always)]
fn exp_parts(x: f32) -> (f32, i32) {
    let shifted = x * LOG2E + ROUNDER;
    let n = shifted - ROUNDER;
    let r = x - n * LN2_HI - n * LN2_LO;
    // e^r on |r| <= ln2 / 2 (Cephes' expf coefficients), the polynomial
    // in Estrin's order (three pairs, then r^2 twice) rather than Horner's:
    // on one vector of elements its chain of dependent steps is the
    // function's latency, and this one is 7 steps shorter.
    let r2 = r * r;
    let high = 1.987_569_1e-4_f32 * r + 1.398_199_9e-3;
    let middle = 8.333_452e-3_f32 * r + 4.166_579_6e-2;
    let low = 1.666_666_5e-1_f32 * r + 5.000_000_1e-1;
    let p = (high * r2 + middle) * r2 + low;
    let e_r = p * r2 + r + 1.0;
    // `n` as an integer, read from the bits of `shifted` (1.5 · 2^23 + n
    // has n in its low mantissa bits): exactly `n as i32`, but `as` is a
    // saturating conversion that the compiler cannot vectorise, which
    // left every exp loop converting lane by lane.
    (e_r, shifted.to_bits() as i32 - ROUNDER.to_bits() as i32)
}

/// `e^c` for `tanh`'s `c = 2|x|` (not NaN, `tanh` uses it only then), with
/// two steps fewer than [`exp_f32`] on its chain: `c` is clamped at 64,
/// past which `tanh` rounds to 1 all the same, so `2^n` is one normal
/// factor. Below 64 it is `exp_f32(c)` bit for bit: scaling by a power
/// of two is exact in one step or two.
#[inline(always)]
fn exp_for_tanh(c: f32) -> f32 {
    let (e_r, n) = exp_parts(c.min(64.0));
    e_r * pow2(n)
}

/// `2^n` for `n` in `[-126, 127]`, from its exponent bits.
#[inline]
fn pow2(n: i32) -> f32 {
    f32::from_bits(((n + 127) as u32) << 23)
}

/// `tanh(x)`: an odd polynomial near 0, `1 - 2 / (e^{2|x|} + 1)` beyond.
#[inline]
pub(crate) fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    // Cephes' tanhf polynomial for |x| < 0.625.
    let z = x * x;
    let p = -5.704_988_7e-3_f32;
    let p = p * z + 2.063_908_8e-2;
    let p = p * z - 5.373_971_3e-2;
    let p = p * z + 1.333_144_2e-1;
    let p = p * z - 3.333_328_2e-1;
    let small = (p * z * a + a).copysign(x);
    let large = (1.0 - 2.0 / (exp_for_tanh(2.0 * a) + 1.0)).copysign(x);
    // A NaN takes the polynomial, which passes it on.
    if a >= 0.625 { large } else { small }
}

/// `1 / (1 + e^{-x})`, formed from `e^{-|x|}` so it never overflows.
#[inline]
pub(crate) fn sigmoid_f32(x: f32) -> f32 {
    let e = exp_f32(-x.abs());
    let denominator = 1.0 + e;
    if x >= 0.0 { 1.0 / denominator } else { e / denominator }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance in units of the last place between two finite floats
    /// of the same sign (0 when both are equal, including both infinite).
    fn ulps(a: f32, b: f32) -> u32 {
        if a == b {
            return 0;
        }
        let (ia, ib) = (a.to_bits() as i64, b.to_bits() as i64);
        let key = |bits: i64| if bits & 0x8000_0000 != 0 { -(bits & 0x7fff_ffff) } else { bits };
        (key(ia) - key(ib)).unsigned_abs() as u32
    }

    /// Every `stride`-th f32 between `lo` and `hi` (by bit pattern, so the
    /// sweep is dense where floats are, near 0).
    fn sweep(lo: f32, hi: f32, samples: u32) -> impl Iterator<Item = f32> {
        let start = if lo < 0.0 { -(lo.to_bits() as i64 & 0x7fff_ffff) } else { lo.to_bits() as i64 };
        let end = if hi < 0.0 { -(hi.to_bits() as i64 & 0x7fff_ffff) } else { hi.to_bits() as i64 };
        let stride = ((end - start) / i64::from(samples)).max(1);
        (0..=(end - start) / stride).map(move |k| {
            let key = start + k * stride;
            if key < 0 { f32::from_bits((-key) as u32 | 0x8000_0000) } else { f32::from_bits(key as u32) }
        })
    }

    fn worst(f: fn(f32) -> f32, reference: fn(f64) -> f64, lo: f32, hi: f32) -> (u32, f32) {
        sweep(lo, hi, 2_000_000)
            .map(|x| (ulps(f(x), reference(f64::from(x)) as f32), x))
            .max_by_key(|&(u, _)| u)
            .unwrap_or((0, 0.0))
    }

    #[test]
    fn exp_is_within_two_ulps_over_its_whole_range() {
        let (ulp, at) = worst(exp_f32, f64::exp, -104.0, 89.0);
        println!("exp: at most {ulp} ulp (at {at})");
        assert!(ulp <= 2, "exp: {ulp} ulp at {at}");
    }

    #[test]
    fn tanh_is_within_two_ulps_over_its_whole_range() {
        let (ulp, at) = worst(tanh_f32, f64::tanh, -50.0, 50.0);
        println!("tanh: at most {ulp} ulp (at {at})");
        assert!(ulp <= 2, "tanh: {ulp} ulp at {at}");
    }

    #[test]
    fn sigmoid_is_within_two_ulps_over_its_whole_range() {
        let reference = |x: f64| 1.0 / (1.0 + (-x).exp());
        let (ulp, at) = worst(sigmoid_f32, reference, -110.0, 110.0);
        println!("sigmoid: at most {ulp} ulp (at {at})");
        assert!(ulp <= 2, "sigmoid: {ulp} ulp at {at}");
    }

    #[test]
    fn the_exponent_read_from_the_bits_is_the_converted_one() {
        // Every `n` exp_f32 can form: 2^n's exponent from the bits of
        // 1.5 · 2^23 + n equals the saturating `as` conversion.
        for x in sweep(-104.0, 89.0, 2_000_000).chain([-104.0, 89.0, 0.0, -0.0]) {
            let shifted = x.clamp(-104.0, 89.0) * LOG2E + ROUNDER;
            let n = shifted - ROUNDER;
            assert_eq!(shifted.to_bits() as i32 - ROUNDER.to_bits() as i32, n as i32, "at {x}");
        }
    }

    #[test]
    fn tanh_s_own_exp_gives_the_general_exp_s_tanh() {
        // Below 64 the same bits as `exp_f32`; at and past it, `tanh` is 1 either way.
        for c in sweep(0.0, 64.0, 2_000_000) {
            assert_eq!(exp_for_tanh(c).to_bits(), exp_f32(c).to_bits(), "at {c}");
        }
        for x in sweep(-100.0, 100.0, 2_000_000).chain([f32::INFINITY, f32::NEG_INFINITY, 0.625, -0.625]) {
            let a = x.abs();
            let general = (1.0 - 2.0 / (exp_f32(2.0 * a) + 1.0)).copysign(x);
            if a >= 0.625 {
                assert_eq!(tanh_f32(x).to_bits(), general.to_bits(), "at {x}");
            }
        }
    }

    #[test]
    fn special_values_are_exact() {
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-0.0), 1.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(89.0), f32::INFINITY);
        assert_eq!(exp_f32(-104.0), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
        assert_eq!(tanh_f32(0.0), 0.0);
        assert_eq!(tanh_f32(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(tanh_f32(100.0), 1.0);
        assert_eq!(tanh_f32(-100.0), -1.0);
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert!(tanh_f32(f32::NAN).is_nan());
        assert_eq!(sigmoid_f32(0.0), 0.5);
        assert_eq!(sigmoid_f32(1000.0), 1.0);
        assert_eq!(sigmoid_f32(-1000.0), 0.0);
        assert!(sigmoid_f32(f32::NAN).is_nan());
    }
}
