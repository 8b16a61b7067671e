//! [`GroupNorm`]: per-sample normalisation over blocks of channels.

use crate::{Float, Params, Tape, Var, grad, init};

/// Group normalisation of `[N, C, ...]`, as `torch.nn.GroupNorm(groups, C)`:
/// `weight: [C]` (ones), `bias: [C]` (zeros), `eps = 1e-5`. The same in
/// training and evaluation (it keeps no running statistics), so it suits
/// small batches where batch norm's statistics are noisy.
///
/// ```
/// use grad_runtime::{nn::GroupNorm, ndarray::Array3, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let norm = GroupNorm::new(&mut tape, 2, 4);
/// let x = tape.constant(Array3::from_shape_fn((3, 4, 5), |(n, c, l)| (n * c + l) as f64));
/// let y = norm.forward(&mut tape, x);
/// assert_eq!(tape.value(y).shape(), &[3, 4, 5]);
/// ```
#[derive(Params, Clone, Copy, Debug)]
pub struct GroupNorm {
    /// The gain, `[C]`.
    pub weight: Var,
    /// The shift, `[C]`.
    pub bias: Var,
    /// How many blocks the channels are split into.
    #[params(skip)]
    pub groups: usize,
    /// Added to the variance.
    #[params(skip)]
    pub eps: f64,
}

impl GroupNorm {
    /// A normalisation of `channels` channels in `groups` blocks (`groups`
    /// must divide `channels`; `forward` says so otherwise).
    pub fn new<T: Float>(tape: &mut Tape<T>, groups: usize, channels: usize) -> GroupNorm {
        GroupNorm {
            weight: tape.param(init::ones::<T>(&[channels])),
            bias: tape.param(init::zeros::<T>(&[channels])),
            groups,
            eps: 1e-5,
        }
    }

    /// Normalises `x: [N, C, ...]`.
    #[track_caller]
    pub fn forward<T: Float>(&self, tape: &mut Tape<T>, x: Var) -> Var {
        let GroupNorm { weight, bias, groups, eps } = *self;
        let eps = T::from_f64(eps);
        grad!(tape; weight: [C], bias: [C]; group_norm(x, groups, weight, bias, eps))
    }
}
