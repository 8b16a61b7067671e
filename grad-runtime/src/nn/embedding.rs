//! [`Embedding`]: a table of vectors looked up by id.

use crate::{Float, Indices, Params, Rng, Tape, Var, grad, init};

/// A table `weight: [vocab, dim]`; `forward` returns the rows of `ids`
/// shaped as the ids with `dim` appended: `[ids.len(), dim]` for a flat
/// list, `[B, T, dim]` for an `Array2<usize>` `[B, T]` (any [`Indices`]). Initialised
/// N(0, 1), as `torch.nn.Embedding`. An id outside `0..vocab` poisons the
/// tape with an error naming it.
///
/// ```
/// use grad_runtime::{nn::Embedding, Rng, Tape};
///
/// let mut tape = Tape::<f32>::new();
/// let embed = Embedding::new(&mut tape, &mut Rng::new(0), 10, 4);
/// let rows = embed.forward(&mut tape, &[3, 3, 9]);
/// assert_eq!(tape.value(rows).shape(), &[3, 4]);
/// let batch = embed.forward(&mut tape, &grad_runtime::ndarray::array![[3, 3, 9], [0, 1, 2]]);
/// assert_eq!(tape.value(batch).shape(), &[2, 3, 4]);
/// ```
#[derive(Params, Clone, Copy, Debug)]
pub struct Embedding {
    /// `[vocab, dim]`.
    pub weight: Var,
}

impl Embedding {
    /// A table of `vocab` vectors of `dim` numbers.
    pub fn new<T: Float>(tape: &mut Tape<T>, rng: &mut Rng, vocab: usize, dim: usize) -> Embedding {
        Embedding { weight: tape.param(init::normal::<T>(rng, &[vocab, dim], 0.0, 1.0)) }
    }

    /// The rows of `ids`: `[..ids' shape, dim]`.
    #[track_caller]
    pub fn forward<T: Float, I: Indices + ?Sized>(&self, tape: &mut Tape<T>, ids: &I) -> Var {
        let weight = self.weight;
        grad!(tape; weight: [V, D]; embedding(weight, ids))
    }
}
