//! What every optimizer shares: the registered parameters (each with its own
//! coefficient and its slice of the optimizer's state), the learning rate,
//! the step count, global-norm clipping, and the checks that turn misuse
//! into a [`GradError`] instead of a panic or a silent no-op.
//!
//! A step is two phases: [`Registry::begin_step`] checks everything and
//! computes the clip scale without touching a parameter (so a refused step
//! changes nothing), then [`Registry::update_each`] hands each parameter
//! that has a gradient to the optimizer's update rule. Neither allocates.

use std::collections::HashSet;
use std::panic::Location;

use crate::error::{ErrorKind, GradError};
use crate::finite::{describe, first_non_finite};
use crate::ops::reduce::add_halves;
use crate::{Float, Tape, Var, simd};

/// One registered parameter.
pub(crate) struct Entry {
    pub(crate) var: Var,
    /// Its name in state files: its path for `add_params` (`layers.0.w`),
    /// `#` and its tape position for `add` (`#3`).
    pub(crate) name: String,
    /// Its own coefficient: the L2 `alpha` of `Sgd`/`Adam`, the decoupled
    /// weight decay of `AdamW`.
    pub(crate) coefficient: f64,
    /// Where its elements start in the optimizer's flat state, counted in
    /// parameter elements (a state with k slots per element scales it by k).
    pub(crate) offset: usize,
    /// Its element count.
    pub(crate) len: usize,
    /// How many steps have updated it so far (steps that found no gradient
    /// for it do not count).
    pub(crate) updates: u64,
}

/// The domain a scalar argument must lie in; each names itself in the error.
#[derive(Clone, Copy)]
pub(crate) enum Domain {
    /// Finite and `>= 0`: learning rates, L2 and decay coefficients, momentum, eps.
    NonNegative,
    /// Finite and `> 0`: the clipping threshold.
    Positive,
    /// In `[0, 1)`: Adam's betas.
    Beta,
    /// In `[0, 1]`: SGD's dampening.
    Fraction,
}

impl Domain {
    fn contains(self, x: f64) -> bool {
        match self {
            Domain::NonNegative => x.is_finite() && x >= 0.0,
            Domain::Positive => x.is_finite() && x > 0.0,
            Domain::Beta => (0.0..1.0).contains(&x),
            Domain::Fraction => (0.0..=1.0).contains(&x),
        }
    }

    fn expected(self) -> &'static str {
        match self {
            Domain::NonNegative => "a finite number >= 0",
            Domain::Positive => "a finite number > 0",
            Domain::Beta => "a number in [0, 1)",
            Domain::Fraction => "a number in [0, 1]",
        }
    }
}

/// Returns `value` if it lies in `domain`, else the error naming it.
pub(crate) fn check_arg(
    op: &'static str,
    name: &'static str,
    value: f64,
    domain: Domain,
    location: &'static Location<'static>,
) -> Result<f64, GradError> {
    if domain.contains(value) {
        Ok(value)
    } else {
        let kind = ErrorKind::InvalidArgument { name, value, expected: domain.expected() };
        Err(GradError::new(op, kind, Vec::new(), location))
    }
}

/// The parameters, learning rate, step count and clipping of one optimizer.
pub(crate) struct Registry {
    entries: Vec<Entry>,
    /// Total element count of the registered parameters.
    elements: usize,
    lr: f64,
    max_norm: Option<f64>,
    steps: u64,
    /// The first invalid constructor or builder argument. Constructors and
    /// builders return the optimizer itself, so the error waits here and
    /// every later `add` and `step` returns it.
    config_error: Option<GradError>,
}

impl Registry {
    /// A registry with no parameter; an invalid `lr` is kept as a configuration error.
    pub(crate) fn new(op: &'static str, lr: f64, location: &'static Location<'static>) -> Registry {
        let mut registry =
            Registry { entries: Vec::new(), elements: 0, lr: 0.0, max_norm: None, steps: 0, config_error: None };
        if let Some(lr) = registry.accept(op, "lr", lr, Domain::NonNegative, location) {
            registry.lr = lr;
        }
        registry
    }

    /// Checks a constructor or builder argument: returns it, or keeps the
    /// error (the first one wins) for the next `add` or `step` and returns `None`.
    pub(crate) fn accept(
        &mut self,
        op: &'static str,
        name: &'static str,
        value: f64,
        domain: Domain,
        location: &'static Location<'static>,
    ) -> Option<f64> {
        match check_arg(op, name, value, domain, location) {
            Ok(value) => Some(value),
            Err(error) => {
                self.reject(error);
                None
            }
        }
    }

    /// Keeps a configuration error unless an earlier one is already kept.
    pub(crate) fn reject(&mut self, error: GradError) {
        self.config_error.get_or_insert(error);
    }

    pub(crate) fn config_error(&self) -> Result<(), GradError> {
        self.config_error.as_ref().map_or(Ok(()), |error| Err(error.clone()))
    }

    pub(crate) fn lr(&self) -> f64 {
        self.lr
    }

    pub(crate) fn set_lr(
        &mut self,
        op: &'static str,
        lr: f64,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        self.lr = check_arg(op, "lr", lr, Domain::NonNegative, location)?;
        Ok(())
    }

