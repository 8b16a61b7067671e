//! The element types a tape can hold.

use std::fmt::{Debug, Display};
use std::iter::Sum;
use std::ops::{AddAssign, DivAssign, MulAssign, SubAssign};

use crate::math;

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

    /// `e^x` as the tape computes it: for `f32` a branch-free polynomial
    /// within 1 ulp of the correctly rounded value that the compiler
    /// vectorises; for `f64` the standard library's `exp`.
    fn tape_exp(self) -> Self;

    /// `tanh(x)` as the tape computes it: within 1 ulp for `f32`
    /// (vectorised); the standard library's for `f64`.
    fn tape_tanh(self) -> Self;

    /// `1 / (1 + e^{-x})` as the tape computes it, formed from `e^{-|x|}`
    /// so it never overflows: within 2 ulp for `f32` (vectorised).
    fn tape_sigmoid(self) -> Self;
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
    #[inline]
    fn tape_exp(self) -> Self {
        math::exp_f32(self)
    }
    #[inline]
    fn tape_tanh(self) -> Self {
        math::tanh_f32(self)
    }
    #[inline]
    fn tape_sigmoid(self) -> Self {
        math::sigmoid_f32(self)
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
    #[inline]
    fn tape_exp(self) -> Self {
        self.exp()
    }
    #[inline]
    fn tape_tanh(self) -> Self {
        self.tanh()
    }
    #[inline]
    fn tape_sigmoid(self) -> Self {
        let e = (-self.abs()).exp();
        if self >= 0.0 { 1.0 / (1.0 + e) } else { e / (1.0 + e) }
    }
}

// The sealed trait's methods name crate-private types (the sink, the fused
// node): nothing outside the crate can name the trait, so none can call them.
#[allow(private_interfaces)]
mod sealed {
    use std::cell::RefCell;
    use std::panic::Location;

    use ndarray::ArrayViewD;

    use crate::GradError;
    use crate::dsl::Operand;
    use crate::gemm::{self, ImageProduct, MatRef, Precision};
    #[cfg(feature = "onnx")]
    use crate::onnx::Export;
    use crate::ops::fused::{self, Fused, Region};
    use crate::ops::sink::GradSink;
    use crate::tensor::{Tensor, TensorRef};
    use crate::{Tape, Var};

