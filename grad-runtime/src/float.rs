//! The element types a tape can hold.

use std::fmt::{Debug, Display};
use std::iter::Sum;
use std::ops::{AddAssign, DivAssign, MulAssign, SubAssign};

/// A floating-point element type of a [`Tape`](crate::Tape): `f32` or `f64`.
///
/// Sealed: the backward rules and the optimizers are verified for exactly
/// these two types.
pub trait Float:
    num_traits::Float
    + ndarray::LinalgScalar
    + ndarray::ScalarOperand
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + Sum
    + Debug
    + Display
    + Default
    + Send
    + Sync
    + 'static
    + sealed::Sealed
{
    /// Converts an `f64` constant, rounding to nearest for `f32`.
    fn from_f64(x: f64) -> Self;
    /// Converts a count (an element count, a batch size) to this type.
    fn from_usize(n: usize) -> Self;
    /// Widens to `f64`, exactly.
    fn to_f64(self) -> f64;
}

impl Float for f32 {
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn from_usize(n: usize) -> Self {
        n as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl Float for f64 {
    fn from_f64(x: f64) -> Self {
        x
    }
    fn from_usize(n: usize) -> Self {
        n as f64
    }
    fn to_f64(self) -> f64 {
        self
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}
