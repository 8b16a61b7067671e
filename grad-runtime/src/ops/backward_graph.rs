//! Every backward rule written as tape ops, for [`Tape::grad_graph`]: one
//! `match` over [`Op`], each arm the same gradient as the op's kernel rule
//! beside its forward, built from `g_*` calls so that it is itself
//! recorded and differentiable (to any order). Masks of piecewise-constant
//! derivatives (relu, abs, clamp, max) are constants: their own derivative
//! is zero.
//!
//! An op with no graph form (a custom op without `backward_graph`) is
//! refused
//! by name: [`unsupported`] finds the built-ins before anything is
//! recorded, and a custom op says so when asked.

use ndarray::{Dimension, IxDyn};

use crate::ops::axis::AxisLanes;
use crate::ops::reduce::{argmax_lane, argmin_lane};
use crate::ops::unary::Unary;
use crate::ops::{Op, attention, attention_packed, conv, index, matmul, permute, pool, scatter};
use crate::tape::NodeId;
use crate::*;

/// Where a rule puts its contributions: `add(tape, input, gradient)`.
pub(crate) type Sink<'a, T> = dyn FnMut(&mut Tape<T>, NodeId, Var) + 'a;

/// Records node `id`'s backward rule as ops: `g` is the gradient in the
/// node's value; each input's share goes to `add`. A fused region is
/// recorded again as its unfused ops; their root is returned so that the
/// caller walks back through them (`Ok(Some(root))`), with `g` as its
/// gradient. `Err` names an op whose backward has no graph form.
pub(crate) fn backward<T: Float>(
    tp: &mut Tape<T>,
    op: &Op<T>,
    id: NodeId,
    g: Var,
    wants: &dyn Fn(NodeId) -> bool,
    add: &mut Sink<'_, T>,
) -> Result<Option<Var>, &'static str> {
    // A product's gradient products are recorded in the precision the
    // product was (as its kernel backward computes them), whatever the
    // tape's setting is now.
    let recorded = match *op {
        Op::MatMul(_, _, product) | Op::Bmm(_, _, product) => product.precision,
        Op::Conv2d { spec, .. } => spec.precision,
        Op::Attention { precision, .. } | Op::AttentionPacked { precision, .. } => precision,
        _ => return rule(tp, op, id, g, wants, add),
    };
    let outer = tp.swap_matmul_precision(recorded);
    let result = rule(tp, op, id, g, wants, add);
    tp.swap_matmul_precision(outer);
    result
}

