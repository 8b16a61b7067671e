//! Work of W7's step that once ran on the caller's thread alone while the
//! other thread waited: an AdamW step over tensors of W7's shapes, and
//! two `reshape`s of W7's `[16, 64, 128]` with a product and a sum,
//! forward and backward. As `name value unit` lines; compare two commits
//! by running each one's build in alternation.
//!
//! Run: `cargo bench --bench caller_thread`. Without `--bench` (as `cargo
//! test --benches` runs it) each runs once, to show that it still works.

use std::time::Instant;

use grad_runtime::ndarray::ArrayD;
use grad_runtime::{AdamW, Rng, Tape, Var, g_add, g_mul, g_reshape, g_sum};

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The median of `timed` runs of `f` after `warmup`, in µs.
fn time_us(warmup: usize, timed: usize, mut f: impl FnMut()) -> f64 {
    let mut samples = Vec::new();
    for iteration in 0..warmup + timed {
        let start = Instant::now();
        f();
        if iteration >= warmup {
            samples.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    median(samples)
}

fn normal(rng: &mut Rng, shape: &[usize]) -> ArrayD<f32> {
    ArrayD::from_shape_fn(shape.to_vec(), |_| rng.normal() as f32)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (warmup, timed) = if full { (50, 1000) } else { (0, 1) };
    if !full {
        println!("# smoke run (no --bench): one iteration each, the figures mean nothing");
    }
    let mut rng = Rng::new(5);

    // The two embeddings and four blocks' projections, weights and biases.
    let mut tape = Tape::<f32>::new();
    let mut opt = AdamW::new(1e-3).betas(0.9, 0.95).eps(1e-8);
    let mut shapes = vec![vec![65, 128], vec![64, 128]];
    for _ in 0..4 {
        for (rows, cols) in [(128, 384), (128, 128), (128, 512), (512, 128)] {
            shapes.extend([vec![rows, cols], vec![cols]]);
        }
    }
    let mut total: Option<Var> = None;
    for shape in &shapes {
        let p = tape.param(normal(&mut rng, shape));
        opt.add(&tape, p, 0.1).expect("a parameter of this tape");
        let s = g_sum(&mut tape, p);
        total = Some(total.map_or(s, |t| g_add(&mut tape, t, s)));
    }
    tape.backward(total.expect("34 parameters")).expect("a scalar loss");
    let us = time_us(warmup, timed, || opt.step(&mut tape).expect("every parameter has a gradient"));
    println!("adamw_step_w7_shapes_us {us:.1} us");

    let mut tape = Tape::<f32>::new();
    let x = tape.param(normal(&mut rng, &[16, 64, 128]));
    let mark = tape.mark();
    let us = time_us(warmup, timed, || {
        let heads = g_reshape(&mut tape, x, &[16, 64, 4, 32]);
        let back = g_reshape(&mut tape, heads, &[16, 64, 128]);
        let product = g_mul(&mut tape, back, x);
        let loss = g_sum(&mut tape, product);
        tape.backward(loss).expect("a scalar loss");
        tape.reset_to(mark);
    });
    println!("two_reshapes_fwd_bwd_us {us:.1} us");
}
