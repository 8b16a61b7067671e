//! Shape rules: one function per [`Rule`], each computing the output shape
//! of a call from its inputs' or explaining, for a person, why it cannot
//! (`explain.rs` writes the messages). An unknown input never causes an
//! error; it makes the output unknown where it matters. The functions are
//! in sections named for the runtime module of their ops.

use crate::explain::{is, message, symbol_note, with_note};
use crate::shape::{self, Dim, Shape};

/// How a built-in's output shape follows from its inputs': one variant per
/// function below ([`apply`] dispatches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Elementwise on two tensors with NumPy broadcasting (`ops/arithmetic.rs`).
    Broadcast,
    /// Elementwise on one tensor: the shape is kept (`ops/unary.rs`, dropout).
    Same,
    /// Every element to one scalar `[]`.
    ReduceAll,
    /// Over one axis (removed, or kept as 1 with keepdim).
    ReduceAxis,
    /// `a @ b`: `[.., m, k] @ [.., k, n]` → `[.., m, n]`, batch dims broadcast.
    MatMul,
    /// `[b, m, k]` and `[b, k, n]` → `[b, m, n]`.
    Bmm,
    /// Queries `[.., tq, d]`, keys `[.., tk, d]`, values `[.., tk, dv]`
    /// (the same leading dims) → `[.., tq, dv]`.
    Attention,
    /// A packed `qkv` `[.., T, 3 · heads · d]` (queries, keys, values) →
    /// `[.., T, heads · d]`.
    AttentionPacked,
    /// The last two dims swapped.
    Transpose,
    /// The dims reordered by a list of axes, each once.
    Permute,
    /// To the listed dims; the element count must be kept.
    Reshape,
    /// `[starts]..[stops]`, one of each per dim.
    Slice,
    /// Joined along an axis; every other dim must be equal.
    Concat,
    /// Along an axis that must exist; the shape is kept.
    Softmax,
    /// Two tensors of one shape to a scalar `[]`.
    Mse,
    /// Logits `[.., c]` (2-D or more) and class targets to a scalar `[]`.
    CrossEntropy,
    /// Rows of a table `[v, d]` gathered by ids: `[..ids, d]`.
    Embedding,
    /// Normalized over the last dim `d`; gamma and beta are `[d]`.
    LayerNorm,
    /// `grad(y, x)`: `y` must hold one element; the result has `x`'s shape.
    GradOf,
    /// `[N, C, ...]` normalised per channel or block of channels: every
    /// other tensor argument is `[C]`, and `groups` (if given) divides `C`.
    ChannelNorm,
    /// `[N, C, H, W]` with `[O, C / groups, kh, kw]` → `[N, O, OH, OW]`.
    Conv2d,
    /// `[N, C, H, W]` → `[N, C, OH, OW]`, windows `kernel`, `stride`, `padding`.
    Pool2d,
    /// The dims from an axis on collapsed into one.
    Flatten,
    // Indexing and masking (issue 13).
    /// Along an axis of `x`, one index per output element: `x`'s rank,
    /// the (run-time) shape of the indices.
    Gather,
    /// Slices along an axis of `x` picked by a list of indices of run-time length.
    IndexSelect,
    /// `where(mask, a, b)`: `a` and `b` must broadcast; the mask's shape is
    /// known at run time only, so the output's is too.
    Where,
}

/// A tensor argument as messages quote it.
pub(crate) struct Operand {
    /// The expression as written: `x @ w1`.
    pub(crate) text: String,
    pub(crate) shape: Shape,
    /// Where a name's shape came from: `declared`, `from \`let h = ...\``.
    pub(crate) origin: Option<String>,
}

/// What a rule sees of one call.
pub(crate) struct Site {
    /// The whole call as written: `softmax(x, 2)`, `x @ w`.
    pub(crate) text: String,
    /// The operator symbol or built-in name.
    pub(crate) name: String,
    /// The tensor arguments, in order.
    pub(crate) tensors: Vec<Operand>,
    /// The integer (axis) arguments, `None` when not a literal.
    pub(crate) ints: Vec<Option<i128>>,
    /// The flag arguments, `None` when not a literal.
    pub(crate) flags: Vec<Option<bool>>,
    /// The list arguments, entries unknown when not literal or symbolic.
    pub(crate) lists: Vec<Vec<Dim>>,
    /// The shapes of the integer-indices arguments: declared, or unknown.
    pub(crate) indices: Vec<Operand>,
}

type Outcome = Result<Shape, String>;