/// [`backward`]'s one `match`, an arm per op.
fn rule<T: Float>(
    tp: &mut Tape<T>,
    op: &Op<T>,
    id: NodeId,
    g: Var,
    wants: &dyn Fn(NodeId) -> bool,
    add: &mut Sink<'_, T>,
) -> Result<Option<Var>, &'static str> {
    // After a failed op (an allocation refused) every later op is a no-op
    // and its handle names no node: nothing more to record or to read.
    if !tp.is_ok() {
        return Ok(None);
    }
    let out = tp.var_at(id);
    let var = |tp: &Tape<T>, id: NodeId| tp.var_at(id);
    match *op {
        Op::Param | Op::Constant | Op::Buffer | Op::Detach | Op::DropoutMask | Op::SegmentOutput => {}
        // Each input's share is recorded only if that input is on a path
        // to a requested gradient (`wants`): a constant operand's would be
        // work thrown away.
        Op::Add(a, b) => {
            if wants(a) {
                let ga = unbroadcast(tp, g, a);
                add(tp, a, ga);
            }
            if wants(b) {
                let gb = unbroadcast(tp, g, b);
                add(tp, b, gb);
            }
        }
        Op::Sub(a, b) => {
            if wants(a) {
                let ga = unbroadcast(tp, g, a);
                add(tp, a, ga);
            }
            if wants(b) {
                let negated = g_neg(tp, g);
                let gb = unbroadcast(tp, negated, b);
                add(tp, b, gb);
            }
        }
        Op::Mul(a, b) => {
            if wants(a) {
                let vb = var(tp, b);
                let ga = g_mul(tp, g, vb);
                let ga = unbroadcast(tp, ga, a);
                add(tp, a, ga);
            }
            if wants(b) {
                let va = var(tp, a);
                let gb = g_mul(tp, g, va);
                let gb = unbroadcast(tp, gb, b);
                add(tp, b, gb);
            }
        }
        Op::Div(a, b) => {
            // d(a / b)/da = 1 / b, d(a / b)/db = −(a / b) / b.
            let vb = var(tp, b);
            let over_b = g_div(tp, g, vb);
            if wants(a) {
                let ga = unbroadcast(tp, over_b, a);
                add(tp, a, ga);
            }
            if wants(b) {
                let scaled = g_mul(tp, over_b, out);
                let negated = g_neg(tp, scaled);
                let gb = unbroadcast(tp, negated, b);
                add(tp, b, gb);
            }
        }
        Op::Unary(x, function) => {
            let gx = unary(tp, function, var(tp, x), out, g);
            add(tp, x, gx);
        }
        Op::Sum(x) => {
            let gx = expand(tp, g, x);
            add(tp, x, gx);
        }
        Op::Mean(x) => {
            let n = tp.value_of(x).len();
            let scaled = g_muls(tp, g, T::one() / T::from_usize(n.max(1)));
            let gx = expand(tp, scaled, x);
            add(tp, x, gx);
        }
        Op::SumAxis { x, axis } | Op::MeanAxis { x, axis } => {
            let kept = keep_axis(tp, g, x, axis);
            let kept = if matches!(op, Op::MeanAxis { .. }) {
                let n = tp.shape(x)[axis];
                g_muls(tp, kept, T::one() / T::from_usize(n.max(1)))
            } else {
                kept
            };
            let gx = expand(tp, kept, x);
            add(tp, x, gx);
        }
        Op::MaxAxis { x, axis } | Op::MinAxis { x, axis } => {
            let choose = if matches!(op, Op::MaxAxis { .. }) { argmax_lane::<T> } else { argmin_lane::<T> };
            let shape = shape_of(tp, x);
            let lanes = AxisLanes::new(shape.slice(), axis);
            // Each lane's g to the element it chose (lanes come in g's order).
            let mut chosen = tp.index_scratch(0);
            let data = &tp.value_of(x).data;
            lanes.for_each(|_, start| chosen.push(start + choose(data, lanes, start) * lanes.inner));
            let gx = scatter::scatter_add(tp, g, chosen, shape);
            add(tp, x, gx);
        }
        Op::MatMul(a, b, product) | Op::Bmm(a, b, product) => {
            // `g @ op(b)ᵀ` to `a` and `op(a)ᵀ @ g` to `b`, as products that
            // read their operands transposed (no copies); a transposed
            // operand's gradient is the transpose of those.
            let bmm = matches!(op, Op::Bmm(..));
            let [ta, tb] = product.transposed;
            let (va, vb) = (var(tp, a), var(tp, b));
            if wants(a) {
                let ga = if ta {
                    matmul::gradient_product(tp, bmm, [vb, g], [tb, true], a)
                } else {
                    matmul::gradient_product(tp, bmm, [g, vb], [false, !tb], a)
                };
                let ga = unbroadcast(tp, ga, a);
                add(tp, a, ga);
            }
            if wants(b) {
                let gb = if tb {
                    matmul::gradient_product(tp, bmm, [g, va], [true, ta], b)
                } else {
                    matmul::gradient_product(tp, bmm, [va, g], [!ta, false], b)
                };
                let gb = unbroadcast(tp, gb, b);
                add(tp, b, gb);
            }
        }
        Op::Transpose(x) => {
            let gx = g_transpose(tp, g);
            add(tp, x, gx);
        }
        Op::Permute { x, ref order, ndim } => {
            let back = permute::inverse(order, ndim);
            let gx = g_permute(tp, g, &back[..ndim as usize]);
            add(tp, x, gx);
        }
        Op::Reshape(x) => {
            let shape = shape_of(tp, x);
            let gx = g_reshape(tp, g, shape.slice());
            add(tp, x, gx);
        }
        Op::Slice { x, ref starts } => {
            let gx = pad(tp, g, shape_of(tp, x), starts.slice());
            add(tp, x, gx);
        }
        Op::Concat { a, b, axis } => {
            let shape = shape_of(tp, out.index());
            let split = tp.shape(a)[axis];
            let mut stops = shape.clone();
            stops[axis] = split;
            let mut starts = IxDyn::zeros(shape.ndim());
            let ga = g_slice(tp, g, starts.slice(), stops.slice());
            starts[axis] = split;
            let gb = g_slice(tp, g, starts.slice(), shape.slice());
            add(tp, a, ga);
            add(tp, b, gb);
        }
        Op::Softmax { x, axis } => {
            // s · (g − Σ g · s).
            let gs = g_mul(tp, g, out);
            let total = g_sum_axis(tp, gs, axis as isize, true);
            let spread = g_mul(tp, out, total);
            let gx = g_sub(tp, gs, spread);
            add(tp, x, gx);
        }
        Op::LogSoftmax { x, axis } => {
            // g − softmax · Σ g.
            let p = g_exp(tp, out);
            let total = g_sum_axis(tp, g, axis as isize, true);
            let spread = g_mul(tp, p, total);
            let gx = g_sub(tp, g, spread);
            add(tp, x, gx);
        }
        Op::Mse(y, t) => {
            // g · 2 (y − t) / n to y, its negation to t.
            let n = tp.value_of(y).len();
            let (vy, vt) = (var(tp, y), var(tp, t));
            let diff = g_sub(tp, vy, vt);
            let scaled = g_muls(tp, diff, T::from_f64(2.0) / T::from_usize(n.max(1)));
            let gy = g_mul(tp, scaled, g);
            let gt = g_neg(tp, gy);
            add(tp, y, gy);
            add(tp, t, gt);
        }
        Op::CrossEntropy { logits, ref targets } => {
            // g · (softmax(logits) − onehot(targets)) / n.
            let shape = shape_of(tp, logits);
            let classes = shape[shape.ndim() - 1];
            let onehot = tp.constant_with(shape.slice(), |m| {
                m.fill(T::zero());
                targets.iter().enumerate().for_each(|(row, &t)| m[row * classes + t] = T::one());
            });
            let p = g_softmax(tp, var(tp, logits), -1);
            let diff = g_sub(tp, p, onehot);
            let scaled = g_muls(tp, diff, T::one() / T::from_usize(targets.len().max(1)));
            let gx = g_mul(tp, scaled, g);
            add(tp, logits, gx);
        }
        Op::Embedding { table, ref ids } => {
            // Each row of g added to the row of its id.
            let shape = shape_of(tp, table);
            let dim = shape[1];
            let mut rows = tp.index_scratch(0);
            ids.iter().for_each(|&id| rows.extend(id * dim..(id + 1) * dim));
            let gt = scatter::scatter_add(tp, g, rows, shape);
            add(tp, table, gt);
        }
        Op::LayerNorm { x, gamma, beta, eps } => {
            let (gx, g_gamma, g_beta) = layer_norm(tp, var(tp, x), var(tp, gamma), g, eps);
            add(tp, x, gx);
            add(tp, gamma, g_gamma);
            add(tp, beta, g_beta);
        }
        Op::Where { mask, a, b } => {
            let m = var(tp, mask);
            let ga_ = g_mul(tp, g, m);
            let ga = unbroadcast(tp, ga_, a);
            let not_m = g_neg(tp, m);
            let not_m = g_adds(tp, not_m, T::one());
            let gb_ = g_mul(tp, g, not_m);
            let gb = unbroadcast(tp, gb_, b);
            add(tp, a, ga);
            add(tp, b, gb);
        }
        Op::Cumsum { x, axis } => {
            // The reverse running sum: Σ g − cumsum(g) + g.
            let total = g_sum_axis(tp, g, axis as isize, true);
            let running = g_cumsum(tp, g, axis as isize);
            let before = g_sub(tp, total, running);
            let gx = g_add(tp, before, g);
            add(tp, x, gx);
        }
        Op::Fused(ref node) => return Ok(node.replay(tp)),
        // The segment's ops again, kept: the caller walks back through them.
        Op::Checkpoint(ref segment) => {
            let shape = shape_of(tp, id);
            let location = tp.location_of(id);
            return Ok(segment.replay(tp, shape.slice(), location));
        }
        Op::Attention { q, k, v, causal, .. } => {
            let inputs = [q, k, v].map(|id| var(tp, id));
            return Ok(Some(attention::replay(tp, inputs, causal)));
        }
        Op::AttentionPacked { qkv, heads, causal, .. } => {
            let qkv = var(tp, qkv);
            return Ok(Some(attention_packed::replay(tp, qkv, heads, causal)));
        }
        Op::Custom(ref node) => {
            let inputs: Vec<Var> = node.inputs.iter().map(|&id| var(tp, id)).collect();
            let grads = node.backward_graph(tp, &inputs, out, g).ok_or(node.name())?;
            for (&x, gx) in node.inputs.iter().zip(grads) {
                if let Some(gx) = gx {
                    add(tp, x, gx);
                }
            }
        }
        // Indexing and pooling: a flat index map, applied by `take` or
        // `scatter_add` (each the other's adjoint).
        Op::Gather { x, axis, ref indices } => {
            let (x_shape, out_shape) = (shape_of(tp, x), shape_of(tp, id));
            let mut sources = tp.index_scratch(0);
            index::gather_sources(x_shape.slice(), out_shape.slice(), axis, indices, &mut sources);
            let gx = scatter::scatter_add(tp, g, sources, x_shape);
            add(tp, x, gx);
        }
        Op::IndexSelect { x, axis, ref indices } => {
            let x_shape = shape_of(tp, x);
            let mut sources = tp.index_scratch(0);
            index::index_select_sources(x_shape.slice(), axis, indices, &mut sources);
            let gx = scatter::scatter_add(tp, g, sources, x_shape);
            add(tp, x, gx);
        }
        Op::MaxPool2d { x, spec } => {
            let x_shape = shape_of(tp, x);
            let mut sources = tp.index_scratch(0);
            pool::max_pool2d_sources(&tp.value_of(x).data, x_shape.slice(), spec, &mut sources);
            let gx = scatter::scatter_add(tp, g, sources, x_shape);
            add(tp, x, gx);
        }
        Op::AvgPool2d { x, spec } => {
            // Each window's g, scaled, to every input element it covers.
            let x_shape = shape_of(tp, x);
            let (mut outputs, mut inputs) = (tp.index_scratch(0), tp.index_scratch(0));
            let scale: T = pool::avg_pool2d_pairs(x_shape.slice(), spec, &mut outputs, &mut inputs);
            let pairs = IxDyn(&[outputs.len()]);
            let shares = scatter::take(tp, g, outputs, pairs);
            let shares = g_muls(tp, shares, scale);
            let gx = scatter::scatter_add(tp, shares, inputs, x_shape);
            add(tp, x, gx);
        }
        Op::Take { x, ref indices } => {
            let copy = tp.copy_indices(indices);
            let gx = scatter::scatter_add(tp, g, copy, shape_of(tp, x));
            add(tp, x, gx);
        }
        Op::ScatterAdd { x, ref indices } => {
            let copy = tp.copy_indices(indices);
            let gx = scatter::take(tp, g, copy, shape_of(tp, x));
            add(tp, x, gx);
        }
        Op::Conv2d { x, w, b, spec } => {
            // Group by group (slices of channels), each a single-group product.
            let (xs, ws, outs) = (shape_of(tp, x), shape_of(tp, w), shape_of(tp, id));
            let groups = conv::groups(spec);
            let ([n, _, h, wd], [o, cg, kh, kw], [_, _, oh, ow]) =
                ([xs[0], xs[1], xs[2], xs[3]], [ws[0], ws[1], ws[2], ws[3]], [outs[0], outs[1], outs[2], outs[3]]);
            let og = o / groups;
            let (mut gx, mut gw): (Option<Var>, Option<Var>) = (None, None);
            for k in 0..groups {
                let part = |tp: &mut Tape<T>, v: Var, starts: [usize; 4], stops: [usize; 4]| {
                    if groups == 1 { v } else { g_slice(tp, v, &starts, &stops) }
                };
                let xk = part(tp, var(tp, x), [0, k * cg, 0, 0], [n, (k + 1) * cg, h, wd]);
                let wk = part(tp, var(tp, w), [k * og, 0, 0, 0], [(k + 1) * og, cg, kh, kw]);
                let gk = part(tp, g, [0, k * og, 0, 0], [n, (k + 1) * og, oh, ow]);
                let shapes = ([n, cg, h, wd], [og, cg, kh, kw]);
                let (gxk, gwk) = conv_grads(tp, [xk, wk, gk], shapes, spec, [wants(x), wants(w)]);
                let join = |tp: &mut Tape<T>, sum: Option<Var>, next: Option<Var>, axis: isize| match (sum, next) {
                    (Some(sum), Some(next)) => Some(g_concat(tp, sum, next, axis)),
                    (sum, next) => sum.or(next),
                };
                gx = join(tp, gx, gxk, 1);
                gw = join(tp, gw, gwk, 0);
            }
            if let Some(gx) = gx {
                add(tp, x, gx);
            }
            if let Some(gw) = gw {
                add(tp, w, gw);
            }
            if let Some(b) = b
                && wants(b)
            {
                let g3 = g_reshape(tp, g, &[n, o, oh * ow]);
                let per_channel = g_sum_axis(tp, g3, 0, false);
                let gb = g_sum_axis(tp, per_channel, 1, false);
                add(tp, b, gb);
            }
        }
        Op::BatchNorm { x, gamma, beta, ref stats, train } => {
            // As [N, C, S]: the statistics are over axes 0 and 2 (the
            // batch's, recomputed as ops, in training; the running ones,
            // constants, in evaluation).
            let shape = shape_of(tp, x);
            let (n, c) = (shape[0], shape[1]);
            let s = tp.value_of(x).len() / (n * c).max(1);
            let x3 = g_reshape(tp, var(tp, x), &[n, c, s]);
            let g3 = g_reshape(tp, g, &[n, c, s]);
            let gamma3 = g_reshape(tp, var(tp, gamma), &[1, c, 1]);
            let (x_hat, rstd) = if train {
                let mean = mean_axes(tp, x3, &[2, 0]);
                let centred = g_sub(tp, x3, mean);
                let squares = g_mul(tp, centred, centred);
                let variance = mean_axes(tp, squares, &[2, 0]);
                let rstd = rstd_of(tp, variance, stats[2 * c]);
                (g_mul(tp, centred, rstd), rstd)
            } else {
                let (mean, rstd) = (&stats[..c], &stats[c..2 * c]);
                let mean = tp.constant_with(&[1, c, 1], |m| m.copy_from_slice(mean));
                let rstd = tp.constant_with(&[1, c, 1], |r| r.copy_from_slice(rstd));
                let centred = g_sub(tp, x3, mean);
                (g_mul(tp, centred, rstd), rstd)
            };
            let g_hat = g_mul(tp, g3, gamma3);
            let gx = if train { normalised_grad(tp, g_hat, x_hat, rstd, &[2, 0]) } else { g_mul(tp, g_hat, rstd) };
            let gx = g_reshape(tp, gx, shape.slice());
            add(tp, x, gx);
            let (g_gamma, g_beta) = affine_grads(tp, g3, x_hat, c);
            add(tp, gamma, g_gamma);
            add(tp, beta, g_beta);
        }
        Op::GroupNorm { x, gamma, beta, groups, ref stats } => {
            // As [N, G, (C / G)·S]: each block's statistics over its last axis.
            let shape = shape_of(tp, x);
            let (n, c) = (shape[0], shape[1]);
            let s = tp.value_of(x).len() / (n * c).max(1);
            let block = c / groups.max(1) * s;
            let eps = stats[stats.len() - 1];
            let xb = g_reshape(tp, var(tp, x), &[n, groups, block]);
            let mean = g_mean_axis(tp, xb, 2, true);
            let centred = g_sub(tp, xb, mean);
            let squares = g_mul(tp, centred, centred);
            let variance = g_mean_axis(tp, squares, 2, true);
            let rstd = rstd_of(tp, variance, eps);
            let x_hat_b = g_mul(tp, centred, rstd);
            let g3 = g_reshape(tp, g, &[n, c, s]);
            let gamma3 = g_reshape(tp, var(tp, gamma), &[1, c, 1]);
            let g_hat = g_mul(tp, g3, gamma3);
            let g_hat_b = g_reshape(tp, g_hat, &[n, groups, block]);
            let gx = normalised_grad(tp, g_hat_b, x_hat_b, rstd, &[2]);
            let gx = g_reshape(tp, gx, shape.slice());
            add(tp, x, gx);
            let x_hat = g_reshape(tp, x_hat_b, &[n, c, s]);
            let (g_gamma, g_beta) = affine_grads(tp, g3, x_hat, c);
            add(tp, gamma, g_gamma);
            add(tp, beta, g_beta);
        }
    }
    Ok(None)
}

