//! The elementwise built-ins one element at a time, for the kernels
//! `grad!` writes: each value and derivative is the very `f` and `df` of
//! the unfused op (`ops/unary.rs`), so a fused region computes the same
//! bits. A derivative takes what its rule reads: the input `x` (`relu`,
//! `log`, `gelu`, ...) or the output `y` (`sigmoid`, `tanh`, `exp`,
//! `sqrt`, which reuse their value as the unfused rules do), plus the
//! built-in's scalar parameters.

use crate::Float;
use crate::ops::unary::{
    Abs, Clamp, Elementwise, Exp, Gelu, LeakyRelu, Log, Pow, Relu, Sigmoid, Silu, Softplus, Sqrt, Tanh,
};

macro_rules! of_input {
    ($($name:ident, $df:ident => $f:expr),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "(x)`.")]
        #[inline(always)]
        pub fn $name<T: Float>(x: T) -> T {
            $f.f(x)
        }

        #[doc = concat!("The derivative of `", stringify!($name), "` at `x`.")]
        #[inline(always)]
        pub fn $df<T: Float>(x: T) -> T {
            $f.df(x, x)
        }
    )*};
}

macro_rules! of_output {
    ($($name:ident, $df:ident => $f:expr),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "(x)`.")]
        #[inline(always)]
        pub fn $name<T: Float>(x: T) -> T {
            $f.f(x)
        }

        #[doc = concat!("The derivative of `", stringify!($name), "` from its value `y`.")]
        #[inline(always)]
        pub fn $df<T: Float>(y: T) -> T {
            $f.df(y, y)
        }
    )*};
}

of_input! {
    relu, relu_df => Relu,
    log, log_df => Log,
    abs, abs_df => Abs,
    gelu, gelu_df => Gelu,
    silu, silu_df => Silu,
    softplus, softplus_df => Softplus,
}

of_output! {
    sigmoid, sigmoid_df => Sigmoid,
    tanh, tanh_df => Tanh,
    exp, exp_df => Exp,
    sqrt, sqrt_df => Sqrt,
}

/// `pow(x, p)`.
#[inline(always)]
pub fn pow<T: Float>(x: T, p: T) -> T {
    Pow(p).f(x)
}

/// The derivative of `pow(x, p)` at `x`.
#[inline(always)]
pub fn pow_df<T: Float>(x: T, p: T) -> T {
    Pow(p).df(x, x)
}

/// `leaky_relu(x, slope)`.
#[inline(always)]
pub fn leaky_relu<T: Float>(x: T, slope: T) -> T {
    LeakyRelu(slope).f(x)
}

/// The derivative of `leaky_relu(x, slope)` at `x`.
#[inline(always)]
pub fn leaky_relu_df<T: Float>(x: T, slope: T) -> T {
    LeakyRelu(slope).df(x, x)
}

/// `clamp(x, lo, hi)`.
#[inline(always)]
pub fn clamp<T: Float>(x: T, lo: T, hi: T) -> T {
    Clamp(lo, hi).f(x)
}

/// The derivative of `clamp(x, lo, hi)` at `x`.
#[inline(always)]
pub fn clamp_df<T: Float>(x: T, lo: T, hi: T) -> T {
    Clamp(lo, hi).df(x, x)
}

/// The derivative of `-x`, `-1`: the unfused rule multiplies by it, which
/// is not always the same bits as negating (a NaN keeps its sign).
#[inline(always)]
pub fn neg_df<T: Float>() -> T {
    -T::one()
}
