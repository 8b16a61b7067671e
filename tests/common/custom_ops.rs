//! Custom ops the tests share: a straight-through estimator, a stable
//! softplus with its own backward, and a three-input `x · y + z`.
//! Include with `#[path = "common/custom_ops.rs"] mod custom_ops;`.
#![allow(dead_code)] // each test binary uses a different subset

use grad_runtime::ndarray::{ArrayViewD, ArrayViewMutD, IxDyn, Zip};
use grad_runtime::{CustomOp, Float, InputGrads, Inputs, Tape, Var, g_custom};

/// Forward `round(x)`, backward the identity.
pub struct StraightThrough;

impl<T: Float> CustomOp<T> for StraightThrough {
    fn name(&self) -> &'static str {
        "straight_through"
    }
    fn output_shape(&self, inputs: &Inputs<'_, T>) -> Result<IxDyn, String> {
        one_input(inputs)
    }
    fn forward(&self, inputs: &Inputs<'_, T>, mut out: ArrayViewMutD<'_, T>) -> Result<(), String> {
        out.zip_mut_with(&inputs.value(0), |o, &x| *o = x.round());
        Ok(())
    }
    fn backward(
        &self,
        _: &Inputs<'_, T>,
        _: ArrayViewD<'_, T>,
        g: ArrayViewD<'_, T>,
        grads: &mut InputGrads<'_, '_, T>,
    ) {
        grads.add(0, |mut dx| dx.assign(&g));
    }
}

/// `softplus(x) = max(x, 0) + log(1 + exp(-|x|))`, finite for every finite
/// `x`, with its derivative `sigmoid(x)` as its backward (0.5 at 0).
pub struct StableSoftplus;

impl<T: Float> CustomOp<T> for StableSoftplus {
    fn name(&self) -> &'static str {
        "stable_softplus"
    }
    fn output_shape(&self, inputs: &Inputs<'_, T>) -> Result<IxDyn, String> {
        one_input(inputs)
    }
    fn forward(&self, inputs: &Inputs<'_, T>, mut out: ArrayViewMutD<'_, T>) -> Result<(), String> {
        out.zip_mut_with(&inputs.value(0), |o, &x| *o = x.max(T::zero()) + (-x.abs()).exp().ln_1p());
        Ok(())
    }
    fn backward(
        &self,
        inputs: &Inputs<'_, T>,
        _: ArrayViewD<'_, T>,
        g: ArrayViewD<'_, T>,
        grads: &mut InputGrads<'_, '_, T>,
    ) {
        let x = inputs.value(0);
        grads.add(0, |dx| {
            Zip::from(dx).and(&x).and(&g).for_each(|d, &x, &g| {
                // sigmoid(x), from exp(-|x|) so that it never overflows.
                let e = (-x.abs()).exp();
                let s = if x >= T::zero() { T::one() / (T::one() + e) } else { e / (T::one() + e) };
                *d = g * s;
            })
        });
    }
    /// The same derivative as tape ops, so that `grad_graph` goes through it.
    fn backward_graph(&self, tape: &mut Tape<T>, inputs: &[Var], _: Var, g: Var) -> Option<Vec<Option<Var>>> {
        let s = grad_runtime::g_sigmoid(tape, inputs[0]);
        Some(vec![Some(grad_runtime::g_mul(tape, g, s))])
    }
}

/// `x · y + z` on three tensors of one shape.
pub struct MulAdd;

impl<T: Float> CustomOp<T> for MulAdd {
    fn name(&self) -> &'static str {
        "mul_add"
    }
    fn output_shape(&self, inputs: &Inputs<'_, T>) -> Result<IxDyn, String> {
        if inputs.len() != 3 {
            return Err(format!("takes three inputs (x, y, z), got {}", inputs.len()));
        }
        if inputs.shape(1) != inputs.shape(0) || inputs.shape(2) != inputs.shape(0) {
            return Err("x, y and z must have one shape".to_string());
        }
        Ok(IxDyn(inputs.shape(0)))
    }
    fn forward(&self, inputs: &Inputs<'_, T>, out: ArrayViewMutD<'_, T>) -> Result<(), String> {
        let (x, y, z) = (inputs.data(0), inputs.data(1), inputs.data(2));
        for (i, o) in out.into_iter().enumerate() {
            *o = x[i] * y[i] + z[i];
        }
        Ok(())
    }
    fn backward(
        &self,
        inputs: &Inputs<'_, T>,
        _: ArrayViewD<'_, T>,
        g: ArrayViewD<'_, T>,
        grads: &mut InputGrads<'_, '_, T>,
    ) {
        // Written in place (no temporary array), so a step allocates nothing.
        let (x, y) = (inputs.value(0), inputs.value(1));
        grads.add(0, |dx| Zip::from(dx).and(&g).and(&y).for_each(|d, &g, &y| *d = g * y));
        grads.add(1, |dy| Zip::from(dy).and(&g).and(&x).for_each(|d, &g, &x| *d = g * x));
        grads.add(2, |mut dz| dz.assign(&g));
    }
    fn backward_graph(&self, tape: &mut Tape<T>, inputs: &[Var], _: Var, g: Var) -> Option<Vec<Option<Var>>> {
        let dx = grad_runtime::g_mul(tape, g, inputs[1]);
        let dy = grad_runtime::g_mul(tape, g, inputs[0]);
        Some(vec![Some(dx), Some(dy), Some(g)])
    }
}

/// A log that refuses non-positive inputs in its forward.
pub struct CheckedLog;

impl<T: Float> CustomOp<T> for CheckedLog {
    fn name(&self) -> &'static str {
        "checked_log"
    }
    fn output_shape(&self, inputs: &Inputs<'_, T>) -> Result<IxDyn, String> {
        one_input(inputs)
    }
    fn forward(&self, inputs: &Inputs<'_, T>, mut out: ArrayViewMutD<'_, T>) -> Result<(), String> {
        if let Some(position) = inputs.data(0).iter().position(|&x| x <= T::zero()) {
            return Err(format!("element {position} is not positive"));
        }
        out.zip_mut_with(&inputs.value(0), |o, &x| *o = x.ln());
        Ok(())
    }
    fn backward(
        &self,
        inputs: &Inputs<'_, T>,
        _: ArrayViewD<'_, T>,
        g: ArrayViewD<'_, T>,
        grads: &mut InputGrads<'_, '_, T>,
    ) {
        let x = inputs.value(0);
        grads.add(0, |dx| Zip::from(dx).and(&g).and(&x).for_each(|d, &g, &x| *d = g / x));
    }
}

fn one_input<T: Float>(inputs: &Inputs<'_, T>) -> Result<IxDyn, String> {
    match inputs.len() {
        1 => Ok(IxDyn(inputs.shape(0))),
        n => Err(format!("takes one input, got {n}")),
    }
}

/// `straight_through(x)`, as a `grad!` block calls it.
#[track_caller]
pub fn straight_through<T: Float>(tape: &mut Tape<T>, x: Var) -> Var {
    g_custom(tape, &StraightThrough, &[x])
}

/// `stable_softplus(x)`, as a `grad!` block calls it.
#[track_caller]
pub fn stable_softplus<T: Float>(tape: &mut Tape<T>, x: Var) -> Var {
    g_custom(tape, &StableSoftplus, &[x])
}

/// `mul_add(x, y, z)`, as a `grad!` block calls it.
#[track_caller]
pub fn mul_add<T: Float>(tape: &mut Tape<T>, x: Var, y: Var, z: Var) -> Var {
    g_custom(tape, &MulAdd, &[x, y, z])
}