pub(crate) fn apply(rule: Rule, site: &Site) -> Outcome {
    match rule {
        Rule::Broadcast => broadcast(site),
        Rule::Same => Ok(site.tensors[0].shape.clone()),
        Rule::ReduceAll => Ok(Shape::scalar()),
        Rule::ReduceAxis => reduce_axis(site),
        Rule::MatMul => matmul(site),
        Rule::Bmm => bmm(site),
        Rule::Attention => attention(site),
        Rule::AttentionPacked => attention_packed(site),
        Rule::Transpose => transpose(site),
        Rule::Permute => permute(site),
        Rule::Reshape => reshape(site),
        Rule::Slice => slice(site),
        Rule::Concat => concat(site),
        Rule::Softmax => softmax(site),
        Rule::Mse => mse(site),
        Rule::CrossEntropy => cross_entropy(site),
        Rule::Embedding => embedding(site),
        Rule::LayerNorm => layer_norm(site),
        Rule::GradOf => grad_of(site),
        Rule::ChannelNorm => channel_norm(site),
        Rule::Conv2d => conv2d(site),
        Rule::Pool2d => pool2d(site),
        Rule::Flatten => flatten(site),
        Rule::Gather => gather(site),
        Rule::IndexSelect => index_select(site),
        Rule::Where => where_(site),
    }
}

fn known(op: &Operand) -> Option<&[Dim]> {
    op.shape.dims()
}

// ---- ops/arithmetic.rs: `+ - * /` ----

fn broadcast(site: &Site) -> Outcome {
    let (a, b) = (&site.tensors[0], &site.tensors[1]);
    let (Some(da), Some(db)) = (known(a), known(b)) else { return Ok(Shape::Unknown) };
    match shape::broadcast(da, db) {
        Ok(dims) => Ok(Shape::Known(dims)),
        Err((i, j)) => {
            let verb = match site.name.as_str() {
                "+" => "add",
                "-" => "subtract",
                "*" => "multiply",
                _ => "divide",
            };
            let summary = format!("`{}`: cannot {verb} {} and {} elementwise", site.text, a.shape, b.shape);
            let why = format!(
                "aligned from the right, dim {i} of `{}` ({}) and dim {j} of `{}` ({}) differ, and neither is 1",
                a.text, da[i], b.text, db[j]
            );
            let details = with_note(vec![is(a), is(b), why], symbol_note(&da[i], &db[j]));
            let help = match (da.len(), db.len(), verb) {
                (1, n, "add" | "subtract") if n >= 2 => Some(bias_help(b, a)),
                (n, 1, "add" | "subtract") if n >= 2 => Some(bias_help(a, b)),
                _ => None,
            };
            Err(message(summary, &details, help))
        }
    }
}

fn bias_help(full: &Operand, bias: &Operand) -> String {
    let last = full.shape.dims().and_then(<[Dim]>::last).cloned().unwrap_or(Dim::Unknown);
    format!("a bias added to {} has one entry per column: `{}` should be [{last}]", full.shape, bias.text)
}

// ---- ops/reduce.rs ----

fn reduce_axis(site: &Site) -> Outcome {
    let x = &site.tensors[0];
    let (Some(dims), Some(axis)) = (known(x), site.ints[0]) else { return Ok(Shape::Unknown) };
    let axis = checked_axis(site, x, dims, axis)?;
    let mut out = dims.to_vec();
    match site.flags.first().copied().unwrap_or(Some(false)) {
        Some(true) => out[axis] = Dim::fixed(1),
        Some(false) => {
            out.remove(axis);
        }
        None => return Ok(Shape::Unknown),
    }
    Ok(Shape::Known(out))
}

/// The axis argument, checked against `x`'s rank when both are known.
fn checked_axis(site: &Site, x: &Operand, dims: &[Dim], axis: i128) -> Result<usize, String> {
    shape::axis(axis, dims.len()).ok_or_else(|| {
        let n = dims.len() as i128;
        let summary = format!("`{}`: axis {axis} is out of range for a {n}-D input", site.text);
        let valid = if n == 0 {
            "a scalar has no axes".to_string()
        } else {
            format!("valid axes are {} to {}, and -1 is the last", -n, n - 1)
        };
        let help = (n > 0 && site.name.contains("softmax"))
            .then(|| format!("for the last axis write `{}({}, -1)`", site.name, x.text));
        message(summary, &[is(x), valid], help)
    })
}

// ---- ops/matmul.rs ----

