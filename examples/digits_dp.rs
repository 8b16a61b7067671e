//! The digits classifier of `examples/digits` trained data-parallel over
//! MPI: every rank holds the model, takes its share of each batch of 32,
//! and `grad_runtime::dist` averages the gradients with one allreduce per
//! step. Rank 0 prints the loss curve and the final accuracy; every rank
//! prints its throughput.
//!
//! Run (grad-runtime/src/guide/data_parallel.md):
//! `cargo build --release -p grad-examples --features mpi --example digits_dp &&
//!  mpirun -np 2 target/release/examples/digits_dp`
//! (as root add `--allow-run-as-root`; with more ranks than cores `--oversubscribe`).

#[allow(dead_code)] // shared with digits, which uses every helper
#[path = "digits/data.rs"]
mod data;

use std::error::Error;
use std::process::ExitCode;
use std::time::Instant;

use data::{CLASSES, Digits, PIXELS};
use grad_runtime::dist::Dist;
use grad_runtime::{Adam, Minibatches, Params, Rng, Tape, Var, argmax, grad, init};

const HIDDEN: usize = 64;
const EPOCHS: usize = 30;
/// The global batch: split across the ranks.
const BATCH: usize = 32;
const TRAIN: usize = 1437;

#[derive(Params)]
struct Model {
    w1: Var,
    b1: Var,
    w2: Var,
    b2: Var,
}

impl Model {
    fn new(tape: &mut Tape<f32>, rng: &mut Rng) -> Model {
        Model {
            w1: tape.param(init::he_normal(rng, &[PIXELS, HIDDEN])),
            b1: tape.param(init::zeros(&[HIDDEN])),
            w2: tape.param(init::he_normal(rng, &[HIDDEN, CLASSES])),
            b2: tape.param(init::zeros(&[CLASSES])),
        }
    }

    fn logits(&self, tape: &mut Tape<f32>, x: Var) -> Var {
        let Model { w1, b1, w2, b2 } = *self;
        grad!(tape;
            x: [B, 64], w1: [64, 64], b1: [64], w2: [64, 10], b2: [10];
            let hidden = relu(x @ w1 + b1);
            hidden @ w2 + b2
        )
    }
}

fn accuracy(tape: &mut Tape<f32>, model: &Model, set: &Digits) -> Result<f64, Box<dyn Error>> {
    let predicted = tape.inference(|t| {
        let x = t.constant(&set.images);
        let logits = model.logits(t, x);
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

fn run() -> Result<(), Box<dyn Error>> {
    let mut dist = Dist::<f32>::init()?;
    let (rank, size) = (dist.rank(), dist.size());
    let (train, test) = Digits::parse(include_str!("data/digits.csv"))?.split(TRAIN);
    if dist.is_root() {
        println!("digits_dp: {size} rank(s), global batch {BATCH}, {} training images", train.len());
    }
    // The data order comes from seed 0 on every rank (all ranks must agree
    // on each global batch); the initial weights come from rank 0 whatever
    // this rank's own seed drew.
    let mut rng = Rng::new(0);
    let mut init_rng = Rng::new(rank as u64);
    let mut tape = Tape::<f32>::new();
    let model = Model::new(&mut tape, &mut init_rng);
    let mut opt = Adam::new(3e-3);
    opt.add_params(&tape, &model, |name| if name.starts_with('w') { 1e-4 } else { 0.0 })?;
    dist.broadcast_params(&mut tape, &opt)?;

    let mark = tape.mark();
    let mut batches = Minibatches::new(train.len(), BATCH);
    let mut samples = 0usize;
    let start = Instant::now();
    for epoch in 1..=EPOCHS {
        let mut loss_sum = [0.0];
        for batch in batches.shuffled(&mut rng) {
            // This rank's contiguous share of the global batch.
            let share = batch.len().div_ceil(size);
            let mine = &batch[(rank * share).min(batch.len())..((rank + 1) * share).min(batch.len())];
            let (images, labels) = train.batch(mine);
            let x = tape.constant(&images);
            let logits = model.logits(&mut tape, x);
            // Mean over this share, scaled so the average over ranks is the
            // mean over the global batch (the scale is exactly 1 when the
            // shares are equal).
            let scale = (mine.len() * size) as f32 / batch.len() as f32;
            let loss = grad!(tape; cross_entropy(logits, &labels) * scale);
            tape.backward(loss)?;
            dist.step(&mut tape, &mut opt)?;
            loss_sum[0] += f64::from(tape.scalar(loss)) * batch.len() as f64 / size as f64;
            samples += mine.len();
            tape.reset_to(mark);
        }
        dist.all_sum(&mut loss_sum);
        if dist.is_root() && (epoch % 5 == 0 || epoch == 1) {
            let test_accuracy = accuracy(&mut tape, &model, &test)?;
            println!(
                "epoch {epoch:>2}: train loss {:.6}, test accuracy {:.1}%",
                loss_sum[0] / train.len() as f64,
                100.0 * test_accuracy
            );
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    dist.check_params(&tape, &opt)?;
    let stats = dist.stats();
    println!(
        "rank {rank}: {samples} samples in {seconds:.2} s = {:.0} samples/s; {} allreduces of {} B, {:.3} s ({:.1}%) communicating",
        samples as f64 / seconds,
        stats.allreduces,
        stats.bytes / stats.allreduces.max(1),
        stats.seconds,
        100.0 * stats.seconds / seconds
    );
    if dist.is_root() {
        let final_accuracy = accuracy(&mut tape, &model, &test)?;
        println!("final test accuracy: {:.1}% (rank 0, {} steps)", 100.0 * final_accuracy, opt.steps());
    }
    Ok(())
}
