//! A nested model for the save/load and resume tests (a struct in a
//! struct, a `Vec` of layers, an `Option`, an array, a skipped field), its
//! training step, bit-level snapshots, and scratch directories.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};

use grad_runtime::{Float, Params, Rng, Tape, Var, grad};
use ndarray::{ArrayD, IxDyn};

#[derive(Params)]
pub struct Dense {
    pub w: Var,
    pub b: Var,
}

#[derive(Params)]
pub struct Block {
    pub inner: Dense,
    pub gate: Option<Dense>,
    #[params(skip)]
    pub label: &'static str,
}

#[derive(Params)]
pub struct Net {
    pub layers: Vec<Block>,
    pub head: Dense,
    pub scales: [Var; 2],
}

/// The names `Net` must list, in order.
pub const NET_NAMES: [&str; 10] = [
    "layers.0.inner.w",
    "layers.0.inner.b",
    "layers.0.gate.w",
    "layers.0.gate.b",
    // layers.1 has no gate
    "layers.1.inner.w",
    "layers.1.inner.b",
    "head.w",
    "head.b",
    "scales.0",
    "scales.1",
];

pub fn array<T: Float>(rng: &mut Rng, shape: &[usize]) -> ArrayD<T> {
    ArrayD::from_shape_fn(IxDyn(shape), |_| T::from_f64(rng.normal() * 0.5))
}

fn dense<T: Float>(tape: &mut Tape<T>, rng: &mut Rng, fan_in: usize, fan_out: usize) -> Dense {
    Dense { w: tape.param(array::<T>(rng, &[fan_in, fan_out])), b: tape.param(array::<T>(rng, &[fan_out])) }
}

/// `Net` with inputs of 3 features and 2 outputs, values drawn from `seed`.
pub fn net<T: Float>(tape: &mut Tape<T>, seed: u64) -> Net {
    let mut rng = Rng::new(seed);
    let first = Block { inner: dense(tape, &mut rng, 3, 4), gate: Some(dense(tape, &mut rng, 3, 4)), label: "first" };
    let second = Block { inner: dense(tape, &mut rng, 4, 4), gate: None, label: "second" };
    let head = dense(tape, &mut rng, 4, 2);
    let scales = [tape.param(array::<T>(&mut rng, &[1])), tape.param(array::<T>(&mut rng, &[]))];
    Net { layers: vec![first, second], head, scales }
}

impl Net {
    /// The model's loss on a batch `x: [B, 3]`, `t: [B, 2]`.
    pub fn loss<T: Float>(&self, tape: &mut Tape<T>, x: Var, t: Var) -> Var {
        let (l0, l1, head) = (&self.layers[0], &self.layers[1], &self.head);
        let gate = l0.gate.as_ref().expect("the first block has a gate");
        let (w0, b0, g0, gb0, w1, b1) = (l0.inner.w, l0.inner.b, gate.w, gate.b, l1.inner.w, l1.inner.b);
        let (hw, hb, s0, s1) = (head.w, head.b, self.scales[0], self.scales[1]);
        grad!(tape; x: [B, 3], t: [B, 2], w0: [3, 4], g0: [3, 4], w1: [4, 4], hw: [4, 2];
            let h0 = tanh(x @ w0 + b0) * sigmoid(x @ g0 + gb0);
            let h1 = tanh(h0 @ w1 + b1) * s0;
            mse((h1 @ hw + hb) * s1, t))
    }
}

/// Batch `step` of a fixed data stream: `x: [5, 3]`, `t: [5, 2]`.
pub fn batch<T: Float>(step: u64) -> (ArrayD<T>, ArrayD<T>) {
    let mut rng = Rng::new(1000 + step);
    (array(&mut rng, &[5, 3]), array(&mut rng, &[5, 2]))
}

/// Every parameter's value as bits, in `named_params` order.
pub fn snapshot<T: Float>(tape: &Tape<T>, model: &impl Params) -> Vec<(String, Vec<usize>, Vec<u64>)> {
    model
        .named_params()
        .into_iter()
        .map(|(name, var)| {
            let value = tape.value(var);
            (name, value.shape().to_vec(), value.iter().map(|&x| Float::to_f64(x).to_bits()).collect())
        })
        .collect()
}

/// A fresh, empty directory for one test, removed with everything in it
/// when the test is done with it (also when it fails: dropped while the
/// panic unwinds), so test runs leave nothing behind in the temp dir.
pub fn scratch(test: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("grad-test-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir is writable");
    Scratch(dir)
}

/// The directory [`scratch`] made; a `Path` by deref.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The files in `dir`, sorted (to see that a save left no temporary file).
pub fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("dir exists")
        .map(|entry| entry.expect("readable").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
