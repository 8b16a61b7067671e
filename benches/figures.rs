//! grad's figures for the side-by-side harness (`benches/side_by_side.py`): the workloads
//! W1..W10 of benches/README.md (W10, bf16 products, as `w3_bf16` for W3 and `w10` for
//! W7), one `name value unit` line per figure, with the names,
//! units and timing rule of the peers in benches/peers/ so the lines compare one to one.
//! A time is the median of single timed iterations after a warm-up; each workload stops
//! timing after a budget of seconds, so it stays under ~20 s.
//!
//! Run: `cargo bench --bench figures` (all), `cargo bench --bench figures -- w1 w2`.
//! Without `--bench` (as `cargo test --benches` runs it) each workload runs one iteration
//! only, to show that it still works, and its figures mean nothing (so says its first line).
//!
//! Only the public API of grad-runtime is used here: the harness builds this file
//! against an older revision of the library too (`--baseline-rev`).

mod common;

use std::time::{Duration, Instant};

use common::{Attention, Mlp, normal, w2_loss, w5_loss};
use grad_runtime::*;

const WORKLOADS: [&str; 11] = ["w1", "w2", "w3", "w3_bf16", "w4", "w5", "w6", "w7", "w8", "w9", "w10"];

/// How long to time: the full measurement, or a smoke run.
#[derive(Clone, Copy)]
struct Plan {
    full: bool,
}

impl Plan {
    /// Median seconds of one call of `f`, after `warmup` untimed calls; timing stops after
    /// `max_iters` calls, or once `budget_s` has passed and `min_iters` calls are timed.
    fn median_s(self, warmup: usize, min_iters: usize, max_iters: usize, budget_s: u64, mut f: impl FnMut()) -> f64 {
        let (warmup, min_iters, max_iters) = if self.full { (warmup, min_iters, max_iters) } else { (0, 1, 1) };
        for _ in 0..warmup {
            f();
        }
        let budget = Duration::from_secs(budget_s);
        let start = Instant::now();
        let mut samples = Vec::with_capacity(max_iters);
        while samples.len() < max_iters && (samples.len() < min_iters || start.elapsed() < budget) {
            let t0 = Instant::now();
            f();
            samples.push(t0.elapsed().as_secs_f64());
        }
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        if n % 2 == 1 { samples[n / 2] } else { (samples[n / 2 - 1] + samples[n / 2]) / 2.0 }
    }
}

fn emit(name: &str, value: f64, unit: &str) {
    println!("{name} {value:.6} {unit}");
}

/// W1: x[64,784], t[64,10]; h = relu(x@w1+b1); y = h@w2+b2; mse; backward; Adam(1e-3).
fn w1(plan: Plan) {
    let mut tape = Tape::<f32>::new();
    let mut model = Mlp::new(&mut tape, 1);
    let mark = tape.mark();
    let s = plan.median_s(50, 20, 20_000, 8, || {
        model.step(&mut tape);
        tape.reset_to(mark);
    });
    emit("w1_mlp_step_us", s * 1e6, "us");
}

/// W2: x[16]; 1000 × x = tanh(x*0.9 + 0.1); sum; backward: 3001 nodes.
fn w2(plan: Plan) {
    const NODES: f64 = 3001.0;
    let mut tape = Tape::<f32>::new();
    let x = tape.param(normal(&mut Rng::new(2), &[16], 0.05));
    let mark = tape.mark();
    let s = plan.median_s(20, 20, 20_000, 8, || {
        let loss = w2_loss(&mut tape, x, false);
        tape.backward(loss).expect("W2 is well formed");
        tape.reset_to(mark);
    });
    emit("w2_small_op_ns_per_node", s * 1e9 / NODES, "ns");
    emit("w2_small_op_iter_ms", s * 1e3, "ms");

    // The same arithmetic as a user writes it in a `grad!` block: there the three ops of
    // an iteration are one fused node (1001 nodes in all).
    let s = plan.median_s(20, 20, 20_000, 8, || {
        let loss = w2_loss(&mut tape, x, true);
        tape.backward(loss).expect("W2 is well formed");
        tape.reset_to(mark);
    });
    emit("w2_grad_macro_iter_ms", s * 1e3, "ms");
}

