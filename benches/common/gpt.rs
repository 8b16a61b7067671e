//! nanoGPT's GPT (Karpathy's `model.py`) written with grad: token and
//! position embeddings, pre-norm blocks of causal self-attention (one
//! fused qkv projection, its heads attended where they lie by
//! `attention_packed`) and a GELU MLP, a final
//! layer norm, and logits from the token embedding (tied weights). Its
//! parameter names follow nanoGPT's (`h.0.attn.c_attn.weight`), its
//! initialisation too: normal(0, 0.02), the residual projections
//! 0.02/√(2·n_layer), biases 0. Dropout is 0, as in nanoGPT's benchmarks.
//!
//! One file for two users: the char_gpt example (`grad_examples::gpt`)
//! and W7 of the benchmarks (`benches/common`), so that W7 measures the
//! model the example trains.

use grad_runtime::nn::{Embedding, LayerNorm, Linear};
use grad_runtime::{Float, Params, Rng, Tape, Var, grad, init};
use ndarray::ArrayView2;

/// The model's sizes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub vocab: usize,
    /// The longest context.
    pub block: usize,
    pub n_layer: usize,
    pub n_head: usize,
    /// The model width; a multiple of `n_head`.
    pub n_embd: usize,
}

impl Config {
    /// The benchmark configuration (W7): 4 layers, 4 heads, 128 wide,
    /// context 64, for a vocabulary of `vocab` characters.
    pub fn small(vocab: usize) -> Config {
        Config { vocab, block: 64, n_layer: 4, n_head: 4, n_embd: 128 }
    }
}

/// `Linear` initialised as nanoGPT's: weights normal(0, `std`), bias 0.
fn linear<T: Float>(tape: &mut Tape<T>, rng: &mut Rng, fan_in: usize, fan_out: usize, std: f64) -> Linear {
    Linear {
        weight: tape.param(init::normal(rng, &[fan_in, fan_out], 0.0, std)),
        bias: tape.param(init::zeros(&[fan_out])),
    }
}

/// Causal self-attention: `c_attn` projects to queries, keys and values at
/// once (`[C, 3C]`), `c_proj` joins the heads.
#[derive(Params, Clone, Copy)]
pub struct Attention {
    pub c_attn: Linear,
    pub c_proj: Linear,
}

/// The MLP: `C → 4C`, GELU (tanh form), `4C → C`.
#[derive(Params, Clone, Copy)]
pub struct Mlp {
    pub c_fc: Linear,
    pub c_proj: Linear,
}

/// One transformer block, pre-norm.
#[derive(Params, Clone, Copy)]
pub struct Block {
    pub ln_1: LayerNorm,
    pub attn: Attention,
    pub ln_2: LayerNorm,
    pub mlp: Mlp,
}

/// The whole model.
#[derive(Params)]
pub struct Gpt {
    pub wte: Embedding,
    pub wpe: Embedding,
    pub h: Vec<Block>,
    pub ln_f: LayerNorm,
    #[params(skip)]
    pub config: Config,
    /// Run each block as a checkpointed segment (`Tape::checkpoint`): its
    /// intermediates are dropped after the forward and recomputed in
    /// backward. Under `Tape::inference` the blocks are segments anyway,
    /// so that evaluation holds one block's intermediates at a time.
    #[params(skip)]
    pub checkpoint: bool,
}

impl Gpt {
    /// A model of `config`'s sizes, initialised from `rng`.
    pub fn new<T: Float>(tape: &mut Tape<T>, rng: &mut Rng, config: Config) -> Gpt {
        let Config { vocab, block, n_layer, n_embd: c, .. } = config;
        let residual = 0.02 / ((2 * n_layer) as f64).sqrt();
        let mut embedding =
            |rng: &mut Rng, rows| Embedding { weight: tape.param(init::normal(rng, &[rows, c], 0.0, 0.02)) };
        let (wte, wpe) = (embedding(rng, vocab), embedding(rng, block));
        let h = (0..n_layer)
            .map(|_| Block {
                ln_1: LayerNorm::new(tape, c),
                attn: Attention {
                    c_attn: linear(tape, rng, c, 3 * c, 0.02),
                    c_proj: linear(tape, rng, c, c, residual),
                },
                ln_2: LayerNorm::new(tape, c),
                mlp: Mlp { c_fc: linear(tape, rng, c, 4 * c, 0.02), c_proj: linear(tape, rng, 4 * c, c, residual) },
            })
            .collect();
        Gpt { wte, wpe, h, ln_f: LayerNorm::new(tape, c), config, checkpoint: false }
    }

