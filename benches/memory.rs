//! What a GPT training step holds, with and without checkpointing, and a
//! forward-only pass under `Tape::inference`: W7 of benches/README.md
//! (nanoGPT's GPT, 4 layers, context 64, batch 16) and a deeper one
//! (12 layers, context 256, batch 16). Each case runs in a child process
//! of its own (peak resident memory is per process): 3 warm-up steps, then
//! the median of the timed ones. Modes: `plain` (the tape keeps every
//! gradient), `lean` (no intermediate gradients kept:
//! `Tape::set_keep_intermediate_grads(false)`, PyTorch's default),
//! `checkpoint` (lean, each block a `Tape::checkpoint` segment) and
//! `inference` (a forward pass under `Tape::inference`).
//!
//! Figures, as `name value unit` lines (`benches/peers/memory_torch.py`
//! prints PyTorch's under the same names):
//! - `tape_peak_mib`: the most the tape held during a step (`Tape::memory`:
//!   values, saved state, gradients, scratch), weights included;
//! - `activation_peak_mib`: that peak less the weights and their gradients;
//! - `saved_for_backward_mib`: what the forward leaves for backward beyond
//!   the weights (values and saved state at the loss);
//! - `peak_rss_mib` and `peak_rss_minus_before_mib`: the process's peak
//!   resident set, and its growth over the set before the first step;
//! - `step_ms` (`forward_ms` under inference) and `tokens_per_s`.
//!
//! Run: `cargo bench --bench memory` (`-- w7` or `-- deep` for one
//! configuration; Linux: reads /proc/self/status).

mod common;

use std::process::Command;
use std::time::Instant;

use common::gpt::{Config, Gpt};
use common::status_kib;
use grad_runtime::{AdamW, Rng, Tape};
use ndarray::Array2;

const MIB: f64 = 1024.0 * 1024.0;
const MODES: [&str; 4] = ["plain", "lean", "checkpoint", "inference"];

/// A configuration's sizes, batch and timed steps; `full` is false under
/// `cargo test`, which runs bench targets to check that they work.
fn configuration(name: &str, full: bool) -> (Config, usize, usize) {
    let config = Config::small(65);
    match (name, full) {
        ("w7", true) => (config, 16, 10),
        ("deep", true) => (Config { block: 256, n_layer: 12, ..config }, 16, 3),
        _ => (Config { block: 16, n_layer: 2, n_embd: 32, ..config }, 2, 2),
    }
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// One case, in this (child) process: prints its figures.
fn run(name: &str, mode: &str, full: bool) {
    let (config, batch, steps) = configuration(name, full);
    let mut tape = Tape::<f32>::new();
    let mut rng = Rng::new(7);
    let mut model = Gpt::new(&mut tape, &mut rng, config);
    model.checkpoint = mode == "checkpoint";
    // `lean` and `checkpoint` keep no intermediate gradients (PyTorch's default).
    tape.set_keep_intermediate_grads(mode == "plain");
    let mut opt = AdamW::new(1e-3).betas(0.9, 0.95).eps(1e-8);
    opt.add_params(&tape, &model, |name| Gpt::weight_decay(name, 0.1)).expect("the parameters register");
    opt.set_clip(1.0).expect("a positive clip");
    let mut ids = || Array2::from_shape_fn((batch, config.block), |_| (rng.next_u64() % 65) as usize);
    let (inputs, targets) = (ids(), ids());
    let weights = tape.memory().values;
    let mark = tape.mark();
    let rss_before = status_kib("VmRSS:").unwrap_or(f64::NAN) / 1024.0;
    let prefix = format!("mem_{name}_{mode}");
    let emit = |figure: &str, value: f64, unit: &str| println!("{prefix}_{figure} {value:.3} {unit}");

    let (mut times, mut saved) = (Vec::new(), 0);
    for step in 0..3 + steps {
        tape.reset_peak_memory();
        let start = Instant::now();
        if mode == "inference" {
            tape.inference(|t| {
                let tokens = model.embed(t, inputs.view());
                let logits = model.logits(t, tokens);
                t.try_value(logits).map(|v| v[[0, 0, 0]])
            })
            .expect("an inference pass")
            .expect("the logits");
        } else {
            let tokens = model.embed(&mut tape, inputs.view());
            let logits = model.logits(&mut tape, tokens);
            let loss = model.loss(&mut tape, logits, targets.view());
            let at_loss = tape.memory();
            saved = at_loss.values + at_loss.saved - weights;
            tape.backward(loss).expect("the loss is a scalar");
            opt.step(&mut tape).expect("the optimizer step");
        }
        let elapsed = start.elapsed().as_secs_f64();
        if step >= 3 {
            times.push(elapsed);
        }
        if mode != "inference" {
            tape.reset_to(mark);
        }
    }
    let memory = tape.memory();
    let grads = if mode == "inference" { 0 } else { weights };
    emit("params_mib", weights as f64 / MIB, "MiB");
    emit("tape_peak_mib", memory.peak as f64 / MIB, "MiB");
    emit("activation_peak_mib", (memory.peak - weights - grads) as f64 / MIB, "MiB");
    emit("saved_for_backward_mib", saved as f64 / MIB, "MiB");
    let peak_rss = status_kib("VmHWM:").unwrap_or(f64::NAN) / 1024.0;
    emit("rss_before_steps_mib", rss_before, "MiB");
    emit("peak_rss_mib", peak_rss, "MiB");
    emit("peak_rss_minus_before_mib", peak_rss - rss_before, "MiB");
    let s = median(times);
    emit(if mode == "inference" { "forward_ms" } else { "step_ms" }, s * 1e3, "ms");
    emit("tokens_per_s", (batch * config.block) as f64 / s, "tok/s");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    if let [_, child, name, mode, ..] = args.as_slice()
        && child == "--child"
    {
        run(name, mode, full);
        return;
    }
    let chosen: Vec<&str> = ["w7", "deep"].into_iter().filter(|name| args.iter().any(|a| a == name)).collect();
    let names = if chosen.is_empty() { vec!["w7", "deep"] } else { chosen };
    let exe = std::env::current_exe().expect("the bench binary");
    println!("# grad, f32, {} threads", grad_runtime::num_threads());
    for name in names {
        for mode in MODES {
            let mut child = Command::new(&exe);
            child.args(["--child", name, mode]);
            if full {
                child.arg("--bench");
            }
            let out = child.output().expect("a child process");
            print!("{}", String::from_utf8_lossy(&out.stdout));
            eprint!("{}", String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success(), "the {name} {mode} child failed: {}", out.status);
        }
    }
}