/// W3: a, b [1024, 1024] params; sum(a @ b); backward: three 1024³ GEMMs.
fn w3(plan: Plan) {
    let s = w3_seconds(plan, Precision::F32);
    emit("w3_matmul_gflops", W3_FLOP / s / 1e9, "GFLOP/s");
    emit("w3_matmul_iter_ms", s * 1e3, "ms");
}

/// W3 with bf16 products (W10's first half): the same three GEMMs from
/// bf16-rounded operands, summed in f32; values and gradients f32.
fn w3_bf16(plan: Plan) {
    let s = w3_seconds(plan, Precision::Bf16);
    emit("w3_bf16_matmul_gflops", W3_FLOP / s / 1e9, "GFLOP/s");
    emit("w3_bf16_matmul_iter_ms", s * 1e3, "ms");
}

/// W3's flop: three 1024³ products.
const W3_FLOP: f64 = 6.0 * 1024.0 * 1024.0 * 1024.0;

/// The median seconds of one W3 iteration with products in `precision`.
fn w3_seconds(plan: Plan, precision: Precision) -> f64 {
    let mut rng = Rng::new(3);
    let mut tape = Tape::<f32>::new();
    tape.set_matmul_precision(precision).expect("an f32 tape computes in either precision");
    let a = tape.param(normal(&mut rng, &[1024, 1024], 0.05));
    let b = tape.param(normal(&mut rng, &[1024, 1024], 0.05));
    let mark = tape.mark();
    plan.median_s(3, 10, 1000, 10, || {
        let c = g_matmul(&mut tape, a, b);
        let loss = g_sum(&mut tape, c);
        tape.backward(loss).expect("W3 is well formed");
        tape.reset_to(mark);
    })
}

/// W4: single-head attention on x[8,64,64], forward + backward, no optimizer. The inputs
/// go onto the tape each iteration, as a training loop's batches would.
fn w4(plan: Plan) {
    let mut tape = Tape::<f32>::new();
    let model = Attention::new(&mut tape, 4);
    let mark = tape.mark();
    let s = plan.median_s(20, 20, 20_000, 8, || {
        model.step(&mut tape);
        tape.reset_to(mark);
    });
    emit("w4_attention_fwd_bwd_us", s * 1e6, "us");
}

/// W5: x[16M] param; sum(sigmoid(x) * x); backward.
fn w5(plan: Plan) {
    const N: usize = 1 << 24;
    /// Bytes an ideal fused implementation moves: read x, write the gradient, read x again.
    const BYTES: f64 = 4.0 * N as f64 * 3.0;
    let mut tape = Tape::<f32>::new();
    let x = tape.param(normal(&mut Rng::new(5), &[N], 1.0));
    let mark = tape.mark();
    let s = plan.median_s(3, 10, 1000, 10, || {
        let loss = w5_loss(&mut tape, x, false);
        tape.backward(loss).expect("W5 is well formed");
        tape.reset_to(mark);
    });
    emit("w5_bandwidth_gbs", BYTES / s / 1e9, "GB/s");
    emit("w5_bandwidth_ms", s * 1e3, "ms");

    // As a `grad!` block: one fused pass forward and one backward.
    let s = plan.median_s(3, 10, 1000, 10, || {
        let loss = w5_loss(&mut tape, x, true);
        tape.backward(loss).expect("W5 is well formed");
        tape.reset_to(mark);
    });
    emit("w5_grad_macro_gbs", BYTES / s / 1e9, "GB/s");
    emit("w5_grad_macro_ms", s * 1e3, "ms");
}

/// W6, measured in this process: it must be a fresh one (see `w6`).
fn w6_here(plan: Plan) {
    match common::steady_state(if plan.full { 2000 } else { 20 }) {
        Some(w6) => {
            emit("w6_peak_rss_mib", w6.peak_rss_mib, "MiB");
            emit("w6_rss_growth_mib", w6.rss_growth_mib, "MiB");
        }
        None => eprintln!("# w6: the resident set size is unavailable on this platform"),
    }
}