/// The gradient of a unary function of `x` (value `out`) from `g`.
fn unary<T: Float>(tp: &mut Tape<T>, function: Unary<T>, x: Var, out: Var, g: Var) -> Var {
    match function {
        Unary::Neg => g_neg(tp, g),
        Unary::AddScalar(_) => g,
        Unary::MulScalar(s) => g_muls(tp, g, s),
        // Piecewise-constant derivatives: a constant mask of the first-order
        // rule's own values (so boundaries are treated as it treats them).
        Unary::Relu | Unary::Abs | Unary::LeakyRelu(_) | Unary::Clamp(..) => {
            let shape = shape_of(tp, x.index());
            let mut mask = tp.scratch(tp.value_of(x.index()).len());
            mask.iter_mut().zip(&tp.value_of(x.index()).data).for_each(|(m, &v)| *m = function.df_at(v));
            let mask_var = tp.constant_with(shape.slice(), |m| m.copy_from_slice(&mask));
            tp.recycle(mask);
            let mask = mask_var;
            g_mul(tp, g, mask)
        }
        Unary::Sigmoid => {
            // g · y (1 − y).
            let gy = g_mul(tp, g, out);
            let gyy = g_mul(tp, gy, out);
            g_sub(tp, gy, gyy)
        }
        Unary::Tanh => {
            // g (1 − y²).
            let gy = g_mul(tp, g, out);
            let gyy = g_mul(tp, gy, out);
            g_sub(tp, g, gyy)
        }
        Unary::Exp => g_mul(tp, g, out),
        Unary::Log => g_div(tp, g, x),
        Unary::Sqrt => {
            let twice = g_add(tp, out, out);
            g_div(tp, g, twice)
        }
        Unary::Pow(p) => {
            let lower = g_pow(tp, x, p - T::one());
            let d = g_muls(tp, lower, p);
            g_mul(tp, g, d)
        }
        Unary::Gelu => {
            // 0.5 (1 + t) + 0.5 x (1 − t²) k (1 + 3 c x²), t = tanh(k (x + c x³)).
            let (k, c) = (T::from_f64(0.797_884_560_802_865_4), T::from_f64(0.044_715));
            let half = T::from_f64(0.5);
            let xx = g_mul(tp, x, x);
            let xxx = g_mul(tp, xx, x);
            let cubic = g_muls(tp, xxx, c);
            let inner = g_add(tp, x, cubic);
            let inner = g_muls(tp, inner, k);
            let t = g_tanh(tp, inner);
            let one_plus_t = g_adds(tp, t, T::one());
            let first = g_muls(tp, one_plus_t, half);
            let tt = g_mul(tp, t, t);
            let one_minus_tt = g_neg(tp, tt);
            let one_minus_tt = g_adds(tp, one_minus_tt, T::one());
            let slope = g_muls(tp, xx, T::from_f64(3.0) * c);
            let slope = g_adds(tp, slope, T::one());
            let slope = g_muls(tp, slope, k * half);
            let second = g_mul(tp, x, one_minus_tt);
            let second = g_mul(tp, second, slope);
            let d = g_add(tp, first, second);
            g_mul(tp, g, d)
        }
        Unary::Silu => {
            // s (1 + x (1 − s)), s = sigmoid(x).
            let s = g_sigmoid(tp, x);
            let one_minus_s = g_neg(tp, s);
            let one_minus_s = g_adds(tp, one_minus_s, T::one());
            let x_part = g_mul(tp, x, one_minus_s);
            let x_part = g_adds(tp, x_part, T::one());
            let d = g_mul(tp, s, x_part);
            g_mul(tp, g, d)
        }
        Unary::Softplus => {
            let s = g_sigmoid(tp, x);
            g_mul(tp, g, s)
        }
    }
}

