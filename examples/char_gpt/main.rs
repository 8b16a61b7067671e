//! A character-level GPT (nanoGPT's architecture, `grad_examples::gpt`)
//! trained on the first 600 kB of the Rust book (`examples/data/`), then
//! asked for 200 characters of its own.
//!
//! W7 of the benchmarks: 4 layers, 4 heads, 128 wide, context 64, batch
//! 16; AdamW (β = 0.9/0.95, weight decay 0.1 on the 2-D weights only),
//! global-norm clipping at 1, a linear warm-up then cosine learning rate.
//! The first 90% of the text trains, the last 10% gives the validation
//! loss, measured every 100 steps on the same 20 batches.
//!
//! Run: `cargo run --release -p grad-examples --example char_gpt`
//!
//! Options (`args.rs`): `--steps N` (2000), `--seed N`, `--plot PATH`
//! (the PNG of the curves; a temp-dir file by default), `--save PATH`,
//! `--load PATH` (sample from a saved model), `--export PATH` (ONNX:
//! `ids [batch, 64]` int64 in, logits `[batch, 64, vocab]` out),
//! `--bf16` (matrix products from bf16 operands), `--quick` (a tiny model,
//! 60 steps).

mod args;
mod text;

use std::error::Error;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use args::Args;
use grad_examples::gpt::{Config, Gpt};
use grad_examples::{Curve, Progress, plot_curves_against};
use grad_runtime::ndarray::{Array2, ArrayView2};
use grad_runtime::onnx::Export;
use grad_runtime::{AdamW, GradError, Params, Precision, Rng, Tape, schedule};
use text::Vocab;

const TEXT: &str = include_str!("../data/rust_book.txt");
const LR: f64 = 1e-3;
const WEIGHT_DECAY: f64 = 0.1;
const TEMPERATURE: f64 = 0.8;

/// What differs between a full run and the smoke test's.
struct Plan {
    config: Config,
    batch: usize,
    steps: usize,
    warmup: usize,
    eval_every: usize,
    eval_batches: usize,
    sample: usize,
}

impl Plan {
    fn new(args: &Args, vocab: usize) -> Plan {
        if args.quick {
            let config = Config { vocab, block: 16, n_layer: 1, n_head: 2, n_embd: 32 };
            let steps = args.steps.unwrap_or(60);
            return Plan { config, batch: 4, steps, warmup: 5, eval_every: 10, eval_batches: 2, sample: 40 };
        }
        let steps = args.steps.unwrap_or(2000);
        Plan {
            config: Config::small(vocab),
            batch: 16,
            steps,
            warmup: 100,
            eval_every: 100,
            eval_batches: 20,
            sample: 200,
        }
    }
}

/// What a run reached (read by the smoke test).
#[cfg_attr(not(test), allow(dead_code))]
struct Report {
    first_validation: f64,
    validation: f64,
}

