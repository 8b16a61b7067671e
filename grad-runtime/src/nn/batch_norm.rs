//! [`BatchNorm2d`]: per-channel normalisation of images over the batch,
//! with running statistics kept as buffers.

use crate::{Float, Params, Tape, Var, grad, init};

/// Batch normalisation of `[N, C, H, W]` images, as `torch.nn.BatchNorm2d`:
/// `weight: [C]` (ones) and `bias: [C]` (zeros) are parameters;
/// `running_mean` (zeros), `running_var` (ones) and `num_batches_tracked`
/// (a 0-d count) are buffers, saved and loaded under PyTorch's
/// `state_dict` names; `momentum = 0.1`, `eps = 1e-5`.
///
/// `forward(.., train)` is the model's mode switch (PyTorch's
/// `model.train()` / `model.eval()`): in training it normalises with the
/// batch's statistics and updates the running ones (and the count); in
/// evaluation it uses the running statistics and changes nothing. A model
/// takes `train` in its own `forward` and passes it to each such layer
/// (and to `dropout`).
///
/// ```
/// use grad_runtime::{nn::BatchNorm2d, ndarray::Array4, Params, Tape};
///
/// let mut tape = Tape::<f64>::new();
/// let norm = BatchNorm2d::new(&mut tape, 3);
/// let names: Vec<String> = norm.named_buffers().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["running_mean", "running_var", "num_batches_tracked"]);
///
/// let x = tape.constant(Array4::from_shape_fn((2, 3, 4, 4), |(n, c, h, w)| (n + c * h + w) as f64));
/// let y = norm.forward(&mut tape, x, true);
/// assert!(tape.value(y).sum().abs() < 1e-9); // each channel to mean 0
/// assert_eq!(tape.value(norm.num_batches_tracked)[[]], 1.0);
/// let eval = norm.forward(&mut tape, x, false);
/// assert_eq!(tape.value(norm.num_batches_tracked)[[]], 1.0);
/// # let _ = eval;
/// ```
#[derive(Params, Clone, Copy, Debug)]
pub struct BatchNorm2d {
    /// The gain, `[C]`.
    pub weight: Var,
    /// The shift, `[C]`.
    pub bias: Var,
    /// The running mean of each channel, `[C]`.
    #[params(buffer)]
    pub running_mean: Var,
    /// The running (unbiased) variance of each channel, `[C]`.
    #[params(buffer)]
    pub running_var: Var,
    /// How many training batches updated the running statistics (0-d).
    #[params(buffer)]
    pub num_batches_tracked: Var,
    /// The weight of the newest batch in the running statistics.
    #[params(skip)]
    pub momentum: f64,
    /// Added to the variance.
    #[params(skip)]
    pub eps: f64,
}

impl BatchNorm2d {
    /// A normalisation of `channels` channels.
    pub fn new<T: Float>(tape: &mut Tape<T>, channels: usize) -> BatchNorm2d {
        BatchNorm2d {
            weight: tape.param(init::ones::<T>(&[channels])),
            bias: tape.param(init::zeros::<T>(&[channels])),
            running_mean: tape.buffer(init::zeros::<T>(&[channels])),
            running_var: tape.buffer(init::ones::<T>(&[channels])),
            num_batches_tracked: tape.buffer(init::zeros::<T>(&[])),
            momentum: 0.1,
            eps: 1e-5,
        }
    }

    /// Normalises `x: [N, C, H, W]`; `train` chooses the batch's
    /// statistics (and updates the running ones) or the running ones.
    #[track_caller]
    pub fn forward<T: Float>(&self, tape: &mut Tape<T>, x: Var, train: bool) -> Var {
        let BatchNorm2d { weight, bias, running_mean, running_var, num_batches_tracked, momentum, eps } = *self;
        let (momentum, eps) = (T::from_f64(momentum), T::from_f64(eps));
        let y = grad!(tape; x: [N, C, H, W], weight: [C], bias: [C], running_mean: [C], running_var: [C];
            batch_norm(x, running_mean, running_var, weight, bias, train, momentum, eps));
        if train && tape.is_ok() {
            tape.count_batch("BatchNorm2d::forward", num_batches_tracked);
        }
        y
    }
}
