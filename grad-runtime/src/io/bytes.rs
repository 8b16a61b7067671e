//! Tensor elements as the little-endian bytes of safetensors, exactly: the
//! tape's `f32` or `f64` bits are copied, never converted (a NaN keeps its
//! payload), by downcasting each element to its concrete type.

use std::any::Any;

use safetensors::Dtype;

use crate::Float;

/// The safetensors element type of a tape of `T`.
pub(crate) fn dtype_of<T: Float>() -> Dtype {
    if (&T::zero() as &dyn Any).is::<f32>() { Dtype::F32 } else { Dtype::F64 }
}

/// Bytes per element of `T`.
pub(crate) fn width_of<T: Float>() -> usize {
    std::mem::size_of::<T>()
}

/// Appends the little-endian bytes of `data` to `out`.
pub(crate) fn encode<T: Float>(data: &[T], out: &mut Vec<u8>) {
    out.reserve(data.len() * width_of::<T>());
    for x in data {
        let any = x as &dyn Any;
        if let Some(x) = any.downcast_ref::<f32>() {
            out.extend_from_slice(&x.to_le_bytes());
        } else if let Some(x) = any.downcast_ref::<f64>() {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
}

/// Fills `out` from little-endian bytes of `T`; `bytes` holds exactly
/// `out.len()` elements (the caller checked the dtype and shape).
pub(crate) fn decode_into<T: Float>(bytes: &[u8], out: &mut [T]) {
    let width = width_of::<T>();
    for (slot, chunk) in out.iter_mut().zip(bytes.chunks_exact(width)) {
        let any = slot as &mut dyn Any;
        if let Some(x) = any.downcast_mut::<f32>() {
            *x = f32::from_le_bytes(chunk.try_into().expect("invariant: chunks of 4 bytes"));
        } else if let Some(x) = any.downcast_mut::<f64>() {
            *x = f64::from_le_bytes(chunk.try_into().expect("invariant: chunks of 8 bytes"));
        }
    }
}

/// Fills `out` from little-endian `BF16` bytes (two per element), each
/// widened exactly: a bf16 is the top half of an `f32`'s bits.
pub(crate) fn decode_bf16_into<T: Float>(bytes: &[u8], out: &mut [T]) {
    for (slot, chunk) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let bits = u16::from_le_bytes([chunk[0], chunk[1]]);
        // Exact both ways: every f32 is an f64, and back.
        *slot = T::from_f64(f64::from(f32::from_bits(u32::from(bits) << 16)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_elements_widen_exactly() {
        // 1.5, -2^-133 (a bf16 denormal), +inf, a NaN, the largest bf16.
        let halves: [u16; 5] = [0x3fc0, 0x8001, 0x7f80, 0x7fc1, 0x7f7f];
        let bytes: Vec<u8> = halves.iter().flat_map(|h| h.to_le_bytes()).collect();
        let mut out = [0.0f32; 5];
        decode_bf16_into(&bytes, &mut out);
        assert_eq!(out[0], 1.5);
        assert_eq!(out[1], -(2.0f64.powi(-133) as f32));
        assert_eq!(out[2], f32::INFINITY);
        assert!(out[3].is_nan());
        assert_eq!(out[4].to_bits(), 0x7f7f_0000);
        let mut wide = [0.0f64; 5];
        decode_bf16_into(&bytes, &mut wide);
        assert_eq!(wide[1], -(2.0f64.powi(-133)));
    }

    #[test]
    fn elements_round_trip_bit_for_bit() {
        let values = [1.5f32, -0.0, f32::from_bits(0x7fc0_1234), f32::MIN_POSITIVE / 2.0];
        let mut bytes = Vec::new();
        encode(&values, &mut bytes);
        assert_eq!(&bytes[..4], &1.5f32.to_le_bytes());
        let mut back = [0.0f32; 4];
        decode_into(&bytes, &mut back);
        assert_eq!(values.map(f32::to_bits), back.map(f32::to_bits));
        assert_eq!(dtype_of::<f32>(), Dtype::F32);
        assert_eq!(dtype_of::<f64>(), Dtype::F64);

        let doubles = [std::f64::consts::PI, f64::from_bits(0x7ff8_0000_0000_0042)];
        let mut bytes = Vec::new();
        encode(&doubles, &mut bytes);
        let mut back = [0.0f64; 2];
        decode_into(&bytes, &mut back);
        assert_eq!(doubles.map(f64::to_bits), back.map(f64::to_bits));
    }
}
