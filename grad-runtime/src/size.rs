//! How large a tensor may be. Every tensor a tape holds is checked against
//! these limits when it is made (an op's output, a parameter or constant
//! copied in), so no later view, kernel or walk ever meets a shape that
//! ndarray refuses or that a buffer cannot hold.

use std::mem::size_of;

use crate::error::ErrorKind;

/// The element count of a tensor of `shape` holding `T`s, if one can exist:
///
/// - the product of its non-zero dims is at most `isize::MAX` (ndarray's
///   rule for every array and view, whatever its element count: a shape
///   `[usize::MAX, 0]` holds no element but no view of it can be made);
/// - its element count times the size of `T` is at most `isize::MAX`
///   bytes (the most a `Vec` can hold).
///
/// Whether the allocator can actually provide the memory is checked where
/// the buffer is taken ([`BufferPool::try_take`](crate::pool::BufferPool::try_take)).
pub(crate) fn checked_len<T>(shape: &[usize]) -> Result<usize, ErrorKind> {
    let too_large = |reason| Err(ErrorKind::TooLarge { shape: shape.to_vec(), reason });
    let nonzero = shape.iter().filter(|&&d| d != 0).try_fold(1usize, |n, &d| n.checked_mul(d));
    match nonzero {
        Some(n) if n <= isize::MAX as usize => {}
        _ => return too_large(NONZERO_PRODUCT),
    }
    let len = if shape.contains(&0) { 0 } else { nonzero.unwrap_or(0) };
    match len.checked_mul(size_of::<T>()) {
        Some(bytes) if bytes <= isize::MAX as usize => Ok(len),
        _ => too_large(BYTES),
    }
}

pub(crate) const NONZERO_PRODUCT: &str =
    "the product of its non-zero dims exceeds isize::MAX, the most an ndarray array or view can have";
pub(crate) const BYTES: &str = "its elements would take more than isize::MAX bytes, the most a buffer can hold";
pub(crate) const ALLOCATION: &str = "the allocator could not provide the memory for its elements";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_that_ndarray_or_a_vec_refuse_are_too_large() {
        let max = isize::MAX as usize;
        assert_eq!(checked_len::<f32>(&[2, 3]), Ok(6));
        assert_eq!(checked_len::<f32>(&[]), Ok(1));
        assert_eq!(checked_len::<f32>(&[max, 0]), Ok(0), "ndarray accepts it: its non-zero product is isize::MAX");
        assert_eq!(checked_len::<f64>(&[0, max, 1]), Ok(0));
        let refused: [&[usize]; 4] = [&[usize::MAX, 0], &[max + 1, 0], &[1 << 32, 1 << 32, 0], &[0, 1 << 40, 1 << 40]];
        for shape in refused {
            let Err(ErrorKind::TooLarge { reason, .. }) = checked_len::<f32>(shape) else { panic!("{shape:?}") };
            assert_eq!(reason, NONZERO_PRODUCT, "{shape:?}");
        }
        // Within ndarray's count, but not within a buffer of f32s.
        let Err(ErrorKind::TooLarge { reason, .. }) = checked_len::<f32>(&[1 << 31, 1 << 31]) else { panic!() };
        assert_eq!(reason, BYTES);
        assert_eq!(checked_len::<f32>(&[1 << 30, 1 << 30]), Ok(1 << 60), "2^62 bytes fit");
    }
}
