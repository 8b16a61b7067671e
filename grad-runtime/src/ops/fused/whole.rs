//! Backward of a region in which a value that carries a gradient is
//! broadcast to a larger shape (`(x - m) / sqrt(v + eps)` with `m, v:
//! [B, 1]`, a column inside the region): still one node, whose forward
//! ran on tiles like any other, but differentiated step by step on whole
//! tensors, each step at its own shape, as the unfused ops compute it. It
//! walks the steps from the root down and sums a step's gradient back to
//! its operand's shape where the operand was broadcast, exactly where the
//! unfused op would: the tile interpreter's single sum at the end
//! (`loops.rs`) would round differently. Gradients are the unfused ops'
//! bits; the node holds no intermediate value (backward recomputes them
//! in pooled buffers).

use std::cell::RefCell;

use ndarray::{Dimension, IxDyn};

use super::loops::Input;
use super::plan::{Src, StepOp, reads_output, with_func};
use super::tile::{MAX_LEAVES, Program};
use crate::Float;
use crate::broadcast::{broadcast_shapes, reduce_into, zip_broadcast};
use crate::ops::sink::GradSink;
use crate::ops::unary::Elementwise;
use crate::tape::NodeId;

thread_local! {
    /// Where each step's value lies in one buffer, and its shape: kept per
    /// thread so that a step allocates nothing once it has run.
    static LAYOUT: RefCell<Vec<(usize, IxDyn)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with each step's offset and shape (steps up to the root),
/// and the total length of their values.
fn with_layout<T: Float, R>(
    prog: &Program<'_, T>,
    inputs: &[Input<'_, T>],
    f: impl FnOnce(&[(usize, IxDyn)], usize) -> R,
) -> R {
    LAYOUT.with_borrow_mut(|layout| {
        layout.clear();
        let mut total = 0;
        for step in &prog.steps[..=prog.root] {
            let shape_of = |src: Src, layout: &[(usize, IxDyn)]| match src {
                Src::Leaf(i) => IxDyn(inputs[i].shape),
                Src::Param(_) => IxDyn(&[]),
                Src::Step(j) => layout[j].1.clone(),
            };
            let a = shape_of(step.a, layout);
            let shape = match step.b {
                Some(b) if is_binary(step.op) => {
                    // The plan passed its checks, so the operands broadcast.
                    broadcast_shapes(a.slice(), shape_of(b, layout).slice()).unwrap_or(a)
                }
                _ => a,
            };
            let size = shape.size();
            layout.push((total, shape));
            total += size;
        }
        f(layout, total)
    })
}

fn is_binary(op: StepOp) -> bool {
    matches!(op, StepOp::Add | StepOp::Sub | StepOp::Mul | StepOp::Div)
}

/// An operand's values and shape.
fn operand<'a, T: Float>(
    src: Src,
    prog: &'a Program<'_, T>,
    inputs: &[Input<'a, T>],
    layout: &'a [(usize, IxDyn)],
    values: &'a [T],
) -> (&'a [T], &'a [usize]) {
    match src {
        Src::Leaf(i) => (inputs[i].data, inputs[i].shape),
        Src::Param(i) => (&prog.params[i..i + 1], &[]),
        Src::Step(j) => {
            let (offset, shape) = &layout[j];
            (&values[*offset..*offset + shape.size()], shape.slice())
        }
    }
}

/// A built-in's scalar parameter.
fn number<T: Float>(src: Option<Src>, prog: &Program<'_, T>, inputs: &[Input<'_, T>]) -> T {
    match src {
        Some(Src::Param(i)) => prog.params[i],
        Some(Src::Leaf(i)) if inputs[i].data.len() == 1 => inputs[i].data[0],
        _ => T::nan(),
    }
}

/// Every step's value into `values`, laid out as `layout` says.
fn evaluate<T: Float>(prog: &Program<'_, T>, inputs: &[Input<'_, T>], layout: &[(usize, IxDyn)], values: &mut [T]) {
    for (k, step) in prog.steps[..=prog.root].iter().enumerate() {
        let (offset, shape) = &layout[k];
        let (before, rest) = values.split_at_mut(*offset);
        let out = &mut rest[..shape.size()];
        let a = operand(step.a, prog, inputs, layout, before);
        let b = || step.b.map_or((&[][..], &[][..]), |b| operand(b, prog, inputs, layout, before));
        let mut zip = |f: fn(T, T) -> T| zip_broadcast(a, b(), out, shape.slice(), f);
        match step.op {
            StepOp::Add => zip(|a, b| a + b),
            StepOp::Sub => zip(|a, b| a - b),
            StepOp::Mul => zip(|a, b| a * b),
            StepOp::Div => zip(|a, b| a / b),
            StepOp::Neg => out.iter_mut().zip(a.0).for_each(|(o, &a)| *o = -a),
            StepOp::Apply(func) => {
                let (p, q) = (number(step.b, prog, inputs), number(step.c, prog, inputs));
                with_func!(func, p, q, f => out.iter_mut().zip(a.0).for_each(|(o, &a)| *o = f.f(a)))
            }
            StepOp::Sum | StepOp::Mean => {}
        }
    }
}

