//! Initial values for parameters, drawn from grad's seeded [`Rng`]:
//! `tape.param(init::he_normal(&mut rng, &[784, 256]))`.
//!
//! Shapes follow grad's layout, where a layer computes `x @ w` and so a
//! weight is `[fan_in, fan_out]` (PyTorch's `nn.Linear.weight` is
//! `[fan_out, fan_in]`): see [`fans`]. Every initialiser fills the array
//! in row-major order, one draw per element, so a seed fixes the values on
//! every platform, for `f32` and `f64` alike (values are drawn in `f64`
//! and rounded once).
//!
//! | initialiser | distribution | fan | for |
//! |---|---|---|---|
//! | [`zeros`], [`ones`], [`full`] | constant | | biases, norm gains |
//! | [`uniform`] | U(low, high) | | |
//! | [`normal`] | N(mean, std²) | | embeddings (std 0.02 in GPT-2, 1 in PyTorch) |
//! | [`xavier_uniform`] | U(−a, a), a = √(6 / (fan_in + fan_out)) | both | tanh, sigmoid, linear layers |
//! | [`xavier_normal`] | N(0, 2 / (fan_in + fan_out)) | both | tanh, sigmoid, linear layers |
//! | [`he_uniform`] | U(−a, a), a = √(6 / fan_in) | fan_in | relu layers |
//! | [`he_normal`] | N(0, 2 / fan_in) | fan_in | relu layers |
//!
//! Xavier (Glorot & Bengio 2010) keeps the variance of activations and of
//! gradients alike by averaging both fans; He (Kaiming, He et al. 2015)
//! keeps the forward variance through relu with gain √2 on fan_in, as
//! PyTorch's `kaiming_*_(mode="fan_in", nonlinearity="relu")`.
//!
//! ```
//! use grad_runtime::{init, Rng, Tape};
//!
//! let mut rng = Rng::new(0);
//! let mut tape = Tape::<f32>::new();
//! let w = tape.param(init::he_normal(&mut rng, &[64, 32]));
//! let b = tape.param(init::zeros(&[32]));
//! assert_eq!(tape.value(w).shape(), &[64, 32]);
//! let std = (tape.value(w).iter().map(|x| x * x).sum::<f32>() / 2048.0).sqrt();
//! assert!((std - (2.0f32 / 64.0).sqrt()).abs() < 0.02);
//! ```

use ndarray::{ArrayD, IxDyn};

use crate::{Float, Rng};

/// `(fan_in, fan_out)` of a weight of `shape`: for `[.., in, out]` the last
/// two dims, each times the product of the leading ones (a stack of
/// weights, as PyTorch counts a convolution's receptive field); for a
/// vector `[n]` both are `n`; for a scalar both are 1.
///
/// ```
/// assert_eq!(grad_runtime::init::fans(&[784, 256]), (784, 256));
/// assert_eq!(grad_runtime::init::fans(&[3, 4, 5]), (12, 15));
/// ```
pub fn fans(shape: &[usize]) -> (usize, usize) {
    match shape {
        [] => (1, 1),
        [n] => (*n, *n),
        [leading @ .., fan_in, fan_out] => {
            let stack: usize = leading.iter().product();
            (fan_in * stack, fan_out * stack)
        }
    }
}

/// Zeros of `shape`.
pub fn zeros<T: Float>(shape: &[usize]) -> ArrayD<T> {
    ArrayD::zeros(IxDyn(shape))
}

/// Ones of `shape`.
pub fn ones<T: Float>(shape: &[usize]) -> ArrayD<T> {
    ArrayD::ones(IxDyn(shape))
}

/// `value` everywhere.
pub fn full<T: Float>(shape: &[usize], value: f64) -> ArrayD<T> {
    ArrayD::from_elem(IxDyn(shape), T::from_f64(value))
}

/// Uniform in `[low, high)`.
pub fn uniform<T: Float>(rng: &mut Rng, shape: &[usize], low: f64, high: f64) -> ArrayD<T> {
    ArrayD::from_shape_fn(IxDyn(shape), |_| T::from_f64(low + (high - low) * rng.uniform()))
}

/// Normal with mean `mean` and standard deviation `std`.
pub fn normal<T: Float>(rng: &mut Rng, shape: &[usize], mean: f64, std: f64) -> ArrayD<T> {
    ArrayD::from_shape_fn(IxDyn(shape), |_| T::from_f64(mean + rng.normal() * std))
}

