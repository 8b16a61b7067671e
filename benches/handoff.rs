//! What handing work to a thread pool costs on this machine: the number
//! behind grad's thresholds for going parallel (`MIN_PARALLEL_ELEMENTS` in
//! grad-runtime's `parallel.rs`, `MIN_PARALLEL_FLOPS` in `gemm/mod.rs`).
//!
//! For each gap of serial work between parallel regions (the workers may
//! fall asleep in it) and each amount of work per region, the median time
//! of a region that splits the work in two on a pool of two threads, beside
//! the same work done on the caller's thread. A region pays for itself only
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
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("a pool of two threads");
    println!("gap (us)  work (us)  parallel region (us)  serial (us)");
    for gap in [0.0, 20.0, 100.0, 1000.0] {
        for work in [0.0, 10.0, 50.0, 200.0] {
            let parallel = median_us(samples, gap, || {
                pool.install(|| rayon::join(|| spin(work / 2.0), || spin(work / 2.0)));
            });
            let serial = median_us(samples, gap, || spin(work));
            println!("{gap:>8.0}  {work:>9.0}  {parallel:>20.1}  {serial:>11.1}");
        }
    }
}
