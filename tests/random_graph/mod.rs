//! Random graphs of the runtime's differentiable ops, for the property
//! tests (`property_graphs.rs`, `faults.rs`).
//!
//! proptest draws a list of raw choices (numbers); [`Graph::build`] reads
//! them into a valid graph over random shapes: operands picked among the
//! earlier nodes (so values fan out), broadcasting partners made up as new
//! parameters, and the small steps an op needs to apply (a reshape to 2-D
//! before a matmul, `x·x + 0.5` before a log) written into the graph as
//! steps of their own. Shrinking removes and lowers raw choices, so a
//! failure shrinks to a short graph, printed as one op per line.
#![allow(dead_code)] // each test binary uses a different subset

use std::fmt;

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::{Strategy, any, prop};

/// Case counts are multiplied by this environment variable (default 1):
/// `GRAD_PROPTEST_SCALE=100` runs 100 times as many random graphs.
pub fn scaled(cases: u32) -> u32 {
    let scale = std::env::var("GRAD_PROPTEST_SCALE").ok().and_then(|s| s.parse::<u32>().ok()).unwrap_or(1);
    cases.saturating_mul(scale.max(1))
}

/// One node of a graph: a new parameter, or an op on earlier nodes (by index).
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Param(Vec<usize>),
    Add(usize, usize),
    Sub(usize, usize),
    Mul(usize, usize),
    Div(usize, usize),
    Unary(&'static str, usize),
    Adds(usize, f64),
    Muls(usize, f64),
    Pow(usize, f64),
    LeakyRelu(usize, f64),
    Clamp(usize, f64, f64),
    Sum(usize),
    Mean(usize),
    ReduceAxis(&'static str, usize, isize, bool),
    MatMul(usize, usize),
    Bmm(usize, usize),
    Transpose(usize),
    Permute(usize, Vec<usize>),
    /// Queries, keys, values, causal.
    Attention(usize, usize, usize, bool),
    /// A packed `qkv`, heads, causal.
    AttentionPacked(usize, usize, bool),
    Reshape(usize, Vec<usize>),
    Slice(usize, Vec<usize>, Vec<usize>),
    Concat(usize, usize, usize),
    Softmax(usize, isize),
    LogSoftmax(usize, isize),
    Mse(usize, usize),
    /// Targets flat or shaped as the logits' leading dims.
    CrossEntropy(usize, ArrayD<usize>),
    /// Ids of rank 1 or 2.
    Embedding(usize, ArrayD<usize>),
    LayerNorm(usize, usize, usize),
    Dropout(usize, f64, u64),
    Flatten(usize, isize),
    Cumsum(usize, isize),
    IndexSelect(usize, isize, Vec<usize>),
    /// `gather(x, axis, indices)`, the indices of `x`'s shape, row-major.
    Gather(usize, isize, Vec<usize>),
    /// `where(mask, a, b)`, the mask of `a`'s shape, row-major.
    Where(Vec<bool>, usize, usize),
    MaskedFill(usize, Vec<bool>, f64),
    /// `conv2d(x, w, b, stride, padding)` (dilation 1, one group).
    Conv2d(usize, usize, Option<usize>, [usize; 2], [usize; 2]),
    /// A 2-D pool, `max` or `avg`: kernel, stride, padding.
    Pool2d(&'static str, usize, [usize; 2], [usize; 2], [usize; 2]),
    /// `batch_norm(x, fresh running statistics, gamma, beta, train)`.
    BatchNorm(usize, usize, usize, bool),
    /// `group_norm(x, groups, gamma, beta)`.
    GroupNorm(usize, usize, usize, usize),
    Detach(usize),
    /// `checkpoint(tanh(a) * b)`: a segment recomputed in backward.
    Checkpoint(usize, usize),
    /// A custom op of `tests/common/custom_ops.rs` on its operands:
    /// `stable_softplus(x)` or `mul_add(x, y, z)`.
    Custom(&'static str, Vec<usize>),
    /// `grad(sum(y), x)`: a gradient recorded as ops, so that the finite
    /// differences of the loss check second derivatives.
    GradOf(usize, usize),
}

/// The unary ops without a parameter (their `g_*` name without `g_`).
const UNARY: [&str; 11] = ["neg", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "gelu", "silu", "softplus"];

/// A graph: its steps (parameters included), each node's shape, and the
/// seed its parameter values are drawn from.
#[derive(Clone, PartialEq)]
pub struct Graph {
    pub steps: Vec<Step>,
    pub shapes: Vec<Vec<usize>>,
    pub seed: u64,
}

/// One raw choice: an op kind and three numbers it reads as it needs.
pub type Raw = (u8, u16, u16, u16);

/// Random graphs of up to `max_ops` raw ops.
pub fn graphs(max_ops: usize) -> impl Strategy<Value = Graph> {
    (prop::collection::vec(any::<Raw>(), 1..=max_ops), any::<u64>(), prop::collection::vec(any::<u16>(), 1..=3))
        .prop_map(|(raw, seed, leaves)| Graph::build(&raw, &leaves, seed))
}

impl Graph {
    /// Reads raw choices into a valid graph: `leaves` make the first
    /// parameters' shapes, each of `raw` one op (with the steps it needs).
    pub fn build(raw: &[Raw], leaves: &[u16], seed: u64) -> Graph {
        let mut g = Graph { steps: Vec::new(), shapes: Vec::new(), seed };
        for &l in leaves {
            g.param(small_shape(l));
        }
        for &(kind, r1, r2, r3) in raw {
            g.op(kind, r1 as usize, r2 as usize, r3 as usize);
        }
        g
    }

    fn push(&mut self, step: Step, shape: Vec<usize>) -> usize {
        self.steps.push(step);
        self.shapes.push(shape);
        self.steps.len() - 1
    }

    fn param(&mut self, shape: Vec<usize>) -> usize {
        self.push(Step::Param(shape.clone()), shape)
    }

    fn len_of(&self, x: usize) -> usize {
        self.shapes[x].iter().product()
    }

    /// `x` as a matrix: reshaped to `[rows, last]` if it is not 2-D.
    fn as_matrix(&mut self, x: usize) -> usize {
        let shape = self.shapes[x].clone();
        match shape.len() {
            2 => x,
            0 | 1 => self.push(Step::Reshape(x, vec![1, self.len_of(x)]), vec![1, self.len_of(x)]),
            _ => {
                let last = shape[shape.len() - 1];
                let target = vec![self.len_of(x) / last, last];
                self.push(Step::Reshape(x, target.clone()), target)
            }
        }
    }

    /// `x` with at least one dim (a scalar becomes `[1]`).
    fn at_least_1d(&mut self, x: usize) -> usize {
        if self.shapes[x].is_empty() { self.push(Step::Reshape(x, vec![1]), vec![1]) } else { x }
    }

    /// `x · x + 0.5`: strictly positive, for log, sqrt, a divisor, a fractional power.
    fn positive(&mut self, x: usize) -> usize {
        let shape = self.shapes[x].clone();
        let square = self.push(Step::Mul(x, x), shape.clone());
        self.push(Step::Adds(square, 0.5), shape)
    }

    fn op(&mut self, kind: u8, r1: usize, r2: usize, r3: usize) {
        let n = self.steps.len();
        let a = r1 % n;
        let sa = self.shapes[a].clone();
        match kind % 32 {
            0..=3 => {
                let b = self.partner(a, r2, r3);
                let b = if kind % 32 == 3 { self.positive(b) } else { b };
                let shape = broadcast(&sa, &self.shapes[b]).expect("partners broadcast");
                let step =
                    [Step::Add(a, b), Step::Sub(a, b), Step::Mul(a, b), Step::Div(a, b)][kind as usize % 32].clone();
                self.push(step, shape);
            }
            4 | 5 => {
                let name = UNARY[r2 % UNARY.len()];
                let x = match name {
                    "log" | "sqrt" => self.positive(a),
                    "exp" => self.push(Step::Unary("tanh", a), sa.clone()),
                    _ => a,
                };
                self.push(Step::Unary(name, x), sa);
            }
            6 => {
                let s = [0.5, -1.25, 2.0, 0.1][r2 % 4];
                let step = if r3.is_multiple_of(2) { Step::Adds(a, s) } else { Step::Muls(a, s) };
                self.push(step, sa);
            }
            7 => {
                let p = [2.0, 3.0, 0.5, -1.5][r2 % 4];
                let x = if p == 2.0 || p == 3.0 { a } else { self.positive(a) };
                self.push(Step::Pow(x, p), sa);
            }
            8 => {
                let step = if r2.is_multiple_of(2) { Step::LeakyRelu(a, 0.1) } else { Step::Clamp(a, -0.7, 0.6) };
                self.push(step, sa);
            }
            9 => {
                let step = if r2.is_multiple_of(2) { Step::Sum(a) } else { Step::Mean(a) };
                self.push(step, vec![]);
            }
            10 | 11 => {
                let x = self.at_least_1d(a);
                let shape = self.shapes[x].clone();
                let name = ["sum", "mean", "max", "min"][r2 % 4];
                let axis = (r3 % shape.len()) as isize - if r3.is_multiple_of(2) { 0 } else { shape.len() as isize };
                let keepdim = r2.is_multiple_of(3);
                let index = axis.rem_euclid(shape.len() as isize) as usize;
                let mut out = shape;
                if keepdim {
                    out[index] = 1;
                } else {
                    out.remove(index);
                }
                self.push(Step::ReduceAxis(name, x, axis, keepdim), out);
            }
            12 | 13 => self.matmul(a, r2, r3),
            14 if r2.is_multiple_of(6) => {
                // The rows of `a` projected to queries, keys and values of 1-2 heads, attending.
                let x = self.as_matrix(a);
                let (m, d) = (self.shapes[x][0], self.shapes[x][1]);
                let (heads, width) = (1 + r3 % 2, 1 + (r3 / 2) % 3);
                let w = self.param(vec![d, 3 * heads * width]);
                let qkv = self.push(Step::MatMul(x, w), vec![m, 3 * heads * width]);
                self.push(Step::AttentionPacked(qkv, heads, r3.is_multiple_of(3)), vec![m, heads * width]);
            }
            14 if r2.is_multiple_of(3) => {
                // The rows of `a` attend over keys and values of their own.
                let x = self.as_matrix(a);
                let (m, d) = (self.shapes[x][0], self.shapes[x][1]);
                let q = self.push(Step::Reshape(x, vec![1, m, d]), vec![1, m, d]);
                let (tk, dv) = (1 + r3 % 4, 1 + (r3 / 4) % 3);
                let (k, v) = (self.param(vec![1, tk, d]), self.param(vec![1, tk, dv]));
                self.push(Step::Attention(q, k, v, r3.is_multiple_of(2)), vec![1, m, dv]);
            }
            14 => {
                let x = self.as_matrix(a);
                let (m, k) = (self.shapes[x][0], self.shapes[x][1]);
                let batch = 1 + r2 % 2;
                let left = if batch == 1 {
                    self.push(Step::Reshape(x, vec![1, m, k]), vec![1, m, k])
                } else {
                    let other = self.param(vec![1, m, k]);
                    let stacked = self.push(Step::Reshape(x, vec![1, m, k]), vec![1, m, k]);
                    self.push(Step::Concat(stacked, other, 0), vec![2, m, k])
                };
                let nn = 1 + r3 % 3;
                let right = self.param(vec![batch, k, nn]);
                self.push(Step::Bmm(left, right), vec![batch, m, nn]);
            }
            15 if r2.is_multiple_of(2) || self.shapes[a].len() < 2 => {
                let x = self.as_matrix(a);
                let mut shape = self.shapes[x].clone();
                shape.swap(0, 1);
                self.push(Step::Transpose(x), shape);
            }
            15 => {
                // A rotation of the axes by r3 places.
                let rank = self.shapes[a].len();
                let axes: Vec<usize> = (0..rank).map(|d| (d + r3) % rank).collect();
                let shape = axes.iter().map(|&d| self.shapes[a][d]).collect();
                self.push(Step::Permute(a, axes), shape);
            }
            16 => {
                let len = self.len_of(a);
                let target = reshape_target(len, r2);
                self.push(Step::Reshape(a, target.clone()), target);
            }
            17 => {
                let x = self.at_least_1d(a);
                let shape = self.shapes[x].clone();
                let (mut starts, mut stops) = (Vec::new(), Vec::new());
                for (i, &d) in shape.iter().enumerate() {
                    let start = (r2 >> i) % d;
                    starts.push(start);
                    stops.push(start + 1 + (r3 >> i) % (d - start));
                }
                let out = starts.iter().zip(&stops).map(|(s, e)| e - s).collect();
                self.push(Step::Slice(x, starts, stops), out);
            }
            18 => {
                let x = self.at_least_1d(a);
                let shape = self.shapes[x].clone();
                let axis = r2 % shape.len();
                let b = if r3.is_multiple_of(2) {
                    x
                } else {
                    let mut other = shape.clone();
                    other[axis] = 1 + r3 % 3;
                    self.param(other)
                };
                let mut out = shape;
                out[axis] += self.shapes[b][axis];
                self.push(Step::Concat(x, b, axis), out);
            }
            19 => {
                let x = self.at_least_1d(a);
                let rank = self.shapes[x].len() as isize;
                let axis = (r2 as isize % (2 * rank)) - rank;
                let step = if r3.is_multiple_of(2) { Step::Softmax(x, axis) } else { Step::LogSoftmax(x, axis) };
                self.push(step, self.shapes[x].clone());
            }
            20 => {
                let b = self.same_shape(a, r2);
                self.push(Step::Mse(a, b), vec![]);
            }
            21 => {
                if r3.is_multiple_of(2) {
                    // N-D logits as they are (targets of their leading
                    // shape, or flat), else made a matrix.
                    let x = if self.shapes[a].len() >= 3 { a } else { self.as_matrix(a) };
                    let shape = &self.shapes[x];
                    let (leading, classes) = (&shape[..shape.len() - 1], shape[shape.len() - 1]);
                    let rows: usize = leading.iter().product();
                    let flat: Vec<usize> = (0..rows).map(|i| (r2 + 7 * i) % classes).collect();
                    let targets_shape = if r3.is_multiple_of(4) { leading.to_vec() } else { vec![rows] };
                    let targets = ArrayD::from_shape_vec(IxDyn(&targets_shape), flat).unwrap();
                    self.push(Step::CrossEntropy(x, targets), vec![]);
                } else {
                    let x = self.as_matrix(a);
                    let (rows, cols) = (self.shapes[x][0], self.shapes[x][1]);
                    let count = 1 + r2 % 4;
                    let flat: Vec<usize> = (0..count).map(|i| (r2 + 5 * i) % rows).collect();
                    let ids_shape =
                        if r3 % 4 == 1 && count.is_multiple_of(2) { vec![2, count / 2] } else { vec![count] };
                    let ids = ArrayD::from_shape_vec(IxDyn(&ids_shape), flat).unwrap();
                    let mut out = ids_shape;
                    out.push(cols);
                    self.push(Step::Embedding(x, ids), out);
                }
            }
            22 => {
                let x = self.at_least_1d(a);
                let d = *self.shapes[x].last().unwrap();
                let (gamma, beta) = (self.param(vec![d]), self.param(vec![d]));
                self.push(Step::LayerNorm(x, gamma, beta), self.shapes[x].clone());
            }
            23 => {
                let p = [0.0, 0.25, 0.5][r2 % 3];
                self.push(Step::Dropout(a, p, r3 as u64), sa);
            }
            24 => self.along_axis(a, r2, r3),
            25 => self.indexing(a, r2, r3),
            26 => {
                let mask: Vec<bool> =
                    (0..self.len_of(a)).map(|i| (r2 >> (i % 16)) & 1 == (r3 >> (i % 7)) & 1).collect();
                if r3.is_multiple_of(2) {
                    let b = self.same_shape(a, r2);
                    self.push(Step::Where(mask, a, b), sa);
                } else {
                    self.push(Step::MaskedFill(a, mask, 0.3), sa);
                }
            }
            27 => self.norm(a, r2),
            28 => {
                if r2.is_multiple_of(2) {
                    self.push(Step::Detach(a), sa);
                } else {
                    let b = self.same_shape(a, r3);
                    self.push(Step::Checkpoint(a, b), sa);
                }
            }
            29 => {
                if r2.is_multiple_of(2) {
                    self.push(Step::Custom("stable_softplus", vec![a]), sa);
                } else {
                    let (b, c) = (self.same_shape(a, r2), self.same_shape(a, r3));
                    self.push(Step::Custom("mul_add", vec![a, b, c]), sa);
                }
            }
            30 => self.grad_of(a, r2),
            _ => self.image(a, r2, r3),
        }
    }

    /// Batch norm (training when every channel has two values or more) or
    /// group norm (one group, or one per channel) of `a` as `[N, C, ...]`.
    fn norm(&mut self, a: usize, r2: usize) {
        let x = if self.shapes[a].len() < 2 { self.as_matrix(a) } else { a };
        let shape = self.shapes[x].clone();
        let c = shape[1];
        let (gamma, beta) = (self.param(vec![c]), self.param(vec![c]));
        let per_channel = self.len_of(x) / c.max(1);
        let step = match r2 % 3 {
            0 => Step::BatchNorm(x, gamma, beta, per_channel >= 2),
            1 => Step::BatchNorm(x, gamma, beta, false),
            _ => Step::GroupNorm(x, if r2.is_multiple_of(2) { 1 } else { c }, gamma, beta),
        };
        self.push(step, shape);
    }

    /// `grad(sum(a), p)` for a parameter `p` (every op the generator makes
    /// has its backward written as ops: convolutions have one group).
    fn grad_of(&mut self, a: usize, r2: usize) {
        let params = self.params();
        let x = params[r2 % params.len()];
        let shape = self.shapes[x].clone();
        self.push(Step::GradOf(a, x), shape);
    }

    /// `flatten` or `cumsum` along a random axis of `a`.
    fn along_axis(&mut self, a: usize, r2: usize, r3: usize) {
        let x = self.at_least_1d(a);
        let shape = self.shapes[x].clone();
        let rank = shape.len();
        let index = r2 % rank;
        let axis = if r3.is_multiple_of(2) { index as isize } else { index as isize - rank as isize };
        if r3.is_multiple_of(3) {
            let mut out = shape[..index].to_vec();
            out.push(shape[index..].iter().product());
            self.push(Step::Flatten(x, axis), out);
        } else {
            self.push(Step::Cumsum(x, axis), shape);
        }
    }

    /// `index_select` or `gather` along a random axis of `a`, repeats included.
    fn indexing(&mut self, a: usize, r2: usize, r3: usize) {
        let x = self.at_least_1d(a);
        let shape = self.shapes[x].clone();
        let index = r2 % shape.len();
        let (axis, d) = (index as isize, shape[index]);
        if r3.is_multiple_of(2) {
            let ids: Vec<usize> = (0..1 + r3 % 4).map(|i| (r2 + 3 * i) % d).collect();
            let mut out = shape;
            out[index] = ids.len();
            self.push(Step::IndexSelect(x, axis, ids), out);
        } else {
            let ids = (0..self.len_of(x)).map(|i| (r2 + 7 * i) % d).collect();
            self.push(Step::Gather(x, axis, ids), shape);
        }
    }

    /// `a` as a one-channel image `[1, 1, h, w]` through a small convolution
    /// (with or without bias) or a max or average pool.
    fn image(&mut self, a: usize, r2: usize, r3: usize) {
        let m = self.as_matrix(a);
        let (h, w) = (self.shapes[m][0], self.shapes[m][1]);
        let x = self.push(Step::Reshape(m, vec![1, 1, h, w]), vec![1, 1, h, w]);
        let kernel = [1 + r2 % 2, 1 + (r2 >> 1) % 2];
        // PyTorch's limit for pools: padding at most half the kernel.
        let padding = [(r3 % 2).min(kernel[0] / 2), ((r3 >> 1) % 2).min(kernel[1] / 2)];
        let kernel = [kernel[0].min(h + 2 * padding[0]), kernel[1].min(w + 2 * padding[1])];
        let stride = [1 + (r3 >> 2) % 2, 1 + (r3 >> 3) % 2];
        let out = |size: usize, k: usize, p: usize, s: usize| (size + 2 * p - k) / s + 1;
        let (oh, ow) = (out(h, kernel[0], padding[0], stride[0]), out(w, kernel[1], padding[1], stride[1]));
        match r2 % 3 {
            0 => {
                let channels = 1 + (r3 >> 4) % 2;
                let weight = self.param(vec![channels, 1, kernel[0], kernel[1]]);
                let bias = (r3 >> 5).is_multiple_of(2).then(|| self.param(vec![channels]));
                self.push(Step::Conv2d(x, weight, bias, stride, padding), vec![1, channels, oh, ow]);
            }
            kind => {
                let name = if kind == 1 { "max" } else { "avg" };
                self.push(Step::Pool2d(name, x, kernel, stride, padding), vec![1, 1, oh, ow]);
            }
        }
    }

    /// An operand that broadcasts with `a`: an earlier node if one does,
    /// else a new parameter shaped as `a` with some dims set to 1, some
    /// leading ones dropped, or a 1 of `a` stretched (so both operands broadcast).
    fn partner(&mut self, a: usize, r2: usize, r3: usize) -> usize {
        let candidate = r2 % self.steps.len();
        if !r3.is_multiple_of(3) && broadcast(&self.shapes[a], &self.shapes[candidate]).is_some() {
            return candidate;
        }
        let sa = &self.shapes[a];
        let drop = if sa.is_empty() { 0 } else { r3 % (sa.len() + 1) % 2 };
        let shape = sa[drop..]
            .iter()
            .enumerate()
            .map(|(i, &d)| match (r2 >> i) % 3 {
                0 => 1,
                1 if d == 1 => 2 + (r3 >> i) % 2,
                _ => d,
            })
            .collect();
        self.param(shape)
    }

    /// A node of `a`'s shape: an earlier one if there is, else a new parameter.
    fn same_shape(&mut self, a: usize, r: usize) -> usize {
        let n = self.steps.len();
        (0..n).map(|i| (r + i) % n).find(|&i| i != a && self.shapes[i] == self.shapes[a]).unwrap_or_else(|| {
            let shape = self.shapes[a].clone();
            self.param(shape)
        })
    }

    fn matmul(&mut self, a: usize, r2: usize, r3: usize) {
        let x = if self.shapes[a].len() < 2 { self.as_matrix(a) } else { a };
        let sx = self.shapes[x].clone();
        let k = sx[sx.len() - 1];
        let nn = 1 + r2 % 3;
        // The right operand: a matrix, or a stack whose batch dims broadcast with x's.
        let rhs = if r3.is_multiple_of(3) && sx.len() >= 3 {
            let batch = &sx[..sx.len() - 2];
            let mut shape: Vec<usize> =
                batch.iter().enumerate().map(|(i, &d)| if (r3 >> i).is_multiple_of(2) { 1 } else { d }).collect();
            shape.extend([k, nn]);
            shape
        } else if r3 % 3 == 1 {
            // A stack: it stretches a matrix, and broadcasts with any batch.
            vec![if sx.len() == 2 { 2 } else { 1 }, k, nn]
        } else {
            vec![k, nn]
        };
        let b = self.param(rhs.clone());
        let mut out: Vec<usize> = if rhs.len() == 2 {
            sx[..sx.len() - 1].to_vec()
        } else {
            let batch = broadcast(&sx[..sx.len() - 2], &rhs[..rhs.len() - 2]).expect("batch dims broadcast");
            let mut o = batch;
            o.push(sx[sx.len() - 2]);
            o
        };
        out.push(nn);
        self.push(Step::MatMul(x, b), out);
    }

    /// The indices of the parameter steps, in order.
    pub fn params(&self) -> Vec<usize> {
        (0..self.steps.len()).filter(|&i| matches!(self.steps[i], Step::Param(_))).collect()
    }

    /// Nodes no later step uses: what the loss sums.
    pub fn sinks(&self) -> Vec<usize> {
        let mut used = vec![false; self.steps.len()];
        for step in &self.steps {
            for x in operands(step) {
                used[x] = true;
            }
        }
        (0..self.steps.len()).filter(|&i| !used[i]).collect()
    }

    /// Parameter values drawn from the graph's seed, one array per parameter.
    pub fn param_values(&self) -> Vec<ArrayD<f64>> {
        let mut rng = grad_runtime::Rng::new(self.seed);
        self.params().iter().map(|&i| ArrayD::from_shape_fn(IxDyn(&self.shapes[i]), |_| rng.normal())).collect()
    }

    /// Records the graph on `tape` (parameters given as handles, in
    /// order): every node's handle. `pre(i, tape, nodes)` runs before step
    /// `i` and may return a replacement handle for it (how `faults.rs`
    /// injects a fault).
    pub fn record<T: Float>(
        &self,
        tape: &mut Tape<T>,
        params: &[Var],
        mut pre: impl FnMut(usize, &mut Tape<T>, &[Var]) -> Option<Var>,
    ) -> Vec<Var> {
        let mut nodes: Vec<Var> = Vec::with_capacity(self.steps.len());
        for i in 0..self.steps.len() {
            let v = match pre(i, tape, &nodes) {
                Some(v) => v,
                None => self.record_step(i, tape, &nodes, params),
            };
            nodes.push(v);
        }
        nodes
    }

    /// Records step `i` on `tape`, its operands read from `nodes`.
    pub fn record_step<T: Float>(&self, i: usize, tape: &mut Tape<T>, nodes: &[Var], params: &[Var]) -> Var {
        let v = |k: usize| nodes[k];
        let s = |x: f64| T::from_f64(x);
        match &self.steps[i] {
            Step::Param(_) => params[self.steps[..i].iter().filter(|s| matches!(s, Step::Param(_))).count()],
            Step::Add(a, b) => g_add(tape, v(*a), v(*b)),
            Step::Sub(a, b) => g_sub(tape, v(*a), v(*b)),
            Step::Mul(a, b) => g_mul(tape, v(*a), v(*b)),
            Step::Div(a, b) => g_div(tape, v(*a), v(*b)),
            Step::Unary(name, a) => unary(name, tape, v(*a)),
            Step::Adds(a, x) => g_adds(tape, v(*a), s(*x)),
            Step::Muls(a, x) => g_muls(tape, v(*a), s(*x)),
            Step::Pow(a, p) => g_pow(tape, v(*a), s(*p)),
            Step::LeakyRelu(a, slope) => g_leaky_relu(tape, v(*a), s(*slope)),
            Step::Clamp(a, lo, hi) => g_clamp(tape, v(*a), s(*lo), s(*hi)),
            Step::Sum(a) => g_sum(tape, v(*a)),
            Step::Mean(a) => g_mean(tape, v(*a)),
            Step::ReduceAxis(name, a, axis, keep) => match *name {
                "sum" => g_sum_axis(tape, v(*a), *axis, *keep),
                "mean" => g_mean_axis(tape, v(*a), *axis, *keep),
                "max" => g_max_axis(tape, v(*a), *axis, *keep),
                _ => g_min_axis(tape, v(*a), *axis, *keep),
            },
            Step::MatMul(a, b) => g_matmul(tape, v(*a), v(*b)),
            Step::Bmm(a, b) => g_bmm(tape, v(*a), v(*b)),
            Step::Attention(q, k, w, causal) => g_attention(tape, v(*q), v(*k), v(*w), *causal),
            Step::AttentionPacked(qkv, heads, causal) => g_attention_packed(tape, v(*qkv), *heads, *causal),
            Step::Transpose(a) => g_transpose(tape, v(*a)),
            Step::Permute(a, axes) => g_permute(tape, v(*a), axes),
            Step::Reshape(a, shape) => g_reshape(tape, v(*a), shape),
            Step::Slice(a, starts, stops) => g_slice(tape, v(*a), starts, stops),
            Step::Concat(a, b, axis) => g_concat(tape, v(*a), v(*b), *axis),
            Step::Softmax(a, axis) => g_softmax(tape, v(*a), *axis),
            Step::LogSoftmax(a, axis) => g_log_softmax(tape, v(*a), *axis),
            Step::Mse(a, b) => g_mse(tape, v(*a), v(*b)),
            Step::CrossEntropy(a, targets) => g_cross_entropy(tape, v(*a), targets),
            Step::Embedding(a, ids) => g_embedding(tape, v(*a), ids),
            Step::LayerNorm(x, gamma, beta) => g_layer_norm(tape, v(*x), v(*gamma), v(*beta), s(1e-5)),
            Step::Dropout(a, p, seed) => g_dropout(tape, v(*a), s(*p), &mut grad_runtime::Rng::new(*seed), true),
            Step::Flatten(a, axis) => g_flatten(tape, v(*a), *axis),
            Step::Cumsum(a, axis) => g_cumsum(tape, v(*a), *axis),
            Step::IndexSelect(a, axis, ids) => g_index_select(tape, v(*a), *axis, ids),
            Step::Gather(a, axis, ids) => {
                let indices = ArrayD::from_shape_vec(IxDyn(&self.shapes[*a]), ids.clone()).expect("x's shape");
                g_gather(tape, v(*a), *axis, &indices)
            }
            Step::Where(mask, a, b) => {
                let mask = ArrayD::from_shape_vec(IxDyn(&self.shapes[*a]), mask.clone()).expect("a's shape");
                g_where(tape, &mask, v(*a), v(*b))
            }
            Step::MaskedFill(a, mask, value) => {
                let mask = ArrayD::from_shape_vec(IxDyn(&self.shapes[*a]), mask.clone()).expect("a's shape");
                g_masked_fill(tape, v(*a), &mask, s(*value))
            }
            Step::Conv2d(x, w, b, stride, padding) => {
                g_conv2d(tape, v(*x), v(*w), b.map(v), *stride, *padding, [1, 1], 1)
            }
            Step::Pool2d(name, x, kernel, stride, padding) => match *name {
                "max" => g_max_pool2d(tape, v(*x), *kernel, *stride, *padding),
                _ => g_avg_pool2d(tape, v(*x), *kernel, *stride, *padding),
            },
            Step::BatchNorm(x, gamma, beta, train) => {
                let c = self.shapes[*gamma][0];
                let mean = tape.buffer(ArrayD::<T>::zeros(IxDyn(&[c])));
                let var = tape.buffer(ArrayD::<T>::ones(IxDyn(&[c])));
                g_batch_norm(tape, v(*x), mean, var, v(*gamma), v(*beta), *train, s(0.1), s(1e-5))
            }
            Step::GroupNorm(x, groups, gamma, beta) => g_group_norm(tape, v(*x), *groups, v(*gamma), v(*beta), s(1e-5)),
            Step::Detach(a) => g_detach(tape, v(*a)),
            Step::Checkpoint(a, b) => {
                let (a, b) = (v(*a), v(*b));
                g_checkpoint(tape, move |t| {
                    let h = g_tanh(t, a);
                    g_mul(t, h, b)
                })
            }
            Step::Custom(name, operands) => match *name {
                "stable_softplus" => crate::common::custom_ops::stable_softplus(tape, v(operands[0])),
                _ => crate::common::custom_ops::mul_add(tape, v(operands[0]), v(operands[1]), v(operands[2])),
            },
            Step::GradOf(y, x) => {
                let total = g_sum(tape, v(*y));
                g_grad(tape, total, v(*x))
            }
        }
    }
}

fn unary<T: Float>(name: &str, tape: &mut Tape<T>, x: Var) -> Var {
    match name {
        "neg" => g_neg(tape, x),
        "relu" => g_relu(tape, x),
        "sigmoid" => g_sigmoid(tape, x),
        "tanh" => g_tanh(tape, x),
        "exp" => g_exp(tape, x),
        "log" => g_log(tape, x),
        "sqrt" => g_sqrt(tape, x),
        "abs" => g_abs(tape, x),
        "gelu" => g_gelu(tape, x),
        "silu" => g_silu(tape, x),
        _ => g_softplus(tape, x),
    }
}

/// The nodes a step reads.
pub fn operands(step: &Step) -> Vec<usize> {
    match *step {
        Step::Param(_) => vec![],
        Step::Add(a, b)
        | Step::Sub(a, b)
        | Step::Mul(a, b)
        | Step::Div(a, b)
        | Step::MatMul(a, b)
        | Step::Bmm(a, b)
        | Step::Concat(a, b, _)
        | Step::Mse(a, b)
        | Step::Where(_, a, b)
        | Step::Conv2d(a, b, None, ..) => vec![a, b],
        Step::Conv2d(a, b, Some(c), ..) => vec![a, b, c],
        Step::LayerNorm(a, b, c) | Step::BatchNorm(a, b, c, _) | Step::GroupNorm(a, _, b, c) => vec![a, b, c],
        Step::Custom(_, ref operands) => operands.clone(),
        Step::Attention(a, b, c, _) => vec![a, b, c],
        Step::GradOf(a, b) | Step::Checkpoint(a, b) => vec![a, b],
        Step::Unary(_, a)
        | Step::Adds(a, _)
        | Step::Muls(a, _)
        | Step::Pow(a, _)
        | Step::LeakyRelu(a, _)
        | Step::Clamp(a, ..)
        | Step::Sum(a)
        | Step::Mean(a)
        | Step::ReduceAxis(_, a, ..)
        | Step::Transpose(a)
        | Step::AttentionPacked(a, ..)
        | Step::Permute(a, _)
        | Step::Reshape(a, _)
        | Step::Slice(a, ..)
        | Step::Softmax(a, _)
        | Step::LogSoftmax(a, _)
        | Step::CrossEntropy(a, _)
        | Step::Embedding(a, _)
        | Step::Dropout(a, ..)
        | Step::Flatten(a, _)
        | Step::Cumsum(a, _)
        | Step::IndexSelect(a, ..)
        | Step::Gather(a, ..)
        | Step::MaskedFill(a, ..)
        | Step::Detach(a)
        | Step::Pool2d(_, a, ..) => vec![a],
    }
}

/// The op a step records, as named in `OP_FUNCTIONS` (`None` for a parameter).
pub fn op_name(step: &Step) -> Option<String> {
    let name = match step {
        Step::Param(_) => return None,
        Step::Unary(name, _) => return Some(format!("g_{name}")),
        Step::ReduceAxis(name, ..) => return Some(format!("g_{name}_axis")),
        Step::Add(..) => "g_add",
        Step::Sub(..) => "g_sub",
        Step::Mul(..) => "g_mul",
        Step::Div(..) => "g_div",
        Step::Adds(..) => "g_adds",
        Step::Muls(..) => "g_muls",
        Step::Pow(..) => "g_pow",
        Step::LeakyRelu(..) => "g_leaky_relu",
        Step::Clamp(..) => "g_clamp",
        Step::Sum(_) => "g_sum",
        Step::Mean(_) => "g_mean",
        Step::MatMul(..) => "g_matmul",
        Step::Bmm(..) => "g_bmm",
        Step::Attention(..) => "g_attention",
        Step::AttentionPacked(..) => "g_attention_packed",
        Step::Transpose(_) => "g_transpose",
        Step::Permute(..) => "g_permute",
        Step::Reshape(..) => "g_reshape",
        Step::Slice(..) => "g_slice",
        Step::Concat(..) => "g_concat",
        Step::Softmax(..) => "g_softmax",
        Step::LogSoftmax(..) => "g_log_softmax",
        Step::Mse(..) => "g_mse",
        Step::CrossEntropy(..) => "g_cross_entropy",
        Step::Embedding(..) => "g_embedding",
        Step::LayerNorm(..) => "g_layer_norm",
        Step::Dropout(..) => "g_dropout",
        Step::Flatten(..) => "g_flatten",
        Step::Cumsum(..) => "g_cumsum",
        Step::IndexSelect(..) => "g_index_select",
        Step::Gather(..) => "g_gather",
        Step::Where(..) => "g_where",
        Step::MaskedFill(..) => "g_masked_fill",
        Step::Conv2d(..) => "g_conv2d",
        Step::Pool2d(name, ..) => return Some(format!("g_{name}_pool2d")),
        Step::BatchNorm(..) => "g_batch_norm",
        Step::GroupNorm(..) => "g_group_norm",
        Step::Detach(_) => "g_detach",
        Step::Checkpoint(..) => "g_checkpoint",
        Step::Custom(..) => "g_custom",
        Step::GradOf(..) => "g_grad",
    };
    Some(name.to_string())
}

/// A shape of rank 0 to 3 with dims 1 to 4, from 16 bits.
fn small_shape(r: u16) -> Vec<usize> {
    let r = r as usize;
    let rank = r % 4;
    (0..rank).map(|i| 1 + (r >> (2 + 2 * i)) % 4).collect()
}

/// A shape with `len` elements: flat, a row, a column, or split at a divisor.
fn reshape_target(len: usize, r: usize) -> Vec<usize> {
    let divisor = (2..len).find(|d| len.is_multiple_of(*d));
    match (r % 4, divisor) {
        (0, _) => vec![len],
        (1, _) => vec![1, len],
        (2, Some(d)) => vec![d, len / d],
        _ => vec![len, 1],
    }
}

/// NumPy's broadcast of two shapes, if they broadcast.
pub fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| if i + s.len() >= n { s[i + s.len() - n] } else { 1 };
    (0..n)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// One line per node: `n3 = g_matmul(n1, p2)  [2, 4]`, parameters as `p`.
impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "graph (parameter seed {}):", self.seed)?;
        for (i, step) in self.steps.iter().enumerate() {
            let shape = &self.shapes[i];
            let name =
                |k: usize| if matches!(self.steps[k], Step::Param(_)) { format!("p{k}") } else { format!("n{k}") };
            let line = match step {
                Step::Param(_) => format!("p{i} = param"),
                other => {
                    let args: Vec<String> = operands(other).into_iter().map(name).collect();
                    let extra = match other {
                        Step::Adds(_, x) | Step::Muls(_, x) | Step::Pow(_, x) | Step::LeakyRelu(_, x) => {
                            format!(", {x}")
                        }
                        Step::Clamp(_, lo, hi) => format!(", {lo}, {hi}"),
                        Step::ReduceAxis(_, _, axis, keep) => format!(", axis {axis}, keepdim {keep}"),
                        Step::Reshape(_, shape) => format!(", {shape:?}"),
                        Step::Slice(_, starts, stops) => format!(", {starts:?}, {stops:?}"),
                        Step::Concat(.., axis) => format!(", axis {axis}"),
                        Step::Softmax(_, axis) | Step::LogSoftmax(_, axis) => format!(", axis {axis}"),
                        Step::CrossEntropy(_, t) => format!(", targets {:?} {:?}", t.shape(), t.as_slice().unwrap()),
                        Step::Embedding(_, ids) => format!(", ids {:?} {:?}", ids.shape(), ids.as_slice().unwrap()),
                        Step::Dropout(_, p, seed) => format!(", p {p}, rng seed {seed}"),
                        _ => String::new(),
                    };
                    format!("n{i} = {}({}{extra})", op_name(other).unwrap_or_default(), args.join(", "))
                }
            };
            writeln!(f, "    {line:<60} {shape:?}")?;
        }
        Ok(())
    }
}
