//! AdamW: Adam with decoupled weight decay, as `torch.optim.AdamW` documents it.

use std::panic::Location;

use crate::error::GradError;
use crate::optim::moments::AdamMoments;
use crate::optim::registry::{Registry, running_power};
use crate::{Float, Tape, Var, parallel, simd};

/// AdamW (Loshchilov & Hutter): Adam whose weight decay shrinks the
/// parameter directly instead of entering the gradient, exactly as
/// `torch.optim.AdamW` documents it. Each parameter has its own decay
/// coefficient λ, given to [`add`](AdamW::add) (PyTorch's default is 0.01;
/// biases and norm gains usually get 0, as with a parameter group).
///
/// For every added parameter `w` that has a gradient, at that parameter's
/// own step `t` (counting from 1 the steps that updated it, as PyTorch's
/// per-parameter `step`), element by element:
///
/// ```text
/// g  = grad·s                       s: the clip scale (1 unless clipping is set and triggers)
/// w  = w − (lr·λ)·w
/// m  = β1·m + (1−β1)·g
/// v  = β2·v + (1−β2)·(g·g)
/// m̂  = m / (1−β1ᵗ)
/// v̂  = v / (1−β2ᵗ)
/// w  = w − (lr·m̂) / (√v̂ + ε)
/// ```
///
/// β1 = 0.9, β2 = 0.999, ε = 1e-8 unless set. Unlike [`Adam`](crate::Adam)
/// (scikit-learn's form), ε is added to the bias-corrected `√v̂`, as in
/// PyTorch, so `AdamW` with λ = 0 is `torch.optim.Adam`, not `Adam`; and
/// there is no L2 term. A parameter whose gradient backward never reached
/// is skipped: not decayed, moments and step unchanged.
///
/// `lr·λ`, `1−β1`, `1−β2`, `1−β1ᵗ`, `1−β2ᵗ` (powers as running products)
/// and the clip scale are computed in `f64` and rounded to `T` once; the
/// rest runs in `T` in the order written. The moments live in one flat
/// slab, as in `Adam`.
///
/// ```
/// use grad_runtime::{g_mul, g_sum, AdamW, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f64>::new();
/// let w = tape.param(array![1.0, -1.0]);
/// let unused = tape.param(array![5.0]);
/// let mut opt = AdamW::new(0.01);
/// opt.add(&tape, w, 0.01)?;
/// opt.add(&tape, unused, 0.01)?;
/// let ww = g_mul(&mut tape, w, w);
/// let loss = g_sum(&mut tape, ww);
/// tape.backward(loss)?;
/// opt.step(&mut tape)?;
/// assert_eq!(tape.value(unused)[0], 5.0); // no gradient: not even decayed
/// assert!(tape.value(w)[0] < 1.0);
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
pub struct AdamW<T: Float = f32> {
    pub(super) registry: Registry,
    /// β1, β2, ε and every parameter's `m` and `v`.
    pub(super) moments: AdamMoments<T>,
    /// `(β1ᵗ, β2ᵗ)` of each parameter at its own step count, as running products.
    pub(super) powers: Vec<(f64, f64)>,
}

registry_methods!(AdamW);

impl<T: Float> AdamW<T> {
    /// An AdamW optimizer with learning rate `lr`, β1 = 0.9, β2 = 0.999,
    /// ε = 1e-8 and no parameter yet. An invalid `lr` is reported by the
    /// next `add` or `step`.
    #[track_caller]
    pub fn new(lr: f64) -> Self {
        AdamW {
            registry: Registry::new("AdamW::new", lr, Location::caller()),
            moments: AdamMoments::new(),
            powers: Vec::new(),
        }
    }

    /// Sets β1 and β2, each in `[0, 1)`; see [`Adam::betas`](crate::Adam::betas).
    #[track_caller]
    #[must_use]
    pub fn betas(mut self, beta1: f64, beta2: f64) -> Self {
        if self.moments.set_betas(&mut self.registry, "AdamW::betas", (beta1, beta2), Location::caller()) {
            for (power, entry) in self.powers.iter_mut().zip(self.registry.entries()) {
                *power = (running_power(beta1, entry.updates), running_power(beta2, entry.updates));
            }
        }
        self
    }

    /// Sets ε (finite, `>= 0`), added to the bias-corrected `√v̂`.
    #[track_caller]
    #[must_use]
    pub fn eps(mut self, eps: f64) -> Self {
        self.moments.set_eps(&mut self.registry, "AdamW::eps", eps, Location::caller());
        self
    }

    /// Registers the parameter `var` of `tape` with its own decoupled
    /// weight decay λ (finite, `>= 0`). Errors as [`Adam::add`](crate::Adam::add).
    #[track_caller]
    #[must_use = "a refused parameter was not added: handle the error"]
    pub fn add(&mut self, tape: &Tape<T>, var: Var, weight_decay: f64) -> Result<(), GradError> {
        let location = Location::caller();
        self.moments.add(&mut self.registry, "AdamW::add", tape, var, ("weight_decay", weight_decay), location)?;
        self.powers.push((1.0, 1.0));
        Ok(())
    }

    /// The first and second moments `(m, v)` of a registered parameter, in
    /// row-major order; `None` if `var` was not added.
    pub fn moments(&self, var: Var) -> Option<(&[T], &[T])> {
        Some(self.moments.of(self.registry.entry(var)?))
    }

    /// Updates every added parameter that has a gradient, in place on
    /// `tape`; see the type's docs. Errors as [`Adam::step`](crate::Adam::step).
    #[track_caller]
    #[must_use = "a refused step updated nothing: handle the error"]
    pub fn step(&mut self, tape: &mut Tape<T>) -> Result<(), GradError> {
        let scale = self.registry.begin_step("AdamW::step", tape, Location::caller())?;
        let lr_f64 = self.registry.lr();
        let lr = T::from_f64(lr_f64);
        let (b1, b2) = (self.moments.beta1, self.moments.beta2);
        let (beta1, one_minus_beta1, beta2, one_minus_beta2, eps) = self.moments.constants();
        let (moments, powers) = (&mut self.moments, &mut self.powers);
        self.registry.update_each(tape, |index, entry, values, grads| {
            let power = &mut powers[index];
            *power = (power.0 * b1, power.1 * b2);
            let correction1 = T::from_f64(1.0 - power.0);
            let correction2 = T::from_f64(1.0 - power.1);
            let decay = T::from_f64(lr_f64 * entry.coefficient);
            let (m, v) = moments.of_mut(entry);
            let constants =
                [scale, decay, beta1, one_minus_beta1, beta2, one_minus_beta2, correction1, correction2, lr, eps];
            parallel::for_each_chunk_of_four(values, m, v, grads, |values, m, v, grads| {
                update(values, m, v, grads, constants)
            });
        });
        Ok(())
    }
}

simd::multiversion! {
    /// One AdamW update of a parameter's elements (the order of the type's docs).
    fn update[T: Float][T](values: &mut [T], m: &mut [T], v: &mut [T], grads: &[T], constants: [T; 10]) {
        let [scale, decay, beta1, one_minus_beta1, beta2, one_minus_beta2, correction1, correction2, lr, eps] = constants;
        for (((w, &grad), m), v) in values.iter_mut().zip(grads).zip(m).zip(v) {
            let g = grad * scale;
            *w -= decay * *w;
            *m = beta1 * *m + one_minus_beta1 * g;
            *v = beta2 * *v + one_minus_beta2 * (g * g);
            let m_hat = *m / correction1;
            let v_hat = *v / correction2;
            *w -= (lr * m_hat) / (v_hat.sqrt() + eps);
        }
    }
}
