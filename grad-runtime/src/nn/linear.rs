//! [`Linear`]: `x @ weight + bias`.

use crate::{Float, Params, Rng, Tape, Var, grad, init};

/// A fully connected layer, `x @ weight + bias`, with `weight: [in, out]`
/// and `bias: [out]`; `x` may have any leading dims (`[N, in]`,
/// `[B, T, in]`).
///
/// Initialised as `torch.nn.Linear`: weight and bias uniform in
/// `±1/√in` (Kaiming uniform with `a = √5`).
///
/// ```
/// use grad_runtime::{nn::Linear, Rng, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let layer = Linear::new(&mut tape, &mut Rng::new(0), 3, 2);
/// let x = tape.constant(ndarray::Array2::<f64>::ones((4, 3)));
/// let y = layer.forward(&mut tape, x);
/// assert_eq!(tape.value(y).shape(), &[4, 2]);
/// ```
#[derive(Params, Clone, Copy, Debug)]
pub struct Linear {
    /// `[in, out]`.
    pub weight: Var,
    /// `[out]`.
    pub bias: Var,
}

impl Linear {
    /// A layer from `fan_in` to `fan_out` features.
    pub fn new<T: Float>(tape: &mut Tape<T>, rng: &mut Rng, fan_in: usize, fan_out: usize) -> Linear {
        let bound = 1.0 / (fan_in.max(1) as f64).sqrt();
        Linear {
            weight: tape.param(init::uniform::<T>(rng, &[fan_in, fan_out], -bound, bound)),
            bias: tape.param(init::uniform::<T>(rng, &[fan_out], -bound, bound)),
        }
    }

    /// `x @ weight + bias`.
    #[track_caller]
    pub fn forward<T: Float>(&self, tape: &mut Tape<T>, x: Var) -> Var {
        let Linear { weight, bias } = *self;
        grad!(tape; weight: [I, O], bias: [O]; x @ weight + bias)
    }
}