/// A single-group convolution's gradients as ops, in its input `x` and
/// weight `w` (each if wanted) from `g`: the input's is g times the weight
/// scattered back from im2col positions of the padded input, the
/// weight's is g times the im2col of the padded input (a `take`).
fn conv_grads<T: Float>(
    tp: &mut Tape<T>,
    [x, w, g]: [Var; 3],
    (xs, ws): ([usize; 4], [usize; 4]),
    spec: conv::ConvSpec,
    [want_x, want_w]: [bool; 2],
) -> (Option<Var>, Option<Var>) {
    let mut sources = tp.index_scratch(0);
    let ([ph, pw], [oh, ow]) = conv::im2col_sources(&xs, &ws, spec, &mut sources);
    let ([n, c, h, wd], [o, _, kh, kw]) = (xs, ws);
    let (positions, taps) = (oh * ow, c * kh * kw);
    let padded = IxDyn(&[n, c, h + 2 * ph, wd + 2 * pw]);
    // g as a product's gradient: [N, O, OH·OW].
    let g3 = g_reshape(tp, g, &[n, o, positions]);
    let gw = want_w.then(|| {
        let xp = pad(tp, x, padded.clone(), &[0, 0, ph, pw]);
        let copy = tp.copy_indices(&sources);
        let cols = scatter::take(tp, xp, copy, IxDyn(&[n, positions, taps]));
        let per_image = g_bmm(tp, g3, cols);
        let gw = g_sum_axis(tp, per_image, 0, false);
        g_reshape(tp, gw, &ws)
    });
    let gx = if want_x {
        let gt = g_transpose(tp, g3);
        let wr = g_reshape(tp, w, &[o, taps]);
        let cols = g_matmul(tp, gt, wr);
        let gxp = scatter::scatter_add(tp, cols, sources, padded);
        Some(g_slice(tp, gxp, &[0, 0, ph, pw], &[n, c, ph + h, pw + wd]))
    } else {
        tp.recycle_indices(sources);
        None
    };
    (gx, gw)
}

