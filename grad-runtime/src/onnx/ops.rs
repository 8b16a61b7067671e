//! Each recorded op written as ONNX nodes: one `match` over [`Op`], one
//! arm per op, in the order of `ops/mod.rs`. Leaves and fused regions are
//! the driver's (`export.rs`); every arm here reads its inputs' values
//! (already written) and returns its output's.
//!
//! An arm also carries the batch dim through its op (`dims.rs`), so that
//! shapes the op holds (a reshape's target, a slice's end) are written
//! relative to it, and refuses what would not be the same computation at
//! another batch size.

use std::collections::HashMap;

use ndarray::Dimension;

use super::dims::{self, Value};
use super::graph::{Graph, float, int, ints};
use crate::ops::Op;
use crate::ops::unary::{Gelu, Unary};
use crate::tape::NodeId;
use crate::{Float, Tape};

/// Why a node cannot be exported: the text of `ErrorKind::NotExportable`.
pub(crate) type Refusal = &'static str;

/// What an arm sees: the tape, the values written so far, the graph.
pub(crate) struct Emit<'a, T: Float> {
    pub(crate) tape: &'a Tape<T>,
    pub(crate) values: &'a HashMap<NodeId, Value>,
    pub(crate) graph: &'a mut Graph,
}

impl<T: Float> Emit<'_, T> {
    fn value(&self, id: NodeId) -> &Value {
        &self.values[&id]
    }

    fn name(&self, id: NodeId) -> String {
        self.values[&id].name.clone()
    }

    fn shape(&self, id: NodeId) -> &[usize] {
        self.tape.shape(id)
    }

    /// A one-output node; its value's name is `stem` (made unique).
    fn node(
        &mut self,
        op_type: &str,
        stem: &str,
        inputs: &[&str],
        attributes: Vec<super::proto::AttributeProto>,
    ) -> String {
        self.graph.node(op_type, stem, inputs, attributes)
    }

    /// `x op s` for a scalar `s`.
    fn with_scalar(&mut self, op_type: &str, stem: &str, x: &str, s: T) -> String {
        let s = self.graph.scalar(&format!("{stem}_scalar"), s);
        self.node(op_type, stem, &[x, &s], vec![])
    }

    /// `x op y`, elementwise with broadcasting.
    fn binary(&mut self, op_type: &str, stem: &str, x: &str, y: &str) -> String {
        self.node(op_type, stem, &[x, y], vec![])
    }

    /// `gamma` or `beta` of a per-channel norm, `[C]` shaped `[C, 1, ...]`
    /// to broadcast against `[N, C, ...]` of rank `rank`.
    fn per_channel(&mut self, stem: &str, v: &str, channels: usize, rank: usize) -> String {
        let mut shape = vec![1i64; rank.saturating_sub(1)];
        if let Some(first) = shape.first_mut() {
            *first = channels as i64;
        }
        let shape = self.graph.list(&format!("{stem}_shape"), &shape);
        self.node("Reshape", stem, &[v, &shape], vec![])
    }
}

