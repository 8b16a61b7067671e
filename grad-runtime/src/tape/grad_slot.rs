//! A node's gradient slot, which keeps its buffer from one backward to the
//! next.
//!
//! A training loop rebuilds the same graph every step, so node `i` needs a
//! gradient of the same size each time. When the slot keeps its buffer
//! through [`Tape::reset_to`](crate::Tape::reset_to) and the next backward,
//! the first contribution to node `i` is written into the buffer already
//! there, instead of each node's gradient being taken from the pool in
//! backward and handed back at the reset: W2 (1000 x three ops on 16
//! elements) spent about a fifth of its time in those pool calls.

use crate::pool::BufferPool;

/// A buffer laid out in its node's shape, and whether it holds the
/// gradient of the last backward (live) or a stale one kept for reuse.
#[derive(Debug)]
pub(crate) struct GradSlot<T> {
    data: Vec<T>,
    live: bool,
}

impl<T: Copy + Default> GradSlot<T> {
    /// A slot with no gradient and no buffer.
    pub(crate) fn empty() -> Self {
        GradSlot { data: Vec::new(), live: false }
    }

    /// The gradient, `None` when backward did not reach the node (zeros).
    #[inline]
    pub(crate) fn get(&self) -> Option<&[T]> {
        if self.live { Some(&self.data) } else { None }
    }

    /// The gradient to add to in place, `None` as in [`get`](GradSlot::get).
    #[inline]
    pub(crate) fn get_mut(&mut self) -> Option<&mut [T]> {
        if self.live { Some(&mut self.data) } else { None }
    }

    /// Makes a slot that is not live hold a gradient of `len` elements and
    /// returns it for the caller to write in full: its contents are
    /// unspecified (the stale gradient, when its length is `len`).
    #[inline]
    pub(crate) fn start(&mut self, len: usize, pool: &mut BufferPool<T>) -> &mut [T] {
        debug_assert!(!self.live, "a live gradient is added to, not restarted");
        if self.data.len() != len {
            let fresh = pool.take(len);
            pool.give(std::mem::replace(&mut self.data, fresh));
        }
        self.live = true;
        &mut self.data
    }

    /// The stale buffer of a slot that is not live, if it has `len`
    /// elements (the slot keeps an empty one): for a contribution built
    /// apart and then moved in with [`set`](GradSlot::set), which then
    /// swaps nothing into the pool that a take had to allocate.
    pub(crate) fn take_stale(&mut self, len: usize) -> Option<Vec<T>> {
        (!self.live && self.data.len() == len).then(|| std::mem::take(&mut self.data))
    }

    /// Makes a slot that is not live hold `gradient`; the stale buffer goes
    /// to the pool.
    pub(crate) fn set(&mut self, gradient: Vec<T>, pool: &mut BufferPool<T>) {
        debug_assert!(!self.live, "a live gradient is added to, not replaced");
        pool.give(std::mem::replace(&mut self.data, gradient));
        self.live = true;
    }

    /// The capacity of the slot's buffer, live or kept for reuse.
    pub(crate) fn capacity(&self) -> usize {
        self.data.capacity()
    }

    /// The live gradient's buffer, moved out (the slot is then empty):
    /// what moves a checkpointed segment's gradient to its recomputed output.
    pub(crate) fn take_live(&mut self) -> Vec<T> {
        debug_assert!(self.live, "only a live gradient is moved");
        self.live = false;
        std::mem::take(&mut self.data)
    }

    /// Forgets the gradient (zeros again) and keeps the buffer for the
    /// next [`start`](GradSlot::start).
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.live = false;
    }

    /// Forgets the gradient and hands the buffer to the pool.
    pub(crate) fn release(&mut self, pool: &mut BufferPool<T>) {
        pool.give(std::mem::take(&mut self.data));
        self.live = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cleared_slot_reads_as_no_gradient_and_restarts_in_its_own_buffer() {
        let mut pool = BufferPool::<f32>::new();
        let mut slot = GradSlot::empty();
        assert_eq!(slot.get(), None);
        slot.start(4, &mut pool).copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(slot.get(), Some(&[1.0, 2.0, 3.0, 4.0][..]));
        let address = slot.get().map(<[f32]>::as_ptr);
        slot.clear();
        assert_eq!(slot.get(), None);
        assert!(slot.get_mut().is_none());
        let again = slot.start(4, &mut pool);
        assert_eq!((again.len(), Some(again.as_ptr())), (4, address));
    }

    #[test]
    fn a_slot_restarted_at_another_length_swaps_its_buffer_through_the_pool() {
        let mut pool = BufferPool::<f32>::new();
        let mut slot = GradSlot::empty();
        slot.start(4, &mut pool);
        slot.clear();
        assert_eq!(slot.start(7, &mut pool).len(), 7);
        assert_eq!(pool.len(), 1);
        slot.clear();
        slot.set(vec![5.0; 2], &mut pool);
        assert_eq!(slot.get(), Some(&[5.0, 5.0][..]));
        assert_eq!(pool.len(), 2);
        slot.release(&mut pool);
        assert_eq!((slot.get(), pool.len()), (None, 3));
    }

    #[test]
    fn an_empty_gradient_is_live_all_the_same() {
        let mut pool = BufferPool::<f64>::new();
        let mut slot = GradSlot::empty();
        slot.start(0, &mut pool);
        assert_eq!(slot.get(), Some(&[][..]));
    }
}