    /// What only the crate sees of a [`Float`](super::Float): the view of
    /// its buffers as `f32`, where the bf16 products start; per-thread
    /// scratch; and the work compiled here once for each type, which the
    /// user's crate calls and compiles none of: the fused regions'
    /// interpreter, the backward pass with every op's rule, the matrix
    /// product, the ONNX export.
    pub trait Sealed: Sized {
        /// True for `f32`.
        fn is_f32() -> bool;
        /// `x` as `f32`s: `Some` for `f32` alone.
        fn f32_slice(x: &[Self]) -> Option<&[f32]>;
        /// `x` as `f32`s: `Some` for `f32` alone.
        fn f32_slice_mut(x: &mut [Self]) -> Option<&mut [f32]>;
        /// Runs `f` on `len` elements of this thread's scratch (their
        /// contents unspecified), grown once and kept: so a kernel that
        /// needs a few tiles allocates nothing after its first call. `f`
        /// must not ask for scratch itself.
        fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [Self]) -> R) -> R;
        /// Records a fused region ([`fused::fused`]).
        fn record_fused(
            tp: &mut Tape<Self>,
            region: &'static Region<Self>,
            leaves: &[Operand<Self>],
            params: &[Self],
            caller: &'static Location<'static>,
        ) -> Var
        where
            Self: super::Float;
        /// [`Tape::backward`] and [`Tape::backward_with`]: the walk over the
        /// tape and every backward rule, compiled here. (Generic code is
        /// compiled again in every crate that calls it; the rules are most
        /// of the library's code.)
        fn tape_backward(
            tp: &mut Tape<Self>,
            loss: Var,
            seed: Option<ArrayViewD<'_, Self>>,
            location: &'static Location<'static>,
        ) -> Result<(), GradError>
        where
            Self: super::Float;
        /// The matrix product every op runs on (`gemm::gemm_in`).
        fn gemm(
            precision: Precision,
            a: MatRef<'_, Self>,
            b: MatRef<'_, Self>,
            c: &mut [Self],
            accumulate: bool,
            scratch: &mut [Self],
        ) where
            Self: super::Float;
        /// A convolution's product whose columns are packed straight from
        /// the image (`ops/conv.rs`), in `precision` as [`Sealed::gemm`].
        fn gemm_windows(
            precision: Precision,
            product: ImageProduct<'_, Self>,
            c: &mut [Self],
            accumulate: bool,
            scratch: &mut [Self],
        ) where
            Self: super::Float;
        /// An ONNX export's bytes ([`Export::to_bytes`]).
        #[cfg(feature = "onnx")]
        fn onnx_bytes(export: Export<'_, Self>) -> Result<Vec<u8>, GradError>
        where
            Self: super::Float;
        /// A fused node's backward rule.
        fn fused_backward(
            sink: &mut GradSink<'_, Self>,
            g: &TensorRef<'_, Self>,
            out: &Tensor<Self>,
            node: &Fused<Self>,
        ) where
            Self: super::Float;
    }

    /// The scratch of [`Sealed::with_scratch`] for one type.
    fn scratch<T: Copy + Default, R>(
        key: &'static std::thread::LocalKey<RefCell<Vec<T>>>,
        len: usize,
        f: impl FnOnce(&mut [T]) -> R,
    ) -> R {
        key.with_borrow_mut(|buffer| {
            if buffer.len() < len {
                buffer.resize(len, T::default());
            }
            f(&mut buffer[..len])
        })
    }

    thread_local! {
        static SCRATCH_F32: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
        static SCRATCH_F64: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
    }

    /// The methods `f32` and `f64` share: the scratch in `$key`, and the
    /// interpreter's entry points, compiled here for `$t`.
    macro_rules! shared {
        ($t:ty, $key:ident) => {
            #[inline]
            fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [$t]) -> R) -> R {
                scratch(&$key, len, f)
            }
            #[inline(never)]
            fn record_fused(
                tp: &mut Tape<$t>,
                region: &'static Region<$t>,
                leaves: &[Operand<$t>],
                params: &[$t],
                caller: &'static Location<'static>,
            ) -> Var {
                fused::record(tp, region, leaves, params, caller)
            }
            #[inline(never)]
            fn tape_backward(
                tp: &mut Tape<$t>,
                loss: Var,
                seed: Option<ArrayViewD<'_, $t>>,
                location: &'static Location<'static>,
            ) -> Result<(), GradError> {
                tp.backward_seeded(loss, seed, location)
            }
            #[inline(never)]
            fn gemm(
                precision: Precision,
                a: MatRef<'_, $t>,
                b: MatRef<'_, $t>,
                c: &mut [$t],
                accumulate: bool,
                scratch: &mut [$t],
            ) {
                gemm::gemm_in(precision, a, b, c, accumulate, scratch)
            }
            #[inline(never)]
            fn gemm_windows(
                precision: Precision,
                product: ImageProduct<'_, $t>,
                c: &mut [$t],
                accumulate: bool,
                scratch: &mut [$t],
            ) {
                gemm::gemm_windows(precision, product, c, accumulate, scratch)
            }
            #[cfg(feature = "onnx")]
            #[inline(never)]
            fn onnx_bytes(export: Export<'_, $t>) -> Result<Vec<u8>, GradError> {
                crate::onnx::bytes(export)
            }
            #[inline(never)]
            fn fused_backward(sink: &mut GradSink<'_, $t>, g: &TensorRef<'_, $t>, out: &Tensor<$t>, node: &Fused<$t>) {
                fused::backward(sink, g, out, node)
            }
        };
    }

    impl Sealed for f32 {
        fn is_f32() -> bool {
            true
        }
        fn f32_slice(x: &[f32]) -> Option<&[f32]> {
            Some(x)
        }
        fn f32_slice_mut(x: &mut [f32]) -> Option<&mut [f32]> {
            Some(x)
        }
        shared!(f32, SCRATCH_F32);
    }

    impl Sealed for f64 {
        fn is_f32() -> bool {
            false
        }
        fn f32_slice(_: &[f64]) -> Option<&[f32]> {
            None
        }
        fn f32_slice_mut(_: &mut [f64]) -> Option<&mut [f32]> {
            None
        }
        shared!(f64, SCRATCH_F64);
    }
}
