//! Node counts and peak memory of W1, W2 and W5 (benches/README.md), each as
//! the hand-written `g_*` ops and as a `grad!` block with its elementwise
//! chains fused. Each runs in a child process of its own (peak resident
//! memory is per process): three steps, then the step's node count and
//! the peak resident set are printed.
//!
//! Run: `cargo bench --bench fusion_memory` (Linux: reads /proc/self/status).

mod common;

use std::process::Command;

use common::{Mlp, normal, w2_loss, w5_loss};
use grad_runtime::{Rng, Tape};
use ndarray::Array1;

/// A field of /proc/self/status in KiB (`VmHWM`), if the platform has it.
fn status_kib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs one workload for three steps; returns the nodes of a step.
fn workload(name: &str, fused: bool, w5_len: usize) -> usize {
    let mut tape = Tape::<f32>::new();
    let mut nodes = 0;
    match name {
        "w1" => {
            let mut model = Mlp::new(&mut tape, 1);
            let mark = tape.mark();
            for _ in 0..3 {
                if fused {
                    model.step_fused(&mut tape)
                } else {
                    model.step(&mut tape)
                }
                nodes = tape.len() - mark.len();
                tape.reset_to(mark);
            }
        }
        "w2" => {
            let x = tape.param(Array1::from_shape_fn(16, |i| i as f32 / 16.0));
            let mark = tape.mark();
            for _ in 0..3 {
                let loss = w2_loss(&mut tape, x, fused);
                tape.backward(loss).unwrap();
                nodes = tape.len() - mark.len();
                tape.reset_to(mark);
            }
        }
        _ => {
            let x = tape.param(normal(&mut Rng::new(5), &[w5_len], 1.0));
            let mark = tape.mark();
            for _ in 0..3 {
                let loss = w5_loss(&mut tape, x, fused);
                tape.backward(loss).unwrap();
                nodes = tape.len() - mark.len();
                tape.reset_to(mark);
            }
        }
    }
    nodes
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo test` runs bench targets without `--bench`: stay quick then.
    let w5_len = if args.iter().any(|a| a == "--bench") { 1 << 24 } else { 1 << 12 };
    if let [_, child, name, form, ..] = args.as_slice()
        && child == "--child"
    {
        let nodes = workload(name, form == "fused", w5_len);
        let peak = status_kib("VmHWM:").map_or("unavailable".to_string(), |kib| format!("{:.1}", kib / 1024.0));
        println!("{nodes} {peak}");
        return;
    }
    let exe = std::env::current_exe().expect("the bench binary");
    println!("workload  form     nodes/step  peak RSS (MiB)");
    for name in ["w1", "w2", "w5"] {
        for form in ["g_ops", "fused"] {
            let mut command = Command::new(&exe);
            command.args(["--child", name, form]);
            if w5_len > 1 << 12 {
                command.arg("--bench");
            }
            let output = command.output().expect("the child runs");
            let text = String::from_utf8_lossy(&output.stdout);
            let mut fields = text.split_whitespace();
            let (nodes, peak) = (fields.next().unwrap_or("?"), fields.next().unwrap_or("?"));
            println!("{name:<9} {form:<8} {nodes:>10}  {peak:>14}");
        }
    }
}
