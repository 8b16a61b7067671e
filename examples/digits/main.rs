//! Trains a two-layer classifier on the UCI handwritten digits (the copy
//! scikit-learn ships, 1797 8×8 images) with `grad!`, cross-entropy and
//! Adam, then reports the accuracy on the 360 held-out test images.
//!
//! Run: `cargo run --release --example digits`

mod data;

use std::error::Error;

use data::{CLASSES, Digits, PIXELS};
use grad_runtime::{Adam, Rng, Tape, Var, argmax, grad};
use ndarray::{Array1, Array2};

const HIDDEN: usize = 64;
const EPOCHS: usize = 30;
const BATCH: usize = 32;
/// The reference split: the first 1437 samples train, the last 360 test.
const TRAIN: usize = 1437;

/// Weights drawn from N(0, 2 / fan_in) (He initialisation, for relu).
fn he_init(rng: &mut Rng, fan_in: usize, fan_out: usize) -> Array2<f32> {
    let scale = (2.0 / fan_in as f64).sqrt();
    Array2::from_shape_fn((fan_in, fan_out), |_| (rng.normal() * scale) as f32)
}

struct Model {
    w1: Var,
    b1: Var,
    w2: Var,
    b2: Var,
}

impl Model {
    fn new(tape: &mut Tape<f32>, rng: &mut Rng) -> Model {
        Model {
            w1: tape.param(he_init(rng, PIXELS, HIDDEN)),
            b1: tape.param(Array1::<f32>::zeros(HIDDEN)),
            w2: tape.param(he_init(rng, HIDDEN, CLASSES)),
            b2: tape.param(Array1::<f32>::zeros(CLASSES)),
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

fn main() -> Result<(), Box<dyn Error>> {
    let (train, test) = Digits::parse(include_str!("../data/digits.csv"))?.split(TRAIN);
    println!("digits: {} training and {} test images of {PIXELS} pixels, {CLASSES} classes", train.len(), test.len());

    let mut rng = Rng::new(0);
    let mut tape = Tape::<f32>::new();
    let model = Model::new(&mut tape, &mut rng);
    let mut opt = Adam::new(3e-3);
    opt.add(&tape, model.w1, 1e-4)?;
    opt.add(&tape, model.b1, 0.0)?;
    opt.add(&tape, model.w2, 1e-4)?;
    opt.add(&tape, model.b2, 0.0)?;
    let mark = tape.mark();

    let mut order: Vec<usize> = (0..train.len()).collect();
    for epoch in 1..=EPOCHS {
        shuffle(&mut order, &mut rng);
        let mut total_loss = 0.0;
        for batch in order.chunks(BATCH) {
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
            let mean_loss = total_loss / train.len() as f64;
            let test_accuracy = accuracy(&mut tape, &model, &test)?;
            println!("epoch {epoch:>2}: train loss {mean_loss:.4}, test accuracy {:.1}%", 100.0 * test_accuracy);
        }
    }
    let final_accuracy = accuracy(&mut tape, &model, &test)?;
    println!("final test accuracy: {:.1}% ({} nodes on the tape)", 100.0 * final_accuracy, tape.len());
    Ok(())
}

/// Fisher-Yates with the example's seeded generator.
fn shuffle(items: &mut [usize], rng: &mut Rng) {
    for i in (1..items.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}