fn matmul(site: &Site) -> Outcome {
    let (a, b) = (&site.tensors[0], &site.tensors[1]);
    let (Some(da), Some(db)) = (known(a), known(b)) else { return Ok(Shape::Unknown) };
    for (vector, left) in [(a, true), (b, false)] {
        let Some(dims) = vector.shape.dims().filter(|d| d.len() < 2) else { continue };
        let summary = format!("`{}`: a matrix product needs 2 or more dims on both sides", site.text);
        let help = match dims {
            [] => "to multiply every element by a number, use `*`".to_string(),
            [d] if left => format!("to use the vector as a row, reshape it: `reshape({}, [1, {d}])`", vector.text),
            [d] => format!("to use the vector as a column, reshape it: `reshape({}, [{d}, 1])`", vector.text),
            _ => unreachable!("fewer than 2 dims"),
        };
        return Err(message(summary, &[is(vector)], Some(help)));
    }
    let (m, k) = (&da[da.len() - 2], &da[da.len() - 1]);
    let (k2, n) = (&db[db.len() - 2], &db[db.len() - 1]);
    if k.differs(k2) {
        let right_dim = if db.len() == 2 { "the first dim" } else { "the second-to-last dim" };
        let summary = format!("`{}`: the inner dims of this matrix product differ ({k} vs {k2})", site.text);
        let why = format!("the last dim of `{}` ({k}) must equal {right_dim} of `{}` ({k2})", a.text, b.text);
        let details = with_note(vec![is(a), is(b), why], symbol_note(k, k2));
        return Err(message(summary, &details, transpose_help(a, b, "@")));
    }
    let batch = match shape::broadcast(&da[..da.len() - 2], &db[..db.len() - 2]) {
        Ok(batch) => batch,
        Err((i, j)) => {
            let summary = format!("`{}`: the batch dims of this matrix product do not broadcast", site.text);
            let why = format!("dim {i} of `{}` ({}) and dim {j} of `{}` ({}) differ", a.text, da[i], b.text, db[j]);
            return Err(message(summary, &with_note(vec![is(a), is(b), why], symbol_note(&da[i], &db[j])), None));
        }
    };
    let mut out = batch;
    out.extend([m.clone(), n.clone()]);
    Ok(Shape::Known(out))
}

/// Suggests the transpose (or the swap) that would make `a op b` fit.
fn transpose_help(a: &Operand, b: &Operand, op: &str) -> Option<String> {
    let (da, db) = (a.shape.dims()?, b.shape.dims()?);
    let last = |d: &[Dim], k: usize| d[d.len() - k].clone();
    let swapped = |d: &[Dim]| {
        let mut t = d.to_vec();
        let n = t.len();
        t.swap(n - 2, n - 1);
        Shape::Known(t)
    };
    let call = |e: &str, x: &str| if op == "@" { format!("{e} @ {x}") } else { format!("{op}({e}, {x})") };
    if last(da, 1).same(&last(db, 1)) == Some(true) {
        let fixed = call(&a.text, &format!("transpose({})", b.text));
        return Some(format!("did you mean `{fixed}`? `transpose({})` is {}", b.text, swapped(db)));
    }
    if last(da, 2).same(&last(db, 2)) == Some(true) {
        let fixed = call(&format!("transpose({})", a.text), &b.text);
        return Some(format!("did you mean `{fixed}`? `transpose({})` is {}", a.text, swapped(da)));
    }
    if da.len() == db.len() && last(db, 1).same(&last(da, 2)) == Some(true) {
        return Some(format!("did you mean `{}`, with the operands swapped?", call(&b.text, &a.text)));
    }
    None
}

fn bmm(site: &Site) -> Outcome {
    let (a, b) = (&site.tensors[0], &site.tensors[1]);
    let (Some(da), Some(db)) = (known(a), known(b)) else { return Ok(Shape::Unknown) };
    if let Some(bad) = [a, b].into_iter().find(|op| op.shape.dims().is_some_and(|d| d.len() != 3)) {
        let summary = format!("`{}`: bmm multiplies stacks of matrices, [batch, m, k] and [batch, k, n]", site.text);
        let help = "for plain matrices use `@`".to_string();
        return Err(message(summary, &[is(bad)], Some(help)));
    }
    if da[0].differs(&db[0]) {
        let summary = format!("`{}`: the batch dims differ ({} vs {})", site.text, da[0], db[0]);
        let why = "bmm pairs the i-th matrix of one stack with the i-th of the other".to_string();
        return Err(message(summary, &with_note(vec![is(a), is(b), why], symbol_note(&da[0], &db[0])), None));
    }
    if da[2].differs(&db[1]) {
        let summary = format!("`{}`: the inner dims differ ({} vs {})", site.text, da[2], db[1]);
        let why = format!("the last dim of `{}` must equal the middle dim of `{}`", a.text, b.text);
        let details = with_note(vec![is(a), is(b), why], symbol_note(&da[2], &db[1]));
        return Err(message(summary, &details, transpose_help(a, b, "bmm")));
    }
    let batch = if da[0] == Dim::Unknown { db[0].clone() } else { da[0].clone() };
    Ok(Shape::Known(vec![batch, da[1].clone(), db[2].clone()]))
}

