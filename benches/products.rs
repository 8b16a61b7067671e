//! Single matrix products at the shapes of the workloads, forward only,
//! each the median of many runs on a tape rewound after each: W1's and
//! W9's `x @ w1` (64 × 784 × 256) and the weights' gradient `xᵀ @ g` (784
//! × 64 × 256), a block of W7's attention (64 × 64 × 32, one head's
//! weighted values), and W7's `qkv` projection (1024 × 128 × 384). As
//! `name value unit` lines (µs and GFLOP/s); compare two commits by
//! running each one's build in alternation, and the thread counts with
//! `GRAD_NUM_THREADS`.
//!
//! Run: `cargo bench --bench products`. Without `--bench` (as `cargo test
//! --benches` runs it) each runs once, to show that it still works.

use std::time::Instant;

use grad_runtime::ndarray::ArrayD;
use grad_runtime::{Rng, Tape, g_matmul};

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (warmup, timed) = if full { (20, 400) } else { (0, 1) };
    if !full {
        println!("# smoke run (no --bench): one iteration each, the figures mean nothing");
    }
    let mut rng = Rng::new(3);
    for (name, [m, k, n]) in [
        ("w1_x_w1", [64, 784, 256]),
        ("w1_xt_g", [784, 64, 256]),
        ("w7_head", [64, 64, 32]),
        ("w7_qkv", [1024, 128, 384]),
    ] {
        let mut tape = Tape::<f32>::new();
        let mut normal =
            |shape: [usize; 2]| tape.constant(ArrayD::from_shape_fn(shape.to_vec(), |_| rng.normal() as f32));
        let (a, b) = (normal([m, k]), normal([k, n]));
        let mark = tape.mark();
        let mut samples = Vec::new();
        for iteration in 0..warmup + timed {
            let start = Instant::now();
            g_matmul(&mut tape, a, b);
            let elapsed = start.elapsed().as_secs_f64();
            tape.reset_to(mark);
            if iteration >= warmup {
                samples.push(elapsed);
            }
        }
        samples.sort_by(f64::total_cmp);
        let s = samples[samples.len() / 2];
        println!("{name}_{m}x{k}x{n}_us {:.1} us", s * 1e6);
        println!("{name}_{m}x{k}x{n}_gflops {:.1} GFLOP/s", 2.0 * (m * k * n) as f64 / s / 1e9);
    }
}
