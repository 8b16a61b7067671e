//! The model of the design card, `relu(x @ w + b)` with a mean squared
//! error, fitted by SGD with momentum to synthetic data made by a known
//! `w` and `b` plus noise; prints the loss falling and the learned weights
//! beside the true ones.
//!
//! Run: `cargo run --release -p grad-examples --example regression`
//! (`--quick`: a few epochs, as the test runs it).

use std::error::Error;
use std::process::ExitCode;

use grad_runtime::{Minibatches, Rng, Sgd, Tape, grad, init};
use ndarray::{Array1, Array2, Axis, array};

const SAMPLES: usize = 1024;
const EPOCHS: usize = 40;
const BATCH: usize = 32;
const NOISE: f64 = 0.05;

fn main() -> ExitCode {
    let quick = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--quick") => true,
        Some(other) => {
            eprintln!("error: unknown argument `{other}`\nusage: regression [--quick]");
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

/// Fits the model; returns the first and the last epoch's mean loss.
fn run(quick: bool) -> Result<(f64, f64), Box<dyn Error>> {
    // The truth: 4 inputs, 2 outputs, both mostly in relu's linear part.
    let true_w: Array2<f32> = array![[1.5, -0.5], [-2.0, 1.0], [0.5, 2.0], [1.0, -1.5]];
    let true_b: Array1<f32> = array![0.5, 1.0];
    let mut rng = Rng::new(0);
    let x: Array2<f32> = init::normal::<f32>(&mut rng, &[SAMPLES, 4], 0.0, 1.0).into_dimensionality()?;
    let noise: Array2<f32> = init::normal::<f32>(&mut rng, &[SAMPLES, 2], 0.0, NOISE).into_dimensionality()?;
    let targets = (x.dot(&true_w) + &true_b).mapv(|v| v.max(0.0)) + noise;

    let mut tape = Tape::<f32>::new();
    let w = tape.param(init::normal::<f32>(&mut rng, &[4, 2], 0.0, 0.5));
    let b = tape.param(init::full::<f32>(&[2], 0.1));
    let mut opt = Sgd::new(0.05).momentum(0.9);
    opt.add(&tape, w, 0.0)?;
    opt.add(&tape, b, 0.0)?;
    let mark = tape.mark();
    let mut batches = Minibatches::new(SAMPLES, BATCH);
    let epochs = if quick { 3 } else { EPOCHS };
    let mut losses = Vec::new();
    for epoch in 1..=epochs {
        let mut total = 0.0;
        for batch in batches.shuffled(&mut rng) {
            let xb = tape.constant(x.select(Axis(0), batch));
            let tb = tape.constant(targets.select(Axis(0), batch));
            let loss = grad!(tape; xb: [B, 4], w: [4, 2], b: [2], tb: [B, 2];
                let y = relu(xb @ w + b);
                mse(y, tb));
            tape.backward(loss)?;
            opt.step(&mut tape)?;
            total += f64::from(tape.scalar(loss)) * batch.len() as f64;
            tape.reset_to(mark);
        }
        losses.push(total / SAMPLES as f64);
        if epoch == 1 || epoch % 5 == 0 || epoch == epochs {
            println!("epoch {epoch:>2}: mse {:.5}", total / SAMPLES as f64);
        }
    }
    println!("noise floor: mse {:.5} (the noise's variance)", NOISE * NOISE);
    println!("weights    true                learned");
    let learned = tape.value(w);
    for (i, row) in true_w.rows().into_iter().enumerate() {
        println!(
            "w[{i}]       [{:>6.3}, {:>6.3}]    [{:>6.3}, {:>6.3}]",
            row[0],
            row[1],
            learned[[i, 0]],
            learned[[i, 1]]
        );
    }
    let learned_b = tape.value(b);
    println!("b          [{:>6.3}, {:>6.3}]    [{:>6.3}, {:>6.3}]", true_b[0], true_b[1], learned_b[0], learned_b[1]);
    Ok((losses[0], losses[losses.len() - 1]))
}

#[cfg(test)]
mod tests {
    /// A few epochs (`--quick`): the loss falls.
    #[test]
    fn a_quick_run_lowers_the_loss() {
        let (first, last) = super::run(true).unwrap();
        assert!(last < first, "mse went from {first} to {last}");
    }
}
