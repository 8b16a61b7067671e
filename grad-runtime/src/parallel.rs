//! The threads large kernels share their work with, and the rule that keeps
//! every result independent of how many there are: work is cut into pieces
//! of a fixed size, never into one piece per thread, and sums are taken in a
//! fixed tree. One thread or eight, every bit of every value and gradient
//! is the same.
//!
//! Kernels use `GRAD_NUM_THREADS` threads if that is set (to a positive
//! integer rayon can start), else one per core; [`set_num_threads`]
//! changes it. The first thread that shares out a kernel becomes the first
//! of a team with the pool's other threads (rayon's `use_current_thread`):
//! it computes its share of each kernel at once, where a thread outside
//! the pool hands the kernel over and sleeps on a lock until it is done,
//! two thread wake-ups a kernel (W1 went from 120K context switches a run
//! to 20K, and from ~750 to ~570 µs a step). Other threads share one pool
//! of that many threads, the old way.
//!
//! Small tensors never reach a pool: below a size measured on the kernels
//! (`MIN_PARALLEL_ELEMENTS`), handing work over costs more than it
//! saves. Medium ones (from `MIN_PAIR_ELEMENTS`) are cut in two for the
//! caller and the helper thread of `pair.rs`, whose hand-off is cheaper;
//! small graphs run exactly as they would on one thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::thread::LocalKey;

use rayon::prelude::*;

use crate::error::{ErrorKind, GradError};
use crate::pair;

/// The threads kernels use; 0 until first read (then `GRAD_NUM_THREADS`,
/// else one per core) or set by [`set_num_threads`].
static THREADS: AtomicUsize = AtomicUsize::new(0);

/// The team: the first thread that shared out a kernel, as the pool's
/// thread 0, and the pool's other threads. Set once.
static TEAM: OnceLock<Arc<rayon::ThreadPool>> = OnceLock::new();

/// Whether a thread has tried to form the team (it is tried once).
static TEAM_TRIED: AtomicBool = AtomicBool::new(false);

/// The pool of the threads not in the team, built on first use and again
/// when the thread count changes.
static SHARED: RwLock<Option<Arc<rayon::ThreadPool>>> = RwLock::new(None);

/// Below this many elements an elementwise kernel stays on the caller's
/// thread. Handing work to the pool and waiting for it costs 17 µs when the
/// workers are awake and 40 to 60 µs once they sleep (measured on a 2-core
/// VM, see `benches/README.md`), so a pass must take well over that alone:
/// at 2^15 elements W4's ops ran slower on two threads than on one.
pub(crate) const MIN_PARALLEL_ELEMENTS: usize = 1 << 17;

/// From this many elements up to [`MIN_PARALLEL_ELEMENTS`], an
/// elementwise pass is cut in two for the caller and one other thread
/// (`pair.rs`), whose hand-off costs about 2 µs.
pub(crate) const MIN_PAIR_ELEMENTS: usize = 2 * CHUNK;

/// The piece of an elementwise pass one thread takes at a time: large
/// enough to amortise the hand-off, small enough to balance two cores.
pub(crate) const CHUNK: usize = 1 << 14;

/// The number of threads kernels use.
///
/// ```
/// assert!(grad_runtime::num_threads() >= 1);
/// ```
pub fn num_threads() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => {
            let threads = one_per_core_unless(threads_from_env());
            // Two threads deciding at once decide the same.
            THREADS.store(threads, Ordering::Relaxed);
            threads
        }
        threads => threads,
    }
}

