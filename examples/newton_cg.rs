//! Newton-CG on the digits: multinomial logistic regression (64 pixels to
//! 10 classes, L2-regularised) fitted by Newton's method, each step's
//! system `H d = −∇f` solved by conjugate gradients on Hessian-vector
//! products. Each product is the gradient recorded on the tape
//! (`Tape::grad_graph`) and one backward of `⟨∇f, p⟩` through it: the
//! Hessian itself (650 × 650) is never formed.
//!
//! Prints the outer iterations, products and time Newton-CG takes to bring
//! the training loss within 1e-6 of its minimum, and where plain gradient
//! descent from the same start is after 5000 steps; and the test accuracy.
//!
//! Run: `cargo run --release -p grad-examples --example newton_cg`

#[allow(dead_code)] // shared with digits, which uses every helper
#[path = "digits/data.rs"]
mod data;

use std::error::Error;
use std::process::ExitCode;
use std::time::Instant;

use data::{CLASSES, Digits, PIXELS};
use grad_runtime::ndarray::{Array1, Array2, ArrayD};
use grad_runtime::{Tape, Var, argmax, grad};

const TRAIN: usize = 1437;
const L2: f64 = 1e-3;
/// Gradient descent's step: the fastest of 0.5, 1, 2, 4, 6 and 8 to come
/// within 1e-6 of the minimum (6 and 8 oscillate).
const STEP: f64 = 4.0;

/// The model's two parameters on `tape`: weights `[64, 10]` and biases `[10]`.
struct Model {
    w: Var,
    b: Var,
}

/// The regularised training loss, recorded on the tape.
fn loss(tape: &mut Tape<f64>, model: &Model, x: &Array2<f64>, labels: &[usize]) -> Var {
    let (w, b) = (model.w, model.b);
    let x = tape.constant(x);
    grad!(tape; x: [N, 64], w: [64, 10], b: [10];
        cross_entropy(x @ w + b, labels) + sum(w * w) * {L2 / 2.0})
}

/// The loss and its gradient at the current parameters.
fn value_and_grad(tape: &mut Tape<f64>, model: &Model, x: &Array2<f64>, labels: &[usize]) -> (f64, [ArrayD<f64>; 2]) {
    let mark = tape.mark();
    let y = loss(tape, model, x, labels);
    tape.backward(y).expect("the loss is well formed");
    let value = tape.scalar(y);
    let grads = [tape.grad(model.w).to_owned(), tape.grad(model.b).to_owned()];
    tape.reset_to(mark);
    (value, grads)
}

fn dot(a: &[ArrayD<f64>; 2], b: &[ArrayD<f64>; 2]) -> f64 {
    a.iter().zip(b).map(|(a, b)| (a * b).sum()).sum()
}

/// Moves the parameters by `step · d`.
fn update(tape: &mut Tape<f64>, model: &Model, d: &[ArrayD<f64>; 2], step: f64) {
    for (var, d) in [model.w, model.b].into_iter().zip(d) {
        let moved = &tape.value(var) + &(d * step);
        tape.set_value(var, moved).expect("a parameter of its own shape");
    }
}

/// Solves `H d = −g` by conjugate gradients, `H` applied as Hessian-vector
/// products through the recorded gradient; returns `d` and the products used.
fn newton_direction(
    tape: &mut Tape<f64>,
    model: &Model,
    x: &Array2<f64>,
    labels: &[usize],
    g: &[ArrayD<f64>; 2],
) -> ([ArrayD<f64>; 2], usize) {
    let mark = tape.mark();
    let y = loss(tape, model, x, labels);
    let recorded = tape.grad_graph(y, &[model.w, model.b]).expect("the loss is twice differentiable");
    let (gw, gb) = (recorded[0], recorded[1]);
    let after_gradient = tape.mark();
    let hvp = |tape: &mut Tape<f64>, p: &[ArrayD<f64>; 2]| -> [ArrayD<f64>; 2] {
        let (pw, pb) = (tape.constant(&p[0]), tape.constant(&p[1]));
        let inner = grad!(tape; sum(gw * pw) + sum(gb * pb));
        tape.backward(inner).expect("the product is well formed");
        let hp = [tape.grad(model.w).to_owned(), tape.grad(model.b).to_owned()];
        tape.reset_to(after_gradient); // also clears the parameters' gradients
        hp
    };
    let mut d = [g[0].mapv(|_| 0.0), g[1].mapv(|_| 0.0)];
    let mut r = [-&g[0], -&g[1]];
    let mut p = r.clone();
    let mut rr = dot(&r, &r);
    let tolerance = (rr.sqrt() * rr.sqrt().min(0.5)).powi(2); // the Eisenstat–Walker forcing term
    let mut products = 0;
    while products < 100 && rr > tolerance {
        let hp = hvp(tape, &p);
        products += 1;
        let alpha = rr / dot(&p, &hp);
        for k in 0..2 {
            d[k] = &d[k] + &(&p[k] * alpha);
            r[k] = &r[k] - &(&hp[k] * alpha);
        }
        let next = dot(&r, &r);
        for k in 0..2 {
            p[k] = &r[k] + &(&p[k] * (next / rr));
        }
        rr = next;
    }
    tape.reset_to(mark);
    (d, products)
}

