//! A small convolutional network on the UCI handwritten digits (8×8
//! images, the same split as `examples/digits`: the first 1437 train, the
//! last 360 test): two 3×3 convolutions with relu, a 2×2 max-pool and a
//! linear head, written as `grad!` blocks with declared shapes, trained
//! with cross-entropy and Adam. Deterministic from its seed.
//!
//! With `--batch-norm`, each convolution is followed by batch
//! normalisation (`nn::BatchNorm2d`, in place of the convolution's bias):
//! training normalises by each batch's statistics and updates the running
//! ones, evaluation uses the running ones.
//!
//! With `--export PATH`, the trained network is written as an ONNX model
//! (`pixels [batch, 64]` in `0..=1`, class probabilities `probs [batch, 10]`
//! out; batch norm in evaluation mode).
//!
//! Run: `cargo run --release -p grad-examples --example digits_cnn [-- --batch-norm] [--export PATH]`

#[allow(dead_code)] // shared with digits, which uses every helper
#[path = "digits/data.rs"]
mod data;

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;

use data::{CLASSES, Digits};
use grad_runtime::nn::BatchNorm2d;
use grad_runtime::onnx::Export;
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
    /// The convolutions' biases: none with batch norm, whose shift replaces them.
    c1: Option<Var>,
    k2: Var,
    c2: Option<Var>,
    w: Var,
    b: Var,
    /// Batch norm after each convolution (`--batch-norm`).
    norms: Option<[BatchNorm2d; 2]>,
}

impl Model {
    /// Kernels He-initialised over their fan-in (channels × 3 × 3), biases zero.
    fn new(tape: &mut Tape<f32>, rng: &mut Rng, batch_norm: bool) -> Model {
        let he = |fan_in: usize| (2.0 / fan_in as f64).sqrt();
        let norms = batch_norm.then(|| [BatchNorm2d::new(tape, C1), BatchNorm2d::new(tape, C2)]);
        Model {
            norms,
            k1: tape.param(init::normal(rng, &[C1, 1, 3, 3], 0.0, he(9))),
            c1: (!batch_norm).then(|| tape.param(init::zeros(&[C1]))),
            k2: tape.param(init::normal(rng, &[C2, C1, 3, 3], 0.0, he(C1 * 9))),
            c2: (!batch_norm).then(|| tape.param(init::zeros(&[C2]))),
            w: tape.param(init::he_normal(rng, &[C2 * 16, CLASSES])),
            b: tape.param(init::zeros(&[CLASSES])),
        }
    }

    /// The class scores of a batch of images `[B, 64]`: `[B, 10]`; `train`
    /// is batch norm's mode (unused without it).
    fn logits(&self, tape: &mut Tape<f32>, x: Var, train: bool) -> Var {
        let Model { k1, c1, k2, c2, w, b, norms } = *self;
        let Some([n1, n2]) = norms else {
            return Self::plain(tape, x, [k1, k2, w, b], [c1, c2]);
        };
        let image = grad!(tape; x: [B, 64]; reshape(x, [B, 1, 8, 8]));
        let h1 = grad!(tape; k1: [16, 1, 3, 3]; conv2d(image, k1, None, [1, 1], [1, 1]));
        let h1 = n1.forward(tape, h1, train);
        let h2 = grad!(tape; k2: [32, 16, 3, 3]; conv2d(relu(h1), k2, None, [1, 1], [1, 1]));
        let h2 = n2.forward(tape, h2, train);
        grad!(tape; h2: [B, 32, 8, 8], w: [512, 10], b: [10];
            let pooled = max_pool2d(relu(h2), [2, 2], [2, 2]);
            reshape(pooled, [B, 512]) @ w + b)
    }

    /// The network without batch norm: each convolution has its bias.
    fn plain(tape: &mut Tape<f32>, x: Var, [k1, k2, w, b]: [Var; 4], [c1, c2]: [Option<Var>; 2]) -> Var {
        grad!(tape;
            x: [B, 64], k1: [16, 1, 3, 3], k2: [32, 16, 3, 3], w: [512, 10], b: [10];
            let image = reshape(x, [B, 1, 8, 8]);
            let h1 = relu(conv2d(image, k1, c1, [1, 1], [1, 1])); // [B, 16, 8, 8]
            let h2 = relu(conv2d(h1, k2, c2, [1, 1], [1, 1]));    // [B, 32, 8, 8]
            let pooled = max_pool2d(h2, [2, 2], [2, 2]);          // [B, 32, 4, 4]
            reshape(pooled, [B, 512]) @ w + b
        )
    }
}

fn accuracy(tape: &mut Tape<f32>, model: &Model, set: &Digits) -> Result<f64, Box<dyn Error>> {
    let predicted = tape.inference(|t| {
        let x = t.constant(&set.images);
        let logits = model.logits(t, x, false);
        argmax(t, logits, -1)
    })??;
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

const USAGE: &str = "usage: digits_cnn [--batch-norm] [--export PATH]";

fn run() -> Result<(), Box<dyn Error>> {
    let (mut batch_norm, mut export_to) = (false, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--batch-norm" => batch_norm = true,
            "--export" => match args.next() {
                Some(path) if !path.starts_with("--") => export_to = Some(PathBuf::from(path)),
                _ => return Err(format!("`--export` needs a file path\n{USAGE}").into()),
            },
            other => return Err(format!("unknown argument `{other}`\n{USAGE}").into()),
        }
    }
    let (train, test) = Digits::parse(include_str!("data/digits.csv"))?.split(TRAIN);
    let mut rng = Rng::new(SEED);
    let mut tape = Tape::<f32>::new();
    let model = Model::new(&mut tape, &mut rng, batch_norm);
    let mut opt = Adam::new(2e-3);
    opt.add_params(&tape, &model, |_| 0.0)?;
    let mark = tape.mark();
    let mut batches = Minibatches::new(train.len(), BATCH);
    for epoch in 1..=EPOCHS {
        let mut total_loss = 0.0;
        for batch in batches.shuffled(&mut rng) {
            let (images, labels) = train.batch(batch);
            let x = tape.constant(&images);
            let logits = model.logits(&mut tape, x, true);
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
    if let Some(path) = export_to {
        // Traced on the test images in evaluation mode; runs at any batch size.
        let x = tape.constant(&test.images);
        let logits = model.logits(&mut tape, x, false);
        let probs = grad!(tape; softmax(logits, -1));
        Export::new(&mut tape).params(&model).input("pixels", x).output("probs", probs).batch("batch").write(&path)?;
        println!("exported {}", path.display());
    }
    Ok(())
}
