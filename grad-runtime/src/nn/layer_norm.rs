//! [`LayerNorm`]: normalisation over the last axis with a learned gain and shift.

use crate::{Float, Params, Tape, Var, grad, init};

/// `(x − mean) / √(var + eps) · weight + bias` over the last axis of `x`
/// (`[.., dim]`), with `weight: [dim]` (ones) and `bias: [dim]` (zeros)
/// and `eps = 1e-5`, as `torch.nn.LayerNorm`.
///
/// ```
/// use grad_runtime::{nn::LayerNorm, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let norm = LayerNorm::new(&mut tape, 3);
/// let x = tape.constant(ndarray::array![[1.0, 2.0, 3.0]]);
/// let y = norm.forward(&mut tape, x);
/// assert!(tape.value(y).sum().abs() < 1e-12);
/// ```
#[derive(Params, Clone, Copy, Debug)]
pub struct LayerNorm {
    /// The gain, `[dim]`.
    pub weight: Var,
    /// The shift, `[dim]`.
    pub bias: Var,
    /// Added to the variance.
    #[params(skip)]
    pub eps: f64,
}

impl LayerNorm {
    /// A normalisation of `dim` features.
    pub fn new<T: Float>(tape: &mut Tape<T>, dim: usize) -> LayerNorm {
        LayerNorm { weight: tape.param(init::ones::<T>(&[dim])), bias: tape.param(init::zeros::<T>(&[dim])), eps: 1e-5 }
    }

    /// Normalises the last axis of `x`.
    #[track_caller]
    pub fn forward<T: Float>(&self, tape: &mut Tape<T>, x: Var) -> Var {
        let LayerNorm { weight, bias, eps } = *self;
        let eps = T::from_f64(eps);
        grad!(tape; weight: [D], bias: [D]; layer_norm(x, weight, bias, eps))
    }
}