// ---- ops/attention.rs ----

fn attention(site: &Site) -> Outcome {
    let (q, k, v) = (&site.tensors[0], &site.tensors[1], &site.tensors[2]);
    let (Some(dq), Some(dk), Some(dv)) = (known(q), known(k), known(v)) else { return Ok(Shape::Unknown) };
    if let Some(bad) = [q, k, v].into_iter().find(|op| op.shape.dims().is_some_and(|d| d.len() < 2)) {
        let summary =
            format!("`{}`: attention takes queries, keys and values of 2 or more dims, [.., T, d]", site.text);
        return Err(message(summary, &[is(bad)], None));
    }
    if dq.len() != dk.len() || dq.len() != dv.len() {
        let summary = format!("`{}`: queries, keys and values must have the same number of dims", site.text);
        return Err(message(summary, &[is(q), is(k), is(v)], None));
    }
    let n = dq.len();
    for (b, db) in [(k, dk), (v, dv)] {
        if let Some(axis) = (0..n - 2).find(|&i| dq[i].differs(&db[i])) {
            let summary = format!("`{}`: the leading dims differ ({} vs {})", site.text, dq[axis], db[axis]);
            let why = "attention pairs each (batch, head) of the queries with the same one of the keys and values";
            let details = with_note(vec![is(q), is(b), why.to_string()], symbol_note(&dq[axis], &db[axis]));
            return Err(message(summary, &details, None));
        }
    }
    if dq[n - 1].differs(&dk[n - 1]) {
        let summary =
            format!("`{}`: queries and keys have different feature dims ({} vs {})", site.text, dq[n - 1], dk[n - 1]);
        let why = format!(
            "each query is compared with each key by a dot product over the last dim of `{}` and `{}`",
            q.text, k.text
        );
        return Err(message(summary, &with_note(vec![is(q), is(k), why], symbol_note(&dq[n - 1], &dk[n - 1])), None));
    }
    if dk[n - 2].differs(&dv[n - 2]) {
        let summary =
            format!("`{}`: keys and values have different lengths ({} vs {})", site.text, dk[n - 2], dv[n - 2]);
        let why = "each key has its value: the second-to-last dims must match".to_string();
        return Err(message(summary, &with_note(vec![is(k), is(v), why], symbol_note(&dk[n - 2], &dv[n - 2])), None));
    }
    let mut out = dq.to_vec();
    out[n - 1] = dv[n - 1].clone();
    Ok(Shape::Known(out))
}

// ---- ops/attention_packed.rs ----

fn attention_packed(site: &Site) -> Outcome {
    let qkv = &site.tensors[0];
    let Some(dims) = known(qkv) else { return Ok(Shape::Unknown) };
    let n = dims.len();
    if n < 2 {
        let summary = format!("`{}`: `{}` must be [.., T, 3 * heads * d], 2-D or more", site.text, qkv.text);
        return Err(message(summary, &[is(qkv)], None));
    }
    let (parts, heads) = match site.ints.first() {
        Some(&Some(heads)) if heads < 1 => {
            return Err(message(format!("`{}`: {heads} heads; there must be at least one", site.text), &[], None));
        }
        Some(&Some(heads)) => {
            ((heads as u128).checked_mul(3).map_or(Dim::Unknown, Dim::fixed), format!("{heads} heads"))
        }
        _ => (Dim::fixed(3), "the heads".to_string()),
    };
    if let Err(why) = dims[n - 1].divided_by(&parts) {
        let last = &dims[n - 1];
        let summary = format!(
            "`{}`: the last dim of `{}` ({last}) does not hold queries, keys and values of {heads}: {last} / {parts} {why}",
            site.text, qkv.text,
        );
        let note = "the last dim holds the queries, then the keys, then the values, each heads * d wide";
        return Err(message(summary, &[is(qkv), note.to_string()], None));
    }
    // The heads' `d` columns each, the width of one of the three parts.
    let mut out = dims.to_vec();
    out[n - 1] = dims[n - 1].divided_by(&Dim::fixed(3)).unwrap_or(Dim::Unknown);
    Ok(Shape::Known(out))
}