/// Sets the number of threads kernels use from now on (`0` = one per core).
/// Results do not depend on it, only speed does.
///
/// ```
/// grad_runtime::set_num_threads(1)?;
/// assert_eq!(grad_runtime::num_threads(), 1);
/// grad_runtime::set_num_threads(0)?;
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
///
/// The first thread that runs a kernel large enough to share out (with
/// more than one thread set) becomes one of grad's threads for good: it
/// computes its share of each kernel instead of sleeping until the others
/// are done, which saves two thread wake-ups a kernel. A consequence: rayon
/// calls made on that thread (`par_iter`, `join`) run on grad's threads
/// rather than rayon's global pool. Other threads, and that thread while a
/// different thread count is set than when it joined, hand kernels to a
/// pool of their own and wait, as threads outside a rayon pool do.
#[track_caller]
pub fn set_num_threads(threads: usize) -> Result<(), GradError> {
    let location = std::panic::Location::caller();
    let threads = one_per_core_unless(threads);
    let built = build(threads).map_err(|reason| {
        let kind = ErrorKind::InvalidArgument { name: "threads", value: threads as f64, expected: reason };
        GradError::new("set_num_threads", kind, Vec::new(), location)
    })?;
    *SHARED.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Arc::new(built));
    THREADS.store(threads, Ordering::Relaxed);
    Ok(())
}

fn build(threads: usize) -> Result<rayon::ThreadPool, &'static str> {
    if threads > rayon::max_num_threads() {
        return Err("a thread count the system can start");
    }
    builder(threads).build().map_err(|_| "a thread count the system can start")
}

/// A pool of `threads` of grad's threads, as every pool of grad's is made.
fn builder(threads: usize) -> rayon::ThreadPoolBuilder {
    rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("grad-{i}"))
}

/// `threads`, or one per core when it is 0.
fn one_per_core_unless(threads: usize) -> usize {
    match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        threads => threads,
    }
}

/// The threads from `GRAD_NUM_THREADS`, or 0 (one per core) when it is
/// unset, not a positive integer, or more threads than rayon can start.
fn threads_from_env() -> usize {
    let threads = std::env::var("GRAD_NUM_THREADS").ok().and_then(|v| v.trim().parse().ok());
    threads.filter(|&n| n <= rayon::max_num_threads()).unwrap_or(0)
}

/// The pool a kernel shared out on this thread runs on: the team, if
/// this thread is one of its threads (or can start it), and the team has
/// as many threads as are set; else the shared pool.
fn pool() -> Arc<rayon::ThreadPool> {
    let threads = num_threads();
    if let Some(team) = team(threads) {
        return Arc::clone(team);
    }
    if let Some(pool) = SHARED.read().unwrap_or_else(|poisoned| poisoned.into_inner()).as_ref()
        && pool.current_num_threads() == threads
    {
        return Arc::clone(pool);
    }
    let mut slot = SHARED.write().unwrap_or_else(|poisoned| poisoned.into_inner());
    match slot.as_ref() {
        Some(pool) if pool.current_num_threads() == threads => Arc::clone(pool),
        _ => {
            let built = build(threads).or_else(|_| {
                // A count from the environment the system cannot start.
                THREADS.store(1, Ordering::Relaxed);
                build(1)
            });
            let built = Arc::new(built.expect("invariant: a pool of one thread can always be built"));
            *slot = Some(Arc::clone(&built));
            built
        }
    }
}

/// The team, when this thread is one of its threads and it has `threads`
/// threads. The first thread to ask with more than one thread set, if it
/// is in no rayon pool already, starts the team as its thread 0 (rayon's
/// `use_current_thread`): kernels it shares out then run on it and on the
/// team's other threads, which steal pieces from it, and it takes part
/// instead of waiting on a lock (see `benches/README.md`).
fn team(threads: usize) -> Option<&'static Arc<rayon::ThreadPool>> {
    if threads < 2 {
        return None;
    }
    if let Some(team) = TEAM.get() {
        return (team.current_thread_index().is_some() && team.current_num_threads() == threads).then_some(team);
    }
    if rayon::current_thread_index().is_some() || TEAM_TRIED.swap(true, Ordering::AcqRel) {
        return None;
    }
    let built = builder(threads).use_current_thread().build().ok()?;
    Some(TEAM.get_or_init(|| Arc::new(built)))
}

