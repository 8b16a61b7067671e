//! W6 of WORKLOADS.md: the W1 training step (MLP 784-256-10, mse, Adam)
//! repeated 2000 times with the tape reset to its mark after each step.
//! Prints the peak resident set and its growth from step 100 to step 2000;
//! a tape that recycles its buffers should show no growth.
//!
//! Run: `cargo bench --bench steady_state_memory` (Linux: reads /proc/self/status).

mod common;

use common::Mlp;
use grad_runtime::Tape;

/// A field of /proc/self/status in KiB (`VmRSS`, `VmHWM`), if the platform has it.
fn status_kib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    // `cargo test` runs bench targets with `--bench` absent: stay quick then.
    let steps = if std::env::args().any(|a| a == "--bench") { 2000 } else { 20 };
    let mut tape = Tape::<f32>::new();
    let mut model = Mlp::new(&mut tape, 6);
    let mark = tape.mark();
    let mut rss_at_100 = None;
    for step in 1..=steps {
        model.step(&mut tape);
        tape.reset_to(mark);
        if step == 100 {
            rss_at_100 = status_kib("VmRSS:");
        }
    }
    match (status_kib("VmHWM:"), rss_at_100.or(status_kib("VmRSS:")), status_kib("VmRSS:")) {
        (Some(peak), Some(early), Some(late)) => {
            println!("w6_peak_rss_mib {:.1} MiB", peak / 1024.0);
            println!("w6_rss_growth_step100_to_{steps}_mib {:.2} MiB", (late - early) / 1024.0);
        }
        _ => println!("w6: resident set size is unavailable on this platform"),
    }
}