/// The mean over `axes` (in that order, each kept as 1).
fn mean_axes<T: Float>(tp: &mut Tape<T>, x: Var, axes: &[isize]) -> Var {
    axes.iter().fold(x, |x, &axis| g_mean_axis(tp, x, axis, true))
}

/// `1 / √(var + eps)`.
fn rstd_of<T: Float>(tp: &mut Tape<T>, var: Var, eps: T) -> Var {
    let shifted = g_adds(tp, var, eps);
    g_pow(tp, shifted, T::from_f64(-0.5))
}

/// The input's gradient of a normalisation through its own statistics:
/// `rstd · (ĝ − mean(ĝ) − x̂ · mean(ĝ · x̂))`, the means over `axes`.
fn normalised_grad<T: Float>(tp: &mut Tape<T>, g_hat: Var, x_hat: Var, rstd: Var, axes: &[isize]) -> Var {
    let mean_g = mean_axes(tp, g_hat, axes);
    let gx_hat = g_mul(tp, g_hat, x_hat);
    let mean_gx = mean_axes(tp, gx_hat, axes);
    let spread = g_mul(tp, x_hat, mean_gx);
    let inner = g_sub(tp, g_hat, mean_g);
    let inner = g_sub(tp, inner, spread);
    g_mul(tp, inner, rstd)
}

