//! Two halves of a medium-sized kernel on two cores: the caller runs one
//! half while a helper thread, kept awake between kernels, runs the other.
//!
//! Why not the pool of `parallel.rs`: a rayon region makes a caller outside
//! the pool wait on a lock while the pool's threads work, and a pool thread
//! that found no work for a few microseconds sleeps (the team's first
//! thread does not wait, but the others still sleep: W4 then made 35K
//! context switches a run, against 300 with the helper). Waking either
//! costs 40 to 60 µs on the 2-core VM grad is measured on (`cargo bench
//! --bench handoff`), more than a 512 × 64 × 64 product (W4's) takes on
//! one core, so such products ran on one thread. Here the caller never
//! sleeps (it runs its half, then spins until the other is done) and the
//! helper does not sleep while kernels keep coming: after each [`pair`] it
//! keeps looking for work for [`KEEP_AWAKE_US`] or four times the last
//! half's time, whichever is
//! longer (gaps between kernels grow with the kernels: an unoptimised build
//! runs everything ~30x slower), pausing between looks, as OpenMP's threads
//! spin between parallel regions. A pair then costs about 2 µs over the
//! halves' time: W4 went from 965 to 692 µs a step.
//!
//! The first pair after the helper has gone back to sleep runs both halves
//! on the caller and wakes the helper for the next one. Results never
//! depend on where a half ran: each half writes its own elements.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use rayon::Yield;

use crate::parallel;

/// How long the helper keeps looking for work after the last pair, at
/// least: longer than the gaps between the products of a training step
/// (tens of µs), short enough that an idle program stops using the core
/// at once.
const KEEP_AWAKE_US: u64 = 1000;

/// What a hand-off may add to the helper's half without counting as
/// falling behind.
const KEPT_UP_SLACK: Duration = Duration::from_micros(3);

/// How many more pairs the helper fell behind in than kept up in before
/// pairs stop using it for a while.
const STRIKES_TO_BACK_OFF: u32 = 16;

/// How long pairs stop using a helper that fell behind, in µs.
const BACK_OFF_US: u64 = 200_000;

/// Pause instructions between two looks for work: they leave the core's
/// pipeline to whatever shares it.
const IDLE_PAUSES: u32 = 32;

/// The helper: a one-thread rayon pool (rayon gives the scoped spawn that
/// lets a half borrow the caller's buffers) and what says whether its
/// thread is awake.
struct Helper {
    pool: rayon::ThreadPool,
    /// The helper's thread is in its look-for-work loop.
    awake: AtomicBool,
    /// A wake-up is queued and has not started yet.
    waking: AtomicBool,
    /// When the last pair asked for the helper, in µs since `epoch`.
    last_use_us: AtomicU64,
    /// How long after that the helper keeps looking for work, in µs.
    keep_awake_us: AtomicU64,
    /// Pairs in which the helper fell behind, less those it kept up in.
    strikes: AtomicU32,
    /// Until when pairs run on the caller alone, in µs since `epoch`.
    resume_at_us: AtomicU64,
    epoch: Instant,
}

impl Helper {
    fn now_us(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Keeps the helper awake for four times a half of the last pair, or
    /// [`KEEP_AWAKE_US`] if longer.
    fn note_half(&self, half: Duration) {
        let us = u64::try_from(half.as_micros()).unwrap_or(u64::MAX / 4);
        self.keep_awake_us.store(KEEP_AWAKE_US.max(4 * us), Ordering::Relaxed);
    }

    /// Counts a pair in which the helper kept up or fell behind. Where the
    /// helper's core is not a core of its own (a VM's two virtual CPUs the
    /// host runs on one physical core, seen on the development VM for
    /// seconds at a time), its half takes twice as long and its spinning
    /// slows the caller: W4 ran at 1.5x its one-thread time. After
    /// [`STRIKES_TO_BACK_OFF`] more such pairs than good ones, pairs run on
    /// the caller alone for [`BACK_OFF_US`], then try the helper again.
    fn count(&self, kept_up: bool, now: u64) {
        if kept_up {
            let _ = self.strikes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        } else if self.strikes.fetch_add(1, Ordering::Relaxed) + 1 >= STRIKES_TO_BACK_OFF {
            self.strikes.store(0, Ordering::Relaxed);
            self.resume_at_us.store(now + BACK_OFF_US, Ordering::Relaxed);
        }
    }

    /// Queues the look-for-work loop on the helper's thread, unless it is
    /// running or queued already.
    fn wake(&'static self) {
        if self.waking.swap(true, Ordering::AcqRel) {
            return;
        }
        self.pool.spawn(move || {
            self.awake.store(true, Ordering::Release);
            self.waking.store(false, Ordering::Release);
            while self.now_us().saturating_sub(self.last_use_us.load(Ordering::Relaxed))
                < self.keep_awake_us.load(Ordering::Relaxed)
            {
                // Runs a half if one is queued (the job a pair spawned).
                if rayon::yield_now() != Some(Yield::Executed) {
                    for _ in 0..IDLE_PAUSES {
                        std::hint::spin_loop();
                    }
                }
            }
            self.awake.store(false, Ordering::Release);
        });
    }
}

/// The helper, once built; `None` inside if the system cannot start a thread.
static HELPER: OnceLock<Option<Helper>> = OnceLock::new();

/// The helper, built on first use; `None` if the system cannot start a thread.
fn helper() -> Option<&'static Helper> {
    let built = HELPER.get_or_init(|| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).thread_name(|_| "grad-helper".into()).build().ok()?;
        let (awake, waking) = (AtomicBool::new(false), AtomicBool::new(false));
        let (last_use_us, resume_at_us) = (AtomicU64::new(0), AtomicU64::new(0));
        Some(Helper {
            pool,
            awake,
            waking,
            last_use_us,
            keep_awake_us: AtomicU64::new(KEEP_AWAKE_US),
            strikes: AtomicU32::new(0),
            resume_at_us,
            epoch: Instant::now(),
        })
    });
    built.as_ref()
}

