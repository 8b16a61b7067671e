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
    /// Bytes of the buffers handed out and not yet returned (by capacity).
    held: usize,
    /// The most `held` has been since [`reset_peak`](BufferPool::reset_peak).
    peak: usize,
    /// Bytes of the buffers waiting in the buckets.
    free: usize,
}

struct Bucket<T> {
    capacity: usize,
    free: Vec<Vec<T>>,
}

impl<T: Copy + Default> BufferPool<T> {
    pub(crate) fn new() -> Self {
        BufferPool { buckets: Vec::new(), hot: 0, held: 0, peak: 0, free: 0 }
    }

    /// Bytes held by callers: buffers taken and not returned.
    pub(crate) fn held_bytes(&self) -> usize {
        self.held
    }

    /// The most bytes callers held at once since the last
    /// [`reset_peak`](BufferPool::reset_peak).
    pub(crate) fn peak_bytes(&self) -> usize {
        self.peak
    }

    /// Bytes waiting in the pool for reuse.
    pub(crate) fn free_bytes(&self) -> usize {
        self.free
    }

    /// Starts a new peak from what callers hold now.
    pub(crate) fn reset_peak(&mut self) {
        self.peak = self.held;
    }

    /// Counts a buffer handed out.
    #[inline]
    fn lend(&mut self, buffer: &Vec<T>) {
        self.held += bytes(buffer);
        self.peak = self.peak.max(self.held);
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
        let buffer = self.reuse::<false>(len).unwrap_or_else(|| vec![T::default(); len]);
        self.lend(&buffer);
        buffer
    }

    /// A buffer of at least `len` elements with unspecified contents, for
    /// scratch its caller reads as `[..len]`: a waiting buffer keeps the
    /// elements it holds past `len` instead of being cut to `len`. A
    /// buffer that serves requests of several lengths in turn (a
    /// convolution's scratch forward and backward) is then not grown back
    /// on every longer request, with zeros written over all it gains: 4.5
    /// MB on each of W8's steps, 3% of its time.
    pub(crate) fn take_at_least(&mut self, len: usize) -> Vec<T> {
        if len == 0 {
            return Vec::new();
        }
        let buffer = self.reuse::<true>(len).unwrap_or_else(|| vec![T::default(); len]);
        self.lend(&buffer);
        buffer
    }

    /// Like [`take`](BufferPool::take), but `None` instead of an abort when
    /// the allocator cannot provide a new buffer: how an op's output is
    /// taken, so an output too large for memory is an error, not a crash.
    /// (Under Linux's default overcommit, the allocator may grant far more
    /// than the machine has; filling such a buffer can still end the process.)
    pub(crate) fn try_take(&mut self, len: usize) -> Option<Vec<T>> {
        let buffer = match self.reuse::<false>(len) {
            Some(buffer) => buffer,
            None => {
                let mut buffer = Vec::new();
                buffer.try_reserve_exact(len).ok()?;
                buffer.resize(len, T::default());
                buffer
            }
        };
        self.lend(&buffer);
        Some(buffer)
    }

    /// A waiting buffer resized to `len` (grown only, when `KEEP`), if one fits.
    fn reuse<const KEEP: bool>(&mut self, len: usize) -> Option<Vec<T>> {
        if len == 0 {
            return Some(Vec::new());
        }
        let hot = self.buckets.get_mut(self.hot).filter(|bucket| bucket.capacity == len).and_then(|b| b.pop(len));
        let mut buffer = match hot {
            Some(buffer) => buffer,
            None => {
                // Reusing a buffer far larger than asked would strand its capacity.
                let max_capacity = len.saturating_mul(2).max(64);
                let first = self.buckets.partition_point(|b| b.capacity < len);
                let (index, buffer) = self.buckets[first..]
                    .iter_mut()
                    .take_while(|b| b.capacity <= max_capacity)
                    .enumerate()
                    .find_map(|(i, bucket)| Some((first + i, bucket.pop(len)?)))?;
                self.hot = index;
                buffer
            }
        };
        self.free -= bytes(&buffer);
        if !KEEP || buffer.len() < len {
            buffer.resize(len, T::default());
        }
        Some(buffer)
    }