/// The scale's and shift's gradients of `[N, C, S]` values: `Σ g · x̂` and
/// `Σ g` per channel, as `[C]`.
fn affine_grads<T: Float>(tp: &mut Tape<T>, g3: Var, x_hat: Var, c: usize) -> (Var, Var) {
    let gx = g_mul(tp, g3, x_hat);
    let per = |tp: &mut Tape<T>, v: Var| {
        let v = g_sum_axis(tp, v, 2, false);
        let v = g_sum_axis(tp, v, 0, false);
        g_reshape(tp, v, &[c])
    };
    (per(tp, gx), per(tp, g3))
}

/// Layer norm's three gradients as ops, the statistics recomputed from `x`.
fn layer_norm<T: Float>(tp: &mut Tape<T>, x: Var, gamma: Var, g: Var, eps: T) -> (Var, Var, Var) {
    let mean = g_mean_axis(tp, x, -1, true);
    let centred = g_sub(tp, x, mean);
    let squares = g_mul(tp, centred, centred);
    let var = g_mean_axis(tp, squares, -1, true);
    let var = g_adds(tp, var, eps);
    let rstd = g_pow(tp, var, T::from_f64(-0.5));
    let x_hat = g_mul(tp, centred, rstd);
    let g_hat = g_mul(tp, g, gamma);
    let mean_g = g_mean_axis(tp, g_hat, -1, true);
    let g_hat_x = g_mul(tp, g_hat, x_hat);
    let mean_gx = g_mean_axis(tp, g_hat_x, -1, true);
    let spread = g_mul(tp, x_hat, mean_gx);
    let inner = g_sub(tp, g_hat, mean_g);
    let inner = g_sub(tp, inner, spread);
    let gx = g_mul(tp, inner, rstd);
    let g_x_hat = g_mul(tp, g, x_hat);
    let g_gamma = unbroadcast(tp, g_x_hat, gamma.index());
    let g_beta = unbroadcast(tp, g, gamma.index());
    (gx, g_gamma, g_beta)
}

