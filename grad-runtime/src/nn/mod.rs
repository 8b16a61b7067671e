//! Standard layers, each a `#[derive(Params)]` struct: a constructor that
//! takes the tape, an [`Rng`](crate::Rng) and its sizes (with the usual
//! initialisation), and a `forward` written as a `grad!` block with
//! declared shapes. They are examples of the derive and of compile-time
//! shapes more than a framework: write your own layers the same way.
//!
//! | layer | parameters (names as in PyTorch) | forward |
//! |---|---|---|
//! | [`Linear`] | `weight [in, out]`, `bias [out]` | `x @ weight + bias`, any leading dims |
//! | [`Embedding`] | `weight [vocab, dim]` | rows of `weight` for token ids |
//! | [`LayerNorm`] | `weight [dim]`, `bias [dim]` | normalises the last axis |
//! | [`BatchNorm2d`] | `weight [C]`, `bias [C]`; buffers `running_mean`, `running_var`, `num_batches_tracked` | normalises each channel over the batch (`train`) or by the running statistics |
//! | [`GroupNorm`] | `weight [C]`, `bias [C]` | normalises each sample over blocks of channels |
//! | [`Mlp`] | `layers.0`, `layers.1`, ... (each a `Linear`) | `Linear`s with relu between |
//! | [`MultiHeadAttention`] | `query`, `key`, `value`, `out` (each a `Linear`) | scaled dot-product attention over `[B, T, D]`, optionally causal |
//!
//! A weight is `[in, out]` because grad computes `x @ weight`;
//! `torch.nn.Linear.weight` is `[out, in]` (transpose it to move weights across).
//!
//! ```
//! use grad_runtime::nn::{Embedding, LayerNorm, Linear, MultiHeadAttention};
//! use grad_runtime::{grad, Params, Rng, Tape, Var};
//!
//! /// A one-block transformer language model, as a user would write it.
//! #[derive(Params)]
//! struct TinyLm {
//!     embed: Embedding,
//!     attention: MultiHeadAttention,
//!     norm: LayerNorm,
//!     head: Linear,
//! }
//!
//! let (vocab, dim, heads) = (11, 8, 2);
//! let mut rng = Rng::new(0);
//! let mut tape = Tape::<f32>::new();
//! let lm = TinyLm {
//!     embed: Embedding::new(&mut tape, &mut rng, vocab, dim),
//!     attention: MultiHeadAttention::new(&mut tape, &mut rng, dim, heads).causal(true),
//!     norm: LayerNorm::new(&mut tape, dim),
//!     head: Linear::new(&mut tape, &mut rng, dim, vocab),
//! };
//! assert_eq!(lm.named_params().len(), 13);
//!
//! let (ids, next) = ([1, 4, 2, 7, 3, 3], [4, 2, 7, 3, 3, 9]); // B = 2 sequences of T = 3
//! let x = lm.embed.forward(&mut tape, &ids);
//! let x = grad!(tape; reshape(x, [2, 3, dim]));
//! let h = lm.attention.forward(&mut tape, x);
//! let h = grad!(tape; x + h);
//! let normed = lm.norm.forward(&mut tape, h);
//! let logits = lm.head.forward(&mut tape, normed);
//! let loss = grad!(tape; cross_entropy(reshape(logits, [6, vocab]), &next));
//! tape.backward(loss)?;
//! assert!(tape.scalar(loss) > 0.0);
//! # Ok::<(), grad_runtime::GradError>(())
//! ```

mod attention;
mod batch_norm;
mod embedding;
mod group_norm;
mod layer_norm;
mod linear;
mod mlp;

pub use attention::MultiHeadAttention;
pub use batch_norm::BatchNorm2d;
pub use embedding::Embedding;
pub use group_norm::GroupNorm;
pub use layer_norm::LayerNorm;
pub use linear::Linear;
pub use mlp::Mlp;