// ---- ops/layout.rs ----

fn transpose(site: &Site) -> Outcome {
    let x = &site.tensors[0];
    let Some(dims) = known(x) else { return Ok(Shape::Unknown) };
    if dims.len() < 2 {
        let summary = format!("`{}`: transpose swaps the last two dims, so it needs 2 or more", site.text);
        return Err(message(summary, &[is(x)], None));
    }
    let mut out = dims.to_vec();
    let n = out.len();
    out.swap(n - 2, n - 1);
    Ok(Shape::Known(out))
}

fn permute(site: &Site) -> Outcome {
    let x = &site.tensors[0];
    let axes = &site.lists[0];
    let Some(dims) = known(x) else { return Ok(Shape::Unknown) };
    let usage = "list each axis of the input once, in the order the output takes them".to_string();
    if axes.len() != dims.len() {
        let summary = format!("`{}`: {} axes for a {}-D input", site.text, axes.len(), dims.len());
        return Err(message(summary, &[is(x), usage], None));
    }
    let mut seen = vec![false; dims.len()];
    let mut out = Vec::with_capacity(dims.len());
    for axis in axes {
        let Some(a) = axis.value() else { return Ok(Shape::Unknown) };
        match seen.get_mut(a as usize) {
            Some(seen) if !*seen => *seen = true,
            _ => {
                let summary = format!("`{}`: axis {a} is out of range or listed twice", site.text);
                return Err(message(summary, &[is(x), usage], None));
            }
        }
        out.push(dims[a as usize].clone());
    }
    Ok(Shape::Known(out))
}

fn reshape(site: &Site) -> Outcome {
    let x = &site.tensors[0];
    let target = Shape::Known(site.lists[0].clone());
    let (from, to) = (x.shape.elements(), target.elements());
    if from.differs(&to) {
        let summary = format!("`{}`: cannot reshape {} into {}", site.text, x.shape, target);
        let why = format!("{} has {from} elements, {target} has {to}; a reshape keeps every element", x.shape);
        return Err(message(summary, &[is(x), why], None));
    }
    Ok(target)
}

fn slice(site: &Site) -> Outcome {
    let x = &site.tensors[0];
    let (starts, stops) = (&site.lists[0], &site.lists[1]);
    if starts.len() != stops.len() {
        let summary = format!("`{}`: {} starts but {} stops", site.text, starts.len(), stops.len());
        return Err(message(summary, &["slice takes one start and one stop per dim".to_string()], None));
    }
    let Some(dims) = known(x) else { return Ok(Shape::Unknown) };
    if starts.len() != dims.len() {
        let summary = format!("`{}`: {} starts and stops for a {}-D input", site.text, starts.len(), dims.len());
        return Err(message(summary, &[is(x), "slice takes one start and one stop per dim".to_string()], None));
    }
    let mut out = Vec::with_capacity(dims.len());
    for (axis, ((start, stop), len)) in starts.iter().zip(stops).zip(dims).enumerate() {
        let fail = |why: String| {
            let summary = format!("`{}`: the slice {start}..{stop} does not fit dim {axis} ({len})", site.text);
            Err(message(summary, &[is(x), why], None))
        };
        if let (Some(a), Some(b)) = (start.value(), stop.value())
            && a > b
        {
            return fail(format!("the start {a} is past the stop {b}"));
        }
        if let (Some(b), Some(n)) = (stop.value(), len.value())
            && b > n
        {
            return fail(format!("the stop {b} is past the end of dim {axis}, which has {n} entries"));
        }
        out.push(stop.minus(start));
    }
    Ok(Shape::Known(out))
}

fn concat(site: &Site) -> Outcome {
    let (a, b) = (&site.tensors[0], &site.tensors[1]);
    let (Some(da), Some(db)) = (known(a), known(b)) else { return Ok(Shape::Unknown) };
    if da.len() != db.len() {
        let summary = format!("`{}`: cannot join a {}-D and a {}-D tensor", site.text, da.len(), db.len());
        return Err(message(summary, &[is(a), is(b)], None));
    }
    let Some(axis) = site.ints[0] else { return Ok(Shape::Unknown) };
    let Some(axis) = shape::axis(axis, da.len()) else {
        let summary = format!("`{}`: axis {axis} is out of range for {}-D inputs", site.text, da.len());
        let n = da.len() as i128;
        let valid = format!("valid axes are 0 to {} (or -{n} to -1 from the end)", n - 1);
        return Err(message(summary, &[is(a), is(b), valid], None));
    };
    if let Some(other) = (0..da.len()).find(|&i| i != axis && da[i].differs(&db[i])) {
        let summary = format!(
            "`{}`: joined along axis {axis}, the other dims must be equal, but dim {other} differs ({} vs {})",
            site.text, da[other], db[other]
        );
        let details = with_note(vec![is(a), is(b)], symbol_note(&da[other], &db[other]));
        let help = (da.len() == 2 && da[axis].same(&db[axis]) == Some(true) && other != axis)
            .then(|| format!("to join along axis {other} instead, write `concat({}, {}, {other})`", a.text, b.text));
        return Err(message(summary, &details, help));
    }
    let mut out: Vec<Dim> =
        da.iter().zip(db).map(|(x, y)| if *x == Dim::Unknown { y.clone() } else { x.clone() }).collect();
    out[axis] = da[axis].plus(&db[axis]);
    Ok(Shape::Known(out))
}

