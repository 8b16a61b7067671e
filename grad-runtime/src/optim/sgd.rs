//! Stochastic gradient descent, optionally with (Nesterov) momentum, as PyTorch defines it.

use std::panic::Location;

use crate::error::{ErrorKind, GradError};
use crate::optim::registry::{Domain, Registry};
use crate::{Float, Tape, Var};

/// Stochastic gradient descent with each parameter's own L2 coefficient
/// `alpha`, and optional momentum (heavy-ball or Nesterov) exactly as
/// `torch.optim.SGD` documents it.
///
/// For every added parameter `w` that has a gradient, element by element:
///
/// ```text
/// g = grad·s + alpha·w              s: the clip scale (1 unless clipping is set and triggers)
/// without momentum (the default):
///     w = w − lr·g
/// with momentum μ > 0 and dampening τ:
///     b = g                         on this parameter's first update
///     b = μ·b + (1−τ)·g             on later ones
///     g = g + μ·b   if Nesterov,  else  g = b
///     w = w − lr·g
/// ```
///
/// The momentum buffer `b` is one flat slab with one offset per parameter.
/// As in PyTorch, a parameter whose gradient backward never reached is
/// skipped (no decay, its buffer unchanged), and its buffer starts on the
/// first step that does update it. `lr`, `1−τ` and the clip scale are
/// computed in `f64` and rounded to `T`; the rest runs in `T` in the order
/// written.
///
/// ```
/// use grad_runtime::{g_mul, g_sum, Sgd, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f64>::new();
/// let w = tape.param(array![1.0, -2.0]);
/// let mut opt = Sgd::new(0.1).momentum(0.9).nesterov(true);
/// opt.add(&tape, w, 0.0)?;
/// let mark = tape.mark();
/// for _ in 0..50 {
///     let ww = g_mul(&mut tape, w, w);
///     let loss = g_sum(&mut tape, ww); // |w|², minimised at 0
///     tape.backward(loss)?;
///     opt.step(&mut tape)?;
///     tape.reset_to(mark);
/// }
/// assert!(tape.value(w).iter().all(|x| x.abs() < 1e-3));
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
pub struct Sgd<T: Float = f32> {
    pub(super) registry: Registry,
    pub(super) momentum: f64,
    pub(super) dampening: f64,
    /// Where `nesterov(true)` was called, to name it if momentum is missing.
    pub(super) nesterov: Option<&'static Location<'static>>,
    /// The momentum buffers: the parameter at element offset `o` with `n`
    /// elements owns `buffers[o .. o + n]`. Empty without momentum.
    pub(super) buffers: Vec<T>,
}

registry_methods!(Sgd);

impl<T: Float> Sgd<T> {
    /// Plain SGD with learning rate `lr` and no parameter yet.
    ///
    /// `lr` must be finite and `>= 0`; otherwise the next [`add`](Sgd::add)
    /// or [`step`](Sgd::step) returns the error (naming this call).
    #[track_caller]
    pub fn new(lr: f64) -> Self {
        Sgd {
            registry: Registry::new("Sgd::new", lr, Location::caller()),
            momentum: 0.0,
            dampening: 0.0,
            nesterov: None,
            buffers: Vec::new(),
        }
    }

    /// Sets the momentum factor μ (finite, `>= 0`; 0, the default, turns
    /// momentum off). Set it when building the optimizer: a parameter's
    /// buffer starts as its gradient only on its first update by this optimizer.
    #[track_caller]
    #[must_use]
    pub fn momentum(mut self, momentum: f64) -> Self {
        let location = Location::caller();
        if let Some(momentum) =
            self.registry.accept("Sgd::momentum", "momentum", momentum, Domain::NonNegative, location)
        {
            self.momentum = momentum;
            if momentum > 0.0 {
                self.buffers.resize(self.registry.elements(), T::zero());
            }
        }
        self
    }

    /// Sets the dampening τ in `[0, 1]`: new gradients enter the momentum
    /// buffer scaled by `1−τ` (PyTorch's `dampening`, default 0).
    #[track_caller]
    #[must_use]
    pub fn dampening(mut self, dampening: f64) -> Self {
        let location = Location::caller();
        if let Some(dampening) =
            self.registry.accept("Sgd::dampening", "dampening", dampening, Domain::Fraction, location)
        {
            self.dampening = dampening;
        }
        self
    }

