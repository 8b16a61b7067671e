//! Recycled tensor buffers, so a training loop that rewinds its tape with
//! `reset_to` stops allocating after its first step.

/// Free buffers in buckets of one capacity each, sorted by capacity. A
/// request takes the smallest buffer that fits (best fit): a training step
/// asks for the same sizes in the same order every time, so after the first
/// step every request finds its own size waiting, found by one binary
/// search over the few distinct sizes a model uses. Buckets stay when they
/// empty, so a steady step never inserts or removes one.
pub(crate) struct BufferPool<T> {
    buckets: Vec<Bucket<T>>,
    /// The bucket the last request or return used, tried first.
    hot: usize,
}

struct Bucket<T> {
    capacity: usize,
    free: Vec<Vec<T>>,
}

impl<T: Copy + Default> BufferPool<T> {
    pub(crate) fn new() -> Self {
        BufferPool { buckets: Vec::new(), hot: 0 }
    }

    /// A buffer of `len` elements whose contents are unspecified (stale
    /// values of an earlier tensor, or zeros): for callers that overwrite
    /// every element.
    #[inline]
    pub(crate) fn take(&mut self, len: usize) -> Vec<T> {
        // Inline, as `reuse` is not: a fused region without scalars asks
        // for 0 elements on every node.
        if len == 0 {
            return Vec::new();
        }
        self.reuse(len).unwrap_or_else(|| vec![T::default(); len])
    }

    /// Like [`take`](BufferPool::take), but `None` instead of an abort when
    /// the allocator cannot provide a new buffer: how an op's output is
    /// taken, so an output too large for memory is an error, not a crash.
    /// (Under Linux's default overcommit, the allocator may grant far more
    /// than the machine has; filling such a buffer can still end the process.)
    pub(crate) fn try_take(&mut self, len: usize) -> Option<Vec<T>> {
        if let Some(buffer) = self.reuse(len) {
            return Some(buffer);
        }
        let mut buffer = Vec::new();
        buffer.try_reserve_exact(len).ok()?;
        buffer.resize(len, T::default());
        Some(buffer)
    }

    /// A waiting buffer resized to `len`, if one fits.
    fn reuse(&mut self, len: usize) -> Option<Vec<T>> {
        if len == 0 {
            return Some(Vec::new());
        }
        if let Some(bucket) = self.buckets.get_mut(self.hot)
            && bucket.capacity == len
            && let Some(mut buffer) = bucket.free.pop()
        {
            buffer.resize(len, T::default());
            return Some(buffer);
        }
        // Reusing a buffer far larger than asked would strand its capacity.
        let max_capacity = len.saturating_mul(2).max(64);
        let first = self.buckets.partition_point(|b| b.capacity < len);
        let (index, mut buffer) = self.buckets[first..]
            .iter_mut()
            .take_while(|b| b.capacity <= max_capacity)
            .enumerate()
            .find_map(|(i, bucket)| Some((first + i, bucket.free.pop()?)))?;
        self.hot = index;
        buffer.resize(len, T::default());
        Some(buffer)
    }

    /// Returns a buffer for reuse.
    pub(crate) fn give(&mut self, buffer: Vec<T>) {
        let capacity = buffer.capacity();
        if capacity == 0 {
            return;
        }
        if let Some(bucket) = self.buckets.get_mut(self.hot)
            && bucket.capacity == capacity
        {
            bucket.free.push(buffer);
            return;
        }
        let i = match self.buckets.binary_search_by_key(&capacity, |b| b.capacity) {
            Ok(i) => i,
            Err(i) => {
                self.buckets.insert(i, Bucket { capacity, free: Vec::new() });
                i
            }
        };
        self.buckets[i].free.push(buffer);
        self.hot = i;
    }

    /// How many buffers are waiting.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.buckets.iter().map(|b| b.free.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_returned_buffer_is_reused_for_the_same_size() {
        let mut pool = BufferPool::<f32>::new();
        let first = pool.take(100);
        let address = first.as_ptr();
        pool.give(first);
        let again = pool.take(100);
        assert_eq!(again.as_ptr(), address);
        assert_eq!(pool.len(), 0);
    }

    #[test]
    fn a_buffer_from_the_last_used_bucket_has_the_length_asked_for() {
        let mut pool = BufferPool::<f32>::new();
        pool.give(vec![2.0; 8]);
        let mut short = Vec::with_capacity(32);
        short.resize(10, 1.0);
        pool.give(short);
        // The first request is served from the bucket just used, the second is not.
        assert_eq!(pool.take(32).len(), 32);
        assert_eq!(pool.take(8), vec![2.0; 8]);
        assert_eq!(pool.len(), 0);
    }

    #[test]
    fn best_fit_leaves_the_large_buffer_for_the_large_request() {
        let mut pool = BufferPool::<f64>::new();
        let (small, large) = (pool.take(100), pool.take(150));
        let large_address = large.as_ptr();
        pool.give(large);
        pool.give(small);
        let _small = pool.take(90);
        let large_again = pool.take(150);
        assert_eq!(large_again.as_ptr(), large_address);
    }

    #[test]
    fn a_much_larger_buffer_is_not_stranded_on_a_tiny_request() {
        let mut pool = BufferPool::<f32>::new();
        let huge = pool.take(1 << 16);
        pool.give(huge);
        let tiny = pool.take(4);
        assert!(tiny.capacity() < 1 << 16);
        assert_eq!(pool.len(), 1);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_allocation_the_system_cannot_make_is_refused_not_aborted() {
        let mut pool = BufferPool::<f32>::new();
        // 2^62 bytes: more address space than any 64-bit machine maps.
        assert!(pool.try_take(1 << 60).is_none());
        assert_eq!(pool.try_take(100).map(|b| b.len()), Some(100));
    }
}
