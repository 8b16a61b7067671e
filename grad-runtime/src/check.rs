//! A gradient check: backward's gradients of any function of [`Var`]s
//! against central finite differences, in `f64`, and the same check of
//! the gradient [`Tape::grad_graph`] records (second order).
//!
//! [`GradCheck::run`] builds the function on a fresh `f64` tape with the
//! given inputs as parameters and runs backward: seeded with 1 for a
//! one-element output, with a random cotangent `u` otherwise (so a
//! non-scalar output is checked too: `uᵀJ`, every input element's
//! derivative of `sum(u · f(x))`, which a wrong Jacobian fails for almost
//! every `u`). Each element is compared with the central difference
//! `(F(x + eps) − F(x − eps)) / 2 eps` of that same function. An
//! element passes when `|analytic − numeric| ≤ atol + rtol · |numeric|`,
//! PyTorch's `gradcheck` criterion, with its default tolerances.
//!
//! ```
//! use grad_runtime::check::GradCheck;
//! use grad_runtime::{g_mul, g_tanh};
//! use grad_runtime::ndarray::array;
//!
//! // tanh(x) · y on a 2×2 and a 2-vector (broadcast).
//! let inputs = [array![[0.5, -1.0], [2.0, 0.1]].into_dyn(), array![3.0, -0.5].into_dyn()];
//! let report = GradCheck::new().run(
//!     |tape, x| {
//!         let t = g_tanh(tape, x[0]);
//!         g_mul(tape, t, x[1])
//!     },
//!     &inputs,
//! )?;
//! assert_eq!(report.checked, 6);
//! assert!((report.worst.analytic - report.worst.numeric).abs() < 1e-8);
//! # Ok::<(), grad_runtime::check::GradCheckError>(())
//! ```
//!
//! A wrong gradient is an error naming the element:
//!
//! ```
//! use grad_runtime::check::{GradCheck, GradCheckError};
//! use grad_runtime::{g_abs, g_add, g_adds, g_exp, g_log, g_neg, g_relu, g_sum};
//! use grad_runtime::ndarray::array;
//!
//! // softplus as relu(x) + log(1 + exp(-|x|)), summed: its gradient at 0
//! // comes out 0 (relu'(0) = abs'(0) = 0) where it is 0.5.
//! let softplus = |tape: &mut grad_runtime::Tape<f64>, x: &[grad_runtime::Var]| {
//!     let (r, a) = (g_relu(tape, x[0]), g_abs(tape, x[0]));
//!     let e = { let n = g_neg(tape, a); g_exp(tape, n) };
//!     let l = { let one_plus = g_adds(tape, e, 1.0); g_log(tape, one_plus) };
//!     let y = g_add(tape, r, l);
//!     g_sum(tape, y)
//! };
//! let err = GradCheck::new().run(softplus, &[array![1.0, 0.0].into_dyn()]).unwrap_err();
//! let GradCheckError::Mismatch(worst) = &err else { panic!("{err}") };
//! assert_eq!((worst.input, worst.index.as_slice()), (0, &[1][..]));
//! assert_eq!(worst.analytic, 0.0);
//! assert!((worst.numeric - 0.5).abs() < 1e-6);
//! // "gradient mismatch: input 0 element [1]: backward 0e0, finite difference 5e-1 ..."
//! assert!(err.to_string().contains("input 0 element [1]: backward 0e0"));
//! ```

use std::fmt;

use ndarray::{ArrayD, Dimension, IxDyn};

use crate::{GradError, Rng, Tape, Var};

/// The settings of a check: the finite-difference step and the tolerances
/// (PyTorch's `gradcheck` defaults), and the seed of the random cotangent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradCheck {
    eps: f64,
    atol: f64,
    rtol: f64,
    seed: u64,
}

impl Default for GradCheck {
    fn default() -> Self {
        GradCheck { eps: 1e-6, atol: 1e-5, rtol: 1e-3, seed: 0 }
    }
}

/// The element that came closest to failing (or failed): which input,
/// where in it, and the two derivatives of `sum(cotangent · f(x))`.
#[derive(Clone, Debug, PartialEq)]
pub struct Element {
    /// The input's position in the slice passed to [`GradCheck::run`].
    pub input: usize,
    /// The element's index in that input.
    pub index: Vec<usize>,
    /// Backward's derivative.
    pub analytic: f64,
    /// The central finite difference.
    pub numeric: f64,
    /// `|analytic − numeric| / (atol + rtol · |numeric|)`: at most 1 passes.
    pub error: f64,
}

/// What a passing check measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// How many input elements were checked.
    pub checked: usize,
    /// The element with the largest [`error`](Element::error).
    pub worst: Element,
}

