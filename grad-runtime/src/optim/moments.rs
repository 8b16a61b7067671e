//! What [`Adam`](crate::Adam) and [`AdamW`](crate::AdamW) share: the decay
//! rates β1 and β2, ε, and every parameter's first and second moments in
//! one flat slab, with the builder checks that set them. The two differ
//! only in their update rule and in how they keep `β1ᵗ`, `β2ᵗ` (one count
//! for all parameters, or one per parameter).

use std::panic::Location;

use crate::error::GradError;
use crate::optim::registry::{Domain, Entry, Registry};
use crate::{Float, Tape, Var};

pub(crate) struct AdamMoments<T> {
    pub(crate) beta1: f64,
    pub(crate) beta2: f64,
    pub(crate) eps: f64,
    /// Every parameter's `m` then `v`: the parameter at element offset `o`
    /// with `n` elements owns `slab[2o .. 2o + 2n]`, `m` in the first half.
    slab: Vec<T>,
}

impl<T: Float> AdamMoments<T> {
    /// β1 = 0.9, β2 = 0.999, ε = 1e-8, no parameter.
    pub(crate) fn new() -> Self {
        AdamMoments { beta1: 0.9, beta2: 0.999, eps: 1e-8, slab: Vec::new() }
    }

    /// Sets β1 and β2 when both lie in `[0, 1)`; otherwise the registry
    /// keeps the error (named after `op`) and nothing changes. True when set.
    pub(crate) fn set_betas(
        &mut self,
        registry: &mut Registry,
        op: &'static str,
        (beta1, beta2): (f64, f64),
        location: &'static Location<'static>,
    ) -> bool {
        let b1 = registry.accept(op, "beta1", beta1, Domain::Beta, location);
        let b2 = registry.accept(op, "beta2", beta2, Domain::Beta, location);
        if let (Some(beta1), Some(beta2)) = (b1, b2) {
            (self.beta1, self.beta2) = (beta1, beta2);
            return true;
        }
        false
    }

    /// Sets ε when finite and `>= 0`; otherwise the registry keeps the error.
    pub(crate) fn set_eps(
        &mut self,
        registry: &mut Registry,
        op: &'static str,
        eps: f64,
        location: &'static Location<'static>,
    ) {
        if let Some(eps) = registry.accept(op, "eps", eps, Domain::NonNegative, location) {
            self.eps = eps;
        }
    }

    /// Registers `var` and makes room for its moments (zeros).
    pub(crate) fn add(
        &mut self,
        registry: &mut Registry,
        op: &'static str,
        tape: &Tape<T>,
        var: Var,
        coefficient: (&'static str, f64),
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        registry.add(op, tape, var, coefficient, location)?;
        self.grow(registry);
        Ok(())
    }

    /// Makes room (zeros) for every parameter the registry holds.
    pub(crate) fn grow(&mut self, registry: &Registry) {
        self.slab.resize(2 * registry.elements(), T::zero());
    }

    /// A registered parameter's `(m, v)`.
    pub(crate) fn of(&self, entry: &Entry) -> (&[T], &[T]) {
        self.slab[2 * entry.offset..2 * (entry.offset + entry.len)].split_at(entry.len)
    }

    /// The same, to update.
    pub(crate) fn of_mut(&mut self, entry: &Entry) -> (&mut [T], &mut [T]) {
        self.slab[2 * entry.offset..2 * (entry.offset + entry.len)].split_at_mut(entry.len)
    }

    /// `(β1, 1 − β1, β2, 1 − β2, ε)` rounded to the tape's type, once per step.
    pub(crate) fn constants(&self) -> (T, T, T, T, T) {
        let (b1, b2) = (self.beta1, self.beta2);
        (T::from_f64(b1), T::from_f64(1.0 - b1), T::from_f64(b2), T::from_f64(1.0 - b2), T::from_f64(self.eps))
    }
}
