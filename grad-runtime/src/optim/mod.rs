//! Optimizers: [`Sgd`], [`Adam`], [`AdamW`], and the [`Optimizer`] trait they share.
//!
//! Every optimizer works the same way:
//!
//! - `add(&tape, var, coefficient)` registers one parameter with its own
//!   regularisation coefficient: the L2 `alpha` added to its gradient
//!   (`Sgd`, `Adam`) or the decoupled weight decay λ (`AdamW`). Weights
//!   usually get a small one, biases 0.
//! - `step(&mut tape)` updates the parameters' values in place on the tape
//!   from the gradients currently there; a parameter backward never reached
//!   is skipped (PyTorch's `None`-gradient rule). Gradients are not
//!   cleared: [`Tape::reset_to`] does that, and the optimizer's state (step
//!   count, moments, momentum buffers) survives it.
//! - `set_clip(max_norm)` turns on clipping by global norm: one L2 norm
//!   over the raw gradients of every added parameter that has one; if it
//!   exceeds `max_norm`, every raw gradient is scaled by `max_norm / norm`
//!   (no epsilon) before the regularisation term is added.
//! - `add_params(&tape, &model, |name| coefficient)` registers every
//!   parameter of a `#[derive(Params)]` model in one call, under its path
//!   name (`layers.0.w`); `add` names a parameter `#index` (its tape position).
//! - `set_lr(lr)` changes the learning rate between steps (schedules).
//! - A step refuses to run while a parameter of the tape received a
//!   gradient but no optimizer has it ([`ErrorKind::UnregisteredParameter`](crate::ErrorKind::UnregisteredParameter);
//!   [`Tape::freeze`] keeps one fixed on purpose).
//! - `save_state(&tape, path)` / `load_state(&tape, path)` write and restore
//!   the whole state (step counts, moments or momentum buffers, learning
//!   rate, clipping, hyperparameters) as a safetensors file keyed by
//!   parameter name, all or nothing, so a resumed run continues bit for bit.
//! - Misuse is a [`GradError`] naming the call and its source location, not
//!   a panic or a silent no-op. Constructors and builder setters return the
//!   optimizer itself, so an invalid hyperparameter given to them is kept
//!   and returned by every later `add` and `step`.
//!
//! Hyperparameters are `f64` whatever the tape's float type; derived
//! per-step scalars are computed in `f64` and rounded to `T` once, the
//! elementwise update runs in `T`. Each type documents its exact order of
//! operations, which the tests reproduce bit for bit.

/// The inherent methods every optimizer has in the same form, on its
/// `registry`: clipping, the learning rate, the step count. Errors name
/// the type's own method (`Adam::set_lr`). Defined before the modules that
/// invoke it (`registry_methods!(Adam);`), which need `Float`, `GradError`
/// and `Location` in scope.
macro_rules! registry_methods {
    ($ty:ident) => {
        impl<T: Float> $ty<T> {
            /// Clips by global norm from now on: before each update, if the
            /// L2 norm of all raw gradients exceeds `max_norm` (finite,
            /// `> 0`), each is scaled by `max_norm / norm`; any L2 term is
            /// added after, unclipped.
            #[track_caller]
            pub fn set_clip(&mut self, max_norm: f64) -> Result<(), GradError> {
                self.registry.set_clip(concat!(stringify!($ty), "::set_clip"), max_norm, Location::caller())
            }

            /// The clipping threshold, if clipping is set.
            pub fn clip(&self) -> Option<f64> {
                self.registry.max_norm()
            }

            /// The learning rate the next step uses.
            pub fn lr(&self) -> f64 {
                self.registry.lr()
            }

            /// Changes the learning rate for the following steps (a
            /// schedule); finite and `>= 0`, else an error and the rate is
            /// unchanged.
            #[track_caller]
            pub fn set_lr(&mut self, lr: f64) -> Result<(), GradError> {
                self.registry.set_lr(concat!(stringify!($ty), "::set_lr"), lr, Location::caller())
            }

            /// How many steps were taken (Adam's `t`).
            pub fn steps(&self) -> u64 {
                self.registry.steps()
            }
        }
    };
}

mod adam;
mod adamw;
mod add_params;
mod moments;
mod registry;
mod sgd;
mod state;

pub use adam::Adam;
pub use adamw::AdamW;
pub use sgd::Sgd;

use std::path::Path;

use crate::error::GradError;
use crate::{Float, Params, Tape, Var};

/// What [`Sgd`], [`Adam`] and [`AdamW`] have in common, for code generic
/// over the optimizer. Each type also has these as inherent methods (with
/// per-type docs), so calling them needs no import of this trait.
///
/// A learning-rate schedule is a `set_lr` before each step; here a linear
/// warm-up followed by a cosine decay:
///
/// ```
/// use grad_runtime::{g_mul, g_sum, Adam, Optimizer, Sgd, Tape};
/// use ndarray::array;
///
/// fn cosine_with_warmup(base: f64, step: u64, warmup: u64, total: u64) -> f64 {
///     if step < warmup {
///         return base * (step + 1) as f64 / warmup as f64;
///     }
///     let progress = (step - warmup) as f64 / (total - warmup) as f64;
///     0.5 * base * (1.0 + (std::f64::consts::PI * progress).cos())
/// }
///
/// fn train(opt: &mut impl Optimizer<f64>, base_lr: f64) -> Result<f64, grad_runtime::GradError> {
///     let mut tape = Tape::<f64>::new();
///     let w = tape.param(array![3.0, -2.0]);
///     opt.add(&tape, w, 0.0)?;
///     let mark = tape.mark();
///     for step in 0..100 {
///         opt.set_lr(cosine_with_warmup(base_lr, step, 10, 100))?;
///         let ww = g_mul(&mut tape, w, w);
///         let loss = g_sum(&mut tape, ww);
///         tape.backward(loss)?;
///         opt.step(&mut tape)?;
///         tape.reset_to(mark);
///     }
///     Ok(tape.value(w).iter().map(|x| x * x).sum())
/// }
///
/// assert!(train(&mut Sgd::new(0.0), 0.1)? < 1e-6);
/// assert!(train(&mut Adam::new(0.0), 0.3)? < 1e-2);
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
pub trait Optimizer<T: Float> {
    /// Registers the parameter `var` of `tape` with its own coefficient
    /// (L2 `alpha` for `Sgd` and `Adam`, decoupled decay λ for `AdamW`).
    #[track_caller]
    #[must_use = "a refused parameter was not added: handle the error"]
    fn add(&mut self, tape: &Tape<T>, var: Var, coefficient: f64) -> Result<(), GradError>;