/// Writes node `id` (not a leaf, not fused) and returns its output value.
pub(crate) fn emit<T: Float>(e: &mut Emit<'_, T>, id: NodeId) -> Result<Value, Refusal> {
    let out_shape = e.shape(id).to_vec();
    let stem = e.tape.op_of(id).name().trim_start_matches("g_").to_string() + &format!("_{id}");
    let stem = stem.as_str();
    let same = |e: &Emit<'_, T>, x: NodeId| e.value(x).dynamic;
    let (name, dynamic) = match e.tape.op_of(id).clone() {
        Op::Param | Op::Constant | Op::Buffer | Op::Fused(_) => {
            unreachable!("invariant: the driver writes leaves and fused regions")
        }
        Op::Detach => {
            return Err(
                "a detached value keeps no link to its input, so the graph would hold the traced value as a constant",
            );
        }
        Op::DropoutMask => {
            return Err(
                "dropout in training mode draws a random mask; export the model in evaluation mode (train = false)",
            );
        }
        Op::Custom(_) => return Err("a custom op has no ONNX form"),
        Op::Checkpoint(_) | Op::SegmentOutput => {
            return Err(
                "a checkpointed segment keeps no record of its ops; export a forward pass run without Tape::checkpoint",
            );
        }
        Op::Take { .. } | Op::ScatterAdd { .. } => {
            return Err("an op of a recorded gradient (grad_graph) is not a forward op");
        }
        op @ (Op::Add(a, b) | Op::Sub(a, b) | Op::Mul(a, b) | Op::Div(a, b)) => {
            let op_type = match op {
                Op::Add(..) => "Add",
                Op::Sub(..) => "Sub",
                Op::Mul(..) => "Mul",
                _ => "Div",
            };
            let dynamic = dims::broadcast(&out_shape, &[(e.value(a), e.shape(a)), (e.value(b), e.shape(b))])?;
            (e.binary(op_type, stem, &e.name(a), &e.name(b)), dynamic)
        }
        Op::Unary(x, function) => (unary(e, stem, &e.name(x), function), same(e, x)),
        Op::Sum(x) | Op::Mean(x) => {
            let op_type = if matches!(e.tape.op_of(id), Op::Sum(_)) { "ReduceSum" } else { "ReduceMean" };
            (e.node(op_type, stem, &[&e.name(x)], vec![int("keepdims", 0)]), None)
        }
        op @ (Op::SumAxis { x, axis }
        | Op::MeanAxis { x, axis }
        | Op::MaxAxis { x, axis }
        | Op::MinAxis { x, axis }) => {
            let keepdim = out_shape.len() == e.shape(x).len();
            let keep = int("keepdims", i64::from(keepdim));
            let name = match op {
                // Since opset 13 ReduceSum takes its axes as an input; the others, as an attribute (until 18).
                Op::SumAxis { .. } => {
                    let axes = e.graph.list(&format!("{stem}_axes"), &[axis as i64]);
                    e.node("ReduceSum", stem, &[&e.name(x), &axes], vec![keep])
                }
                Op::MeanAxis { .. } => {
                    e.node("ReduceMean", stem, &[&e.name(x)], vec![ints("axes", &[axis as i64]), keep])
                }
                Op::MaxAxis { .. } => {
                    e.node("ReduceMax", stem, &[&e.name(x)], vec![ints("axes", &[axis as i64]), keep])
                }
                _ => e.node("ReduceMin", stem, &[&e.name(x)], vec![ints("axes", &[axis as i64]), keep]),
            };
            (name, dims::reduce(same(e, x), axis, keepdim))
        }
        Op::MatMul(a, b, product) | Op::Bmm(a, b, product) => {
            // An operand the product reads transposed goes through a Transpose.
            let mut operand = |x: NodeId, transposed: bool, which: &str| {
                if transposed {
                    transpose_last_two(e, &format!("{stem}_{which}t"), x)
                } else {
                    (e.name(x), e.value(x).dynamic)
                }
            };
            let (name_a, dynamic_a) = operand(a, product.transposed[0], "a");
            let (name_b, dynamic_b) = operand(b, product.transposed[1], "b");
            let dynamic = dims::matmul(dynamic_a, e.shape(a).len(), dynamic_b, e.shape(b).len(), out_shape.len())?;
            (e.binary("MatMul", stem, &name_a, &name_b), dynamic)
        }
        Op::Attention { q, k, v, causal, .. } => {
            let rank = e.shape(q).len();
            let dynamic = dims::same_axis(same(e, q), dims::same_axis(same(e, k), same(e, v))?)?;
            if dynamic.is_some_and(|d| d + 2 >= rank) {
                return Err("the batch is in its sequence or feature dims, not a leading one");
            }
            let sizes = [e.shape(q)[rank - 2], e.shape(k)[rank - 2], e.shape(q)[rank - 1]];
            let names = [q, k, v].map(|x| e.name(x));
            (attention(e, stem, &names, rank, sizes, causal), dynamic)
        }
        Op::AttentionPacked { qkv, heads, causal, .. } => {
            let shape = e.shape(qkv).to_vec();
            let rank = shape.len();
            if same(e, qkv).is_some_and(|d| d + 2 >= rank) {
                return Err("the batch is in its sequence or feature dims, not a leading one");
            }
            let (t, width) = (shape[rank - 2], shape[rank - 1] / 3);
            // Each third of the last dim, [.., T, heads, d] permuted to [.., heads, T, d].
            let mut split = shape[..rank - 1].to_vec();
            split.extend([heads, width / heads]);
            let mut order: Vec<usize> = (0..rank + 1).collect();
            order.swap(rank - 2, rank - 1);
            let perm: Vec<i64> = order.iter().map(|&a| a as i64).collect();
            let mut sliced = shape.clone();
            sliced[rank - 1] = width;
            let (target, dynamic) = dims::reshape(&sliced, same(e, qkv), &split)?;
            let names = [0, 1, 2].map(|part| {
                let part_stem = format!("{stem}_{}", ["q", "k", "v"][part]);
                let starts = e.graph.list(&format!("{part_stem}_starts"), &[(part * width) as i64]);
                let ends = e.graph.list(&format!("{part_stem}_ends"), &[((part + 1) * width) as i64]);
                let axes = e.graph.list(&format!("{part_stem}_axes"), &[rank as i64 - 1]);
                let x = e.node("Slice", &format!("{part_stem}_slice"), &[&e.name(qkv), &starts, &ends, &axes], vec![]);
                let target = e.graph.list(&format!("{part_stem}_shape"), &target);
                let x = e.node("Reshape", &format!("{part_stem}_split"), &[&x, &target], vec![]);
                e.node("Transpose", &part_stem, &[&x], vec![ints("perm", &perm)])
            });
            let y = attention(e, &format!("{stem}_heads"), &names, rank + 1, [t, t, width / heads], causal);
            let y = e.node("Transpose", &format!("{stem}_merge"), &[&y], vec![ints("perm", &perm)]);
            let (target, dynamic) = dims::reshape(&split, dynamic, &out_shape)?;
            let target = e.graph.list(&format!("{stem}_shape"), &target);
            (e.node("Reshape", stem, &[&y, &target], vec![]), dynamic)
        }
        Op::Transpose(x) => transpose_last_two(e, stem, x),
        Op::Permute { x, order, ndim } => {
            let order: Vec<usize> = order[..usize::from(ndim)].iter().map(|&a| usize::from(a)).collect();
            let perm: Vec<i64> = order.iter().map(|&a| a as i64).collect();
            (e.node("Transpose", stem, &[&e.name(x)], vec![ints("perm", &perm)]), dims::permute(same(e, x), &order))
        }
        Op::Reshape(x) => {
            let (target, dynamic) = dims::reshape(e.shape(x), same(e, x), &out_shape)?;
            let target = e.graph.list(&format!("{stem}_shape"), &target);
            (e.node("Reshape", stem, &[&e.name(x), &target], vec![]), dynamic)
        }
        Op::Slice { x, starts } => {
            let ends = dims::slice_ends(e.shape(x), same(e, x), starts.slice(), &out_shape)?;
            let starts: Vec<i64> = starts.slice().iter().map(|&s| s as i64).collect();
            let axes: Vec<i64> = (0..starts.len() as i64).collect();
            let starts = e.graph.list(&format!("{stem}_starts"), &starts);
            let ends = e.graph.list(&format!("{stem}_ends"), &ends);
            let axes = e.graph.list(&format!("{stem}_axes"), &axes);
            (e.node("Slice", stem, &[&e.name(x), &starts, &ends, &axes], vec![]), same(e, x))
        }
        Op::Concat { a, b, axis } => {
            let dynamic = dims::same_axis(e.value(a).dynamic, e.value(b).dynamic)?;
            (e.node("Concat", stem, &[&e.name(a), &e.name(b)], vec![int("axis", axis as i64)]), dynamic)
        }
        Op::Softmax { x, axis } => (e.node("Softmax", stem, &[&e.name(x)], vec![int("axis", axis as i64)]), same(e, x)),
        Op::LogSoftmax { x, axis } => {
            (e.node("LogSoftmax", stem, &[&e.name(x)], vec![int("axis", axis as i64)]), same(e, x))
        }
        Op::Mse(y, t) => {
            dims::broadcast(e.shape(y), &[(e.value(y), e.shape(y)), (e.value(t), e.shape(t))])?;
            let diff = e.binary("Sub", &format!("{stem}_diff"), &e.name(y), &e.name(t));
            let square = e.binary("Mul", &format!("{stem}_square"), &diff, &diff);
            (e.node("ReduceMean", stem, &[&square], vec![int("keepdims", 0)]), None)
        }
        Op::CrossEntropy { logits, targets } => {
            if same(e, logits).is_some() {
                return Err("its targets are traced at the batch size; export the logits and compute the loss outside");
            }
            let targets: Vec<i64> = targets.iter().map(|&t| t as i64).collect();
            let targets = e.graph.ints(&format!("{stem}_targets"), &[targets.len()], &targets);
            // NegativeLogLikelihoodLoss reads the classes on axis 1: N-D
            // logits [.., C] go in as their rows, [N, C].
            let rows = match e.shape(logits) {
                [_, _] => e.name(logits),
                shape => {
                    let classes = shape[shape.len() - 1] as i64;
                    let target = e.graph.list(&format!("{stem}_rows_shape"), &[-1, classes]);
                    e.node("Reshape", &format!("{stem}_rows"), &[&e.name(logits), &target], vec![])
                }
            };
            let log_p = e.node("LogSoftmax", &format!("{stem}_log_p"), &[&rows], vec![int("axis", 1)]);
            // The mean over rows of -log_p[row, target]: the loss's default reduction.
            (e.node("NegativeLogLikelihoodLoss", stem, &[&log_p, &targets], vec![]), None)
        }
        Op::Embedding { table, ids } => {
            // The driver writes the ids as a graph input when the caller named them.
            let (ids, dynamic) = match e.values.get(&ids_key(id)) {
                Some(input) => (input.name.clone(), input.dynamic),
                None => {
                    let ids: Vec<i64> = ids.iter().map(|&t| t as i64).collect();
                    // Shaped as the ids: the output's shape without its last dim.
                    let shape = &out_shape[..out_shape.len() - 1];
                    (e.graph.ints(&format!("{stem}_ids"), shape, &ids), None)
                }
            };
            (e.node("Gather", stem, &[&e.name(table), &ids], vec![int("axis", 0)]), dynamic)
        }
        Op::LayerNorm { x, gamma, beta, eps } => {
            let attributes = vec![int("axis", -1), float("epsilon", eps.to_f64())];
            (e.node("LayerNormalization", stem, &[&e.name(x), &e.name(gamma), &e.name(beta)], attributes), same(e, x))
        }
        Op::BatchNorm { x, gamma, beta, stats, train } => {
            if train {
                return Err(
                    "batch norm in training mode normalizes by the batch's statistics; export in evaluation mode (train = false)",
                );
            }
            // y = (x - mean) · inv_std · gamma + beta, with the running
            // statistics the op used, as per-channel constants.
            let (channels, rank) = (e.shape(x)[1], e.shape(x).len());
            let mut shape = vec![1usize; rank - 1];
            shape[0] = channels;
            let mean = e.graph.floats(&format!("{stem}_mean"), &shape, &stats[..channels]);
            let inv_std = e.graph.floats(&format!("{stem}_inv_std"), &shape, &stats[channels..2 * channels]);
            let gamma = e.per_channel(&format!("{stem}_gamma"), &e.name(gamma), channels, rank);
            let beta = e.per_channel(&format!("{stem}_beta"), &e.name(beta), channels, rank);
            let centred = e.binary("Sub", &format!("{stem}_centred"), &e.name(x), &mean);
            let normed = e.binary("Mul", &format!("{stem}_normed"), &centred, &inv_std);
            let scaled = e.binary("Mul", &format!("{stem}_scaled"), &normed, &gamma);
            (e.binary("Add", stem, &scaled, &beta), same(e, x))
        }
        Op::GroupNorm { x, gamma, beta, groups, stats } => {
            let (channels, rank) = (e.shape(x)[1], e.shape(x).len());
            let eps = stats[stats.len() - 1];
            let grouped = e.graph.list(&format!("{stem}_grouped"), &[0, groups as i64, -1]);
            let rows = e.node("Reshape", &format!("{stem}_rows"), &[&e.name(x), &grouped], vec![]);
            let mean =
                e.node("ReduceMean", &format!("{stem}_mean"), &[&rows], vec![ints("axes", &[2]), int("keepdims", 1)]);
            let centred = e.binary("Sub", &format!("{stem}_centred"), &rows, &mean);
            let square = e.binary("Mul", &format!("{stem}_square"), &centred, &centred);
            let var =
                e.node("ReduceMean", &format!("{stem}_var"), &[&square], vec![ints("axes", &[2]), int("keepdims", 1)]);
            let var_eps = e.with_scalar("Add", &format!("{stem}_var_eps"), &var, eps);
            let std = e.node("Sqrt", &format!("{stem}_std"), &[&var_eps], vec![]);
            let normed = e.binary("Div", &format!("{stem}_normed"), &centred, &std);
            let x_shape = e.node("Shape", &format!("{stem}_x_shape"), &[&e.name(x)], vec![]);
            let back = e.node("Reshape", &format!("{stem}_back"), &[&normed, &x_shape], vec![]);
            let gamma = e.per_channel(&format!("{stem}_gamma"), &e.name(gamma), channels, rank);
            let beta = e.per_channel(&format!("{stem}_beta"), &e.name(beta), channels, rank);
            let scaled = e.binary("Mul", &format!("{stem}_scaled"), &back, &gamma);
            (e.binary("Add", stem, &scaled, &beta), same(e, x))
        }
        Op::Conv2d { x, w, b, spec } => {
            let pads = [spec.padding[0], spec.padding[1], spec.padding[0], spec.padding[1]].map(i64::from);
            let attributes = vec![
                ints("kernel_shape", &[e.shape(w)[2] as i64, e.shape(w)[3] as i64]),
                ints("strides", &spec.stride.map(i64::from)),
                ints("dilations", &spec.dilation.map(i64::from)),
                ints("pads", &pads),
                int("group", i64::from(spec.groups)),
            ];
            let mut inputs = vec![e.name(x), e.name(w)];
            inputs.extend(b.map(|b| e.name(b)));
            let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
            (e.node("Conv", stem, &inputs, attributes), dims::batch_only(same(e, x))?)
        }
        op @ (Op::MaxPool2d { x, spec } | Op::AvgPool2d { x, spec }) => {
            let pads = [spec.padding[0], spec.padding[1], spec.padding[0], spec.padding[1]].map(i64::from);
            let mut attributes = vec![
                ints("kernel_shape", &spec.kernel.map(i64::from)),
                ints("strides", &spec.stride.map(i64::from)),
                ints("pads", &pads),
            ];
            let op_type = if matches!(op, Op::MaxPool2d { .. }) {
                "MaxPool"
            } else {
                // PyTorch's default, and grad's: padding counts in the mean.
                attributes.push(int("count_include_pad", 1));
                "AveragePool"
            };
            (e.node(op_type, stem, &[&e.name(x)], attributes), dims::batch_only(same(e, x))?)
        }
        Op::Gather { x, axis, indices } => {
            if same(e, x).is_some() {
                return Err("its indices are traced at the batch size");
            }
            // torch.gather allows indices smaller than x in the other dims;
            // ONNX's GatherElements reads x sliced to them.
            let mut source = e.name(x);
            if out_shape.iter().zip(e.shape(x)).enumerate().any(|(a, (o, i))| a != axis && o != i) {
                let ends: Vec<i64> = out_shape
                    .iter()
                    .zip(e.shape(x))
                    .enumerate()
                    .map(|(a, (&o, &i))| if a == axis { i } else { o } as i64)
                    .collect();
                let zeros = e.graph.list(&format!("{stem}_starts"), &vec![0; ends.len()]);
                let ends = e.graph.list(&format!("{stem}_ends"), &ends);
                source = e.node("Slice", &format!("{stem}_source"), &[&source, &zeros, &ends], vec![]);
            }
            let indices: Vec<i64> = indices.iter().map(|&i| i as i64).collect();
            let indices = e.graph.ints(&format!("{stem}_indices"), &out_shape, &indices);
            (e.node("GatherElements", stem, &[&source, &indices], vec![int("axis", axis as i64)]), None)
        }
        Op::IndexSelect { x, axis, indices } => {
            let indices: Vec<i64> = indices.iter().map(|&i| i as i64).collect();
            let indices = e.graph.list(&format!("{stem}_indices"), &indices);
            let dynamic = same(e, x).filter(|&d| d != axis);
            (e.node("Gather", stem, &[&e.name(x), &indices], vec![int("axis", axis as i64)]), dynamic)
        }
        Op::Where { mask, a, b } => {
            // The mask, a constant, is not among the written values.
            let constant = Value { name: String::new(), dynamic: None };
            let operands = [(&constant, e.shape(mask)), (e.value(a), e.shape(a)), (e.value(b), e.shape(b))];
            let dynamic = dims::broadcast(&out_shape, &operands)?;
            let tape = e.tape;
            let condition = e.graph.mask(&format!("{stem}_mask"), tape.shape(mask), &tape.value_of(mask).data);
            (e.node("Where", stem, &[&condition, &e.name(a), &e.name(b)], vec![]), dynamic)
        }
        Op::Cumsum { x, axis } => {
            let axis = e.graph.ints(&format!("{stem}_axis"), &[], &[axis as i64]);
            (e.node("CumSum", stem, &[&e.name(x), &axis], vec![]), same(e, x))
        }
    };
    Ok(Value { name, dynamic })
}