/// Why a check failed.
#[derive(Clone, Debug, PartialEq)]
pub enum GradCheckError {
    /// The function poisoned its tape (a shape error, say), at the inputs
    /// or at a perturbed copy of them.
    Program(GradError),
    /// The function gave outputs of two different shapes.
    OutputShape {
        /// The shape at the inputs.
        expected: Vec<usize>,
        /// The shape at a perturbed copy.
        found: Vec<usize>,
    },
    /// A finite difference or a gradient is not finite.
    NonFinite(Element),
    /// An element's derivatives disagree beyond the tolerance.
    Mismatch(Element),
    /// The gradient `grad_graph` recorded (`analytic`) differs from the
    /// one `backward` computed (`numeric`) at this element.
    RecordedGradient(Element),
    /// [`Tape::hvp`] (`analytic`) differs from `backward` through the
    /// recorded gradient (`numeric`) at this element.
    HessianVectorProduct(Element),
    /// There is nothing to check: no input holds an element.
    NoElements,
}

impl GradCheck {
    /// PyTorch's defaults: `eps = 1e-6`, `atol = 1e-5`, `rtol = 1e-3`; seed 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The finite-difference step (each element is moved by `±eps`).
    pub fn eps(self, eps: f64) -> Self {
        GradCheck { eps, ..self }
    }

    /// The absolute tolerance.
    pub fn atol(self, atol: f64) -> Self {
        GradCheck { atol, ..self }
    }

    /// The relative tolerance (of the finite difference's magnitude).
    pub fn rtol(self, rtol: f64) -> Self {
        GradCheck { rtol, ..self }
    }

    /// The seed of the random cotangent.
    pub fn seed(self, seed: u64) -> Self {
        GradCheck { seed, ..self }
    }

    /// Checks every element of every input: `f` builds the function on the
    /// tape it is given from the inputs (as parameters, in order) and
    /// returns its output. `f` runs `2 n + 1` times for `n` input elements.
    pub fn run<F>(&self, f: F, inputs: &[ArrayD<f64>]) -> Result<Report, GradCheckError>
    where
        F: Fn(&mut Tape<f64>, &[Var]) -> Var,
    {
        let (shape, cotangent, grads) = self.analytic(&f, inputs)?;
        let mut worst: Option<Element> = None;
        let mut checked = 0;
        let mut shifted: Vec<ArrayD<f64>> = inputs.iter().map(|x| x.as_standard_layout().into_owned()).collect();
        for (input, grad) in grads.iter().enumerate() {
            for (index, &analytic) in grad.indexed_iter() {
                let original = shifted[input][&index];
                shifted[input][&index] = original + self.eps;
                let plus = projected(&f, &shifted, &cotangent, &shape)?;
                shifted[input][&index] = original - self.eps;
                let minus = projected(&f, &shifted, &cotangent, &shape)?;
                shifted[input][&index] = original;
                let numeric = (plus - minus) / (2.0 * self.eps);
                let diff = (analytic - numeric).abs();
                let error = diff / (self.atol + self.rtol * numeric.abs());
                let element = Element { input, index: index.slice().to_vec(), analytic, numeric, error };
                checked += 1;
                if !analytic.is_finite() || !numeric.is_finite() {
                    return Err(GradCheckError::NonFinite(element));
                }
                if error > 1.0 {
                    return Err(GradCheckError::Mismatch(element));
                }
                if worst.as_ref().is_none_or(|w| error > w.error) {
                    worst = Some(element);
                }
            }
        }
        worst.map(|worst| Report { checked, worst }).ok_or(GradCheckError::NoElements)
    }

