//! What the benchmark binaries share: seeded inputs, the W1 model, W2's and
//! W5's losses, W4's attention, W6's memory figures and W7's GPT (`gpt.rs`,
//! also the model of the char_gpt example).
#![allow(dead_code)] // each binary uses a different subset

pub mod gpt;

use grad_runtime::{
    Adam, Rng, Tape, Var, g_adds, g_bmm, g_matmul, g_mse, g_mul, g_muls, g_sigmoid, g_softmax, g_sum, g_tanh,
    g_transpose, grad,
};
use ndarray::{ArrayD, IxDyn};

/// Seeded normal values times `scale`, as the workloads ask (benches/README.md).
pub fn normal(rng: &mut Rng, shape: &[usize], scale: f32) -> ArrayD<f32> {
    ArrayD::from_shape_fn(IxDyn(shape), |_| rng.normal() as f32 * scale)
}

/// W1's model on a tape: x[64,784], t[64,10], w1[784,256], b1[256],
/// w2[256,10], b2[10], parameters at scale 0.05, all under an Adam(1e-3).
pub struct Mlp {
    pub x: ArrayD<f32>,
    pub t: ArrayD<f32>,
    pub params: [Var; 4],
    pub opt: Adam<f32>,
}

impl Mlp {
    pub fn new(tape: &mut Tape<f32>, seed: u64) -> Mlp {
        let mut rng = Rng::new(seed);
        let (x, t) = (normal(&mut rng, &[64, 784], 1.0), normal(&mut rng, &[64, 10], 1.0));
        let params =
            [&[784, 256][..], &[256], &[256, 10], &[10]].map(|shape| tape.param(normal(&mut rng, shape, 0.05)));
        let mut opt = Adam::new(1e-3);
        for p in params {
            opt.add(tape, p, 0.0).expect("a parameter of this tape");
        }
        Mlp { x, t, params, opt }
    }

    /// One training step: forward, mse, backward, Adam.
    pub fn step(&mut self, tape: &mut Tape<f32>) {
        use grad_runtime::{g_add, g_matmul, g_mse, g_relu};
        let [w1, b1, w2, b2] = self.params;
        let (x, t) = (tape.constant(&self.x), tape.constant(&self.t));
        let xw = g_matmul(tape, x, w1);
        let z = g_add(tape, xw, b1);
        let h = g_relu(tape, z);
        let hw = g_matmul(tape, h, w2);
        let y = g_add(tape, hw, b2);
        let loss = g_mse(tape, y, t);
        tape.backward(loss).expect("the step is well formed");
        self.opt.step(tape).expect("the step is well formed");
    }

    /// The same step written with `grad!`: `relu(x @ w1 + b1)` is a
    /// product and one fused node (bias and relu in one pass).
    pub fn step_fused(&mut self, tape: &mut Tape<f32>) {
        use grad_runtime::grad;
        let [w1, b1, w2, b2] = self.params;
        let (x, t) = (tape.constant(&self.x), tape.constant(&self.t));
        let loss = grad!(tape; let h = relu(x @ w1 + b1); mse(h @ w2 + b2, t));
        tape.backward(loss).expect("the step is well formed");
        self.opt.step(tape).expect("the step is well formed");
    }
}

/// W2's loss on `x`: 1000 × `h = tanh(h * 0.9 + 0.1)`, then `sum(h)`. With
/// one `g_*` call per op (3001 nodes), or each link a `grad!` block, one
/// fused node (1001 nodes).
pub fn w2_loss(tape: &mut Tape<f32>, x: Var, fused: bool) -> Var {
    let mut h = x;
    for _ in 0..1000 {
        h = if fused {
            grad!(tape; tanh(h * 0.9 + 0.1))
        } else {
            let scaled = g_muls(tape, h, 0.9);
            let shifted = g_adds(tape, scaled, 0.1);
            g_tanh(tape, shifted)
        };
    }
    g_sum(tape, h)
}

/// W5's loss `sum(sigmoid(x) * x)`: three `g_*` nodes, or one fused node
/// (`grad!`) that stores nothing for its backward.
pub fn w5_loss(tape: &mut Tape<f32>, x: Var, fused: bool) -> Var {
    if fused {
        return grad!(tape; sum(sigmoid(x) * x));
    }
    let s = g_sigmoid(tape, x);
    let sx = g_mul(tape, s, x);
    g_sum(tape, sx)
}

/// W4's model: single-head attention on x[8,64,64] against t[8,64,64],
/// four [64,64] projections at scale 0.05.
pub struct Attention {
    pub x: ArrayD<f32>,
    pub t: ArrayD<f32>,
    pub weights: [Var; 4],
}

impl Attention {
    pub fn new(tape: &mut Tape<f32>, seed: u64) -> Attention {
        let mut rng = Rng::new(seed);
        let (x, t) = (normal(&mut rng, &[8, 64, 64], 1.0), normal(&mut rng, &[8, 64, 64], 1.0));
        let weights = [(); 4].map(|_| tape.param(normal(&mut rng, &[64, 64], 0.05)));
        Attention { x, t, weights }
    }

    /// Forward, mse and backward, no optimizer. The inputs go onto the tape
    /// each step, as a training loop's batches would.
    pub fn step(&self, tape: &mut Tape<f32>) {
        let [wq, wk, wv, wo] = self.weights;
        let (x, t) = (tape.constant(&self.x), tape.constant(&self.t));
        let q = g_matmul(tape, x, wq);
        let k = g_matmul(tape, x, wk);
        let v = g_matmul(tape, x, wv);
        let kt = g_transpose(tape, k);
        let s = g_bmm(tape, q, kt);
        let s = g_muls(tape, s, 0.125);
        let p = g_softmax(tape, s, -1);
        let o = g_bmm(tape, p, v);
        let y = g_matmul(tape, o, wo);
        let loss = g_mse(tape, y, t);
        tape.backward(loss).expect("W4 is well formed");
    }
}

/// A field of /proc/self/status in KiB (`VmRSS`, `VmHWM`), if the platform has it.
pub fn status_kib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// W6's figures, in MiB: the peak resident set, and its growth from step 100 to the last step.
pub struct SteadyState {
    pub peak_rss_mib: f64,
    pub rss_growth_mib: f64,
}

/// W6: the W1 step `steps` times with the tape reset to its mark after each step. `None`
/// where the platform has no /proc/self/status. Run it in a fresh process: the peak
/// resident set is the process's, so earlier work would inflate it.
pub fn steady_state(steps: usize) -> Option<SteadyState> {
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
    let late = status_kib("VmRSS:")?;
    let early = rss_at_100.unwrap_or(late);
    Some(SteadyState { peak_rss_mib: status_kib("VmHWM:")? / 1024.0, rss_growth_mib: (late - early) / 1024.0 })
}
