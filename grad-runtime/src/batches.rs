//! [`Minibatches`]: the indices of a data set in a fresh random order each
//! epoch, cut into batches.

use crate::Rng;

/// The sample indices `0..n`, reshuffled each epoch (Fisher-Yates with
/// grad's seeded [`Rng`], continuing from the previous epoch's order) and
/// handed out in batches of `batch` (the last one shorter when `batch`
/// does not divide `n`).
///
/// ```
/// use grad_runtime::{Minibatches, Rng};
///
/// let mut rng = Rng::new(0);
/// let mut batches = Minibatches::new(10, 4);
/// for _epoch in 0..3 {
///     let mut seen: Vec<usize> = Vec::new();
///     for batch in batches.shuffled(&mut rng) {
///         assert!(batch.len() == 4 || batch.len() == 2);
///         seen.extend(batch);
///     }
///     seen.sort();
///     assert_eq!(seen, (0..10).collect::<Vec<_>>()); // every sample once per epoch
/// }
/// ```
#[derive(Clone, Debug)]
pub struct Minibatches {
    order: Vec<usize>,
    batch: usize,
}

impl Minibatches {
    /// Batches of `batch` indices (at least 1) out of `0..n`, in order until the first shuffle.
    pub fn new(n: usize, batch: usize) -> Self {
        Minibatches { order: (0..n).collect(), batch: batch.max(1) }
    }

    /// Shuffles the order and returns this epoch's batches.
    pub fn shuffled(&mut self, rng: &mut Rng) -> std::slice::Chunks<'_, usize> {
        rng.shuffle(&mut self.order);
        self.order.chunks(self.batch)
    }

    /// The current order's batches, without shuffling (evaluation).
    pub fn in_order(&self) -> std::slice::Chunks<'_, usize> {
        self.order.chunks(self.batch)
    }
}
