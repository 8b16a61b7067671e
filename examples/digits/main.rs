//! Trains a classifier on the UCI handwritten digits (the copy scikit-learn
//! ships, 1797 8×8 images) with `grad!`, then reports the accuracy on the
//! 360 test images (the last rows, written by other people than the
//! training rows).
//!
//! The recipe (`grad-runtime/src/guide/examples.md` has each step's
//! accuracy): a 256-wide hidden layer with dropout, AdamW with weight decay
//! on the weights only, a warm-up then cosine learning rate, one-pixel
//! shifts of the training images, and early stopping on a validation slice
//! of the training rows (the test rows are never used to choose anything).
//!
//! Run: `cargo run --release -p grad-examples --example digits`
//!
//! Options (`args.rs`): `--epochs N`, `--seed N`, `--plot PATH` (the PNG of
//! the curves; a temp-dir file by default), `--save PATH`, `--load PATH`,
//! `--export PATH` (an ONNX model: `pixels [batch, 64]` in `0..=1`, the
//! class probabilities `probs [batch, 10]` out), `--quick` (one epoch).

mod args;
mod data;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use args::Args;
use data::{CLASSES, Digits, PIXELS};
use grad_examples::{Curve, Progress, plot_curves};
use grad_runtime::onnx::Export;
use grad_runtime::{AdamW, Minibatches, Params, Rng, Tape, Var, argmax, grad, init, schedule};

const HIDDEN: usize = 256;
const DROPOUT: f32 = 0.25;
const EPOCHS: usize = 60;
const BATCH: usize = 32;
const LR: f64 = 2e-3;
const WEIGHT_DECAY: f64 = 1e-2;
const WARMUP_EPOCHS: usize = 3;
/// Stop when the validation accuracy has not improved for this many epochs.
const PATIENCE: usize = 15;
/// The reference split: the first 1437 samples train, the last 360 test.
const TRAIN: usize = 1437;
/// The last rows of the training part, held out to choose the epoch.
const VALIDATION: usize = 144;

#[derive(Params)]
struct Model {
    w1: Var,
    b1: Var,
    w2: Var,
    b2: Var,
}

impl Model {
    /// Weights He-initialised (for relu), biases zero.
    fn new(tape: &mut Tape<f32>, rng: &mut Rng) -> Model {
        Model {
            w1: tape.param(init::he_normal(rng, &[PIXELS, HIDDEN])),
            b1: tape.param(init::zeros(&[HIDDEN])),
            w2: tape.param(init::he_normal(rng, &[HIDDEN, CLASSES])),
            b2: tape.param(init::zeros(&[CLASSES])),
        }
    }

    /// The class scores of a batch of images `[B, 64]`: `[B, 10]`; dropout
    /// on the hidden layer when `train`.
    fn logits(&self, tape: &mut Tape<f32>, x: Var, rng: &mut Rng, train: bool) -> Var {
        let Model { w1, b1, w2, b2 } = *self;
        grad!(tape;
            x: [B, 64], w1: [64, 256], b1: [256], w2: [256, 10], b2: [10];
            let hidden = dropout(relu(x @ w1 + b1), DROPOUT, rng, train);
            hidden @ w2 + b2
        )
    }
}

/// The fraction of `set` the model classifies correctly.
fn accuracy(tape: &mut Tape<f32>, model: &Model, set: &Digits) -> Result<f64, Box<dyn Error>> {
    let predicted = tape.inference(|t| {
        let x = t.constant(&set.images);
        let logits = model.logits(t, x, &mut Rng::new(0), false);
        argmax(t, logits, -1)
    })??;
    let correct = predicted.iter().zip(&set.labels).filter(|(p, l)| p == l).count();
    Ok(correct as f64 / set.len() as f64)
}

/// Writes the model as ONNX, traced on the test images in evaluation mode
/// (dropout off): `pixels [batch, 64]` in, `probs [batch, 10]` out, any batch size.
fn export(tape: &mut Tape<f32>, model: &Model, set: &Digits, path: &Path) -> Result<(), Box<dyn Error>> {
    let mark = tape.mark();
    let x = tape.constant(&set.images);
    let logits = model.logits(tape, x, &mut Rng::new(0), false);
    let probs = grad!(tape; softmax(logits, -1));
    let exported = Export::new(tape).params(model).input("pixels", x).output("probs", probs).batch("batch").write(path);
    tape.reset_to(mark);
    Ok(exported?)
}

fn main() -> ExitCode {
    match run(Args::parse(std::env::args().skip(1))) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}"); // Display, not the Debug form `main` would print
            ExitCode::FAILURE
        }
    }
}