/// Whether backward must take this path: a step through which a wanted
/// gradient flows is read by a step of a larger shape. Decided from the
/// shapes of the tensor leaves alone when they are all one shape (nothing
/// then grows; `scalar_leaf` tells the Rust scalars among `inputs`).
pub(crate) fn needed_for<T: Float>(
    prog: &Program<'_, T>,
    inputs: &[Input<'_, T>],
    scalar_leaf: impl Fn(usize) -> bool,
) -> bool {
    let mut shapes = inputs.iter().enumerate().filter(|&(k, _)| !scalar_leaf(k)).map(|(_, x)| x.shape);
    let first = shapes.next();
    if shapes.all(|s| Some(s) == first) {
        return false;
    }
    with_layout(prog, inputs, |layout, _| {
        prog.steps[..=prog.root].iter().enumerate().any(|(k, step)| {
            [Some(step.a), step.b].into_iter().flatten().any(|src| match src {
                Src::Step(j) => prog.live.has(j) && layout[j].1 != layout[k].1,
                _ => false,
            })
        })
    })
}

/// Hands the root's gradient `g` (on its elementwise shape; one value,
/// for the sum of its elements, when the region is folded, divided by
/// their count when `mean`) to each wanted leaf `ids[i]`.
pub(crate) fn backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    prog: &Program<'_, T>,
    inputs: &[Input<'_, T>],
    ids: &[NodeId],
    g: &[T],
    mean: bool,
) {
    with_layout(prog, inputs, |layout, total| {
        let mut values = sink.scratch(total);
        evaluate(prog, inputs, layout, &mut values);
        let mut adjs = sink.scratch(total);
        let (offset, shape) = &layout[prog.root];
        let root = &mut adjs[*offset..*offset + shape.size()];
        match g {
            [g] if mean => root.fill(*g / T::from_usize(shape.size())),
            [g] => root.fill(*g),
            g => root.copy_from_slice(g),
        }
        for k in (0..=prog.root).rev().filter(|&k| prog.live.has(k)) {
            let step = prog.steps[k];
            let (offset, shape) = &layout[k];
            let (lower, upper) = adjs.split_at_mut(*offset);
            let adj = &upper[..shape.size()];
            let value = &values[*offset..*offset + shape.size()];
            let operands = [Some(step.a), step.b.filter(|_| is_binary(step.op))];
            for (position, src) in operands.into_iter().enumerate() {
                let Some(src) = src else { continue };
                let fill =
                    |c: &mut [T]| contribution(prog, inputs, layout, &values, step, position, adj, value, shape, c);
                match src {
                    Src::Step(j) if prog.live.has(j) => {
                        let (to, to_shape) = &layout[j];
                        let dst = &mut lower[*to..*to + to_shape.size()];
                        if to_shape == shape {
                            fill(dst);
                        } else {
                            let mut c = sink.scratch(shape.size());
                            fill(&mut c);
                            dst.fill(T::zero());
                            reduce_into(&c, shape.slice(), to_shape.slice(), dst);
                            sink.recycle(c);
                        }
                    }
                    Src::Leaf(i) if i < MAX_LEAVES && prog.wanted & (1 << i) != 0 => {
                        sink.contribute_broadcast(ids[i], shape.slice(), fill);
                    }
                    _ => {}
                }
            }
        }
        sink.recycle(values);
        sink.recycle(adjs);
    });
}

/// Step `step`'s contribution to its operand at `position`, on the step's
/// shape: the unfused rule's arithmetic, the other operand broadcast.
#[allow(clippy::too_many_arguments)]
fn contribution<T: Float>(
    prog: &Program<'_, T>,
    inputs: &[Input<'_, T>],
    layout: &[(usize, IxDyn)],
    values: &[T],
    step: super::plan::Step,
    position: usize,
    adj: &[T],
    value: &[T],
    shape: &IxDyn,
    c: &mut [T],
) {
    let other = |src: Option<Src>| src.map_or((&[][..], &[][..]), |s| operand(s, prog, inputs, layout, values));
    let on = shape.slice();
    match (step.op, position) {
        (StepOp::Add, _) | (StepOp::Sub, 0) => c.copy_from_slice(adj),
        (StepOp::Sub, _) => c.iter_mut().zip(adj).for_each(|(c, &g)| *c = -g),
        (StepOp::Mul, 0) => zip_broadcast((adj, on), other(step.b), c, on, |g, b| g * b),
        (StepOp::Mul, _) => zip_broadcast((adj, on), other(Some(step.a)), c, on, |g, a| g * a),
        (StepOp::Div, 0) => zip_broadcast((adj, on), other(step.b), c, on, |g, b| g / b),
        (StepOp::Div, _) => {
            zip_broadcast((value, on), other(step.b), c, on, |y, b| y / b);
            c.iter_mut().zip(adj).for_each(|(c, &g)| *c = -g * *c);
        }
        (StepOp::Neg, _) => c.iter_mut().zip(adj).for_each(|(c, &g)| *c = g * -T::one()),
        (StepOp::Apply(func), _) => {
            let at = if reads_output(func) { value } else { other(Some(step.a)).0 };
            let (p, q) = (number(step.b, prog, inputs), number(step.c, prog, inputs));
            with_func!(func, p, q, f => {
                c.iter_mut().zip(adj).zip(at).for_each(|((c, &g), &v)| *c = g * f.df(v, v))
            })
        }
        (StepOp::Sum | StepOp::Mean, _) => {}
    }
}