    /// Turns Nesterov momentum on or off. As in PyTorch it needs a momentum
    /// `> 0` and zero dampening; otherwise the next `add` or `step` returns
    /// an error naming this call.
    #[track_caller]
    #[must_use]
    pub fn nesterov(mut self, nesterov: bool) -> Self {
        let location = Location::caller(); // here, not inside a closure: that would name core
        self.nesterov = nesterov.then_some(location);
        self
    }

    /// Registers the parameter `var` of `tape` with its own L2 coefficient
    /// `alpha` (finite, `>= 0`; typically small for weights, 0 for biases).
    ///
    /// Errors: as [`Adam::add`](crate::Adam::add).
    #[track_caller]
    #[must_use = "a refused parameter was not added: handle the error"]
    pub fn add(&mut self, tape: &Tape<T>, var: Var, alpha: f64) -> Result<(), GradError> {
        self.check_config()?;
        self.registry.add("Sgd::add", tape, var, ("alpha", alpha), Location::caller())?;
        if self.momentum > 0.0 {
            self.buffers.resize(self.registry.elements(), T::zero());
        }
        Ok(())
    }

    /// The momentum buffer of a registered parameter, in row-major order;
    /// `None` if `var` was not added or momentum is off.
    pub fn momentum_buffer(&self, var: Var) -> Option<&[T]> {
        let entry = self.registry.entry(var)?;
        self.buffers.get(entry.offset..entry.offset + entry.len)
    }

    /// Updates every added parameter that has a gradient, in place on
    /// `tape`; see the type's docs. Errors as [`Adam::step`](crate::Adam::step).
    #[track_caller]
    #[must_use = "a refused step updated nothing: handle the error"]
    pub fn step(&mut self, tape: &mut Tape<T>) -> Result<(), GradError> {
        self.check_config()?;
        let scale = self.registry.begin_step("Sgd::step", tape, Location::caller())?;
        let lr = T::from_f64(self.registry.lr());
        if self.momentum == 0.0 {
            self.registry.update_each(tape, |_, entry, values, grads| {
                let alpha = T::from_f64(entry.coefficient);
                for (w, &grad) in values.iter_mut().zip(grads) {
                    let g = grad * scale + alpha * *w;
                    *w -= lr * g;
                }
            });
            return Ok(());
        }
        let momentum = T::from_f64(self.momentum);
        let one_minus_dampening = T::from_f64(1.0 - self.dampening);
        let nesterov = self.nesterov.is_some();
        let buffers = &mut self.buffers;
        self.registry.update_each(tape, |_, entry, values, grads| {
            let alpha = T::from_f64(entry.coefficient);
            let first = entry.updates == 0;
            let own = &mut buffers[entry.offset..entry.offset + entry.len];
            for ((w, &grad), b) in values.iter_mut().zip(grads).zip(own) {
                let mut g = grad * scale + alpha * *w;
                *b = if first { g } else { momentum * *b + one_minus_dampening * g };
                g = if nesterov { g + momentum * *b } else { *b };
                *w -= lr * g;
            }
        });
        Ok(())
    }

    /// The first invalid builder argument, else whether Nesterov has the
    /// momentum and zero dampening it needs (PyTorch refuses it too).
    pub(super) fn check_config(&self) -> Result<(), GradError> {
        self.registry.config_error()?;
        match self.nesterov {
            Some(location) if self.momentum <= 0.0 || self.dampening != 0.0 => {
                let (name, value, expected) = if self.momentum <= 0.0 {
                    ("momentum", self.momentum, "a momentum > 0 with Nesterov")
                } else {
                    ("dampening", self.dampening, "zero dampening with Nesterov")
                };
                let kind = ErrorKind::InvalidArgument { name, value, expected };
                Err(GradError::new("Sgd::nesterov", kind, Vec::new(), location))
            }
            _ => Ok(()),
        }
    }
}