    pub(crate) fn max_norm(&self) -> Option<f64> {
        self.max_norm
    }

    pub(crate) fn set_clip(
        &mut self,
        op: &'static str,
        max_norm: f64,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        self.max_norm = Some(check_arg(op, "max_norm", max_norm, Domain::Positive, location)?);
        Ok(())
    }

    /// How many steps were taken (the `t` of Adam's bias correction).
    pub(crate) fn steps(&self) -> u64 {
        self.steps
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The registered parameter `var`, if any.
    pub(crate) fn entry(&self, var: Var) -> Option<&Entry> {
        self.entries.iter().find(|entry| entry.var == var)
    }

    /// Total element count of the registered parameters: the length of a
    /// state with one slot per element.
    pub(crate) fn elements(&self) -> usize {
        self.elements
    }

    /// Registers `var`, a parameter of `tape`, with its own coefficient
    /// (called `name` in errors), under the name `#index`. Refuses anything
    /// but a live parameter of the tape the earlier parameters came from, a
    /// parameter already registered, and a coefficient that is negative or
    /// not finite.
    pub(crate) fn add<T: Float>(
        &mut self,
        op: &'static str,
        tape: &Tape<T>,
        var: Var,
        (name, coefficient): (&'static str, f64),
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        self.add_named(op, tape, &[(format!("#{}", var.index()), var, coefficient)], name, location)
    }

    /// Registers each `(name, var, coefficient)` as [`add`](Registry::add)
    /// does, all or none: the first refusal (or a name already taken)
    /// leaves the registry as it was. A handle listed again under another
    /// name (tied weights) is registered once, under its first name.
    pub(crate) fn add_named<T: Float>(
        &mut self,
        op: &'static str,
        tape: &Tape<T>,
        items: &[(String, Var, f64)],
        coefficient_name: &'static str,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        self.config_error()?;
        let mut names: HashSet<&str> = self.entries.iter().map(|entry| entry.name.as_str()).collect();
        let mut batch: Vec<Entry> = Vec::new();
        let mut elements = self.elements;
        for (name, var, coefficient) in items {
            let var = *var;
            if batch.iter().any(|entry| entry.var == var) {
                continue;
            }
            let id = tape.check_or_error(op, var, location)?;
            let shapes = vec![tape.shape(id).to_vec()];
            let kind = if !tape.is_param(id) {
                Some(ErrorKind::NotAParameter)
            } else if self.entries.first().is_some_and(|first| first.var.tape != var.tape) {
                Some(ErrorKind::ForeignVar)
            } else if self.entry(var).is_some() {
                Some(ErrorKind::DuplicateParameter)
            } else if !names.insert(name) {
                Some(ErrorKind::DuplicateName { name: name.clone() })
            } else {
                None
            };
            if let Some(kind) = kind {
                return Err(GradError::new(op, kind, shapes, location));
            }
            let coefficient = check_arg(op, coefficient_name, *coefficient, Domain::NonNegative, location)?;
            let len = tape.value_of(id).len();
            batch.push(Entry { var, name: name.clone(), coefficient, offset: elements, len, updates: 0 });
            elements += len;
        }
        for entry in &batch {
            tape.claims().claim(entry.var);
        }
        self.entries.extend(batch);
        self.elements = elements;
        Ok(())
    }

    /// The entries, to restore their update counts from a state file.
    pub(crate) fn entries_mut(&mut self) -> &mut [Entry] {
        &mut self.entries
    }

    /// Restores what a state file holds besides the per-parameter state.
    pub(crate) fn restore(&mut self, lr: f64, max_norm: Option<f64>, steps: u64) {
        self.lr = lr;
        self.max_norm = max_norm;
        self.steps = steps;
    }

    /// Phase one of a step: refuses a misconfigured optimizer, a poisoned
    /// tape, a parameter that is no longer a live node of `tape` (a
    /// different tape, or dropped by `reset_to`), a parameter of the tape
    /// that has a gradient but no optimizer (`claims.rs`), and a gradient
    /// holding a NaN or an infinity (always, not only in anomaly mode: as a
    /// mixed-precision loss scaler skips such a step); then advances the
    /// step count and returns the clip scale (one when clipping is off or
    /// the norm is within bounds). Nothing is changed when it fails.
    pub(crate) fn begin_step<T: Float>(
        &mut self,
        op: &'static str,
        tape: &Tape<T>,
        location: &'static Location<'static>,
    ) -> Result<T, GradError> {
        self.check_ready(op, tape, location)?;
        // A finite sum of squares means every gradient is finite (a NaN or
        // an infinity makes the sum one): the search for them then need not
        // read the gradients again.
        let norm = self.max_norm.map(|_| self.global_norm(tape));
        if !norm.is_some_and(f64::is_finite) {
            self.refuse_non_finite(op, tape, location)?;
        }
        let scale = match (self.max_norm, norm) {
            (Some(max_norm), Some(norm)) => clip_scale(norm, max_norm),
            _ => 1.0,
        };
        self.steps += 1;
        Ok(T::from_f64(scale))
    }

    /// The error for the first gradient that holds a NaN or an infinity, in
    /// registration order, if any does.
    fn refuse_non_finite<T: Float>(
        &self,
        op: &'static str,
        tape: &Tape<T>,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        for entry in &self.entries {
            let node = entry.var.index();
            let Some((position, bad)) = tape.grad_of(node).and_then(first_non_finite) else {
                continue;
            };
            let parameter = entry.name.as_str().into();
            let kind = ErrorKind::NonFiniteGradient { parameter, value: describe(bad), position };
            return Err(GradError::new(op, kind, vec![tape.shape(node).to_vec()], location));
        }
        Ok(())
    }

    /// The checks of [`begin_step`](Registry::begin_step) that read no
    /// gradient value: the configuration, a poisoned tape, registered
    /// parameters that are live nodes of `tape`, and no unregistered
    /// parameter with a gradient.
    pub(crate) fn check_ready<T: Float>(
        &self,
        op: &'static str,
        tape: &Tape<T>,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        self.config_error()?;
        if let Some(first) = tape.error() {
            let kind = ErrorKind::TapePoisoned { first: Box::new(first.clone()) };
            return Err(GradError::new(op, kind, Vec::new(), location));
        }
        for entry in &self.entries {
            tape.check_or_error(op, entry.var, location)?;
        }
        tape.claims().check(op, tape, location)
    }

    /// The L2 norm of the raw gradients of every registered parameter that
    /// has one: each parameter's sum of squares in f64
    /// ([`sum_of_squares`]), added in registration order.
    fn global_norm<T: Float>(&self, tape: &Tape<T>) -> f64 {
        let grads = self.entries.iter().filter_map(|entry| tape.grad_of(entry.var.index()));
        grads.map(sum_of_squares).sum::<f64>().sqrt()
    }

    /// Phase two of a step: calls `update(index, entry, value, grad)` for
    /// every registered parameter that has a gradient, in registration
    /// order, with its value (to update in place) and its raw gradient; a
    /// parameter backward never reached is skipped. Counts the update in the
    /// entry afterwards, so `entry.updates` is the count before this one.
    pub(crate) fn update_each<T: Float>(
        &mut self,
        tape: &mut Tape<T>,
        mut update: impl FnMut(usize, &Entry, &mut [T], &[T]),
    ) {
        for (index, entry) in self.entries.iter_mut().enumerate() {
            let (value, Some(grad)) = tape.value_and_grad_mut(entry.var.index()) else { continue };
            update(index, entry, value, grad);
            entry.updates += 1;
        }
    }
}

simd::multiversion! {
    /// `Σ x²` in f64, in 16 interleaved partial sums added by a fixed tree
    /// of halves, then the tail: the same order at every SIMD level and
    /// thread count. (As one chain of adds, each waiting on the last, the
    /// sum over W7's 0.8M gradients took 0.4 ms of every clipped step.)
    /// Each square of an `f32` is exact in f64.
    fn sum_of_squares[T: Float][T](x: &[T]) -> f64 {
        const LANES: usize = 16;
        let mut lanes = [0.0f64; LANES];
        let chunks = x.chunks_exact(LANES);
        let tail = chunks.remainder();
        for chunk in chunks {
            for (lane, &v) in lanes.iter_mut().zip(chunk) {
                let v = v.to_f64();
                *lane += v * v;
            }
        }
        tail.iter().fold(add_halves(lanes), |sum, &v| {
            let v = v.to_f64();
            sum + v * v
        })
    }
}

/// `max_norm / norm` when the norm exceeds `max_norm`, else exactly one (no
/// epsilon: torch's `clip_grad_norm_` divides by `norm + 1e-6`). The norm
/// is never NaN: a step with a non-finite gradient is refused before it.
fn clip_scale(norm: f64, max_norm: f64) -> f64 {
    if norm > max_norm { max_norm / norm } else { 1.0 }
}

/// `base` to the power `n` as the running product `((base·base)·base)···`,
/// the order in which a step-by-step hand computation (and an optimizer
/// that multiplies once per step) forms it; `powi` promises no particular
/// rounding. Used only when betas change after steps were taken.
pub(crate) fn running_power(base: f64, n: u64) -> f64 {
    (0..n).fold(1.0, |power, _| power * base)
}

#[cfg(test)]
mod tests {
    use super::sum_of_squares;

    #[test]
    fn sums_of_squares_are_exact_on_small_integers_at_every_length() {
        for len in [0, 1, 15, 16, 17, 33, 1000] {
            let x: Vec<f32> = (0..len).map(|i| (i % 13) as f32 - 6.0).collect();
            let expected: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
            assert_eq!(sum_of_squares(&x), expected, "length {len}");
        }
    }

    #[test]
    fn sums_of_squares_of_f64_are_accurate() {
        let x: Vec<f64> = (0..10_001).map(|i| (f64::from(i) * 0.37).sin() * 1e3).collect();
        let expected: f64 = x.iter().map(|v| v * v).sum();
        let got = sum_of_squares(&x);
        assert!(((got - expected) / expected).abs() < 1e-13, "{got} against {expected}");
    }
}