    /// Clips by global norm `max_norm` (finite, `> 0`) from the next step on.
    #[track_caller]
    fn set_clip(&mut self, max_norm: f64) -> Result<(), GradError>;

    /// Updates every added parameter that has a gradient, in place on `tape`.
    #[track_caller]
    #[must_use = "a refused step updated nothing: handle the error"]
    fn step(&mut self, tape: &mut Tape<T>) -> Result<(), GradError>;

    /// The learning rate the next step uses.
    fn lr(&self) -> f64;

    /// Changes the learning rate for the following steps (finite, `>= 0`).
    #[track_caller]
    fn set_lr(&mut self, lr: f64) -> Result<(), GradError>;

    /// How many steps were taken.
    fn steps(&self) -> u64;

    /// The registered parameters in registration order, each with its name
    /// (its path for `add_params`, `#index` for `add`) and element count:
    /// what a step updates, and what `grad_runtime::dist` (the `mpi`
    /// feature) broadcasts and averages.
    fn registered(&self) -> impl ExactSizeIterator<Item = (&str, Var, usize)>
    where
        Self: Sized;

    /// The checks `step` makes before it reads a gradient's values, without
    /// stepping: a misconfigured optimizer, a poisoned tape, a parameter that
    /// is no longer a live node of `tape`, or a parameter of the tape with a
    /// gradient but no optimizer is an error. `step` may still refuse a
    /// non-finite gradient.
    #[track_caller]
    fn check_step(&self, tape: &Tape<T>) -> Result<(), GradError>;

    /// Registers every parameter of `model` under its path name, each with
    /// the coefficient `coefficient(name)`; all or nothing.
    #[track_caller]
    #[must_use = "a refused model was not added: handle the error"]
    fn add_params<P: Params + ?Sized>(
        &mut self,
        tape: &Tape<T>,
        model: &P,
        coefficient: impl FnMut(&str) -> f64,
    ) -> Result<(), GradError>
    where
        Self: Sized;

    /// Writes the optimizer's state to a safetensors file, by parameter name.
    #[track_caller]
    fn save_state(&self, tape: &Tape<T>, path: impl AsRef<Path>) -> Result<(), GradError>
    where
        Self: Sized;

    /// Restores a state `save_state` wrote; all or nothing.
    #[track_caller]
    fn load_state(&mut self, tape: &Tape<T>, path: impl AsRef<Path>) -> Result<(), GradError>
    where
        Self: Sized;
}

/// Each trait method forwards to the inherent method of the same name.
macro_rules! forward_optimizer {
    ($($ty:ident),*) => {$(
        impl<T: Float> Optimizer<T> for $ty<T> {
            fn add(&mut self, tape: &Tape<T>, var: Var, coefficient: f64) -> Result<(), GradError> {
                <$ty<T>>::add(self, tape, var, coefficient)
            }
            fn set_clip(&mut self, max_norm: f64) -> Result<(), GradError> {
                <$ty<T>>::set_clip(self, max_norm)
            }
            fn step(&mut self, tape: &mut Tape<T>) -> Result<(), GradError> {
                <$ty<T>>::step(self, tape)
            }
            fn lr(&self) -> f64 {
                <$ty<T>>::lr(self)
            }
            fn set_lr(&mut self, lr: f64) -> Result<(), GradError> {
                <$ty<T>>::set_lr(self, lr)
            }
            fn steps(&self) -> u64 {
                <$ty<T>>::steps(self)
            }
            fn registered(&self) -> impl ExactSizeIterator<Item = (&str, Var, usize)> {
                self.registry.entries().iter().map(|entry| (entry.name.as_str(), entry.var, entry.len))
            }
            #[track_caller]
            fn check_step(&self, tape: &Tape<T>) -> Result<(), GradError> {
                let op = concat!(stringify!($ty), "::step");
                self.registry.check_ready(op, tape, std::panic::Location::caller())
            }
            fn add_params<P: Params + ?Sized>(
                &mut self,
                tape: &Tape<T>,
                model: &P,
                coefficient: impl FnMut(&str) -> f64,
            ) -> Result<(), GradError> {
                <$ty<T>>::add_params(self, tape, model, coefficient)
            }
            fn save_state(&self, tape: &Tape<T>, path: impl AsRef<Path>) -> Result<(), GradError> {
                <$ty<T>>::save_state(self, tape, path)
            }
            fn load_state(&mut self, tape: &Tape<T>, path: impl AsRef<Path>) -> Result<(), GradError> {
                <$ty<T>>::load_state(self, tape, path)
            }
        }
    )*};
}

forward_optimizer!(Sgd, Adam, AdamW);
