//! [`Mlp`]: `Linear` layers with relu between them.

use crate::nn::Linear;
use crate::{Float, Params, Rng, Tape, Var, grad};

/// A multi-layer perceptron: `Linear` layers of the given sizes, relu
/// after each but the last. Its parameters are `layers.0.weight`,
/// `layers.0.bias`, `layers.1.weight`, ...
///
/// ```
/// use grad_runtime::{nn::Mlp, Params, Rng, Tape};
///
/// let mut tape = Tape::<f32>::new();
/// let mlp = Mlp::new(&mut tape, &mut Rng::new(0), &[2, 16, 16, 1]);
/// assert_eq!(mlp.named_params().len(), 6);
/// let x = tape.constant(ndarray::Array2::<f32>::zeros((5, 2)));
/// let y = mlp.forward(&mut tape, x);
/// assert_eq!(tape.value(y).shape(), &[5, 1]);
/// ```
#[derive(Params, Clone, Debug)]
pub struct Mlp {
    /// One `Linear` per pair of consecutive sizes.
    pub layers: Vec<Linear>,
}

impl Mlp {
    /// Layers from `sizes[0]` features through each size in turn; two
    /// sizes make one layer.
    pub fn new<T: Float>(tape: &mut Tape<T>, rng: &mut Rng, sizes: &[usize]) -> Mlp {
        Mlp { layers: sizes.windows(2).map(|pair| Linear::new(tape, rng, pair[0], pair[1])).collect() }
    }

    /// The layers in turn, relu between them.
    #[track_caller]
    pub fn forward<T: Float>(&self, tape: &mut Tape<T>, x: Var) -> Var {
        let mut h = x;
        for (i, layer) in self.layers.iter().enumerate() {
            h = layer.forward(tape, h);
            if i + 1 < self.layers.len() {
                h = grad!(tape; relu(h));
            }
        }
        h
    }
}