/// The key under which the driver keeps an embedding's ids input: past
/// every node id (a tape never holds `usize::MAX / 2` nodes).
pub(crate) fn ids_key(embedding: NodeId) -> NodeId {
    usize::MAX / 2 + embedding
}

/// A `Transpose` of `x`'s last two axes: its output's name and where the
/// batch dim goes.
fn transpose_last_two<T: Float>(e: &mut Emit<'_, T>, stem: &str, x: NodeId) -> (String, Option<usize>) {
    let rank = e.shape(x).len();
    let mut order: Vec<usize> = (0..rank).collect();
    order.swap(rank - 2, rank - 1);
    let perm: Vec<i64> = order.iter().map(|&a| a as i64).collect();
    let name = e.node("Transpose", stem, &[&e.name(x)], vec![ints("perm", &perm)]);
    (name, dims::permute(e.value(x).dynamic, &order))
}

/// `softmax(q kᵀ / √d + mask) v` over the named `q`, `k`, `v` of rank
/// `rank`, with `sizes` `[tq, tk, d]`: the five ops `g_attention` stands for.
fn attention<T: Float>(
    e: &mut Emit<'_, T>,
    stem: &str,
    [q, k, v]: &[String; 3],
    rank: usize,
    [tq, tk, d]: [usize; 3],
    causal: bool,
) -> String {
    let mut order: Vec<i64> = (0..rank as i64).collect();
    order.swap(rank - 2, rank - 1);
    let kt = e.node("Transpose", &format!("{stem}_kt"), &[k], vec![ints("perm", &order)]);
    let products = e.binary("MatMul", &format!("{stem}_products"), q, &kt);
    let scale = T::from_f64(1.0 / (d.max(1) as f64).sqrt());
    let mut scores = e.with_scalar("Mul", &format!("{stem}_scores"), &products, scale);
    if causal {
        let above: Vec<T> = (0..tq * tk).map(|n| if n % tk > n / tk { T::one() } else { T::zero() }).collect();
        let above = e.graph.mask(&format!("{stem}_mask"), &[tq, tk], &above);
        let blocked = e.graph.scalar(&format!("{stem}_blocked"), T::neg_infinity());
        scores = e.node("Where", &format!("{stem}_masked"), &[&above, &blocked, &scores], vec![]);
    }
    let probs = e.node("Softmax", &format!("{stem}_probs"), &[&scores], vec![int("axis", -1)]);
    e.binary("MatMul", stem, &probs, v)
}

