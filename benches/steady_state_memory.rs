//! W6 of benches/README.md: the W1 training step (MLP 784-256-10, mse, Adam)
//! repeated 2000 times with the tape reset to its mark after each step.
//! Prints the peak resident set and its growth from step 100 to step 2000;
//! a tape that recycles its buffers should show no growth.
//!
//! Run: `cargo bench --bench steady_state_memory` (Linux: reads /proc/self/status).

mod common;

fn main() {
    // `cargo test` runs bench targets with `--bench` absent: stay quick then.
    let steps = if std::env::args().any(|a| a == "--bench") { 2000 } else { 20 };
    match common::steady_state(steps) {
        Some(w6) => {
            println!("w6_peak_rss_mib {:.1} MiB", w6.peak_rss_mib);
            println!("w6_rss_growth_step100_to_{steps}_mib {:.2} MiB", w6.rss_growth_mib);
        }
        None => println!("w6: resident set size is unavailable on this platform"),
    }
}