fn flatten(site: &Site) -> Outcome {
    let x = &site.tensors[0];
    let (Some(dims), Some(axis)) = (known(x), site.ints[0]) else { return Ok(Shape::Unknown) };
    let from = checked_axis(site, x, dims, axis)?;
    let mut out = dims[..from].to_vec();
    out.push(dims[from..].iter().fold(Dim::fixed(1), |n, d| n.times(d)));
    Ok(Shape::Known(out))
}

// ---- ops/softmax.rs ----

fn softmax(site: &Site) -> Outcome {
    let x = &site.tensors[0];
    if let (Some(dims), Some(axis)) = (known(x), site.ints[0]) {
        checked_axis(site, x, dims, axis)?;
    }
    Ok(x.shape.clone())
}

// ---- ops/mse.rs ----

fn mse(site: &Site) -> Outcome {
    let (y, t) = (&site.tensors[0], &site.tensors[1]);
    if let (Some(dy), Some(dt)) = (known(y), known(t)) {
        let summary = format!("`{}`: the prediction and the target must have the same shape", site.text);
        let why = format!("`{}` compares them element by element and never broadcasts", site.name);
        if dy.len() != dt.len() {
            let ranks = format!("`{}` has {} dims and `{}` has {}", y.text, dy.len(), t.text, dt.len());
            return Err(message(summary, &[is(y), is(t), ranks, why], None));
        }
        if let Some(i) = (0..dy.len()).find(|&i| dy[i].differs(&dt[i])) {
            let which = format!("dim {i} differs ({} vs {})", dy[i], dt[i]);
            let details = with_note(vec![is(y), is(t), which, why], symbol_note(&dy[i], &dt[i]));
            return Err(message(summary, &details, None));
        }
    }
    Ok(Shape::scalar())
}

// ---- ops/cross_entropy.rs ----

fn cross_entropy(site: &Site) -> Outcome {
    let (logits, targets) = (&site.tensors[0], &site.indices[0]);
    let Some(dims) = known(logits) else { return Ok(Shape::scalar()) };
    if dims.len() < 2 {
        let summary = format!("`{}`: the logits must be 2-D or more, [.., classes]", site.text);
        let help = match dims {
            [classes] => {
                Some(format!("for one row of {classes} classes write `reshape({}, [1, {classes}])`", logits.text))
            }
            _ => None,
        };
        return Err(message(summary, &[is(logits)], help));
    }
    // One target per row: shaped as the leading dims, or a flat list of them.
    let leading = &dims[..dims.len() - 1];
    let rows = Shape::Known(leading.to_vec());
    let fits = match known(targets) {
        None => true,
        Some([flat]) => !flat.differs(&rows.elements()),
        Some(t) => t.len() == leading.len() && t.iter().zip(leading).all(|(a, b)| !a.differs(b)),
    };
    if !fits {
        let summary =
            format!("`{}`: the targets are {}, but the rows of the logits are {rows}", site.text, targets.shape);
        let why = format!(
            "`{}` takes one target per row: shaped as the logits without their last dim ({rows}), or a flat list of {}",
            site.name,
            rows.elements()
        );
        return Err(message(summary, &[is(logits), is(targets), why], None));
    }
    Ok(Shape::scalar())
}

// ---- ops/embedding.rs ----

/// `[v, d]` gathered by ids: the ids' shape with `d` appended, unknown
/// when the ids' shape is (Rust data the block does not declare).
fn embedding(site: &Site) -> Outcome {
    let (table, ids) = (&site.tensors[0], &site.indices[0]);
    match (known(table), known(ids)) {
        (Some([_, d]), Some(ids)) => Ok(Shape::Known(ids.iter().chain([d]).cloned().collect())),
        (Some([_, _]) | None, _) => Ok(Shape::Unknown),
        (Some(_), _) => {
            let summary = format!("`{}`: the table must be 2-D, [vocabulary, dim]", site.text);
            Err(message(summary, &[is(table)], None))
        }
    }
}

