//! Trains a two-layer classifier on the UCI handwritten digits (the copy
//! scikit-learn ships, 1797 8×8 images) with `grad!`, cross-entropy and
//! Adam, then reports the accuracy on the 360 held-out test images.
//!
//! Run: `cargo run --release --example digits`
//!
//! Options: `--save PATH` writes the trained model to a safetensors file;
//! `--load PATH` evaluates a saved model instead of training one.

mod args;
mod data;

use std::error::Error;
use std::process::ExitCode;

use args::Args;
use data::{CLASSES, Digits, PIXELS};
use grad_runtime::{Adam, Minibatches, Params, Rng, Tape, Var, argmax, grad, init};

const HIDDEN: usize = 64;
const EPOCHS: usize = 30;
const BATCH: usize = 32;
/// The reference split: the first 1437 samples train, the last 360 test.
const TRAIN: usize = 1437;

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

    /// The class scores of a batch of images `[B, 64]`: `[B, 10]`.
    fn logits(&self, tape: &mut Tape<f32>, x: Var) -> Var {
        let Model { w1, b1, w2, b2 } = *self;
        grad!(tape;
            x: [B, 64], w1: [64, 64], b1: [64], w2: [64, 10], b2: [10];
            let hidden = relu(x @ w1 + b1);
            hidden @ w2 + b2
        )
    }
}

/// The fraction of `set` the model classifies correctly.
fn accuracy(tape: &mut Tape<f32>, model: &Model, set: &Digits) -> Result<f64, Box<dyn Error>> {
    let mark = tape.mark();
    let x = tape.constant(&set.images);
    let logits = model.logits(tape, x);
    let predicted = argmax(tape, logits, -1)?;
    tape.reset_to(mark);
    let correct = predicted.iter().zip(&set.labels).filter(|(p, l)| p == l).count();
    Ok(correct as f64 / set.len() as f64)
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}"); // Display, not the Debug form `main` would print
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let args = Args::parse(std::env::args().skip(1))?;
    let (train, test) = Digits::parse(include_str!("../data/digits.csv"))?.split(TRAIN);
    println!("digits: {} training and {} test images of {PIXELS} pixels, {CLASSES} classes", train.len(), test.len());

    let mut rng = Rng::new(0);
    let mut tape = Tape::<f32>::new();
    let model = Model::new(&mut tape, &mut rng);
    match &args.load {
        Some(path) => {
            model.load(&mut tape, path)?;
            println!("loaded {}", path.display());
        }
        None => train_model(&mut tape, &model, &train, &test, &mut rng)?,
    }
    let final_accuracy = accuracy(&mut tape, &model, &test)?;
    println!("final test accuracy: {:.1}% ({} nodes on the tape)", 100.0 * final_accuracy, tape.len());
    if let Some(path) = &args.save {
        let accuracy = format!("{:.1}", 100.0 * final_accuracy);
        model.save_with_metadata(&tape, path, &[("example", "digits"), ("test_accuracy", &accuracy)])?;
        println!("saved {}", path.display());
    }
    Ok(())
}

/// Adam on shuffled minibatches for `EPOCHS` epochs, reporting as it goes.
fn train_model(
    tape: &mut Tape<f32>,
    model: &Model,
    train: &Digits,
    test: &Digits,
    rng: &mut Rng,
) -> Result<(), Box<dyn Error>> {
    let mut opt = Adam::new(3e-3);
    opt.add_params(tape, model, |name| if name.starts_with('w') { 1e-4 } else { 0.0 })?;
    let mark = tape.mark();
    let mut batches = Minibatches::new(train.len(), BATCH);
    for epoch in 1..=EPOCHS {
        let mut total_loss = 0.0;
        for batch in batches.shuffled(rng) {
            let (images, labels) = train.batch(batch);
            let x = tape.constant(&images);
            let logits = model.logits(tape, x);
            let loss = grad!(tape; cross_entropy(logits, &labels));
            tape.backward(loss)?;
            opt.step(tape)?;
            total_loss += f64::from(tape.scalar(loss)) * batch.len() as f64;
            tape.reset_to(mark);
        }
        if epoch % 5 == 0 || epoch == 1 {
            let mean_loss = total_loss / train.len() as f64;
            let test_accuracy = accuracy(tape, model, test)?;
            println!("epoch {epoch:>2}: train loss {mean_loss:.4}, test accuracy {:.1}%", 100.0 * test_accuracy);
        }
    }
    Ok(())
}
