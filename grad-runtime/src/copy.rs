//! Copies of short runs (a row of a tile, a panel or a head) as arrays of
//! a length the compiler knows, which it moves in vector registers: a
//! `copy_from_slice` of a length known only at run time is a call of
//! `memmove`, whose cost on 32 values is many times the copy's.

/// `to = from` as arrays of `N` when both are `N` long, and `true`; else
/// nothing copied, and `false`.
#[inline(always)]
pub(crate) fn as_array<T: Copy, const N: usize>(to: &mut [T], from: &[T]) -> bool {
    match (<&mut [T; N]>::try_from(to), <&[T; N]>::try_from(from)) {
        (Ok(to), Ok(from)) => {
            *to = *from;
            true
        }
        _ => false,
    }
}

/// `to.copy_from_slice(from)`, as arrays for the usual widths of a row
/// (32 and 64 values), and a shorter run as arrays of 16, 8, 4, 2 and 1
/// (a convolution's windows cut a row of the image into runs of any
/// length below a panel's width, and `memmove` on them was 11% of a
/// convolution's training step).
#[inline(always)]
pub(crate) fn row<T: Copy>(to: &mut [T], from: &[T]) {
    if as_array::<T, 32>(to, from) || as_array::<T, 64>(to, from) {
        return;
    }
    if to.len() >= 32 || to.len() != from.len() {
        to.copy_from_slice(from);
        return;
    }
    // The run's length below 32 in binary digits: a piece for each.
    let mut at = 0;
    piece::<T, 16>(to, from, &mut at);
    piece::<T, 8>(to, from, &mut at);
    piece::<T, 4>(to, from, &mut at);
    piece::<T, 2>(to, from, &mut at);
    piece::<T, 1>(to, from, &mut at);
}

/// Copies `N` elements of `from` from `at` on, as an array, and moves `at`
/// past them, when `N` is a binary digit of the length.
#[inline(always)]
fn piece<T: Copy, const N: usize>(to: &mut [T], from: &[T], at: &mut usize) {
    if to.len() & N != 0 {
        as_array::<T, N>(&mut to[*at..*at + N], &from[*at..*at + N]);
        *at += N;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_every_length_are_copied_whole() {
        for len in (0..=70).chain([200]) {
            let from: Vec<f32> = (0..len).map(|i| i as f32 + 0.5).collect();
            let mut to = vec![-1.0; len];
            row(&mut to, &from);
            assert_eq!(to, from, "{len}");
        }
    }

    #[test]
    fn as_array_copies_only_runs_of_its_length() {
        let (mut to, from) = ([0.0f64; 16], [2.0f64; 16]);
        assert!(!as_array::<f64, 8>(&mut to, &from));
        assert_eq!(to, [0.0; 16]);
        assert!(!as_array::<f64, 16>(&mut to[..15], &from[..15]));
        assert!(as_array::<f64, 16>(&mut to, &from));
        assert_eq!(to, from);
    }
}