/// Node `x`'s shape, held inline up to four dims (no allocation).
fn shape_of<T: Float>(tp: &Tape<T>, x: NodeId) -> IxDyn {
    tp.value_of(x).shape.clone()
}

/// The shape of `v` if it names a node (not the handle of an op that
/// failed, which every later op passes on).
fn live_shape<T: Float>(tp: &Tape<T>, v: Var) -> Option<IxDyn> {
    tp.check(v).ok().map(|id| shape_of(tp, id))
}

/// `g` summed back to the shape of node `x` over the dims broadcasting
/// stretched (leading dims, and dims where `x` has 1).
fn unbroadcast<T: Float>(tp: &mut Tape<T>, g: Var, x: NodeId) -> Var {
    let target = shape_of(tp, x);
    let mut g = g;
    while let Some(shape) = live_shape(tp, g)
        && shape.ndim() > target.ndim()
    {
        g = g_sum_axis(tp, g, 0, false);
    }
    for (axis, &d) in target.slice().iter().enumerate() {
        if d == 1 && live_shape(tp, g).is_some_and(|shape| shape[axis] != 1) {
            g = g_sum_axis(tp, g, axis as isize, true);
        }
    }
    g
}

/// `g` (broadcastable to node `x`'s shape) stretched to it: `g · ones`.
fn expand<T: Float>(tp: &mut Tape<T>, g: Var, x: NodeId) -> Var {
    let shape = shape_of(tp, x);
    let ones = tp.constant_with(shape.slice(), |o| o.fill(T::one()));
    g_mul(tp, g, ones)
}