    /// AdamW's weight decay for parameter `name`, as nanoGPT's
    /// `configure_optimizers`: `decay` on every 2-D weight (the linear
    /// layers' and the embeddings'), 0 on biases and layer norms.
    pub fn weight_decay(name: &str, decay: f64) -> f64 {
        let is_norm = name.contains("ln_");
        if name.ends_with(".weight") && !is_norm { decay } else { 0.0 }
    }

    /// The token embedding of `ids` `[batch, T]` (`T <= block`):
    /// `[batch, T, C]`. Its handle is what an ONNX export names as the ids
    /// input.
    #[track_caller]
    pub fn embed<T: Float>(&self, tape: &mut Tape<T>, ids: ArrayView2<'_, usize>) -> Var {
        self.wte.forward(tape, &ids)
    }

    /// The next-character logits of every position, `[batch, T, vocab]`,
    /// from the token embedding `tokens` of [`embed`](Gpt::embed).
    #[track_caller]
    pub fn logits<T: Float>(&self, tape: &mut Tape<T>, tokens: Var) -> Var {
        let wpe = self.wpe.weight;
        // The first T positions' embeddings.
        let mut x = grad!(tape; tokens: [B, T, C], wpe: [P, C]; tokens + slice(wpe, [0, 0], [T, C]));
        let n_head = self.config.n_head;
        for block in &self.h {
            x = if self.checkpoint || tape.is_inference() {
                let block = *block;
                tape.checkpoint(move |t| Gpt::block(t, &block, n_head, x))
            } else {
                Gpt::block(tape, block, n_head, x)
            };
        }
        let (g, b, wte) = (self.ln_f.weight, self.ln_f.bias, self.wte.weight);
        grad!(tape; x: [B, T, C], g: [C], b: [C], wte: [V, C];
            layer_norm(x, g, b, 1e-5) @ transpose(wte))
    }

    /// The mean cross-entropy of `logits` (`[batch, T, vocab]`) against
    /// the next characters `targets` (`[batch, T]`).
    #[track_caller]
    pub fn loss<T: Float>(&self, tape: &mut Tape<T>, logits: Var, targets: ArrayView2<'_, usize>) -> Var {
        grad!(tape; logits: [B, T, V], targets: [B, T]; cross_entropy(logits, &targets))
    }

    /// One block: `x + attention(ln_1(x))`, then `x + mlp(ln_2(x))`.
    #[track_caller]
    fn block<T: Float>(tape: &mut Tape<T>, block: &Block, h: usize, x: Var) -> Var {
        let Block { ln_1, attn, ln_2, mlp } = block;
        let (g1, b1, g2, b2) = (ln_1.weight, ln_1.bias, ln_2.weight, ln_2.bias);
        let (w_qkv, b_qkv, w_out, b_out) = (attn.c_attn.weight, attn.c_attn.bias, attn.c_proj.weight, attn.c_proj.bias);
        let (w_fc, b_fc, w_proj, b_proj) = (mlp.c_fc.weight, mlp.c_fc.bias, mlp.c_proj.weight, mlp.c_proj.bias);
        grad!(tape;
            x: [B, T, C], g1: [C], b1: [C], w_qkv: [C, Q], b_qkv: [Q], w_out: [C, C], b_out: [C],
            g2: [C], b2: [C], w_fc: [C, F], b_fc: [F], w_proj: [F, C], b_proj: [C];
            let qkv = layer_norm(x, g1, b1, 1e-5) @ w_qkv + b_qkv;
            let x = x + attention_packed(qkv, h, true) @ w_out + b_out;
            x + gelu(layer_norm(x, g2, b2, 1e-5) @ w_fc + b_fc) @ w_proj + b_proj)
    }
}