    /// Returns a buffer for reuse.
    pub(crate) fn give(&mut self, buffer: Vec<T>) {
        let capacity = buffer.capacity();
        if capacity == 0 {
            return;
        }
        // A buffer the pool did not hand out (a caller's own) makes `held`
        // smaller than it was; it never goes below zero.
        self.held = self.held.saturating_sub(bytes(&buffer));
        self.free += bytes(&buffer);
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

impl<T> Bucket<T> {
    /// A waiting buffer for a request of `len` elements: the one returned
    /// last, unless it holds fewer than `len` and another holds them all.
    /// Growing a buffer writes zeros over the elements it gains, a pass
    /// over memory the caller then writes again (in W7's step, a few times
    /// 0.5 MB, where buffers of one capacity serve `[1024, 384]` and
    /// `[1024, 512]` tensors).
    #[inline]
    fn pop(&mut self, len: usize) -> Option<Vec<T>> {
        let mut buffer = self.free.pop()?;
        if buffer.len() < len {
            swap_for_longer(&mut self.free, &mut buffer, len);
        }
        Some(buffer)
    }
}

/// Swaps `buffer` for a waiting one of at least `len` elements, if any.
/// Kept out of [`Bucket::pop`], which a steady step runs for every op and
/// which reads only the buffer it popped: reading the last waiting
/// buffer's length where it lay, before popping it, made W2 as `g_*`
/// calls 13% slower.
#[cold]
fn swap_for_longer<T>(free: &mut [Vec<T>], buffer: &mut Vec<T>, len: usize) {
    if let Some(longer) = free.iter_mut().rev().find(|b| b.len() >= len) {
        std::mem::swap(longer, buffer);
    }
}

/// A buffer's size in bytes, by capacity: what it holds of memory.
fn bytes<T>(buffer: &Vec<T>) -> usize {
    buffer.capacity() * std::mem::size_of::<T>()
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
    fn a_request_takes_a_buffer_it_need_not_grow() {
        let mut pool = BufferPool::<f32>::new();
        let mut full = Vec::with_capacity(64);
        full.resize(64, 2.0);
        let mut short = Vec::with_capacity(64);
        short.resize(10, 1.0);
        let full_address = full.as_ptr();
        pool.give(full);
        pool.give(short);
        // The short buffer came back last, but growing it would write zeros.
        let taken = pool.take(64);
        assert_eq!(taken.as_ptr(), full_address);
        assert_eq!(taken, vec![2.0; 64]);
        // With none long enough, the one returned last is grown.
        let mut shorter = Vec::with_capacity(64);
        shorter.resize(5, 3.0);
        pool.give(shorter);
        let grown = pool.take(64);
        assert_eq!(grown[..6], [3.0, 3.0, 3.0, 3.0, 3.0, 0.0]);
        assert_eq!(pool.take(10), vec![1.0; 10]);
    }

    #[test]
    fn take_at_least_keeps_what_a_buffer_holds_past_the_request() {
        let mut pool = BufferPool::<f32>::new();
        pool.give(vec![2.0; 64]);
        let kept = pool.take_at_least(40);
        assert_eq!(kept, vec![2.0; 64]);
        pool.give(kept);
        // `take` cuts it to the request; `take_at_least` grows a shorter one.
        let cut = pool.take(40);
        assert_eq!(cut.len(), 40);
        pool.give(cut);
        assert_eq!(pool.take_at_least(50)[38..42], [2.0, 2.0, 0.0, 0.0]);
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
    fn held_bytes_count_what_is_out_and_the_peak_its_most() {
        let mut pool = BufferPool::<f32>::new();
        let a = pool.take(100);
        let b = pool.take(50);
        assert_eq!((pool.held_bytes(), pool.peak_bytes(), pool.free_bytes()), (600, 600, 0));
        pool.give(a);
        assert_eq!((pool.held_bytes(), pool.peak_bytes(), pool.free_bytes()), (200, 600, 400));
        pool.reset_peak();
        let again = pool.take(100);
        assert_eq!((pool.held_bytes(), pool.peak_bytes(), pool.free_bytes()), (600, 600, 0));
        pool.give(again);
        pool.give(b);
        pool.give(vec![1.0; 10]);
        assert_eq!((pool.held_bytes(), pool.free_bytes()), (0, 640));
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