    /// The second-order check (PyTorch's `gradgradcheck`): the gradient
    /// [`Tape::grad_graph`] records for `f` must equal, element by element
    /// within the tolerance, the gradient `backward` computes (itself
    /// checked by [`run`](GradCheck::run) first), and is then checked by
    /// `run` against central differences of its own values; last,
    /// [`Tape::hvp`] with the random weights as its vectors must give what
    /// `backward` through the weighted recorded gradient gives. A non-scalar
    /// output is projected on a random cotangent, and the recorded
    /// gradients on random weights, so one scalar covers every second
    /// derivative's direction. The report is the second-order one.
    ///
    /// ```
    /// use grad_runtime::check::GradCheck;
    /// use grad_runtime::{g_matmul, g_tanh};
    /// use grad_runtime::ndarray::array;
    ///
    /// let inputs = [array![[0.5, -1.0], [0.3, 0.2]].into_dyn(), array![[1.0], [-2.0]].into_dyn()];
    /// let report = GradCheck::new().run_second_order(
    ///     |tape, x| {
    ///         let p = g_matmul(tape, x[0], x[1]);
    ///         g_tanh(tape, p)
    ///     },
    ///     &inputs,
    /// )?;
    /// assert_eq!(report.checked, 6);
    /// # Ok::<(), grad_runtime::check::GradCheckError>(())
    /// ```
    pub fn run_second_order<F>(&self, f: F, inputs: &[ArrayD<f64>]) -> Result<Report, GradCheckError>
    where
        F: Fn(&mut Tape<f64>, &[Var]) -> Var,
    {
        let seed = self.seed;
        let scalar_of = |tape: &mut Tape<f64>, xs: &[Var]| -> Var {
            let out = f(tape, xs);
            let Ok(value) = tape.try_value(out) else { return out };
            let shape = value.shape().to_vec();
            if shape.iter().product::<usize>() == 1 { out } else { project(tape, out, &shape, seed ^ 0x5eed) }
        };
        self.run(scalar_of, inputs)?;
        self.recorded_matches_backward(&scalar_of, inputs)?;
        let gradient_projected = move |tape: &mut Tape<f64>, xs: &[Var]| -> Var {
            let y = scalar_of(tape, xs);
            let grads = match tape.grad_graph(y, xs) {
                Ok(grads) => grads,
                Err(error) => {
                    tape.poison(error);
                    return tape.constant(ndarray::arr0(0.0));
                }
            };
            let mut total: Option<Var> = None;
            for (k, g) in grads.into_iter().enumerate() {
                let shape = tape.value(g).shape().to_vec();
                let term = project(tape, g, &shape, seed.wrapping_add(k as u64 + 1));
                total = Some(match total {
                    Some(sum) => crate::g_add(tape, sum, term),
                    None => term,
                });
            }
            total.unwrap_or_else(|| tape.constant(ndarray::arr0(0.0)))
        };
        let report = self.run(gradient_projected, inputs)?;
        self.hvp_matches_backward(&scalar_of, inputs)?;
        Ok(report)
    }

    /// [`Tape::hvp`] against `backward` of `Σₖ sum(gₖ · uₖ)`, `gₖ` the
    /// recorded gradient and `uₖ` the weights `run_second_order` draws.
    fn hvp_matches_backward<F>(&self, f: &F, inputs: &[ArrayD<f64>]) -> Result<(), GradCheckError>
    where
        F: Fn(&mut Tape<f64>, &[Var]) -> Var,
    {
        let weights = |k: usize, shape: &[usize]| {
            let mut rng = Rng::new(self.seed.wrapping_add(k as u64 + 1));
            ArrayD::from_shape_fn(IxDyn(shape), |_| rng.normal())
        };
        let mut through_graph = Tape::<f64>::new();
        let vars: Vec<Var> = inputs.iter().map(|x| through_graph.param(x)).collect();
        let y = f(&mut through_graph, &vars);
        let grads = through_graph.grad_graph(y, &vars).map_err(GradCheckError::Program)?;
        let mut total = through_graph.constant(ndarray::arr0(0.0));
        for (k, g) in grads.into_iter().enumerate() {
            let shape = through_graph.value(g).shape().to_vec();
            let term = project(&mut through_graph, g, &shape, self.seed.wrapping_add(k as u64 + 1));
            total = crate::g_add(&mut through_graph, total, term);
        }
        through_graph.backward(total).map_err(GradCheckError::Program)?;
        let mut tape = Tape::<f64>::new();
        let xs: Vec<Var> = inputs.iter().map(|x| tape.param(x)).collect();
        let y = f(&mut tape, &xs);
        let vs: Vec<Var> = inputs.iter().enumerate().map(|(k, x)| tape.constant(weights(k, x.shape()))).collect();
        tape.hvp(y, &xs, &vs).map_err(GradCheckError::Program)?;
        for (input, (&want, &got)) in vars.iter().zip(&xs).enumerate() {
            let (want, got) = (through_graph.grad(want).to_owned(), tape.grad(got).to_owned());
            if let Some(element) = self.first_beyond(input, &want, &got) {
                return Err(GradCheckError::HessianVectorProduct(element));
            }
        }
        Ok(())
    }

    /// The first element of input `input` where `got` (the `analytic`
    /// side) differs from `want` (the `numeric`) beyond the tolerance.
    fn first_beyond(&self, input: usize, want: &ArrayD<f64>, got: &ArrayD<f64>) -> Option<Element> {
        want.indexed_iter().zip(got.iter()).find_map(|((index, &numeric), &analytic)| {
            let error = (analytic - numeric).abs() / (self.atol + self.rtol * numeric.abs());
            (error > 1.0 || error.is_nan()).then(|| Element {
                input,
                index: index.slice().to_vec(),
                analytic,
                numeric,
                error,
            })
        })
    }