/// Xavier/Glorot uniform: U(−a, a) with a = √(6 / (fan_in + fan_out)).
pub fn xavier_uniform<T: Float>(rng: &mut Rng, shape: &[usize]) -> ArrayD<T> {
    let (fan_in, fan_out) = fans(shape);
    let a = (6.0 / (fan_in + fan_out).max(1) as f64).sqrt();
    uniform(rng, shape, -a, a)
}

/// Xavier/Glorot normal: N(0, 2 / (fan_in + fan_out)).
pub fn xavier_normal<T: Float>(rng: &mut Rng, shape: &[usize]) -> ArrayD<T> {
    let (fan_in, fan_out) = fans(shape);
    scaled_normal(rng, shape, (2.0 / (fan_in + fan_out).max(1) as f64).sqrt())
}

/// He/Kaiming uniform (fan_in mode, relu gain √2): U(−a, a) with a = √(6 / fan_in).
pub fn he_uniform<T: Float>(rng: &mut Rng, shape: &[usize]) -> ArrayD<T> {
    let a = (6.0 / fans(shape).0.max(1) as f64).sqrt();
    uniform(rng, shape, -a, a)
}

/// He/Kaiming normal (fan_in mode, relu gain √2): N(0, 2 / fan_in).
pub fn he_normal<T: Float>(rng: &mut Rng, shape: &[usize]) -> ArrayD<T> {
    scaled_normal(rng, shape, (2.0 / fans(shape).0.max(1) as f64).sqrt())
}

/// `normal() · std` per element (the form the examples always used, so
/// their seeded values do not change).
fn scaled_normal<T: Float>(rng: &mut Rng, shape: &[usize], std: f64) -> ArrayD<T> {
    ArrayD::from_shape_fn(IxDyn(shape), |_| T::from_f64(rng.normal() * std))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(values: &ArrayD<f64>) -> (f64, f64) {
        let n = values.len() as f64;
        let mean = values.sum() / n;
        (mean, (values.mapv(|x| (x - mean).powi(2)).sum() / n).sqrt())
    }

    #[test]
    fn each_initialiser_has_its_documented_spread() {
        let mut rng = Rng::new(1);
        let shape = [400, 100];
        let (_, std) = moments(&he_normal(&mut rng, &shape));
        assert!((std / (2.0 / 400.0f64).sqrt() - 1.0).abs() < 0.02, "{std}");
        let (_, std) = moments(&xavier_normal(&mut rng, &shape));
        assert!((std / (2.0 / 500.0f64).sqrt() - 1.0).abs() < 0.02, "{std}");
        let x = xavier_uniform::<f64>(&mut rng, &shape);
        let a = (6.0 / 500.0f64).sqrt();
        assert!(x.iter().all(|v| v.abs() < a) && x.iter().any(|v| v.abs() > 0.99 * a));
        let h = he_uniform::<f64>(&mut rng, &shape);
        assert!(h.iter().all(|v| v.abs() < (6.0 / 400.0f64).sqrt()));
        let (mean, std) = moments(&normal(&mut rng, &shape, 3.0, 0.5));
        assert!((mean - 3.0).abs() < 0.01 && (std - 0.5).abs() < 0.01);
        let u = uniform::<f32>(&mut rng, &[1000], 2.0, 3.0);
        assert!(u.iter().all(|&v| (2.0..3.0).contains(&v)));
        assert_eq!(full::<f32>(&[2], 0.5), ndarray::arr1(&[0.5f32, 0.5]).into_dyn());
        assert_eq!(zeros::<f64>(&[0, 3]).shape(), &[0, 3]);
        assert_eq!(ones::<f64>(&[]).sum(), 1.0);
    }

    #[test]
    fn a_seed_fixes_the_values_and_f32_rounds_the_f64_draw() {
        let a = he_normal::<f64>(&mut Rng::new(9), &[3, 4]);
        let b = he_normal::<f32>(&mut Rng::new(9), &[3, 4]);
        assert!(a.iter().zip(&b).all(|(&x, &y)| x as f32 == y));
        let mut rng = Rng::new(9);
        let by_hand: Vec<f64> = (0..12).map(|_| rng.normal() * (2.0f64 / 3.0).sqrt()).collect();
        assert_eq!(a.iter().copied().collect::<Vec<_>>(), by_hand);
    }

    #[test]
    fn fans_of_degenerate_shapes_do_not_divide_by_zero() {
        assert!(he_normal::<f64>(&mut Rng::new(1), &[0, 5]).is_empty());
        assert!(xavier_uniform::<f64>(&mut Rng::new(1), &[]).iter().all(|v| v.is_finite()));
    }
}
