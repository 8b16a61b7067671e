//! Helpers shared by the integration tests: a seeded random source, a
//! central finite-difference gradient check in f64, and tolerance checks.
#![allow(dead_code)] // each test binary uses a different subset

pub mod custom_ops;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use grad_runtime::{Tape, Var};
use ndarray::{ArrayD, IxDyn};

/// Runs `f` on its own thread and fails the test if it has not finished
/// after `limit`: a hang is reported as a failure naming `what`, not a CI
/// run that never ends. A panic in `f` is passed on as it is.
pub fn within<R: Send + 'static>(limit: Duration, what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (done, result) = mpsc::channel();
    let worker = thread::spawn(move || {
        let _ = done.send(f());
    });
    match result.recv_timeout(limit) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what} did not finish within {limit:?}: a hang"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker ended without a result"),
        },
    }
}

/// The runtime's seeded generator plus the array helpers the tests need.
pub struct Rng(grad_runtime::Rng);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(grad_runtime::Rng::new(seed))
    }

    pub fn uniform(&mut self) -> f64 {
        self.0.uniform()
    }

    pub fn normal(&mut self) -> f64 {
        self.0.normal()
    }

    pub fn normal_array(&mut self, shape: &[usize]) -> ArrayD<f64> {
        ArrayD::from_shape_fn(IxDyn(shape), |_| self.normal())
    }

    /// Uniform in [lo, hi).
    pub fn uniform_array(&mut self, shape: &[usize], lo: f64, hi: f64) -> ArrayD<f64> {
        ArrayD::from_shape_fn(IxDyn(shape), |_| lo + (hi - lo) * self.uniform())
    }

    /// Normal values pushed at least `gap` away from zero (for relu and
    /// abs, whose kink a finite difference must not straddle).
    pub fn away_from_zero(&mut self, shape: &[usize], gap: f64) -> ArrayD<f64> {
        self.normal_array(shape).mapv(|v| if v >= 0.0 { v + gap } else { v - gap })
    }
}

/// Gradients of `sum(f(inputs) * cotangent)` with `inputs` as parameters.
pub fn grads_with(
    inputs: &[ArrayD<f64>],
    cotangent: &ArrayD<f64>,
    f: impl Fn(&mut Tape<f64>, &[Var]) -> Var,
) -> Vec<ArrayD<f64>> {
    run_with_grads(&f, inputs, cotangent).1
}

/// Gradients of `sum(f(inputs))`, through `g_sum` and a plain `backward`.
pub fn grads_of_sum(inputs: &[ArrayD<f64>], f: impl Fn(&mut Tape<f64>, &[Var]) -> Var) -> Vec<ArrayD<f64>> {
    let mut tape = Tape::<f64>::new();
    let vars: Vec<Var> = inputs.iter().map(|x| tape.param(x)).collect();
    let out = f(&mut tape, &vars);
    let loss = grad_runtime::g_sum(&mut tape, out);
    tape.backward(loss).expect("program must run cleanly");
    vars.iter().map(|&v| tape.grad(v).to_owned()).collect()
}

/// The gradient of `sum(op(x))` for a vector `x`: each element's derivative.
pub fn unary_grad(x: &[f64], op: impl Fn(&mut Tape<f64>, Var) -> Var) -> Vec<f64> {
    let input = ArrayD::from_shape_vec(IxDyn(&[x.len()]), x.to_vec()).expect("a vector");
    let g = grads_with(&[input], &ArrayD::ones(IxDyn(&[x.len()])), |tp, v| op(tp, v[0]));
    g[0].iter().copied().collect()
}

/// The value of `f(inputs)` with `inputs` as constants.
pub fn forward(inputs: &[ArrayD<f64>], f: impl Fn(&mut Tape<f64>, &[Var]) -> Var) -> ArrayD<f64> {
    let mut tape = Tape::<f64>::new();
    let vars: Vec<Var> = inputs.iter().map(|x| tape.constant(x)).collect();
    let out = f(&mut tape, &vars);
    assert!(tape.is_ok(), "{:?}", tape.error());
    tape.value(out).to_owned()
}

/// A 0-d array holding `x`.
pub fn scalar(x: f64) -> ArrayD<f64> {
    ArrayD::from_elem(IxDyn(&[]), x)
}

/// `first, first + 1, ...` in row-major order: inputs whose sums and
/// products are exact, for identities checked to the bit.
pub fn integers(shape: &[usize], first: f64) -> ArrayD<f64> {
    let mut next = first;
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        next += 1.0;
        next - 1.0
    })
}

/// Builds a program on a fresh tape from its inputs (all registered as
/// parameters) and returns its output.
pub type Program<'a> = &'a dyn Fn(&mut Tape<f64>, &[Var]) -> Var;

/// Runs `program` forward, then backward seeded with `cotangent`; returns
/// the output and the gradient of every input.
pub fn run_with_grads(
    program: Program<'_>,
    inputs: &[ArrayD<f64>],
    cotangent: &ArrayD<f64>,
) -> (ArrayD<f64>, Vec<ArrayD<f64>>) {
    let mut tape = Tape::<f64>::new();
    let vars: Vec<Var> = inputs.iter().map(|x| tape.param(x)).collect();
    let out = program(&mut tape, &vars);
    assert!(tape.is_ok(), "program failed: {:?}", tape.error());
    tape.backward_with(out, cotangent).expect("program must run cleanly");
    let value = tape.value(out).to_owned();
    let grads = vars.iter().map(|&v| tape.grad(v).to_owned()).collect();
    (value, grads)
}

/// Checks every input's analytic gradient against central finite
/// differences (step 1e-6, in f64) with the library's own check
/// ([`grad_runtime::check::GradCheck`]): `sum(output * cotangent)` with a
/// random cotangent, each element within `1e-6 + 1e-6 · |numeric|`.
/// Returns the worst element's difference (0 when no input holds an
/// element: forward and backward still ran).
pub fn check_finite_differences(name: &str, program: Program<'_>, inputs: &[ArrayD<f64>], seed: u64) -> f64 {
    let check = grad_runtime::check::GradCheck::new().atol(1e-6).rtol(1e-6).seed(seed);
    match check.run(program, inputs) {
        Ok(report) => (report.worst.analytic - report.worst.numeric).abs(),
        // Empty inputs: forward and backward ran, there is no element to compare.
        Err(grad_runtime::check::GradCheckError::NoElements) => 0.0,
        Err(error) => panic!("{name}: {error}"),
    }
}

/// The second-order check: the gradient `grad_graph` records for
/// `program`, checked like [`check_finite_differences`] against central
/// differences of its own values (projected on random weights).
pub fn check_second_order(name: &str, program: Program<'_>, inputs: &[ArrayD<f64>], seed: u64) -> f64 {
    let check = grad_runtime::check::GradCheck::new().atol(1e-6).rtol(1e-6).seed(seed);
    match check.run_second_order(program, inputs) {
        Ok(report) => (report.worst.analytic - report.worst.numeric).abs(),
        Err(error) => panic!("{name} (second order): {error}"),
    }
}

/// Asserts `|got - want| <= atol + rtol * |want|` elementwise, with the same shape.
pub fn assert_close(what: &str, got: &ArrayD<f64>, want: &ArrayD<f64>, rtol: f64, atol: f64) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    for (i, (&g, &w)) in got.iter().zip(want.iter()).enumerate() {
        assert!(
            (g - w).abs() <= atol + rtol * w.abs(),
            "{what}: element {i}: got {g}, want {w} (diff {:e})",
            (g - w).abs()
        );
    }
}