    /// `grad_graph`'s values against `backward`'s gradients of the scalar
    /// `f`, at the inputs.
    fn recorded_matches_backward<F>(&self, f: &F, inputs: &[ArrayD<f64>]) -> Result<(), GradCheckError>
    where
        F: Fn(&mut Tape<f64>, &[Var]) -> Var,
    {
        let mut tape = Tape::<f64>::new();
        let vars: Vec<Var> = inputs.iter().map(|x| tape.param(x)).collect();
        let y = f(&mut tape, &vars);
        let recorded = tape.grad_graph(y, &vars).map_err(GradCheckError::Program)?;
        tape.backward(y).map_err(GradCheckError::Program)?;
        for (input, (&var, &g)) in vars.iter().zip(&recorded).enumerate() {
            let (want, got) = (tape.grad(var).to_owned(), tape.value(g).to_owned());
            if let Some(element) = self.first_beyond(input, &want, &got) {
                return Err(GradCheckError::RecordedGradient(element));
            }
        }
        Ok(())
    }

    /// The output's shape, the random cotangent and backward's gradient of
    /// every input.
    fn analytic<F>(&self, f: &F, inputs: &[ArrayD<f64>]) -> Result<Analytic, GradCheckError>
    where
        F: Fn(&mut Tape<f64>, &[Var]) -> Var,
    {
        let mut tape = Tape::<f64>::new();
        let vars: Vec<Var> = inputs.iter().map(|x| tape.param(x)).collect();
        let out = f(&mut tape, &vars);
        let shape = tape.try_value(out).map_err(GradCheckError::Program)?.shape().to_vec();
        let mut rng = Rng::new(self.seed);
        let scalar = shape.iter().product::<usize>() == 1;
        let cotangent = ArrayD::from_shape_fn(IxDyn(&shape), |_| if scalar { 1.0 } else { rng.normal() });
        tape.backward_with(out, &cotangent).map_err(GradCheckError::Program)?;
        let grads = vars.iter().map(|&v| tape.grad(v).to_owned()).collect();
        Ok((shape, cotangent, grads))
    }
}

/// `sum(x · u)` for a random `u` of `shape` drawn from `seed` (the same
/// `u` at every call).
fn project(tape: &mut Tape<f64>, x: Var, shape: &[usize], seed: u64) -> Var {
    let mut rng = Rng::new(seed);
    let u = tape.constant(ArrayD::from_shape_fn(IxDyn(shape), |_| rng.normal()));
    let xu = crate::g_mul(tape, x, u);
    crate::g_sum(tape, xu)
}

/// The output's shape, the cotangent, and backward's gradient of each input.
type Analytic = (Vec<usize>, ArrayD<f64>, Vec<ArrayD<f64>>);

/// `sum(cotangent · f(inputs))`.
fn projected<F>(f: &F, inputs: &[ArrayD<f64>], cotangent: &ArrayD<f64>, shape: &[usize]) -> Result<f64, GradCheckError>
where
    F: Fn(&mut Tape<f64>, &[Var]) -> Var,
{
    let mut tape = Tape::<f64>::new();
    let vars: Vec<Var> = inputs.iter().map(|x| tape.param(x)).collect();
    let out = f(&mut tape, &vars);
    if let Some(error) = tape.error() {
        return Err(GradCheckError::Program(error.clone()));
    }
    let value = tape.value(out);
    if value.shape() != shape {
        return Err(GradCheckError::OutputShape { expected: shape.to_vec(), found: value.shape().to_vec() });
    }
    Ok((&value * cotangent).sum())
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "input {} element {:?}: backward {:e}, finite difference {:e} (difference {:e})",
            self.input,
            self.index,
            self.analytic,
            self.numeric,
            (self.analytic - self.numeric).abs()
        )
    }
}

impl fmt::Display for GradCheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GradCheckError::Program(error) => write!(f, "the function failed: {error}"),
            GradCheckError::OutputShape { expected, found } => {
                write!(f, "the function's output changed shape from {expected:?} to {found:?}")
            }
            GradCheckError::NonFinite(element) => write!(f, "not finite: {element}"),
            GradCheckError::Mismatch(element) => {
                write!(f, "gradient mismatch: {element}, beyond the tolerance by a factor {:.3}", element.error)
            }
            GradCheckError::RecordedGradient(element) => {
                write!(
                    f,
                    "grad_graph's gradient differs from backward's: {element} (first the recorded, then backward's)"
                )
            }
            GradCheckError::HessianVectorProduct(element) => {
                write!(
                    f,
                    "Tape::hvp differs from backward through grad_graph: {element} (first hvp's, then backward's)"
                )
            }
            GradCheckError::NoElements => write!(f, "no input holds an element: nothing to check"),
        }
    }
}

impl std::error::Error for GradCheckError {}
