//! The elementwise activations on W7's MLP activation shape, [16, 64, 512]
//! (f32): each one's forward alone, and its forward with a sum and the
//! backward, as `name value unit` lines. A backward rule that is not
//! vectorised shows here as a forward + backward many times its forward
//! (GELU's was 9x before its functions were inlined).
//!
//! Run: `cargo bench --bench activations`. Without `--bench` (as `cargo
//! test --benches` runs it) each activation runs once, to show that it
//! still works.

use std::time::Instant;

use grad_runtime::ndarray::ArrayD;
use grad_runtime::{Tape, Var, g_gelu, g_relu, g_sigmoid, g_silu, g_softplus, g_sum, g_tanh};

type Activation = fn(&mut Tape<f32>, Var) -> Var;

const ACTIVATIONS: [(&str, Activation); 6] = [
    ("gelu", g_gelu),
    ("tanh", g_tanh),
    ("sigmoid", g_sigmoid),
    ("relu", g_relu),
    ("silu", g_silu),
    ("softplus", g_softplus),
];

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (warmup, timed) = if full { (5, 40) } else { (0, 1) };
    if !full {
        println!("# smoke run (no --bench): one iteration each, the figures mean nothing");
    }
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ArrayD::from_shape_fn(vec![16, 64, 512], |i| i[2] as f32 / 128.0 - 2.0 + i[1] as f32 * 1e-3));
    let mark = tape.mark();
    for (name, f) in ACTIVATIONS {
        let (mut forward, mut both) = (Vec::new(), Vec::new());
        for iteration in 0..warmup + timed {
            let start = Instant::now();
            let y = f(&mut tape, x);
            let forward_s = start.elapsed().as_secs_f64();
            let loss = g_sum(&mut tape, y);
            tape.backward(loss).expect("the activation is well formed");
            let both_s = start.elapsed().as_secs_f64();
            tape.reset_to(mark);
            if iteration >= warmup {
                forward.push(forward_s);
                both.push(both_s);
            }
        }
        println!("{name}_forward_ms {:.4} ms", median(forward) * 1e3);
        println!("{name}_forward_backward_ms {:.4} ms", median(both) * 1e3);
    }
}