/// The whole example; returns the final test accuracy.
fn run(args: Result<Args, args::UsageError>) -> Result<f64, Box<dyn Error>> {
    let args = args?;
    let started = Instant::now();
    let (train, test) = Digits::parse(include_str!("../data/digits.csv"))?.split(TRAIN);
    let (train, validation) = train.split(TRAIN - VALIDATION);
    println!(
        "digits: {} training, {} validation and {} test images of {PIXELS} pixels, {CLASSES} classes",
        train.len(),
        validation.len(),
        test.len()
    );

    let mut rng = Rng::new(args.seed.unwrap_or(0));
    let mut tape = Tape::<f32>::new();
    let model = Model::new(&mut tape, &mut rng);
    match &args.load {
        Some(path) => {
            model.load(&mut tape, path)?;
            println!("loaded {}", path.display());
        }
        None => {
            let epochs = if args.quick { 1 } else { args.epochs.unwrap_or(EPOCHS) };
            let plot = match (&args.plot, args.quick) {
                (Some(path), _) => Some(path.clone()),
                (None, false) => Some(std::env::temp_dir().join("grad-digits.png")),
                (None, true) => None,
            };
            let sets = Sets { train: &train, validation: &validation, test: &test };
            train_model(&mut tape, &model, sets, epochs, &mut rng, args.quick, plot)?;
        }
    }
    let final_accuracy = accuracy(&mut tape, &model, &test)?;
    println!(
        "final test accuracy: {:.1}% ({:.1} s, {} nodes on the tape)",
        100.0 * final_accuracy,
        started.elapsed().as_secs_f64(),
        tape.len()
    );
    if let Some(path) = &args.save {
        let accuracy = format!("{:.1}", 100.0 * final_accuracy);
        model.save_with_metadata(&tape, path, &[("example", "digits"), ("test_accuracy", &accuracy)])?;
        println!("saved {}", path.display());
    }
    if let Some(path) = &args.export {
        export(&mut tape, &model, &test, path)?;
        println!("exported {}", path.display());
    }
    Ok(final_accuracy)
}

struct Sets<'a> {
    train: &'a Digits,
    validation: &'a Digits,
    test: &'a Digits,
}

/// AdamW on shuffled, shifted minibatches with a warm-up then cosine
/// learning rate; keeps the weights of the epoch with the best validation
/// accuracy (a checkpoint file) and stops after `PATIENCE` epochs without
/// a better one. The test accuracy is printed and plotted, never used.
fn train_model(
    tape: &mut Tape<f32>,
    model: &Model,
    sets: Sets<'_>,
    epochs: usize,
    rng: &mut Rng,
    quiet: bool,
    plot: Option<PathBuf>,
) -> Result<(), Box<dyn Error>> {
    let mut opt = AdamW::new(LR);
    opt.add_params(tape, model, |name| if name.starts_with('w') { WEIGHT_DECAY } else { 0.0 })?;
    let mark = tape.mark();
    let mut batches = Minibatches::new(sets.train.len(), BATCH);
    let steps_per_epoch = sets.train.len().div_ceil(BATCH);
    let total_steps = (epochs * steps_per_epoch) as u64;
    let warmup = (WARMUP_EPOCHS.min(epochs) * steps_per_epoch) as u64;
    let checkpoint = std::env::temp_dir().join(format!("grad-digits-best-{}.safetensors", std::process::id()));
    let (mut best, mut best_epoch) = (-1.0, 0);
    let (mut losses, mut test_accuracies) = (Vec::new(), Vec::new());
    for epoch in 1..=epochs {
        let progress = Progress::epoch(epoch, epochs, steps_per_epoch, quiet);
        let (mut total_loss, mut seen) = (0.0, 0);
        for batch in batches.shuffled(rng) {
            opt.set_lr(schedule::warmup_cosine(LR, opt.steps(), warmup, total_steps))?;
            let (mut images, labels) = sets.train.batch(batch);
            data::shift_randomly(&mut images, rng);
            let x = tape.constant(&images);
            let logits = model.logits(tape, x, rng, true);
            let loss = grad!(tape; cross_entropy(logits, &labels));
            tape.backward(loss)?;
            opt.step(tape)?;
            total_loss += f64::from(tape.scalar(loss)) * batch.len() as f64;
            seen += batch.len();
            tape.reset_to(mark);
            progress.step(total_loss / seen as f64);
        }
        let validation = accuracy(tape, model, sets.validation)?;
        let test = accuracy(tape, model, sets.test)?;
        losses.push(total_loss / seen as f64);
        test_accuracies.push(100.0 * test);
        let mark_best = if validation > best { " *" } else { "" };
        progress.finish(&format!(
            "epoch {epoch:>2}: train loss {:.4}, validation accuracy {:.1}%, test accuracy {:.1}%{mark_best}",
            total_loss / seen as f64,
            100.0 * validation,
            100.0 * test
        ));
        if validation > best {
            (best, best_epoch) = (validation, epoch);
            model.save(tape, &checkpoint)?;
        } else if epoch - best_epoch >= PATIENCE {
            println!("early stop: no better validation accuracy for {PATIENCE} epochs");
            break;
        }
    }
    model.load(tape, &checkpoint)?;
    std::fs::remove_file(&checkpoint)?;
    println!("kept epoch {best_epoch} (best validation accuracy {:.1}%)", 100.0 * best);
    if let Some(path) = plot {
        let curves = [
            Curve { label: "training loss", values: &losses },
            Curve { label: "test accuracy (%)", values: &test_accuracies },
        ];
        plot_curves(&path, "digits: training loss and test accuracy per epoch", &curves)?;
        println!("plot: {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// One epoch end to end (`--quick`), so the example cannot rot; the
    /// ONNX file it exports is checked by onnxruntime in `tests/onnx.rs`'s way.
    #[test]
    fn a_quick_run_trains_and_beats_chance_and_exports() {
        let path = std::env::temp_dir().join(format!("grad-digits-{}.onnx", std::process::id()));
        let args = ["--quick".to_string(), "--export".to_string(), path.display().to_string()];
        let accuracy = super::run(super::Args::parse(args)).unwrap();
        assert!(accuracy > 0.5, "one epoch reached {accuracy}");
        // The weights (64·256 + 256·10 floats) are in the file.
        assert!(std::fs::metadata(&path).unwrap().len() > 4 * (64 * 256 + 256 * 10));
        std::fs::remove_file(&path).unwrap();
    }
}