// ---- ops/layer_norm.rs ----

fn layer_norm(site: &Site) -> Outcome {
    let x = &site.tensors[0];
    let Some(last) = known(x).and_then(<[Dim]>::last) else { return Ok(x.shape.clone()) };
    for param in &site.tensors[1..] {
        if let Some(dims) = known(param)
            && (dims.len() != 1 || dims[0].differs(last))
        {
            let summary =
                format!("`{}`: `{}` must be [{last}], one entry per feature of `{}`", site.text, param.text, x.text);
            return Err(message(summary, &[is(x), is(param)], None));
        }
    }
    Ok(x.shape.clone())
}

// ---- ops/grad.rs ----

fn grad_of(site: &Site) -> Outcome {
    let (y, x) = (&site.tensors[0], &site.tensors[1]);
    if let Some(dims) = known(y)
        && dims.iter().any(|d| d.value().is_some_and(|n| n != 1))
    {
        let summary = format!("`{}`: the gradient is of a scalar, and `{}` is not one", site.text, y.text);
        let why = format!("reduce it first: `{}(sum({}), {})`", site.name, y.text, x.text);
        return Err(message(summary, &[is(y), why], None));
    }
    Ok(x.shape.clone())
}

// ---- ops/batch_norm.rs, ops/group_norm.rs ----

fn channel_norm(site: &Site) -> Outcome {
    let x = &site.tensors[0];
    let Some(dims) = known(x) else { return Ok(Shape::Unknown) };
    if dims.len() < 2 {
        let summary = format!("`{}`: `{}` must be [N, C, ...], 2-D or more", site.text, x.text);
        return Err(message(summary, &[is(x)], None));
    }
    let channels = &dims[1];
    for param in &site.tensors[1..] {
        if let Some(p) = known(param)
            && (p.len() != 1 || p[0].differs(channels))
        {
            let summary = format!(
                "`{}`: `{}` must be [{channels}], one entry per channel (dim 1) of `{}`",
                site.text, param.text, x.text
            );
            return Err(message(summary, &[is(x), is(param)], None));
        }
    }
    if let Some(&Some(groups)) = site.ints.first()
        && let Some(c) = channels.value()
        && (groups < 1 || c % groups as u128 != 0)
    {
        let summary =
            format!("`{}`: {groups} groups do not divide the {c} channels (dim 1) of `{}`", site.text, x.text);
        return Err(message(summary, &[is(x)], None));
    }
    Ok(x.shape.clone())
}

// ---- ops/conv.rs ----

fn conv2d(site: &Site) -> Outcome {
    let (x, w) = (&site.tensors[0], &site.tensors[1]);
    for (operand, what) in
        [(x, "the input must be 4-D, [N, C, H, W]"), (w, "the weight must be 4-D, [O, C / groups, kh, kw]")]
    {
        if known(operand).is_some_and(|d| d.len() != 4) {
            return Err(message(format!("`{}`: {what}", site.text), &[is(operand)], None));
        }
    }
    let (Some(dx), Some(dw)) = (known(x), known(w)) else { return Ok(Shape::Unknown) };
    let groups = site.ints.first().copied().unwrap_or(Some(1));
    if let Some(g) = groups {
        let per_group = dw[1].times(&Dim::fixed(g.max(0) as u128));
        if dx[1].differs(&per_group) {
            let summary =
                format!("`{}`: `{}` has {} channels, but `{}` takes {}", site.text, x.text, dx[1], w.text, per_group);
            let why = if g == 1 {
                format!(
                    "dim 1 of `{}` (channels) must equal dim 1 of `{}` (input channels of the kernel)",
                    x.text, w.text
                )
            } else {
                format!("dim 1 of `{}` must equal dim 1 of `{}` times groups = {g}", x.text, w.text)
            };
            return Err(message(summary, &with_note(vec![is(x), is(w), why], symbol_note(&dx[1], &per_group)), None));
        }
    }
    let pair = |i: usize, default: u128| -> [Dim; 2] {
        match site.lists.get(i) {
            Some(list) if list.len() == 2 => [list[0].clone(), list[1].clone()],
            Some(_) => [Dim::Unknown, Dim::Unknown],
            None => [Dim::fixed(default), Dim::fixed(default)],
        }
    };
    let (stride, padding, dilation) = (pair(0, 1), pair(1, 0), pair(2, 1));
    let mut out = vec![dx[0].clone(), dw[0].clone()];
    for i in 0..2 {
        out.push(window_dim(site, x, i, &dx[2 + i], &dw[2 + i], &stride[i], &padding[i], &dilation[i])?);
    }
    Ok(Shape::Known(out))
}

