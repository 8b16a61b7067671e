//! Finding NaN and infinities: what anomaly mode checks on every op output
//! and gradient, and what every optimizer step checks on every gradient.

use crate::Float;

/// The position and value of the first element that is NaN or infinite.
///
/// Fast when every element is finite (the common case, and the one an
/// optimizer step pays for): one pass summing `x · 0`, which is 0 for a
/// finite `x` and NaN otherwise, in 32 independent lanes that vectorize
/// (eight were one chain of dependent vector adds, bound by their latency).
/// Only a slice that fails it is searched element by element.
pub(crate) fn first_non_finite<T: Float>(x: &[T]) -> Option<(usize, T)> {
    if all_finite(x) {
        return None;
    }
    x.iter().position(|v| !v.is_finite()).map(|i| (i, x[i]))
}

fn all_finite<T: Float>(x: &[T]) -> bool {
    const LANES: usize = 32;
    let mut lanes = [T::zero(); LANES];
    let mut chunks = x.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane += v * T::zero();
        }
    }
    let tail = chunks.remainder().iter().fold(T::zero(), |sum, &v| sum + v * T::zero());
    lanes.iter().fold(tail, |sum, &lane| sum + lane) == T::zero()
}

/// How an error message writes a non-finite value: `NaN`, `inf` or `-inf`.
pub(crate) fn describe<T: Float>(v: T) -> &'static str {
    if v.is_nan() {
        "NaN"
    } else if v > T::zero() {
        "inf"
    } else {
        "-inf"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_non_finite_element_is_found_at_any_position() {
        for len in [0, 1, 7, 8, 9, 31, 32, 33, 64, 1000] {
            let clean: Vec<f32> = (0..len).map(|i| i as f32 - 3.5).collect();
            assert_eq!(first_non_finite(&clean), None, "len {len}");
            for at in 0..len {
                for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                    let mut x = clean.clone();
                    x[at] = bad;
                    if at + 1 < len {
                        x[len - 1] = f32::NAN; // a later one does not hide the first
                    }
                    let (position, value) = first_non_finite(&x).expect("found");
                    assert_eq!(position, at);
                    assert_eq!(describe(value), describe(bad));
                }
            }
        }
        assert_eq!(first_non_finite(&[f64::MAX, -f64::MAX, f64::MIN_POSITIVE, -0.0]), None);
    }
}