/// An elementwise function of one tensor.
fn unary<T: Float>(e: &mut Emit<'_, T>, stem: &str, x: &str, function: Unary<T>) -> String {
    let plain = |op_type: &str, e: &mut Emit<'_, T>| e.node(op_type, stem, &[x], vec![]);
    match function {
        Unary::Neg => plain("Neg", e),
        Unary::AddScalar(s) => e.with_scalar("Add", stem, x, s),
        Unary::MulScalar(s) => e.with_scalar("Mul", stem, x, s),
        Unary::Relu => plain("Relu", e),
        Unary::Sigmoid => plain("Sigmoid", e),
        Unary::Tanh => plain("Tanh", e),
        Unary::Exp => plain("Exp", e),
        Unary::Log => plain("Log", e),
        Unary::Sqrt => plain("Sqrt", e),
        Unary::Pow(p) => e.with_scalar("Pow", stem, x, p),
        Unary::Abs => plain("Abs", e),
        Unary::LeakyRelu(slope) => e.node("LeakyRelu", stem, &[x], vec![float("alpha", slope.to_f64())]),
        Unary::Gelu => {
            // The tanh form as its formula (opset 20's Gelu is past 17):
            // 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))).
            let (k, c) = (T::from_f64(Gelu::SQRT_2_OVER_PI), T::from_f64(Gelu::CUBIC));
            let square = e.binary("Mul", &format!("{stem}_square"), x, x);
            let cube = e.binary("Mul", &format!("{stem}_cube"), &square, x);
            let cubic = e.with_scalar("Mul", &format!("{stem}_cubic"), &cube, c);
            let inner = e.binary("Add", &format!("{stem}_inner"), x, &cubic);
            let scaled = e.with_scalar("Mul", &format!("{stem}_scaled"), &inner, k);
            let tanh = e.node("Tanh", &format!("{stem}_tanh"), &[&scaled], vec![]);
            let one_plus = e.with_scalar("Add", &format!("{stem}_one_plus"), &tanh, T::one());
            let times_x = e.binary("Mul", &format!("{stem}_times_x"), x, &one_plus);
            e.with_scalar("Mul", stem, &times_x, T::from_f64(0.5))
        }
        Unary::Silu => {
            let sigmoid = e.node("Sigmoid", &format!("{stem}_sigmoid"), &[x], vec![]);
            e.binary("Mul", stem, x, &sigmoid)
        }
        Unary::Softplus => {
            // max(x, 0) + log(1 + exp(-|x|)): ONNX's Softplus overflows in f32 past x ≈ 88.
            let relu = e.node("Relu", &format!("{stem}_relu"), &[x], vec![]);
            let abs = e.node("Abs", &format!("{stem}_abs"), &[x], vec![]);
            let neg = e.node("Neg", &format!("{stem}_neg"), &[&abs], vec![]);
            let exp = e.node("Exp", &format!("{stem}_exp"), &[&neg], vec![]);
            let one_plus = e.with_scalar("Add", &format!("{stem}_one_plus"), &exp, T::one());
            let log = e.node("Log", &format!("{stem}_log"), &[&one_plus], vec![]);
            e.binary("Add", stem, &relu, &log)
        }
        Unary::Clamp(lo, hi) => {
            let lo = e.graph.scalar(&format!("{stem}_lo"), lo);
            let hi = e.graph.scalar(&format!("{stem}_hi"), hi);
            e.node("Clip", stem, &[x, &lo, &hi], vec![])
        }
    }
}
