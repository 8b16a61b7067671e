//! [`MultiHeadAttention`]: scaled dot-product attention with several heads.

use std::panic::Location;

use ndarray::Array2;

use crate::error::{ErrorKind, GradError};
use crate::nn::Linear;
use crate::{Float, Params, Rng, Tape, Var, grad};

/// Multi-head self-attention over `x: [B, T, D]` (Vaswani et al.): the
/// projections `query`, `key`, `value` (each a `Linear` `[D, D]`) are split
/// into `heads` heads of `D / heads` features; each head computes
/// `softmax(q·kᵀ / √(D / heads) + mask) · v`; the heads are joined and
/// projected by `out`. With [`causal`](MultiHeadAttention::causal),
/// position `t` attends to positions `<= t` only (the mask is a large
/// negative number above the diagonal, so every value stays finite).
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
        // Sizes for the mask and the head slices; a wrong rank is reported
        // by the block's declared-shape check (`q` is not `[B, T, D]`).
        let t = match *tape.value(x).shape() {
            [_, t, _] => t,
            _ => 0,
        };
        let width = tape.value(self.query.bias).len() / self.heads;
        let scale = T::from_f64(1.0 / (width.max(1) as f64).sqrt());
        let mask = tape.constant(self.mask::<T>(t));
        let mut joined: Option<Var> = None;
        for head in 0..self.heads {
            let (lo, hi) = (head * width, (head + 1) * width);
            let head_out = grad!(tape; q: [B, T, D], k: [B, T, D], v: [B, T, D], mask: [T, T];
                let qh = slice(q, [0, 0, lo], [B, T, hi]);
                let kh = slice(k, [0, 0, lo], [B, T, hi]);
                let vh = slice(v, [0, 0, lo], [B, T, hi]);
                let weights = softmax(bmm(qh, transpose(kh)) * scale + mask, -1);
                bmm(weights, vh));
            joined = Some(match joined {
                None => head_out,
                Some(before) => grad!(tape; concat(before, head_out, 2)),
            });
        }
        self.out.forward(tape, joined.unwrap_or(x))
    }

    /// `[T, T]`: 0 where a position may attend, a large negative number
    /// where it may not (above the diagonal when causal).
    fn mask<T: Float>(&self, t: usize) -> Array2<T> {
        let blocked = T::from_f64(-1e30);
        Array2::from_shape_fn((t, t), |(i, j)| if self.causal && j > i { blocked } else { T::zero() })
    }
}
