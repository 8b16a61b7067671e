//! A small convolutional network on the UCI handwritten digits (8×8
//! images, the same split as `examples/digits`: the first 1437 train, the
//! last 360 test): two 3×3 convolutions with relu, a 2×2 max-pool and a
//! linear head, written as `grad!` blocks with declared shapes, trained
//! with cross-entropy and Adam. Deterministic from its seed.
//!
//! Run: `cargo run --release -p grad-examples --example digits_cnn`

#[allow(dead_code)] // shared with digits, which uses every helper
#[path = "digits/data.rs"]
mod data;

use std::error::Error;
use std::process::ExitCode;

use data::{CLASSES, Digits};
use grad_runtime::{Adam, Minibatches, Params, Rng, Tape, Var, argmax, grad, init};

const C1: usize = 16;
const C2: usize = 32;
const EPOCHS: usize = 15;
const BATCH: usize = 32;
const TRAIN: usize = 1437;
const SEED: u64 = 0;

#[derive(Params)]
struct Model {
    k1: Var,
    c1: Var,
    k2: Var,
    c2: Var,
    w: Var,
    b: Var,
}

impl Model {
    /// Kernels He-initialised over their fan-in (channels × 3 × 3), biases zero.
    fn new(tape: &mut Tape<f32>, rng: &mut Rng) -> Model {
        let he = |fan_in: usize| (2.0 / fan_in as f64).sqrt();
        Model {
            k1: tape.param(init::normal(rng, &[C1, 1, 3, 3], 0.0, he(9))),
            c1: tape.param(init::zeros(&[C1])),
            k2: tape.param(init::normal(rng, &[C2, C1, 3, 3], 0.0, he(C1 * 9))),
            c2: tape.param(init::zeros(&[C2])),
            w: tape.param(init::he_normal(rng, &[C2 * 16, CLASSES])),
            b: tape.param(init::zeros(&[CLASSES])),
        }
    }

    /// The class scores of a batch of images `[B, 64]`: `[B, 10]`.
    fn logits(&self, tape: &mut Tape<f32>, x: Var) -> Var {
        let Model { k1, c1, k2, c2, w, b } = *self;
        grad!(tape;
            x: [B, 64], k1: [16, 1, 3, 3], k2: [32, 16, 3, 3], w: [512, 10], b: [10];
            let image = reshape(x, [B, 1, 8, 8]);
            let h1 = relu(conv2d(image, k1, Some(c1), [1, 1], [1, 1]));    // [B, 16, 8, 8]
            let h2 = relu(conv2d(h1, k2, Some(c2), [1, 1], [1, 1]));       // [B, 32, 8, 8]
            let pooled = max_pool2d(h2, [2, 2], [2, 2]);                  // [B, 32, 4, 4]
            reshape(pooled, [B, 512]) @ w + b
        )
    }
}

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
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let (train, test) = Digits::parse(include_str!("data/digits.csv"))?.split(TRAIN);
    let mut rng = Rng::new(SEED);
    let mut tape = Tape::<f32>::new();
    let model = Model::new(&mut tape, &mut rng);
    let mut opt = Adam::new(2e-3);
    opt.add_params(&tape, &model, |_| 0.0)?;
    let mark = tape.mark();
    let mut batches = Minibatches::new(train.len(), BATCH);
    for epoch in 1..=EPOCHS {
        let mut total_loss = 0.0;
        for batch in batches.shuffled(&mut rng) {
            let (images, labels) = train.batch(batch);
            let x = tape.constant(&images);
            let logits = model.logits(&mut tape, x);
            let loss = grad!(tape; cross_entropy(logits, &labels));
            tape.backward(loss)?;
            opt.step(&mut tape)?;
            total_loss += f64::from(tape.scalar(loss)) * batch.len() as f64;
            tape.reset_to(mark);
        }
        if epoch % 5 == 0 || epoch == 1 {
            let test_accuracy = accuracy(&mut tape, &model, &test)?;
            let mean_loss = total_loss / train.len() as f64;
            println!("epoch {epoch:>2}: train loss {mean_loss:.4}, test accuracy {:.1}%", 100.0 * test_accuracy);
        }
    }
    println!("final test accuracy: {:.1}%", 100.0 * accuracy(&mut tape, &model, &test)?);
    Ok(())
}