/// Sends an awake helper back to sleep: the pool's threads are about to
/// share a kernel, and a helper still looking for work would take a core
/// from one of them: on two cores, the helper spun through the products
/// that follow each optimizer step's pairs, 2.3% of W7's samples (0.6%
/// since). The next pair then runs on the caller alone and wakes it.
pub(crate) fn make_way() {
    if let Some(Some(helper)) = HELPER.get()
        && helper.awake.load(Ordering::Relaxed)
    {
        helper.keep_awake_us.store(0, Ordering::Relaxed);
    }
}

/// Sets its flag when dropped: when the half returns, and when it panics
/// (the caller would otherwise spin forever; rayon's scope then passes the
/// panic on to the caller).
struct DoneOnDrop<'a>(&'a AtomicBool);

impl Drop for DoneOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Runs `first` and `second`, on two cores when grad uses more than one
/// thread and the helper is awake and keeping up, else one after the
/// other on this thread. The halves must not depend on each other's results.
pub(crate) fn pair(first: impl FnOnce() + Send, second: impl FnOnce() + Send) {
    // Inside a kernel shared out over a pool, or inside work run alone, the
    // caller is already one of several threads at work.
    let usable = parallel::num_threads() > 1 && parallel::may_share() && parallel::between_kernels();
    let Some(helper) = helper().filter(|_| usable) else {
        first();
        second();
        return;
    };
    let now = helper.now_us();
    if now < helper.resume_at_us.load(Ordering::Relaxed) {
        // Backing off: not touching `last_use_us` lets the helper sleep.
        first();
        second();
        return;
    }
    helper.last_use_us.store(now, Ordering::Relaxed);
    if !helper.awake.load(Ordering::Acquire) {
        helper.wake();
        let start = Instant::now();
        first();
        second();
        helper.note_half(start.elapsed() / 2);
        return;
    }
    let (kept_up, half) = run_on_both(helper, first, second);
    helper.note_half(half);
    helper.count(kept_up, now);
}

/// `first` here and `second` on the helper; how long `first` took, and
/// whether the helper kept up:
/// its half was done within half the time the caller's took, plus
/// [`KEPT_UP_SLACK`] (the hand-off), after the caller's. On a core of
/// its own it finishes about when the caller does.
fn run_on_both(helper: &Helper, first: impl FnOnce() + Send, second: impl FnOnce() + Send) -> (bool, Duration) {
    // The helper's half, taken by whichever side gets to it first: when the
    // helper has not started it by the time the caller's half is done, the
    // caller runs it rather than wait.
    let second = Mutex::new(Some(second));
    let take = || second.lock().unwrap_or_else(PoisonError::into_inner).take();
    let done = AtomicBool::new(false);
    helper.pool.in_place_scope(|scope| {
        scope.spawn(|_| {
            if let Some(second) = take() {
                let _done = DoneOnDrop(&done);
                second();
            }
        });
        let start = Instant::now();
        first();
        let first_done = Instant::now();
        let half = first_done - start;
        if let Some(second) = take() {
            second();
            return (false, half);
        }
        // Spin, not block: waking a blocked caller costs what this saves.
        while !done.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        (first_done.elapsed() <= half / 2 + KEPT_UP_SLACK, half)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_halves_run_once_whether_the_helper_is_awake_or_not() {
        for round in 0..200 {
            let (mut left, mut right) = (vec![0u32; 1000], vec![0u32; 1000]);
            pair(|| left.iter_mut().for_each(|x| *x += 1), || right.iter_mut().for_each(|x| *x += 2));
            assert!(left.iter().all(|&x| x == 1) && right.iter().all(|&x| x == 2), "round {round}");
            if round % 50 == 0 {
                // Long enough for the helper to go back to sleep.
                std::thread::sleep(Duration::from_micros(3 * KEEP_AWAKE_US));
            }
        }
    }

    #[test]
    fn inside_work_run_alone_both_halves_run_on_the_callers_thread() {
        let caller = std::thread::current().id();
        for _ in 0..50 {
            let (mut first, mut second) = (None, None);
            parallel::alone(|| {
                pair(|| first = Some(std::thread::current().id()), || second = Some(std::thread::current().id()))
            });
            assert_eq!((first, second), (Some(caller), Some(caller)));
        }
    }

    #[test]
    fn a_panicking_half_reaches_the_caller_instead_of_hanging_it() {
        for _ in 0..20 {
            let caught = std::panic::catch_unwind(|| pair(|| (), || panic!("the second half failed")));
            assert!(caught.is_err());
        }
    }
}
