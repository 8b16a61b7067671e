//! Adam with an L2 term per parameter, in the scikit-learn / Adam-paper ε-hat form.

use std::panic::Location;

use crate::error::GradError;
use crate::optim::moments::AdamMoments;
use crate::optim::registry::{Registry, running_power};
use crate::{Float, Tape, Var, parallel, simd};

/// Adam (Kingma & Ba), with each parameter's own L2 coefficient `alpha`
/// added to its gradient, in the form scikit-learn uses.
///
/// At step `t` (counting every step from 1), for every added parameter `w`
/// that has a gradient, element by element:
///
/// ```text
/// g    = grad·s + alpha·w                      s: the clip scale (1 unless clipping is set and triggers)
/// m    = β1·m + (1−β1)·g
/// v    = β2·v + (1−β2)·(g·g)
/// lr_t = lr·√(1−β2ᵗ) / (1−β1ᵗ)
/// w    = w − (lr_t·m) / (√v + ε)
/// ```
///
/// `m` and `v` start at zero; β1 = 0.9, β2 = 0.999 and ε = 1e-8 unless set
/// with [`betas`](Adam::betas) and [`eps`](Adam::eps). `t` advances on every
/// step, also for a parameter that step skipped (see below), and survives
/// [`Tape::reset_to`] (the optimizer holds it, not the tape).
///
/// **ε placement.** ε is added to `√v` after both bias corrections were
/// folded into `lr_t` (scikit-learn's `AdamOptimizer`, the paper's "ε-hat"
/// form). `torch.optim.Adam` adds ε to the bias-corrected `√v̂ = √(v/(1−β2ᵗ))`
/// instead, which is this update with ε scaled by `√(1−β2ᵗ)`: the two agree
/// unless `√v̂` is within a few orders of magnitude of ε, and differ most
/// in the first steps. [`AdamW`](crate::AdamW) follows torch's form.
///
/// **Skipping.** A parameter whose gradient backward never reached (since
/// the last `reset_to`) is skipped, as PyTorch skips a `None` gradient: no
/// L2 decay, moments unchanged, not counted by clipping.
///
/// **Precision.** Hyperparameters are kept as the `f64` you gave. Per step,
/// `lr_t` (with `β1ᵗ`, `β2ᵗ` as running products), `1−β1`, `1−β2` and the
/// clip scale are computed in `f64` and rounded to `T` once; every
/// elementwise operation above runs in `T`, in the order written.
///
/// The moments of all parameters live in one flat slab, `m` then `v` for
/// each parameter at its own offset; a step allocates nothing.
///
/// Training the design-card model `relu(x @ w + b)` with an MSE loss:
///
/// ```
/// use grad_runtime::{g_add, g_matmul, g_mse, g_relu, Adam, Tape};
/// use ndarray::Array2;
///
/// // 32 samples of 3 features; the targets come from a known relu layer.
/// let x = Array2::from_shape_fn((32, 3), |(i, j)| ((i * 7 + j * 5) % 11) as f32 / 5.0 - 1.0);
/// let w_true = Array2::from_shape_fn((3, 2), |(i, j)| [0.8, -0.5, 0.3, 1.1, -0.7, 0.4][i * 2 + j]);
/// let t = x.dot(&w_true).mapv(|z: f32| (z + 0.2).max(0.0));
///
/// let mut tape = Tape::<f32>::new();
/// let w = tape.param(Array2::from_shape_fn((3, 2), |(i, j)| 0.1 * (i as f32) - 0.05 * (j as f32) + 0.1));
/// let b = tape.param(ndarray::arr1(&[0.1f32, 0.1]));
/// let mut opt = Adam::new(0.05);
/// opt.add(&tape, w, 1e-4)?; // weights get a little L2
/// opt.add(&tape, b, 0.0)?; //  biases none
///
/// let mark = tape.mark();
/// let mut losses = Vec::new();
/// for _ in 0..200 {
///     let xc = tape.constant(&x);
///     let tc = tape.constant(&t);
///     let xw = g_matmul(&mut tape, xc, w);
///     let z = g_add(&mut tape, xw, b);
///     let y = g_relu(&mut tape, z);
///     let loss = g_mse(&mut tape, y, tc);
///     tape.backward(loss)?;
///     losses.push(tape.scalar(loss));
///     opt.step(&mut tape)?;
///     tape.reset_to(mark); // parameters and the Adam state survive
///     if losses[0] / losses[losses.len() - 1] >= 10.0 {
///         break;
///     }
/// }
/// let (first, last) = (losses[0], losses[losses.len() - 1]);
/// assert!(first / last >= 10.0, "loss went from {first} to {last} in {} steps", losses.len());
/// assert_eq!(opt.steps() as usize, losses.len());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
pub struct Adam<T: Float = f32> {
    pub(super) registry: Registry,
    /// β1, β2, ε and every parameter's `m` and `v`.
    pub(super) moments: AdamMoments<T>,
    /// `β1ᵗ` and `β2ᵗ` for the current step count, as running products.
    pub(super) beta1_power: f64,
    pub(super) beta2_power: f64,
}