/// W6 in a fresh process of this same binary, so that W1..W5 do not inflate its peak.
fn w6(plan: Plan) {
    let exe = std::env::current_exe().expect("the path of this binary");
    let mode = if plan.full { "--bench" } else { "--smoke" };
    let out = std::process::Command::new(exe).args([mode, "w6-child"]).output().expect("a child process for W6");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the W6 child failed: {}", out.status);
}

/// W7: one training step of nanoGPT's GPT (`common/gpt.rs`: 4 layers, 4
/// heads, 128 wide, context 64, vocabulary 65) on a batch of 16 random
/// sequences: cross-entropy over every position, backward, AdamW (lr 1e-3,
/// β 0.9/0.95, ε 1e-8, decay 0.1 on the 2-D weights), clipping at 1, reset.
fn w7(plan: Plan) {
    let mut run = GptRun::new(Precision::F32);
    let s = plan.median_s(3, 10, 200, 10, || {
        run.step();
    });
    emit("w7_gpt_step_ms", s * 1e3, "ms");
    emit("w7_gpt_tokens_per_s", GptRun::TOKENS / s, "tok/s");
}

/// W7's model, optimizer and batches on a tape whose products are in `precision`.
struct GptRun {
    tape: Tape<f32>,
    model: common::gpt::Gpt,
    opt: AdamW,
    batches: Vec<(ndarray::Array2<usize>, ndarray::Array2<usize>)>,
    mark: Mark,
    steps: usize,
}

impl GptRun {
    const BATCH: usize = 16;
    /// Tokens per step: the batch times the context.
    const TOKENS: f64 = (Self::BATCH * 64) as f64;

