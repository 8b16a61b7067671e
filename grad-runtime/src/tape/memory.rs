//! `Tape::memory`: what a tape holds, in bytes, and the most it held.
//!
//! Every buffer of a tape (values, gradients, what backward rules keep,
//! scratch) comes from its pools and goes back to them, so the pools
//! count the bytes out at any moment and their peak; the breakdown is a
//! walk over the nodes and gradient slots.

use std::fmt;

use crate::{Float, Tape};

/// A tape's memory, in bytes: see [`Tape::memory`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// The nodes' values: parameters, inputs, every intermediate.
    pub values: usize,
    /// What ops keep for their backward rules besides values: attention's
    /// softmax weights, normalisations' statistics, class targets and
    /// embedding ids, a fused region's scalars, a segment's input list.
    pub saved: usize,
    /// Gradient buffers, live or kept for the next backward.
    pub grads: usize,
    /// Everything the tape's pools have handed out and not had back:
    /// `values + saved + grads`, plus scratch an op or rule is using.
    pub held: usize,
    /// The most `held` has been since the tape was made or
    /// [`reset_peak_memory`](Tape::reset_peak_memory) was called: a
    /// step's peak, values, saved state, gradients and scratch together.
    pub peak: usize,
    /// Buffers the pools keep for reuse: allocated, not in use.
    pub pooled: usize,
}

impl fmt::Display for MemoryStats {
    /// In MiB: `held 12.3 MiB (values 8.1, saved 2.0, grads 2.2), peak 30.5 MiB, pooled 18.0 MiB`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |bytes: usize| bytes as f64 / (1024.0 * 1024.0);
        write!(
            f,
            "held {:.1} MiB (values {:.1}, saved {:.1}, grads {:.1}), peak {:.1} MiB, pooled {:.1} MiB",
            mib(self.held),
            mib(self.values),
            mib(self.saved),
            mib(self.grads),
            mib(self.peak),
            mib(self.pooled)
        )
    }
}

impl<T: Float> Tape<T> {
    /// The bytes the tape holds now, by kind, and the most it held: the
    /// figure to watch when a model's activations outgrow memory (see
    /// [`checkpoint`](Tape::checkpoint)). Bytes count buffers' capacity;
    /// the peak is that of values and scratch together, plus the (small)
    /// peak of the integer payloads.
    ///
    /// ```
    /// use grad_runtime::{grad, ndarray::Array2, Tape};
    ///
    /// let mut tape = Tape::<f32>::new();
    /// let w = tape.param(Array2::<f32>::zeros((256, 256)));
    /// let mark = tape.mark();
    /// tape.reset_peak_memory();
    /// let loss = grad!(tape; sum(tanh(w @ w)));
    /// tape.backward(loss)?;
    /// let step = tape.memory();
    /// assert!(step.peak >= 3 * 256 * 256 * 4); // w, w @ w, its tanh
    /// tape.reset_to(mark);
    /// let after = tape.memory();
    /// assert_eq!(after.values, 256 * 256 * 4); // only w is left
    /// assert!(after.held < step.peak);
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    pub fn memory(&self) -> MemoryStats {
        let values = self.nodes.iter().map(|node| node.value.data.capacity() * size_of::<T>()).sum();
        let saved = self.nodes.iter().map(|node| node.op.saved_bytes()).sum();
        let grads = self.grads.iter().map(|slot| slot.capacity() * size_of::<T>()).sum();
        MemoryStats {
            values,
            saved,
            grads,
            held: self.pool.held_bytes() + self.index_pool.held_bytes(),
            peak: self.pool.peak_bytes() + self.index_pool.peak_bytes(),
            pooled: self.pool.free_bytes() + self.index_pool.free_bytes(),
        }
    }

    /// Whether backward keeps the gradient of every intermediate node
    /// (`true`, the default: [`grad`](Tape::grad) reads any node's) or
    /// hands each back to the pool as soon as the node's rule has used it
    /// (`false`: PyTorch's default, where only leaves keep a `.grad`).
    /// Without them a step's peak holds the values and the gradients
    /// of the nodes backward is working on, not every node's gradient:
    /// W7 of the benchmarks, 152 → 81 MiB beyond the weights. Reading an
    /// intermediate's gradient is then [`ErrorKind::GradNotKept`](crate::ErrorKind::GradNotKept).
    ///
    /// ```
    /// use grad_runtime::{grad, ndarray::array, ErrorKind, Tape};
    ///
    /// let mut tape = Tape::<f32>::new();
    /// tape.set_keep_intermediate_grads(false);
    /// let w = tape.param(array![1.0f32, 2.0]);
    /// let h = grad!(tape; tanh(w * 3.0));
    /// let loss = grad!(tape; sum(h * h));
    /// tape.backward(loss)?;
    /// assert!(tape.grad(w).iter().all(|g| *g != 0.0));
    /// assert!(tape.try_grad(h).is_err_and(|e| e.kind() == &ErrorKind::GradNotKept));
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    pub fn set_keep_intermediate_grads(&mut self, keep: bool) {
        self.keep_intermediate_grads = keep;
    }

    /// See [`set_keep_intermediate_grads`](Tape::set_keep_intermediate_grads).
    pub fn keeps_intermediate_grads(&self) -> bool {
        self.keep_intermediate_grads
    }

    /// Starts a new [`memory`](Tape::memory) peak from what the tape holds now.
    pub fn reset_peak_memory(&mut self) {
        self.pool.reset_peak();
        self.index_pool.reset_peak();
    }
}
