//! [`MultiHeadAttention`]: scaled dot-product attention with several heads.

use std::panic::Location;

use crate::error::{ErrorKind, GradError};
use crate::nn::Linear;
use crate::{Float, Params, Rng, Tape, Var, grad};

/// Multi-head self-attention over `x: [B, T, D]` (Vaswani et al.): the
/// projections `query`, `key`, `value` (each a `Linear` `[D, D]`) are split
/// into `heads` heads of `D / heads` features; each head computes
/// `softmax(q·kᵀ / √(D / heads) + mask) · v` (one [`g_attention`](crate::g_attention)
/// over every head at once); the heads are joined and projected by `out`.
/// With [`causal`](MultiHeadAttention::causal), position `t` attends to
/// positions `<= t` only.
///
/// ```
/// use grad_runtime::{nn::MultiHeadAttention, Rng, Tape};
///
/// let mut tape = Tape::<f32>::new();
/// let attention = MultiHeadAttention::new(&mut tape, &mut Rng::new(0), 8, 2).causal(true);
/// let x = tape.constant(ndarray::Array3::<f32>::ones((2, 5, 8)));
/// let y = attention.forward(&mut tape, x);
/// assert_eq!(tape.value(y).shape(), &[2, 5, 8]);
/// ```
#[derive(Params, Clone, Copy, Debug)]
pub struct MultiHeadAttention {
    /// Projects `x` to the queries, `[D, D]`.
    pub query: Linear,
    /// Projects `x` to the keys, `[D, D]`.
    pub key: Linear,
    /// Projects `x` to the values, `[D, D]`.
    pub value: Linear,
    /// Joins the heads.
    pub out: Linear,
    /// The number of heads; it divides the model dim.
    #[params(skip)]
    pub heads: usize,
    /// Whether position `t` sees only positions `<= t`.
    #[params(skip)]
    pub causal: bool,
}

impl MultiHeadAttention {
    /// Attention over `dim` features in `heads` heads, not causal. A
    /// `heads` that does not divide `dim` (or is 0) poisons the tape.
    #[track_caller]
    pub fn new<T: Float>(tape: &mut Tape<T>, rng: &mut Rng, dim: usize, heads: usize) -> MultiHeadAttention {
        if heads == 0 || !dim.is_multiple_of(heads) {
            let kind = ErrorKind::InvalidArgument { name: "heads", value: heads as f64, expected: "a divisor of dim" };
            tape.poison(GradError::new("MultiHeadAttention::new", kind, Vec::new(), Location::caller()));
        }
        MultiHeadAttention {
            query: Linear::new(tape, rng, dim, dim),
            key: Linear::new(tape, rng, dim, dim),
            value: Linear::new(tape, rng, dim, dim),
            out: Linear::new(tape, rng, dim, dim),
            heads: heads.max(1),
            causal: false,
        }
    }

    /// Turns the causal mask on or off.
    #[must_use]
    pub fn causal(mut self, causal: bool) -> Self {
        self.causal = causal;
        self
    }

    /// Attention of every position of `x: [B, T, D]` over the sequence: `[B, T, D]`.
    #[track_caller]
    pub fn forward<T: Float>(&self, tape: &mut Tape<T>, x: Var) -> Var {
        let (q, k, v) = (self.query.forward(tape, x), self.key.forward(tape, x), self.value.forward(tape, x));
        // Sizes for the head split; a wrong rank is reported by the
        // block's declared-shape check (`q` is not `[B, T, D]`).
        let (b, t, d) = match *tape.value(x).shape() {
            [b, t, d] => (b, t, d),
            _ => (0, 0, 0),
        };
        let (h, causal) = (self.heads, self.causal);
        let s = d / h;
        let joined = grad!(tape; q: [B, T, D], k: [B, T, D], v: [B, T, D];
            let qh = permute(reshape(q, [b, t, h, s]), [0, 2, 1, 3]);
            let kh = permute(reshape(k, [b, t, h, s]), [0, 2, 1, 3]);
            let vh = permute(reshape(v, [b, t, h, s]), [0, 2, 1, 3]);
            reshape(permute(attention(qh, kh, vh, causal), [0, 2, 1, 3]), [b, t, d]));
        self.out.forward(tape, joined)
    }
}