thread_local! {
    /// Whether this thread is running its share of a kernel on a pool.
    static IN_KERNEL: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread runs a piece of work already shared out, whose
    /// inner kernels stay on it ([`alone`]).
    static ALONE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with every kernel it calls kept on this thread: for the pieces
/// of an outer split that already keeps every thread busy (a batch of
/// convolution images cut into chunks), where sharing each inner product
/// out again costs hand-offs and gains no thread.
pub(crate) fn alone<R>(f: impl FnOnce() -> R) -> R {
    let _restore = Restore::set(&ALONE);
    f()
}

/// Whether kernels called here may share their work out (not inside [`alone`]).
pub(crate) fn may_share() -> bool {
    !ALONE.get()
}

/// Whether this thread runs no share of any pool's kernel: it is in no
/// rayon pool, or it is the team's first thread between two kernels. Only
/// such a thread hands half of a medium kernel to `pair.rs`'s helper; on
/// any other, another pool's threads are already busy.
pub(crate) fn between_kernels() -> bool {
    match rayon::current_thread_index() {
        None => true,
        Some(_) => !IN_KERNEL.get() && TEAM.get().is_some_and(|team| team.current_thread_index() == Some(0)),
    }
}

/// Puts back one of this thread's flags ([`IN_KERNEL`], [`ALONE`]) when
/// the work that raised it returns or panics.
struct Restore {
    flag: &'static LocalKey<Cell<bool>>,
    was: bool,
}

impl Restore {
    /// Raises `flag` until the result is dropped.
    fn set(flag: &'static LocalKey<Cell<bool>>) -> Restore {
        Restore { flag, was: flag.replace(true) }
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        self.flag.set(self.was);
    }
}

/// Whether a pass over `len` elements is worth sharing out: large enough,
/// and the pool has more than one thread (with one, no rayon call is made
/// at all, so nothing reaches rayon's global pool either).
pub(crate) fn worth_it(len: usize) -> bool {
    len >= MIN_PARALLEL_ELEMENTS && num_threads() > 1 && may_share()
}

/// Runs `f` on the pool when `parallel`, else on this thread: the body of
/// every parallel kernel, so that nested rayon calls (the GEMM's) run on
/// grad's threads. On a thread of the team (or of the shared pool), `f`
/// runs here at once and its rayon calls share work with the other threads.
pub(crate) fn run<R: Send>(parallel: bool, f: impl FnOnce() -> R + Send) -> R {
    if !parallel {
        return f();
    }
    let pool = pool();
    if pool.current_num_threads() < 2 {
        return f();
    }
    pair::make_way();
    let _restore = Restore::set(&IN_KERNEL);
    pool.install(f)
}

/// Where a medium pass of `len` elements is cut in two for `pair.rs`: at
/// a chunk boundary, where the pool's pieces would be cut.
fn pair_mid(len: usize) -> usize {
    len / 2 / CHUNK * CHUNK
}

/// `dst.copy_from_slice(src)`, shared out as [`for_each_chunk`] shares a
/// pass (a `reshape`'s value and gradient): two cores copy faster than
/// one (the harness measured memcpy at 19.5 against 12.2 GB/s on a Zen 4).
pub(crate) fn copy<T: Copy + Send + Sync>(dst: &mut [T], src: &[T]) {
    debug_assert_eq!(dst.len(), src.len());
    for_each_chunk(dst, |offset, out| out.copy_from_slice(&src[offset..offset + out.len()]));
}

/// `f(offset, out_chunk)` for consecutive chunks of [`CHUNK`] elements of
/// `out` (`offset` is the chunk's first index), in parallel when `out` is
/// large enough. Each element is written by exactly one call, so the result
/// does not depend on the thread count.
pub(crate) fn for_each_chunk<T: Send>(out: &mut [T], f: impl Fn(usize, &mut [T]) + Sync) {
    if !worth_it(out.len()) {
        if out.len() >= MIN_PAIR_ELEMENTS {
            let mid = pair_mid(out.len());
            let (first, second) = out.split_at_mut(mid);
            return pair::pair(|| f(0, first), || f(mid, second));
        }
        f(0, out);
        return;
    }
    run(true, || out.par_chunks_mut(CHUNK).enumerate().for_each(|(i, chunk)| f(i * CHUNK, chunk)));
}

/// `f(first_row, rows)` over consecutive groups of whole rows of `row_len`
/// elements of `out` (about [`CHUNK`] elements a group), in parallel when
/// `out` is large enough.
pub(crate) fn for_each_rows<T: Send>(out: &mut [T], row_len: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    if !worth_it(out.len()) || row_len == 0 {
        let rows = out.len().checked_div(row_len).unwrap_or(0);
        if out.len() >= MIN_PAIR_ELEMENTS && rows >= 2 {
            let (first, second) = out.split_at_mut(rows / 2 * row_len);
            return pair::pair(|| f(0, first), || f(rows / 2, second));
        }
        f(0, out);
        return;
    }
    let rows = (CHUNK / row_len).max(1);
    run(true, || out.par_chunks_mut(rows * row_len).enumerate().for_each(|(i, group)| f(i * rows, group)));
}

/// `f(offset, a, b)` on matching chunks of two mutable slices of one
/// length (`offset` is the chunks' first index), as [`for_each_chunk`]
/// cuts one.
pub(crate) fn for_each_chunk_of_two<T: Send>(a: &mut [T], b: &mut [T], f: impl Fn(usize, &mut [T], &mut [T]) + Sync) {
    debug_assert_eq!(a.len(), b.len());
    if !worth_it(a.len()) {
        if a.len() >= MIN_PAIR_ELEMENTS {
            let mid = pair_mid(a.len());
            let ((a_first, a_second), (b_first, b_second)) = (a.split_at_mut(mid), b.split_at_mut(mid));
            return pair::pair(|| f(0, a_first, b_first), || f(mid, a_second, b_second));
        }
        f(0, a, b);
        return;
    }
    run(true, || {
        let chunks = a.par_chunks_mut(CHUNK).zip(b.par_chunks_mut(CHUNK)).enumerate();
        chunks.for_each(|(i, (a, b))| f(i * CHUNK, a, b));
    });
}

/// `f(a, b, c, d)` on matching chunks of three mutable slices and one
/// shared one, all of one length (an optimizer's parameter, its two state
/// slots and its gradient), in parallel when they are large enough: cut
/// in two for the caller and the helper from [`MIN_PAIR_ELEMENTS`], as
/// [`for_each_chunk`] cuts one.
pub(crate) fn for_each_chunk_of_four<T: Send + Sync>(
    a: &mut [T],
    b: &mut [T],
    c: &mut [T],
    d: &[T],
    f: impl Fn(&mut [T], &mut [T], &mut [T], &[T]) + Sync,
) {
    if !worth_it(a.len()) {
        if a.len() >= MIN_PAIR_ELEMENTS {
            let mid = pair_mid(a.len());
            let ((a0, a1), (b0, b1)) = (a.split_at_mut(mid), b.split_at_mut(mid));
            let ((c0, c1), (d0, d1)) = (c.split_at_mut(mid), d.split_at(mid));
            return pair::pair(|| f(a0, b0, c0, d0), || f(a1, b1, c1, d1));
        }
        f(a, b, c, d);
        return;
    }
    run(true, || {
        let chunks = a.par_chunks_mut(CHUNK).zip(b.par_chunks_mut(CHUNK)).zip(c.par_chunks_mut(CHUNK));
        chunks.zip(d.par_chunks(CHUNK)).for_each(|(((a, b), c), d)| f(a, b, c, d));
    });
}

/// The sum of `x` by a fixed pairwise tree (halves summed recursively down
/// to blocks summed by `block_sum`): the same tree, so the same bits,
/// whether the halves run on one thread or two.
pub(crate) fn tree_sum<T: Copy + Send + Sync + std::ops::Add<Output = T>>(
    x: &[T],
    block: usize,
    block_sum: &(impl Fn(&[T]) -> T + Sync),
) -> T {
    fn go<T: Copy + Send + Sync + std::ops::Add<Output = T>>(
        x: &[T],
        block: usize,
        block_sum: &(impl Fn(&[T]) -> T + Sync),
        parallel: bool,
    ) -> T {
        if x.len() <= block {
            return block_sum(x);
        }
        let (left, right) = x.split_at(x.len() / 2);
        if parallel && worth_it(x.len()) {
            let (a, b) = rayon::join(|| go(left, block, block_sum, true), || go(right, block, block_sum, true));
            a + b
        } else {
            go(left, block, block_sum, false) + go(right, block, block_sum, false)
        }
    }
    let parallel = worth_it(x.len());
    run(parallel, || go(x, block, block_sum, parallel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_run_alone_keeps_its_kernels_on_its_thread_until_it_returns_or_panics() {
        assert!(may_share());
        alone(|| {
            assert!(!may_share());
            assert!(!worth_it(1 << 30));
            alone(|| assert!(!may_share()));
            assert!(!may_share(), "a nested call puts back what it found");
        });
        assert!(may_share());
        let panicked = std::panic::catch_unwind(|| alone(|| panic!("inside")));
        assert!(panicked.is_err());
        assert!(may_share(), "a panic puts the flag back too");
    }

    #[test]
    fn more_threads_than_rayon_can_start_is_an_error_that_changes_nothing() {
        let before = num_threads();
        let err = set_num_threads(usize::MAX).expect_err("more threads than rayon can start");
        assert!(err.to_string().contains("set_num_threads"), "{err}");
        assert_eq!(num_threads(), before);
    }

    #[test]
    fn a_copy_is_exact_at_every_size() {
        // Alone, cut in two for the helper, and shared out over the pool.
        for len in [0, 5, MIN_PAIR_ELEMENTS + 7, MIN_PARALLEL_ELEMENTS, 5 * CHUNK + 3] {
            let src: Vec<u32> = (0..len as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
            let mut dst = vec![0; len];
            copy(&mut dst, &src);
            assert!(dst == src, "a copy of {len}");
        }
    }

    #[test]
    fn four_slices_are_cut_at_the_same_element_at_every_size() {
        // Alone, cut in two for the helper, and shared out over the pool.
        for len in [5, MIN_PAIR_ELEMENTS + 7, 3 * CHUNK + 5, MIN_PARALLEL_ELEMENTS + 9] {
            let mut a: Vec<f64> = (0..len).map(|i| i as f64).collect();
            let mut b = vec![0.0; len];
            let mut c = vec![0.0; len];
            let d: Vec<f64> = (0..len).map(|i| 2.0 * i as f64).collect();
            for_each_chunk_of_four(&mut a, &mut b, &mut c, &d, |a, b, c, d| {
                assert!(a.len() == b.len() && b.len() == c.len() && c.len() == d.len());
                for (((a, b), c), d) in a.iter_mut().zip(b).zip(c).zip(d) {
                    (*b, *c) = (*a, *d);
                    *a += d;
                }
            });
            for i in 0..len {
                let x = i as f64;
                assert_eq!([a[i], b[i], c[i]], [3.0 * x, x, 2.0 * x], "element {i} of {len}");
            }
        }
    }

    #[test]
    fn a_team_runs_its_first_threads_kernels_on_it_and_shares_their_pieces() {
        // A team of its own on a thread of its own, as `team` forms grad's.
        std::thread::spawn(|| {
            let team = rayon::ThreadPoolBuilder::new().num_threads(2).use_current_thread().build().unwrap();
            let here = std::thread::current().id();
            let (ran_here, sum) = team.install(|| {
                let ran_here = std::thread::current().id() == here;
                let sum: usize = (0..1_000_000usize).into_par_iter().with_min_len(1000).sum();
                (ran_here, sum)
            });
            assert!(ran_here, "the first thread runs its kernel itself");
            assert_eq!(sum, 999_999 * 1_000_000 / 2);
            assert_eq!(team.current_thread_index(), Some(0));
        })
        .join()
        .unwrap();
    }
}