registry_methods!(Adam);

impl<T: Float> Adam<T> {
    /// An Adam optimizer with learning rate `lr`, β1 = 0.9, β2 = 0.999,
    /// ε = 1e-8 and no parameter yet.
    ///
    /// `lr` must be finite and `>= 0`; otherwise the next [`add`](Adam::add)
    /// or [`step`](Adam::step) returns the error (naming this call).
    #[track_caller]
    pub fn new(lr: f64) -> Self {
        Adam {
            registry: Registry::new("Adam::new", lr, Location::caller()),
            moments: AdamMoments::new(),
            beta1_power: 1.0,
            beta2_power: 1.0,
        }
    }

    /// Sets the moment decay rates β1 and β2, each in `[0, 1)`. An invalid
    /// value is reported by the next `add` or `step` and leaves both unchanged.
    #[track_caller]
    #[must_use]
    pub fn betas(mut self, beta1: f64, beta2: f64) -> Self {
        if self.moments.set_betas(&mut self.registry, "Adam::betas", (beta1, beta2), Location::caller()) {
            self.beta1_power = running_power(beta1, self.registry.steps());
            self.beta2_power = running_power(beta2, self.registry.steps());
        }
        self
    }

    /// Sets ε, finite and `>= 0`, added to `√v` (see the type's docs for
    /// where torch adds it instead).
    #[track_caller]
    #[must_use]
    pub fn eps(mut self, eps: f64) -> Self {
        self.moments.set_eps(&mut self.registry, "Adam::eps", eps, Location::caller());
        self
    }

    /// Registers the parameter `var` of `tape` with its own L2 coefficient
    /// `alpha` (finite, `>= 0`; typically small for weights, 0 for biases).
    ///
    /// Errors: `var` is not a parameter (a constant, an op's result), is
    /// stale, poisoned or from another tape than the parameters added
    /// before, or was already added; `alpha` is out of domain; or a
    /// constructor or builder argument was invalid.
    #[track_caller]
    #[must_use = "a refused parameter was not added: handle the error"]
    pub fn add(&mut self, tape: &Tape<T>, var: Var, alpha: f64) -> Result<(), GradError> {
        self.moments.add(&mut self.registry, "Adam::add", tape, var, ("alpha", alpha), Location::caller())
    }

    /// The first and second moments `(m, v)` of a registered parameter, in
    /// row-major order; `None` if `var` was not added.
    pub fn moments(&self, var: Var) -> Option<(&[T], &[T])> {
        Some(self.moments.of(self.registry.entry(var)?))
    }

    /// Updates every added parameter that has a gradient, in place on
    /// `tape`, from the gradients currently there (see the type's docs).
    /// Gradients are left as they are: [`Tape::reset_to`] clears them.
    ///
    /// Errors, with nothing updated and the step count unchanged: the tape
    /// is poisoned, a parameter is not a live node of `tape` (another tape,
    /// or dropped by `reset_to`), a gradient holds a NaN or an infinity
    /// ([`ErrorKind::NonFiniteGradient`](crate::ErrorKind::NonFiniteGradient),
    /// naming the parameter: skip the batch, as a loss scaler would), or a
    /// configuration argument was invalid.
    #[track_caller]
    #[must_use = "a refused step updated nothing: handle the error"]
    pub fn step(&mut self, tape: &mut Tape<T>) -> Result<(), GradError> {
        let scale = self.registry.begin_step("Adam::step", tape, Location::caller())?;
        self.beta1_power *= self.moments.beta1;
        self.beta2_power *= self.moments.beta2;
        let lr_t = T::from_f64(self.registry.lr() * (1.0 - self.beta2_power).sqrt() / (1.0 - self.beta1_power));
        let (beta1, one_minus_beta1, beta2, one_minus_beta2, eps) = self.moments.constants();
        let moments = &mut self.moments;
        self.registry.update_each(tape, |_, entry, values, grads| {
            let alpha = T::from_f64(entry.coefficient);
            let (m, v) = moments.of_mut(entry);
            let constants = [scale, alpha, beta1, one_minus_beta1, beta2, one_minus_beta2, lr_t, eps];
            parallel::for_each_chunk_of_four(values, m, v, grads, |values, m, v, grads| {
                update(values, m, v, grads, constants)
            });
        });
        Ok(())
    }
}

simd::multiversion! {
    /// One Adam update of a parameter's elements (the order of the type's docs).
    fn update[T: Float][T](values: &mut [T], m: &mut [T], v: &mut [T], grads: &[T], constants: [T; 8]) {
        let [scale, alpha, beta1, one_minus_beta1, beta2, one_minus_beta2, lr_t, eps] = constants;
        for (((w, &grad), m), v) in values.iter_mut().zip(grads).zip(m).zip(v) {
            let g = grad * scale + alpha * *w;
            *m = beta1 * *m + one_minus_beta1 * g;
            *v = beta2 * *v + one_minus_beta2 * (g * g);
            *w -= (lr_t * *m) / (v.sqrt() + eps);
        }
    }
}
