//! A physics-informed network: `u'' = −π² sin(πx)` on `[0, 1]` with
//! `u(0) = u(1) = 0`, whose solution is `sin(πx)`. A small tanh network
//! `u(x)` is trained so that its own second derivative in `x` satisfies
//! the equation at collocation points: `u''` is two nested gradients
//! recorded on the tape (`grad(y, x)` in a `grad!` block, that is
//! `Tape::grad_graph`), and the loss built on it is differentiated once
//! more, in the network's parameters (third order through tanh). No
//! finite differences in `x`, no hand-derived derivatives.
//!
//! Prints the loss falling and the largest error against `sin(πx)` on 201
//! points of `[0, 1]`.
//!
//! Run: `cargo run --release -p grad-examples --example pinn`
//! (`--quick`: a few hundred steps, as the test runs it).

use std::error::Error;
use std::f64::consts::PI;
use std::process::ExitCode;

use grad_runtime::{Adam, Params, Rng, Tape, Var, grad, init, schedule};
use ndarray::{Array2, ArrayD};

const HIDDEN: usize = 24;
const POINTS: usize = 64;
const STEPS: usize = 6000;

/// `u(x)`: two tanh layers and a linear output.
#[derive(Params)]
struct Net {
    w1: Var,
    b1: Var,
    w2: Var,
    b2: Var,
    w3: Var,
    b3: Var,
}

impl Net {
    fn new(tape: &mut Tape<f64>, rng: &mut Rng) -> Net {
        Net {
            w1: tape.param(init::xavier_normal(rng, &[1, HIDDEN])),
            b1: tape.param(init::zeros(&[HIDDEN])),
            w2: tape.param(init::xavier_normal(rng, &[HIDDEN, HIDDEN])),
            b2: tape.param(init::zeros(&[HIDDEN])),
            w3: tape.param(init::xavier_normal(rng, &[HIDDEN, 1])),
            b3: tape.param(init::zeros(&[1])),
        }
    }

    /// `u` at each point of `x: [N, 1]`.
    fn u(&self, tape: &mut Tape<f64>, x: Var) -> Var {
        let Net { w1, b1, w2, b2, w3, b3 } = *self;
        grad!(tape; x: [N, 1], w1: [1, H], w2: [H, H], w3: [H, 1];
            let h = tanh(x @ w1 + b1);
            let h = tanh(h @ w2 + b2);
            h @ w3 + b3)
    }
}

/// The points `0, 1/(n − 1), ..., 1` as a column.
fn grid(n: usize) -> Array2<f64> {
    Array2::from_shape_fn((n, 1), |(i, _)| i as f64 / (n - 1) as f64)
}

/// The equation's residual at the collocation points plus the boundary
/// conditions, squared: the loss.
fn loss(tape: &mut Tape<f64>, net: &Net, points: &Array2<f64>, forcing: &Array2<f64>) -> Var {
    let x = tape.constant(points);
    let f = tape.constant(forcing);
    let u = net.u(tape, x);
    // Each u(xᵢ) depends on xᵢ alone, so the gradient of Σ u is u'(xᵢ) per point.
    let residual = grad!(tape; x: [N, 1], u: [N, 1], f: [N, 1];
        let du = grad(sum(u), x);
        let ddu = grad(sum(du), x);
        mean(pow(ddu + f, 2.0)));
    let ends = tape.constant(Array2::from_shape_vec((2, 1), vec![0.0, 1.0]).expect("two points"));
    let u_ends = net.u(tape, ends);
    grad!(tape; residual + mean(u_ends * u_ends))
}

/// The largest |u(x) − sin(πx)| on 201 points of [0, 1].
fn max_error(tape: &mut Tape<f64>, net: &Net) -> f64 {
    let mark = tape.mark();
    let points = grid(201);
    let x = tape.constant(&points);
    let u = net.u(tape, x);
    let exact: ArrayD<f64> = points.mapv(|x| (PI * x).sin()).into_dyn();
    let error = (&tape.value(u) - &exact).iter().fold(0.0f64, |m, e| m.max(e.abs()));
    tape.reset_to(mark);
    error
}

fn main() -> ExitCode {
    let quick = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--quick") => true,
        Some(other) => {
            eprintln!("error: unknown argument `{other}`\nusage: pinn [--quick]");
            return ExitCode::FAILURE;
        }
    };
    match run(if quick { 300 } else { STEPS }) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Trains for `steps`; returns the first and last loss and the final error.
fn run(steps: usize) -> Result<(f64, f64, f64), Box<dyn Error>> {
    let mut rng = Rng::new(0);
    let mut tape = Tape::<f64>::new();
    let net = Net::new(&mut tape, &mut rng);
    let mut opt = Adam::new(5e-3);
    opt.add_params(&tape, &net, |_| 0.0)?;
    let mark = tape.mark();
    // Interior collocation points (the grid without its ends) and the
    // forcing −u'' = π² sin(πx) there.
    let points = Array2::from_shape_fn((POINTS, 1), |(i, _)| (i + 1) as f64 / (POINTS + 1) as f64);
    let forcing = points.mapv(|x| PI * PI * (PI * x).sin());
    let (mut first, mut last) = (f64::NAN, f64::NAN);
    for step in 0..steps {
        opt.set_lr(schedule::warmup_cosine(5e-3, step as u64, 100, steps as u64))?;
        let loss = loss(&mut tape, &net, &points, &forcing);
        tape.backward(loss)?;
        opt.step(&mut tape)?;
        last = tape.scalar(loss);
        if step == 0 {
            first = last;
        }
        tape.reset_to(mark);
        if step % 1000 == 0 || step + 1 == steps {
            println!("step {step:>5}: loss {last:.3e}, max |u − sin(πx)| {:.2e}", max_error(&mut tape, &net));
        }
    }
    let error = max_error(&mut tape, &net);
    println!("final max error against sin(πx): {error:.2e} (loss {first:.3e} -> {last:.3e})");
    Ok((first, last, error))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_quick_run_lowers_the_residual() {
        let (first, last, error) = super::run(300).unwrap();
        assert!(last < first / 10.0, "loss {first} -> {last}");
        assert!(error.is_finite());
    }
}
