//! W6 of WORKLOADS.md: the W1 training step (MLP 784-256-10, mse, Adam)
//! repeated 2000 times with the tape reset to its mark after each step.
//! Prints the peak resident set and its growth from step 100 to step 2000;
//! a tape that recycles its buffers should show no growth.
//!
//! Run: `cargo bench --bench steady_state_memory` (Linux: reads /proc/self/status).

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn};

fn normal(rng: &mut Rng, shape: &[usize], scale: f32) -> ArrayD<f32> {
    ArrayD::from_shape_fn(IxDyn(shape), |_| rng.normal() as f32 * scale)
}

/// A field of /proc/self/status in KiB (`VmRSS`, `VmHWM`), if the platform has it.
fn status_kib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    // `cargo test` runs bench targets with `--bench` absent: stay quick then.
    let steps = if std::env::args().any(|a| a == "--bench") { 2000 } else { 20 };
    let mut rng = Rng::new(6);
    let (x, t) = (normal(&mut rng, &[64, 784], 1.0), normal(&mut rng, &[64, 10], 1.0));
    let mut tape = Tape::<f32>::new();
    let w1 = tape.param(normal(&mut rng, &[784, 256], 0.05));
    let b1 = tape.param(normal(&mut rng, &[256], 0.05));
    let w2 = tape.param(normal(&mut rng, &[256, 10], 0.05));
    let b2 = tape.param(normal(&mut rng, &[10], 0.05));
    let mut opt = Adam::new(1e-3);
    for w in [w1, b1, w2, b2] {
        opt.add(&tape, w, 0.0).expect("a parameter of this tape");
    }
    let mark = tape.mark();
    let mut rss_at_100 = None;
    for step in 1..=steps {
        let (xv, tv) = (tape.constant(&x), tape.constant(&t));
        let xw = g_matmul(&mut tape, xv, w1);
        let z = g_add(&mut tape, xw, b1);
        let h = g_relu(&mut tape, z);
        let hw = g_matmul(&mut tape, h, w2);
        let y = g_add(&mut tape, hw, b2);
        let loss = g_mse(&mut tape, y, tv);
        tape.backward(loss).expect("the step is well formed");
        opt.step(&mut tape).expect("the step is well formed");
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
