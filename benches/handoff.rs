//! What handing work to a thread pool costs on this machine: the number
//! behind grad's thresholds for going parallel (`MIN_PARALLEL_ELEMENTS` in
//! grad-runtime's `parallel.rs`, `MIN_PARALLEL_FLOPS` in `gemm/mod.rs`).
//!
//! For each gap of serial work between parallel regions (the workers may
//! fall asleep in it) and each amount of work per region, the median time
//! of a region that splits the work in two on a pool of two threads, called
//! from outside the pool and from the pool's first thread (as grad's team
//! runs its first thread's kernels), beside the same work done on the
//! caller's thread. A region pays for itself only
//! where its time is below the serial one.
//!
//! Run: `cargo bench --bench handoff`. Without `--bench` (as `cargo test
//! --benches` runs it) it takes a few samples only, to show that it works.

use std::time::Instant;

/// Busy-waits `us` microseconds: work that neither allocates nor sleeps.
fn spin(us: f64) {
    let start = Instant::now();
    while start.elapsed().as_secs_f64() * 1e6 < us {}
}

fn median_us(samples: usize, gap_us: f64, mut region: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..samples)
        .map(|_| {
            spin(gap_us);
            let start = Instant::now();
            region();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let samples = if full { 1000 } else { 3 };
    let cases: Vec<(f64, f64)> = [0.0, 20.0, 100.0, 1000.0]
        .into_iter()
        .flat_map(|gap| [0.0, 10.0, 50.0, 200.0].map(|work| (gap, work)))
        .collect();
    // From a thread outside the pool, as every thread but the first that
    // shares out a kernel runs grad's: the caller hands the region over and
    // sleeps until it is done.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("a pool of two threads");
    let outside: Vec<f64> = cases
        .iter()
        .map(|&(gap, work)| {
            median_us(samples, gap, || {
                pool.install(|| rayon::join(|| spin(work / 2.0), || spin(work / 2.0)));
            })
        })
        .collect();
    // From the pool's first thread, as grad's team runs the kernels of the
    // thread that formed it: the caller computes its half at once.
    let team = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .use_current_thread()
        .build()
        .expect("a pool of this thread and one more");
    println!("gap (us)  work (us)  from outside (us)  from the team (us)  serial (us)");
    for (&(gap, work), outside) in cases.iter().zip(outside) {
        let inside = median_us(samples, gap, || {
            team.install(|| rayon::join(|| spin(work / 2.0), || spin(work / 2.0)));
        });
        let serial = median_us(samples, gap, || spin(work));
        println!("{gap:>8.0}  {work:>9.0}  {outside:>17.1}  {inside:>18.1}  {serial:>11.1}");
    }
}
