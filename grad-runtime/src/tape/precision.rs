//! Mixed precision: the tape's setting for how matrix products compute
//! their terms, recorded in each product's node so that its backward
//! products use the same.

use std::panic::Location;

use crate::error::{ErrorKind, GradError};
use crate::{Float, Tape};

/// How a tape's matrix products ([`g_matmul`](crate::g_matmul),
/// [`g_bmm`](crate::g_bmm), the products a [`g_conv2d`](crate::g_conv2d)
/// lowers to, forward and backward) compute their terms; see
/// [`Tape::set_matmul_precision`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// In the tape's own type: one fused multiply-add per term.
    #[default]
    F32,
    /// From the operands rounded to bfloat16 (8 significant bits, to
    /// nearest even), each product of two bf16s exact, summed in `f32`:
    /// PyTorch's `autocast` on the CPU. On a CPU with AVX512-BF16 this is
    /// its `vdpbf16ps` instruction; elsewhere an exact emulation of it,
    /// giving the same bits (slower than `F32`).
    Bf16,
}

impl<T: Float> Tape<T> {
    /// Sets how the matrix products recorded from now on compute their
    /// terms (`Precision::F32`, the default, or `Precision::Bf16`).
    ///
    /// Under `Bf16`, [`g_matmul`](crate::g_matmul) and [`g_bmm`](crate::g_bmm)
    /// round their operands to bfloat16 and sum the exact products in
    /// `f32`, and so do the two products of their backward rule (`g @ bᵀ`
    /// and `aᵀ @ g`), whatever the setting when `backward` runs: each node
    /// keeps the precision it was recorded with. [`g_conv2d`](crate::g_conv2d)
    /// computes its products (im2col columns times the weights, and both
    /// gradients') the same way, and so does [`g_attention`](crate::g_attention)
    /// (the scores `q kᵀ`, the weighted values, the products of its
    /// backward; its softmax stays `f32`). Everything else stays `f32`:
    /// values and gradients on the tape, parameters, optimizer state, every
    /// other op (PyTorch's CPU `autocast` policy for `bfloat16`). Each
    /// element of a product is then within
    /// `(2^-7 + (k + 2)·2^-23)·Σₚ|a_ip||b_pj|` of the exact product (`k`
    /// the inner dimension) instead of `F32`'s `k·2^-24·Σₚ|a_ip||b_pj|`.
    ///
    /// **No loss scaling.** bf16 keeps all 8 exponent bits of `f32`, so
    /// every gradient an `f32` run produces, down to `2^-126`, is a
    /// normal bf16 too: only 16 bits of significand are lost, never the
    /// value. (`f16`'s 5 exponent bits flush gradients below `2^-24` to
    /// zero, which is why `f16` training scales the loss up and the
    /// gradients down again; bf16 training does not.)
    ///
    /// Results are the same bits whatever the thread count and on every
    /// CPU (with or without AVX512-BF16). The higher-order gradients of
    /// [`grad_graph`](Tape::grad_graph) record each product's gradient
    /// products in the precision that product was recorded with.
    ///
    /// An `f64` tape refuses `Bf16` with [`ErrorKind::PrecisionUnsupported`]
    /// and keeps its setting: it exists for tight gradient checks, which
    /// bf16 would defeat.
    ///
    /// ```
    /// use grad_runtime::{g_matmul, g_sum, ndarray::array, Precision, Tape};
    ///
    /// let mut tape = Tape::<f32>::new();
    /// tape.set_matmul_precision(Precision::Bf16)?;
    /// // 1 + 2^-10 is not a bf16: it rounds to 1.
    /// let a = tape.param(array![[1.0 + 1.0 / 1024.0, 2.0]]);
    /// let b = tape.param(array![[3.0], [4.0]]);
    /// let y = g_matmul(&mut tape, a, b);
    /// let loss = g_sum(&mut tape, y);
    /// tape.backward(loss)?;
    /// assert_eq!(tape.value(y)[[0, 0]], 11.0); // not 11.0029...
    /// assert_eq!(tape.grad(b)[[0, 0]], 1.0); // the gradients' products too
    /// assert_eq!(tape.value(a)[[0, 0]], 1.0 + 1.0 / 1024.0); // the values stay f32
    ///
    /// let mut checks = Tape::<f64>::new();
    /// assert!(checks.set_matmul_precision(Precision::Bf16).is_err());
    /// assert_eq!(checks.matmul_precision(), Precision::F32);
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn set_matmul_precision(&mut self, precision: Precision) -> Result<(), GradError> {
        if precision == Precision::Bf16 && !T::is_f32() {
            let kind = ErrorKind::PrecisionUnsupported { precision: "bf16", dtype: "f64" };
            return Err(GradError::new("Tape::set_matmul_precision", kind, Vec::new(), Location::caller()));
        }
        self.matmul_precision = precision;
        Ok(())
    }

    /// Sets the precision without the `f64` check (to one a node of this
    /// tape was recorded with) and returns the one it replaces.
    pub(crate) fn swap_matmul_precision(&mut self, precision: Precision) -> Precision {
        std::mem::replace(&mut self.matmul_precision, precision)
    }

    /// The precision matrix products are recorded with; see
    /// [`set_matmul_precision`](Tape::set_matmul_precision).
    pub fn matmul_precision(&self) -> Precision {
        self.matmul_precision
    }
}