/// `g` of a reduction over `axis` of node `x`, with that axis kept as 1.
fn keep_axis<T: Float>(tp: &mut Tape<T>, g: Var, x: NodeId, axis: usize) -> Var {
    let mut shape = shape_of(tp, x);
    shape[axis] = 1;
    match live_shape(tp, g) {
        Some(current) if current == shape => g,
        _ => g_reshape(tp, g, shape.slice()),
    }
}

/// `g` placed at `starts` in zeros of `shape` (slice's gradient), by
/// concatenating zeros before and after it on each axis.
fn pad<T: Float>(tp: &mut Tape<T>, g: Var, shape: IxDyn, starts: &[usize]) -> Var {
    let mut g = g;
    for (axis, (&start, &full)) in starts.iter().zip(shape.slice()).enumerate() {
        let Some(current) = live_shape(tp, g) else { return g };
        let after = full - start - current[axis];
        for (len, before) in [(start, true), (after, false)] {
            if len == 0 {
                continue;
            }
            let Some(mut zeros_shape) = live_shape(tp, g) else { return g };
            zeros_shape[axis] = len;
            let zeros = tp.constant_with(zeros_shape.slice(), |z| z.fill(T::zero()));
            g = if before { g_concat(tp, zeros, g, axis as isize) } else { g_concat(tp, g, zeros, axis as isize) };
        }
    }
    g
}