/// PyTorch's output size along spatial dim `i`: `(len + 2p - d(k - 1) - 1) / s + 1`.
#[allow(clippy::too_many_arguments)]
fn window_dim(
    site: &Site,
    x: &Operand,
    i: usize,
    len: &Dim,
    k: &Dim,
    s: &Dim,
    p: &Dim,
    d: &Dim,
) -> Result<Dim, String> {
    let (Some(k), Some(s), Some(p), Some(d)) = (k.value(), s.value(), p.value(), d.value()) else {
        return Ok(Dim::Unknown);
    };
    if k == 0 || s == 0 || d == 0 {
        return Ok(Dim::Unknown); // the run time names the zero argument
    }
    let span = d * (k - 1) + 1;
    match len.value() {
        Some(n) if span > n + 2 * p => {
            let axis = ["height", "width"][i];
            let summary = format!(
                "`{}`: the window spans {span} positions along the {axis} (dim {}), but the padded input has {}",
                site.text,
                i + 2,
                n + 2 * p
            );
            let why = format!("{n} from `{}` plus padding {p} on both sides", x.text);
            Err(message(summary, &[is(x), why], None))
        }
        Some(n) => Ok(Dim::fixed((n + 2 * p - span) / s + 1)),
        // A symbolic size is kept when the window preserves it ("same" padding, stride 1).
        None if s == 1 && 2 * p + 1 == span => Ok(len.clone()),
        None => Ok(Dim::Unknown),
    }
}

// ---- ops/pool.rs ----

fn pool2d(site: &Site) -> Outcome {
    let x = &site.tensors[0];
    let Some(dx) = known(x) else { return Ok(Shape::Unknown) };
    if dx.len() != 4 {
        let summary = format!("`{}`: the input must be 4-D, [N, C, H, W]", site.text);
        return Err(message(summary, &[is(x)], None));
    }
    let pair = |i: usize, default: u128| -> [Dim; 2] {
        match site.lists.get(i) {
            Some(list) if list.len() == 2 => [list[0].clone(), list[1].clone()],
            Some(_) => [Dim::Unknown, Dim::Unknown],
            None => [Dim::fixed(default), Dim::fixed(default)],
        }
    };
    let (kernel, stride, padding) = (pair(0, 0), pair(1, 0), pair(2, 0));
    let mut out = vec![dx[0].clone(), dx[1].clone()];
    for i in 0..2 {
        out.push(window_dim(site, x, i, &dx[2 + i], &kernel[i], &stride[i], &padding[i], &Dim::fixed(1))?);
    }
    Ok(Shape::Known(out))
}
// ---- ops/index.rs ----

fn gather(site: &Site) -> Outcome {
    let x = &site.tensors[0];
    let (Some(dims), Some(axis)) = (known(x), site.ints[0]) else { return Ok(Shape::Unknown) };
    checked_axis(site, x, dims, axis)?;
    Ok(Shape::Known(vec![Dim::Unknown; dims.len()]))
}

fn index_select(site: &Site) -> Outcome {
    let x = &site.tensors[0];
    let (Some(dims), Some(axis)) = (known(x), site.ints[0]) else { return Ok(Shape::Unknown) };
    let axis = checked_axis(site, x, dims, axis)?;
    let mut out = dims.to_vec();
    out[axis] = Dim::Unknown;
    Ok(Shape::Known(out))
}

// ---- ops/select.rs ----

fn where_(site: &Site) -> Outcome {
    let (a, b) = (&site.tensors[0], &site.tensors[1]);
    let (Some(da), Some(db)) = (known(a), known(b)) else { return Ok(Shape::Unknown) };
    if let Err((i, j)) = shape::broadcast(da, db) {
        let summary =
            format!("`{}`: the two branches {} and {} do not broadcast together", site.text, a.shape, b.shape);
        let why = format!(
            "aligned from the right, dim {i} of `{}` ({}) and dim {j} of `{}` ({}) differ, and neither is 1",
            a.text, da[i], b.text, db[j]
        );
        let note = "`where` picks each element from `a` or `b`, so both must broadcast to one shape".to_string();
        return Err(message(summary, &with_note(vec![is(a), is(b), why, note], symbol_note(&da[i], &db[j])), None));
    }
    Ok(Shape::Unknown)
}