fn accuracy(tape: &mut Tape<f64>, model: &Model, x: &Array2<f64>, labels: &[usize]) -> f64 {
    let (w, b) = (model.w, model.b);
    let predicted = tape
        .inference(|t| {
            let xs = t.constant(x);
            let logits = grad!(t; xs @ w + b);
            argmax(t, logits, -1)
        })
        .and_then(|predicted| predicted)
        .expect("logits are 2-D");
    predicted.iter().zip(labels).filter(|(p, l)| p == l).count() as f64 / labels.len() as f64
}

/// A fresh model at zero.
fn model(tape: &mut Tape<f64>) -> Model {
    Model { w: tape.param(Array2::<f64>::zeros((PIXELS, CLASSES))), b: tape.param(Array1::<f64>::zeros(CLASSES)) }
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
    let (x, x_test) = (train.images.mapv(f64::from), test.images.mapv(f64::from));

    // Newton-CG, with a backtracking line search on the loss.
    let mut tape = Tape::<f64>::new();
    let newton = model(&mut tape);
    let start = Instant::now();
    let (mut iterations, mut gradients, mut products) = (0, 0, 0);
    let mut history = Vec::new();
    loop {
        let (f, g) = value_and_grad(&mut tape, &newton, &x, &train.labels);
        gradients += 1;
        history.push(f);
        if dot(&g, &g).sqrt() < 1e-9 || iterations == 50 {
            break;
        }
        let (d, used) = newton_direction(&mut tape, &newton, &x, &train.labels, &g);
        products += used;
        let slope = dot(&g, &d);
        let mut step = 1.0;
        update(&mut tape, &newton, &d, step);
        while value_and_grad(&mut tape, &newton, &x, &train.labels).0 > f + 1e-4 * step * slope && step > 1e-8 {
            gradients += 1;
            update(&mut tape, &newton, &d, -step / 2.0);
            step /= 2.0;
        }
        iterations += 1;
    }
    let newton_time = start.elapsed();
    let minimum = *history.last().expect("one evaluation at least");
    let within = |f: f64| f - minimum < 1e-6;
    let newton_iterations = history.iter().position(|&f| within(f)).unwrap_or(history.len());
    println!(
        "Newton-CG: loss {minimum:.6} within 1e-6 of its minimum after {newton_iterations} iterations \
         ({products} Hessian-vector products, {gradients} gradients, {:.2} s); test accuracy {:.1}%",
        newton_time.as_secs_f64(),
        100.0 * accuracy(&mut tape, &newton, &x_test, &test.labels)
    );

    // Gradient descent from the same start.
    let mut tape = Tape::<f64>::new();
    let descent = model(&mut tape);
    let start = Instant::now();
    let mut steps = 0;
    let mut f = f64::INFINITY;
    while steps < 5_000 {
        let (value, g) = value_and_grad(&mut tape, &descent, &x, &train.labels);
        f = value;
        if within(f) {
            break;
        }
        update(&mut tape, &descent, &[-&g[0], -&g[1]], STEP);
        steps += 1;
    }
    println!(
        "gradient descent (step {STEP}): loss {f:.6} after {steps} steps ({steps} gradients, {:.2} s), {:.1e} above \
         the minimum; test accuracy {:.1}%",
        start.elapsed().as_secs_f64(),
        f - minimum,
        100.0 * accuracy(&mut tape, &descent, &x_test, &test.labels)
    );
    Ok(())
}