    fn new(precision: Precision) -> GptRun {
        use common::gpt::{Config, Gpt};
        let config = Config::small(65);
        assert_eq!(config.block, 64);
        let mut tape = Tape::<f32>::new();
        tape.set_matmul_precision(precision).expect("an f32 tape computes in either precision");
        // `W10_SEED` draws another initialisation and other batches.
        let seed = std::env::var("W10_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(7);
        let mut rng = Rng::new(seed);
        let model = Gpt::new(&mut tape, &mut rng, config);
        let mut opt = AdamW::new(1e-3).betas(0.9, 0.95).eps(1e-8);
        opt.add_params(&tape, &model, |name| Gpt::weight_decay(name, 0.1)).expect("W7's parameters register");
        opt.set_clip(1.0).expect("a positive clip");
        let batches = (0..8)
            .map(|_| {
                let mut ids =
                    || ndarray::Array2::from_shape_fn((Self::BATCH, config.block), |_| (rng.next_u64() % 65) as usize);
                (ids(), ids())
            })
            .collect();
        let mark = tape.mark();
        GptRun { tape, model, opt, batches, mark, steps: 0 }
    }

    /// The same run with every initial parameter moved up by one ulp: the
    /// smallest change an f32 run can see, to tell how far two trajectories
    /// drift on their own.
    fn nudged(mut self) -> GptRun {
        for (name, var) in self.model.named_params() {
            let nudged = self.tape.value(var).mapv(f32::next_up);
            self.tape.set_value(var, nudged).unwrap_or_else(|e| panic!("{name} takes its own shape: {e}"));
        }
        self
    }

    /// The losses of `reference` and `other`, step by step, for `steps` steps.
    fn curves(mut reference: GptRun, mut other: GptRun, steps: usize) -> Vec<(f64, f64)> {
        (0..steps).map(|_| (f64::from(reference.step()), f64::from(other.step()))).collect()
    }

    /// One training step; its loss.
    fn step(&mut self) -> f32 {
        let tape = &mut self.tape;
        let (inputs, targets) = &self.batches[self.steps % self.batches.len()];
        self.steps += 1;
        let tokens = self.model.embed(tape, inputs.view());
        let logits = self.model.logits(tape, tokens);
        let loss = self.model.loss(tape, logits, targets.view());
        tape.backward(loss).expect("W7's loss is a scalar");
        let value = tape.scalar(loss);
        self.opt.step(tape).expect("W7's step");
        tape.reset_to(self.mark);
        value
    }
}

/// W10's second half: W7 with bf16 products (f32 values, gradients, master
/// weights and AdamW state), its step time, and how far its loss curve over
/// 200 steps strays from W7's in f32 from the same start on the same
/// batches: the largest (over all steps and from step 50 on), the mean and
/// the final relative gap, in percent (both curves, as a table, to the file
/// `W10_CURVES` names, when it is set). Then the floor of those gaps: the
/// same figures for two f32 runs whose initial parameters are one ulp
/// apart.
/// (The runs drift apart as they memorise the 8 batches, PyTorch's
/// autocast run alike: a gap of a few percent late in the curve is the
/// drift of two trajectories, not a bias. How far a one-ulp start drifts
/// depends on the trajectory: `W10_SEED=n` runs another one; see
/// benches/README.md.)
fn w10(plan: Plan) {
    let mut run = GptRun::new(Precision::Bf16);
    let s = plan.median_s(3, 10, 200, 10, || {
        run.step();
    });
    emit("w10_gpt_bf16_step_ms", s * 1e3, "ms");
    emit("w10_gpt_bf16_tokens_per_s", GptRun::TOKENS / s, "tok/s");
    let steps = if plan.full { 200 } else { 2 };
    let curves = GptRun::curves(GptRun::new(Precision::F32), GptRun::new(Precision::Bf16), steps);
    if let Some(path) = std::env::var_os("W10_CURVES") {
        let lines: String =
            curves.iter().enumerate().map(|(step, (f32_loss, bf16))| format!("{step}\t{f32_loss}\t{bf16}\n")).collect();
        std::fs::write(&path, format!("step\tf32\tbf16\n{lines}")).expect("W10_CURVES names a writable file");
    }
    let gaps = gaps_pct(&curves);
    emit("w10_loss_gap_max_pct", gaps.iter().copied().fold(0.0, f64::max), "%");
    emit("w10_loss_gap_max_after_50_pct", max_after_50(&gaps), "%");
    emit("w10_loss_gap_mean_pct", mean(&gaps), "%");
    emit("w10_loss_gap_final_pct", gaps[steps - 1], "%");
    let drift = gaps_pct(&GptRun::curves(GptRun::new(Precision::F32), GptRun::new(Precision::F32).nudged(), steps));
    emit("w10_f32_drift_max_after_50_pct", max_after_50(&drift), "%");
    emit("w10_f32_drift_mean_pct", mean(&drift), "%");
}

/// Each step's relative gap between two loss curves, in percent of the first.
fn gaps_pct(curves: &[(f64, f64)]) -> Vec<f64> {
    curves.iter().map(|(reference, other)| (other - reference).abs() / reference * 100.0).collect()
}

/// The mean gap over every step.
fn mean(gaps: &[f64]) -> f64 {
    gaps.iter().sum::<f64>() / gaps.len() as f64
}

/// The largest gap from step 50 on (the last, on a shorter run).
fn max_after_50(gaps: &[f64]) -> f64 {
    gaps.get(50..).unwrap_or(&gaps[gaps.len() - 1..]).iter().copied().fold(0.0, f64::max)
}

/// W8: x[32,16,32,32], w[32,16,3,3], b[32], stride 1, padding 1; loss =
/// sum(conv2d(x, w, b)); backward to x, w and b.
fn w8(plan: Plan) {
    let mut rng = grad_runtime::Rng::new(8);
    let mut tape = Tape::<f32>::new();
    let x = tape.param(normal(&mut rng, &[32, 16, 32, 32], 1.0));
    let w = tape.param(normal(&mut rng, &[32, 16, 3, 3], 0.1));
    let b = tape.param(normal(&mut rng, &[32], 0.1));
    let mark = tape.mark();
    let s = plan.median_s(5, 10, 500, 8, || {
        let y = g_conv2d(&mut tape, x, w, Some(b), [1, 1], [1, 1], [1, 1], 1);
        let loss = g_sum(&mut tape, y);
        tape.backward(loss).expect("W8's loss is a scalar");
        tape.reset_to(mark);
    });
    // Three convolutions' worth: the forward and the two gradients.
    const FLOP: f64 = 6.0 * 32.0 * 32.0 * 32.0 * 32.0 * 16.0 * 9.0;
    emit("w8_conv_step_ms", s * 1e3, "ms");
    emit("w8_conv_gflops", FLOP / s / 1e9, "GFLOP/s");
}

/// W9: the W1 MLP with tanh, mse; H·v in all four parameters: the
/// gradient recorded on the tape, then one backward through it seeded
/// with `v` (`Tape::hvp`); and the same written by hand (`grad_graph`,
/// then backward of `Σ ⟨g, v⟩`), which also computes the gradient's value.
fn w9(plan: Plan) {
    use grad_runtime::ndarray::ArrayD;
    use grad_runtime::{Rng, grad};
    let mut tape = Tape::<f32>::new();
    let model = Mlp::new(&mut tape, 1);
    let [w1, b1, w2, b2] = model.params;
    let mut rng = Rng::new(9);
    let shapes = [&[784, 256][..], &[256], &[256, 10], &[10]];
    let v = shapes.map(|shape| tape.constant(ArrayD::from_shape_fn(shape, |_| rng.normal() as f32)));
    // The data stays on the tape, as the peers hold theirs outside the timed loop.
    let (x, t) = (tape.constant(&model.x), tape.constant(&model.t));
    let mark = tape.mark();
    let s = plan.median_s(20, 10, 5_000, 8, || {
        let loss = grad!(tape; x: [64, 784], w1: [784, 256], w2: [256, 10], t: [64, 10];
            mse(tanh(x @ w1 + b1) @ w2 + b2, t));
        tape.hvp(loss, &model.params, &v).expect("W9 is differentiable twice");
        tape.reset_to(mark);
    });
    emit("w9_hvp_us", s * 1e6, "us");
    let s = plan.median_s(20, 10, 5_000, 8, || {
        let loss = grad!(tape; x: [64, 784], w1: [784, 256], w2: [256, 10], t: [64, 10];
            mse(tanh(x @ w1 + b1) @ w2 + b2, t));
        let g = tape.grad_graph(loss, &model.params).expect("W9 is differentiable twice");
        let (g1, g2, g3, g4) = (g[0], g[1], g[2], g[3]);
        let [v1, v2, v3, v4] = v;
        let gv = grad!(tape; sum(g1 * v1) + sum(g2 * v2) + sum(g3 * v3) + sum(g4 * v4));
        tape.backward(gv).expect("the H·v is well formed");
        tape.reset_to(mark);
    });
    emit("w9_hvp_grad_graph_us", s * 1e6, "us");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let plan = Plan { full: args.iter().any(|a| a == "--bench") };
    if !plan.full && !args.iter().any(|a| a == "--smoke") {
        println!("# smoke run (no --bench): one iteration per workload, the figures mean nothing");
    }
    // Workload names; flags (cargo's `--bench`, libtest-style options) are not ours.
    let mut names: Vec<&str> = args.iter().map(String::as_str).filter(|a| !a.starts_with('-')).collect();
    if names.is_empty() {
        names = WORKLOADS.to_vec();
    }
    for name in names {
        match name.to_ascii_lowercase().as_str() {
            "w1" => w1(plan),
            "w2" => w2(plan),
            "w3" => w3(plan),
            "w3_bf16" => w3_bf16(plan),
            "w4" => w4(plan),
            "w5" => w5(plan),
            "w6" => w6(plan),
            "w7" => w7(plan),
            "w8" => w8(plan),
            "w9" => w9(plan),
            "w10" => w10(plan),
            "w6-child" => w6_here(plan),
            other => {
                eprintln!("figures: unknown workload {other:?} (known: {})", WORKLOADS.join(" "));
                std::process::exit(2);
            }
        }
    }
}
