//! Learning-rate schedules: functions of the step that feed `set_lr`
//! before each step.
//!
//! ```
//! use grad_runtime::{schedule, Adam, Optimizer};
//!
//! let mut opt = Adam::<f32>::new(0.0);
//! for step in 0..1000 {
//!     opt.set_lr(schedule::warmup_cosine(3e-4, step, 100, 1000))?;
//!     // ... forward, backward, opt.step(&mut tape)?, reset
//! }
//! # Ok::<(), grad_runtime::GradError>(())
//! ```

/// Linear warm-up to `base` over `warmup` steps, then a cosine decay to 0
/// at step `total` (and 0 after): step `s < warmup` gives
/// `base · (s + 1) / warmup`; later steps `base · (1 + cos(π · p)) / 2` with
/// `p = (s − warmup) / (total − warmup)`. With `total <= warmup` the rate
/// stays `base` after the warm-up.
///
/// ```
/// use grad_runtime::schedule::warmup_cosine;
///
/// assert_eq!(warmup_cosine(1.0, 0, 10, 110), 0.1);
/// assert_eq!(warmup_cosine(1.0, 9, 10, 110), 1.0);
/// assert_eq!(warmup_cosine(1.0, 10, 10, 110), 1.0);
/// assert!((warmup_cosine(1.0, 60, 10, 110) - 0.5).abs() < 1e-12);
/// assert_eq!(warmup_cosine(1.0, 110, 10, 110), 0.0);
/// ```
pub fn warmup_cosine(base: f64, step: u64, warmup: u64, total: u64) -> f64 {
    if step < warmup {
        return base * (step + 1) as f64 / warmup as f64;
    }
    if total <= warmup {
        return base;
    }
    let progress = ((step - warmup) as f64 / (total - warmup) as f64).min(1.0);
    0.5 * base * (1.0 + (std::f64::consts::PI * progress).cos())
}

/// `base` multiplied by `factor` once every `every` steps (PyTorch's
/// `StepLR`): `base · factor^(step / every)`. `every = 0` means never.
///
/// ```
/// use grad_runtime::schedule::step_decay;
///
/// assert_eq!(step_decay(0.1, 29, 30, 0.5), 0.1);
/// assert_eq!(step_decay(0.1, 30, 30, 0.5), 0.05);
/// assert_eq!(step_decay(0.1, 95, 30, 0.5), 0.0125);
/// ```
pub fn step_decay(base: f64, step: u64, every: u64, factor: f64) -> f64 {
    match step.checked_div(every) {
        Some(decays) => base * factor.powi(i32::try_from(decays).unwrap_or(i32::MAX)),
        None => base,
    }
}
