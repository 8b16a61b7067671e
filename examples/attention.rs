//! A one-block transformer that learns to reverse a sequence of digits:
//! given `3 1 4 1 5 9 2 6` it predicts `6 2 9 5 1 4 1 3`, every position at
//! once. Position `t`'s answer is the token at position `T - 1 - t`, so no
//! model that looks at one position alone can beat chance (10%): the
//! information has to come through attention (full, not causal: the answer
//! at the start is the last token).
//!
//! The block, pre-norm as in GPT-2, written as one `grad!` block with
//! declared shapes: token embedding plus a learned position embedding,
//! single-head self-attention, layer_norm, an MLP with gelu, a linear head
//! and cross-entropy over every position.
//!
//! Run: `cargo run --release -p grad-examples --example attention`
//! (`--quick`: 100 steps, as the test runs it).

use std::error::Error;
use std::process::ExitCode;
use std::time::Instant;

use grad_runtime::{Adam, Params, Rng, Tape, Var, argmax, grad, init, schedule};

/// Sequence length, vocabulary (the digits), model width, MLP width.
const T: usize = 8;
const VOCAB: usize = 10;
const D: usize = 32;
const HIDDEN: usize = 64;
const BATCH: usize = 64;
const STEPS: usize = 1500;
const LR: f64 = 3e-3;

#[derive(Params)]
struct Transformer {
    embed: Var,
    position: Var,
    norm1_gain: Var,
    norm1_shift: Var,
    query: Var,
    key: Var,
    value: Var,
    out: Var,
    norm2_gain: Var,
    norm2_shift: Var,
    w1: Var,
    b1: Var,
    w2: Var,
    b2: Var,
    norm3_gain: Var,
    norm3_shift: Var,
    head: Var,
}

impl Transformer {
    fn new(tape: &mut Tape<f32>, rng: &mut Rng) -> Transformer {
        let mut weight =
            |tape: &mut Tape<f32>, rows: usize, cols: usize| tape.param(init::xavier_uniform(rng, &[rows, cols]));
        Transformer {
            embed: weight(tape, VOCAB, D),
            position: weight(tape, T, D),
            query: weight(tape, D, D),
            key: weight(tape, D, D),
            value: weight(tape, D, D),
            out: weight(tape, D, D),
            w1: weight(tape, D, HIDDEN),
            w2: weight(tape, HIDDEN, D),
            head: weight(tape, D, VOCAB),
            b1: tape.param(init::zeros(&[HIDDEN])),
            b2: tape.param(init::zeros(&[D])),
            norm1_gain: tape.param(init::ones(&[D])),
            norm1_shift: tape.param(init::zeros(&[D])),
            norm2_gain: tape.param(init::ones(&[D])),
            norm2_shift: tape.param(init::zeros(&[D])),
            norm3_gain: tape.param(init::ones(&[D])),
            norm3_shift: tape.param(init::zeros(&[D])),
        }
    }

    /// The scores of every position of `batch` sequences (`ids`, row-major
    /// `[batch, T]`) over the vocabulary: `[batch * T, VOCAB]`.
    fn logits(&self, tape: &mut Tape<f32>, ids: &[usize], batch: usize) -> Var {
        let Transformer { embed, position, norm1_gain, norm1_shift, query, key, value, out, .. } = *self;
        let Transformer { norm2_gain, norm2_shift, w1, b1, w2, b2, norm3_gain, norm3_shift, head, .. } = *self;
        let (eps, scale) = (1e-5_f32, 1.0 / (D as f32).sqrt());
        grad!(tape;
            embed: [V, D], position: [T, D], query: [D, D], key: [D, D], value: [D, D], out: [D, D],
            norm1_gain: [D], norm1_shift: [D], norm2_gain: [D], norm2_shift: [D],
            w1: [D, H], b1: [H], w2: [H, D], b2: [D], norm3_gain: [D], norm3_shift: [D], head: [D, V];
            let x = reshape(embedding(embed, ids), [batch, T, D]) + position;
            // Self-attention: every position a weighted mean of all positions' values.
            let h = layer_norm(x, norm1_gain, norm1_shift, eps);
            let q = h @ query;
            let k = h @ key;
            let weights = softmax(bmm(q, transpose(k)) * scale, -1);
            let x = x + bmm(weights, h @ value) @ out;
            // The MLP, position by position.
            let h = layer_norm(x, norm2_gain, norm2_shift, eps);
            let x = x + gelu(h @ w1 + b1) @ w2 + b2;
            let h = layer_norm(x, norm3_gain, norm3_shift, eps);
            reshape(h @ head, [batch * T, V])
        )
    }
}

/// `count` random sequences (row-major) and their reversals.
fn sequences(rng: &mut Rng, count: usize) -> (Vec<usize>, Vec<usize>) {
    let ids: Vec<usize> = (0..count * T).map(|_| (rng.next_u64() % VOCAB as u64) as usize).collect();
    let reversed = ids.chunks(T).flat_map(|row| row.iter().rev().copied()).collect();
    (ids, reversed)
}

fn main() -> ExitCode {
    let quick = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--quick") => true,
        Some(other) => {
            eprintln!("error: unknown argument `{other}`\nusage: attention [--quick]");
            return ExitCode::FAILURE;
        }
    };
    match run(quick) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Trains on fresh random sequences; returns the test accuracy over all positions.
fn run(quick: bool) -> Result<f64, Box<dyn Error>> {
    let started = Instant::now();
    let mut rng = Rng::new(0);
    let mut tape = Tape::<f32>::new();
    let model = Transformer::new(&mut tape, &mut rng);
    let mut opt = Adam::new(LR);
    opt.add_params(&tape, &model, |_| 0.0)?;
    let mark = tape.mark();
    let steps = if quick { 100 } else { STEPS };
    let mut running = 0.0;
    for step in 0..steps {
        opt.set_lr(schedule::warmup_cosine(LR, step as u64, 100, steps as u64))?;
        let (ids, targets) = sequences(&mut rng, BATCH);
        let logits = model.logits(&mut tape, &ids, BATCH);
        let loss = grad!(tape; cross_entropy(logits, &targets));
        tape.backward(loss)?;
        opt.step(&mut tape)?;
        running += f64::from(tape.scalar(loss));
        tape.reset_to(mark);
        if (step + 1) % 100 == 0 {
            println!("step {:>4}: train loss {:.4}", step + 1, running / 100.0);
            running = 0.0;
        }
    }

    // Fresh sequences the model has not seen.
    let tests = 1000;
    let (ids, targets) = sequences(&mut Rng::new(12345), tests);
    let predicted = tape.inference(|t| {
        let logits = model.logits(t, &ids, tests);
        argmax(t, logits, -1)
    })??;
    let mut correct = [0usize; T];
    for (i, (p, t)) in predicted.iter().zip(&targets).enumerate() {
        correct[i % T] += usize::from(p == t);
    }
    let per_position: Vec<String> =
        correct.iter().map(|&c| format!("{:.0}%", 100.0 * c as f64 / tests as f64)).collect();
    println!("accuracy per position: {}", per_position.join(" "));
    let accuracy = correct.iter().sum::<usize>() as f64 / (tests * T) as f64;
    println!(
        "final test accuracy: {:.1}% (chance {:.0}%, {:.1} s)",
        100.0 * accuracy,
        100.0 / VOCAB as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(accuracy)
}

#[cfg(test)]
mod tests {
    /// A short run (`--quick`) already beats chance.
    #[test]
    fn a_quick_run_beats_chance() {
        let accuracy = super::run(true).unwrap();
        assert!(accuracy > 0.2, "accuracy {accuracy}");
    }
}