fn main() -> ExitCode {
    match Args::parse(std::env::args().skip(1)).map_err(Into::into).and_then(run) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<Report, Box<dyn Error>> {
    let vocab = Vocab::of(TEXT);
    let ids = vocab.encode(TEXT)?;
    let split = ids.len() * 9 / 10;
    let (train, validation) = ids.split_at(split);
    let plan = Plan::new(&args, vocab.len());
    let Config { block, n_layer, n_head, n_embd, .. } = plan.config;
    println!(
        "char_gpt: {} training and {} validation characters, {} distinct; {n_layer} layers, {n_head} heads, \
         {n_embd} wide, context {block}, batch {}",
        train.len(),
        validation.len(),
        vocab.len(),
        plan.batch
    );

    let mut rng = Rng::new(args.seed.unwrap_or(0));
    let mut tape = Tape::<f32>::new();
    if args.bf16 {
        tape.set_matmul_precision(Precision::Bf16)?;
        println!("matrix products from bf16 operands, summed in f32");
    }
    let model = Gpt::new(&mut tape, &mut rng, plan.config);
    let count: usize = model.named_params().iter().map(|(_, p)| tape.value(*p).len()).sum();
    println!("{count} parameters");
    // The same validation windows at every evaluation.
    let held_out: Vec<_> =
        (0..plan.eval_batches).map(|_| text::batch(validation, plan.batch, block, &mut Rng::new(12345))).collect();
    let first_validation = validation_loss(&mut tape, &model, &held_out)?;
    match &args.load {
        Some(path) => {
            model.load(&mut tape, path)?;
            println!("loaded {}", path.display());
        }
        None => train_model(&mut tape, &model, train, &held_out, &plan, &mut rng, &args)?,
    }
    let validation = validation_loss(&mut tape, &model, &held_out)?;
    println!("validation loss {validation:.4} (untrained {first_validation:.4})");
    if let Some(path) = &args.save {
        model.save_with_metadata(
            &tape,
            path,
            &[("example", "char_gpt"), ("validation_loss", &format!("{validation:.4}"))],
        )?;
        println!("saved {}", path.display());
    }
    if let Some(path) = &args.export {
        export(&mut tape, &model, path)?;
        println!("exported {}", path.display());
    }
    let prompt = vocab.encode("fn main() {\n")?;
    let sampled = sample(&mut tape, &model, &prompt, plan.sample, &mut rng)?;
    println!("--- {} characters after `fn main() {{`:\n{}\n---", plan.sample, vocab.decode(&sampled));
    Ok(Report { first_validation, validation })
}

/// Trains for `plan.steps` steps, evaluating every `plan.eval_every`.
fn train_model(
    tape: &mut Tape<f32>,
    model: &Gpt,
    train: &[usize],
    held_out: &[(Array2<usize>, Array2<usize>)],
    plan: &Plan,
    rng: &mut Rng,
    args: &Args,
) -> Result<(), Box<dyn Error>> {
    let mut opt = AdamW::new(LR).betas(0.9, 0.95).eps(1e-8);
    opt.add_params(tape, model, |name| Gpt::weight_decay(name, WEIGHT_DECAY))?;
    opt.set_clip(1.0)?;
    let mark = tape.mark();
    let (mut train_curve, mut validation_curve) = (Vec::new(), Vec::new());
    let started = Instant::now();
    let intervals = plan.steps.div_ceil(plan.eval_every);
    for interval in 0..intervals {
        let steps = plan.eval_every.min(plan.steps - interval * plan.eval_every);
        let progress = Progress::epoch(interval + 1, intervals, steps, args.quick);
        let mut total = 0.0;
        for k in 0..steps {
            let step = interval * plan.eval_every + k;
            opt.set_lr(schedule::warmup_cosine(LR, step as u64, plan.warmup as u64, plan.steps as u64))?;
            let (inputs, targets) = text::batch(train, plan.batch, plan.config.block, rng);
            let tokens = model.embed(tape, inputs.view());
            let logits = model.logits(tape, tokens);
            let loss = model.loss(tape, logits, targets.view());
            tape.backward(loss)?;
            opt.step(tape)?;
            total += f64::from(tape.scalar(loss));
            tape.reset_to(mark);
            progress.step(total / (k + 1) as f64);
        }
        let validation = validation_loss(tape, model, held_out)?;
        let done = interval * plan.eval_every + steps;
        let tokens_per_s = (done * plan.batch * plan.config.block) as f64 / started.elapsed().as_secs_f64();
        progress.finish(&format!(
            "step {done:>5}: train loss {:.4}, validation loss {validation:.4}, {tokens_per_s:.0} tokens/s",
            total / steps as f64
        ));
        train_curve.push(total / steps as f64);
        validation_curve.push(validation);
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "trained {} steps in {elapsed:.1} s: {:.1} ms a step, {:.0} tokens/s",
        plan.steps,
        1e3 * elapsed / plan.steps as f64,
        (plan.steps * plan.batch * plan.config.block) as f64 / elapsed
    );
    let plot = match (&args.plot, args.quick) {
        (Some(path), _) => Some(path.clone()),
        (None, false) => Some(std::env::temp_dir().join("grad-char-gpt.png")),
        (None, true) => None,
    };
    if let Some(path) = plot {
        let curves = [
            Curve { label: "training loss", values: &train_curve },
            Curve { label: "validation loss", values: &validation_curve },
        ];
        let x_label = format!("step / {}", plan.eval_every);
        plot_curves_against(&path, "char_gpt: loss per evaluation", &x_label, &curves)?;
        println!("plot: {}", path.display());
    }
    Ok(())
}

/// The mean loss over the held-out batches.
fn validation_loss(
    tape: &mut Tape<f32>,
    model: &Gpt,
    held_out: &[(Array2<usize>, Array2<usize>)],
) -> Result<f64, Box<dyn Error>> {
    let mut total = 0.0;
    for (inputs, targets) in held_out {
        total += tape.inference(|t| {
            let tokens = model.embed(t, inputs.view());
            let logits = model.logits(t, tokens);
            let loss = model.loss(t, logits, targets.view());
            t.try_scalar(loss).map(f64::from)
        })??;
    }
    Ok(total / held_out.len() as f64)
}

/// `count` characters after `prompt`, each drawn from the model's
/// distribution over the next one (temperature 0.8).
fn sample(
    tape: &mut Tape<f32>,
    model: &Gpt,
    prompt: &[usize],
    count: usize,
    rng: &mut Rng,
) -> Result<Vec<usize>, Box<dyn Error>> {
    let block = model.config.block;
    let mut context = prompt.to_vec();
    let mut row = Vec::new();
    for _ in 0..count {
        let window =
            ArrayView2::from_shape((1, context.len().min(block)), &context[context.len().saturating_sub(block)..])?;
        tape.inference(|t| {
            let tokens = model.embed(t, window);
            let logits = model.logits(t, tokens);
            let values = t.try_value(logits)?;
            let last = values.shape()[1] - 1;
            row.clear();
            row.extend(values.slice(ndarray::s![0, last, ..]));
            Ok::<(), GradError>(())
        })??;
        context.push(text::sample(&row, TEMPERATURE, rng));
    }
    Ok(context[prompt.len()..].to_vec())
}

/// The model as ONNX: token ids `[batch, block]` in, logits out, at any
/// number of sequences.
fn export(tape: &mut Tape<f32>, model: &Gpt, path: &Path) -> Result<(), Box<dyn Error>> {
    let mark = tape.mark();
    let ids = Array2::zeros((2, model.config.block));
    let tokens = model.embed(tape, ids.view());
    let logits = model.logits(tape, tokens);
    let exported =
        Export::new(tape).params(model).ids_input("ids", tokens).output("logits", logits).batch("batch").write(path);
    tape.reset_to(mark);
    Ok(exported?)
}

#[cfg(test)]
mod tests {
    /// A tiny model for 60 steps end to end (`--quick`), so the example
    /// cannot rot: the validation loss falls well below the untrained one.
    #[test]
    fn a_quick_run_learns_and_samples() {
        let report = super::run(super::Args::parse(["--quick".to_string()]).unwrap()).unwrap();
        assert!(
            report.validation < report.first_validation - 0.5,
            "{} -> {}",
            report.first_validation,
            report.validation
        );
    }
}
