//! Registering a whole model in one call: `opt.add_params(&tape, &model, |name| l2)`
//! on every optimizer, each parameter under its path name.

use std::panic::Location;

use super::{Adam, AdamW, Sgd};
use crate::error::GradError;
use crate::{Float, Params, Tape, Var};

/// Every parameter of `model` with its name and the coefficient `coefficient(name)` gives it.
fn named_items<P: Params + ?Sized>(model: &P, mut coefficient: impl FnMut(&str) -> f64) -> Vec<(String, Var, f64)> {
    let mut items = Vec::new();
    model.visit_params(&mut crate::ParamVisitor::new(&mut |name, var| {
        items.push((name.to_string(), var, coefficient(name)))
    }));
    items
}

impl<T: Float> Adam<T> {
    /// Registers every parameter of `model` (a `#[derive(Params)]` struct)
    /// under its path name (`layers.0.w`, the name [`save_state`](Adam::save_state)
    /// files it under), with the L2 coefficient `alpha(name)`: typically
    /// small for weights, 0 for biases.
    ///
    /// The errors of [`add`](Adam::add), plus two parameters with one name,
    /// for the whole model at once: on any error nothing is registered. A
    /// handle the model lists twice (tied weights) is registered once,
    /// under its first name.
    ///
    /// ```
    /// use grad_runtime::{Adam, Params, Tape, Var};
    /// use ndarray::{Array1, Array2};
    ///
    /// #[derive(Params)]
    /// struct Dense { w: Var, b: Var }
    ///
    /// let mut tape = Tape::<f32>::new();
    /// let layer = Dense { w: tape.param(Array2::<f32>::zeros((3, 2))), b: tape.param(Array1::<f32>::zeros(2)) };
    /// let mut opt = Adam::new(1e-3);
    /// opt.add_params(&tape, &layer, |name| if name.ends_with('w') { 1e-4 } else { 0.0 })?;
    /// assert!(opt.moments(layer.w).is_some() && opt.moments(layer.b).is_some());
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn add_params<P: Params + ?Sized>(
        &mut self,
        tape: &Tape<T>,
        model: &P,
        alpha: impl FnMut(&str) -> f64,
    ) -> Result<(), GradError> {
        let items = named_items(model, alpha);
        self.registry.add_named("Adam::add_params", tape, &items, "alpha", Location::caller())?;
        self.moments.grow(&self.registry);
        Ok(())
    }
}

impl<T: Float> AdamW<T> {
    /// Registers every parameter of `model` under its path name, with the
    /// decoupled weight decay `weight_decay(name)`. Errors as
    /// [`Adam::add_params`](crate::Adam::add_params).
    #[track_caller]
    pub fn add_params<P: Params + ?Sized>(
        &mut self,
        tape: &Tape<T>,
        model: &P,
        weight_decay: impl FnMut(&str) -> f64,
    ) -> Result<(), GradError> {
        let items = named_items(model, weight_decay);
        self.registry.add_named("AdamW::add_params", tape, &items, "weight_decay", Location::caller())?;
        self.moments.grow(&self.registry);
        self.powers.resize(self.registry.entries().len(), (1.0, 1.0));
        Ok(())
    }
}

impl<T: Float> Sgd<T> {
    /// Registers every parameter of `model` under its path name, with the
    /// L2 coefficient `alpha(name)`. Errors as
    /// [`Adam::add_params`](crate::Adam::add_params).
    #[track_caller]
    pub fn add_params<P: Params + ?Sized>(
        &mut self,
        tape: &Tape<T>,
        model: &P,
        alpha: impl FnMut(&str) -> f64,
    ) -> Result<(), GradError> {
        self.check_config()?;
        let items = named_items(model, alpha);
        self.registry.add_named("Sgd::add_params", tape, &items, "alpha", Location::caller())?;
        if self.momentum > 0.0 {
            self.buffers.resize(self.registry.elements(), T::zero());
        }
        Ok(())
    }
}
