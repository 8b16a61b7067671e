//! Before a region computes anything, its plan is walked in the order the
//! unfused ops would run: each step resolves its inputs' handles, checks
//! that its operands broadcast (and `clamp` its bounds), and the first
//! failure poisons the tape exactly as that op would: its name (`g_add`,
//! or `g_adds` for a Rust scalar), its inputs' shapes and the location of
//! its operator in the `grad!` block. The walk also finds the shape the
//! region computes on (see [`Checked`]). Nothing is allocated unless an
//! error is recorded.

use std::panic::Location;

use ndarray::{Dimension, IxDyn};

use super::SCALAR_LEAF;
use super::plan::{Func, Src, Step, StepOp};
use crate::broadcast::broadcast_shapes;
use crate::dsl::Operand;
use crate::error::{ErrorKind, GradError};
use crate::tape::NodeId;
use crate::{Float, Tape};

/// A plan that passed its checks.
pub(crate) struct Checked {
    /// The shape of the elementwise root (a folded sum's operand).
    pub(crate) shape: IxDyn,
    /// Whether `shape` is a live leaf's (or `[]`), whose size passed the
    /// checks when that leaf was made; a broadcast shape is new.
    pub(crate) sized: bool,
}

/// What a step knows of one operand.
#[derive(Clone, Debug)]
enum Seen {
    /// A tensor (a `Var` leaf, or a step's value) and its shape.
    Tensor { shape: IxDyn },
    /// A number: a parameter, or a leaf that is a Rust scalar.
    Scalar,
    /// A leaf whose handle names no node.
    Bad(ErrorKind),
}

/// What a region's steps read besides its leaves: its scalar parameters.
#[derive(Clone, Copy)]
pub(crate) struct Scalars<'a, T> {
    pub(crate) params: &'a [T],
}

impl<T: Float> Scalars<'_, T> {
    /// The number `src` names, if it names one.
    pub(crate) fn get(&self, src: Src) -> Option<T> {
        match src {
            Src::Param(i) => self.params.get(i).copied(),
            Src::Leaf(_) | Src::Step(_) => None,
        }
    }
}

/// Walks `steps` (`well_formed` as `plan::well_formed` says), recording
/// the first error on `tp`; the resolved node of each leaf goes to `ids`
/// (`SCALAR_LEAF` for a Rust scalar). Inlined into every region's call,
/// so the common case returns its shape in registers.
#[inline(always)]
pub(crate) fn check<T: Float>(
    tp: &mut Tape<T>,
    well_formed: bool,
    steps: &[Step],
    sites: &[&'static Location<'static>],
    leaves: &[Operand<T>],
    scalars: Scalars<'_, T>,
    ids: &mut [NodeId],
) -> Option<Checked> {
    if !well_formed || ids.len() != leaves.len() {
        return malformed(tp);
    }
    if let Some(checked) = quick(tp, steps, leaves, scalars, ids) {
        return Some(checked);
    }
    walk(tp, steps, sites, leaves, scalars, ids)
}

/// The walk `check` falls back on: every step in turn.
#[inline(never)]
fn walk<T: Float>(
    tp: &mut Tape<T>,
    steps: &[Step],
    sites: &[&'static Location<'static>],
    leaves: &[Operand<T>],
    scalars: Scalars<'_, T>,
    ids: &mut [NodeId],
) -> Option<Checked> {
    let mut walk = Walker { tp, steps, sites, leaves, scalars, ids, fold_shape: None };
    let Seen::Tensor { shape, .. } = walk.visit(steps.len() - 1)? else { return malformed(walk.tp) };
    Some(Checked { shape: walk.fold_shape.take().unwrap_or(shape), sized: false })
}

/// The common case, without a walk: every tensor leaf a live handle of
/// one shape. Then nothing broadcasts, so no step can fail on shapes;
/// only `clamp`'s bounds remain to check. `None` sends the region to
/// the walk, which finds and records the error, if any.
#[inline(always)]
fn quick<T: Float>(
    tp: &Tape<T>,
    steps: &[Step],
    leaves: &[Operand<T>],
    scalars: Scalars<'_, T>,
    ids: &mut [NodeId],
) -> Option<Checked> {
    let mut shape: Option<NodeId> = None;
    for (leaf, slot) in leaves.iter().zip(ids.iter_mut()) {
        *slot = match *leaf {
            Operand::Scalar(_) => SCALAR_LEAF,
            Operand::Var(v) => {
                let id = tp.check(v).ok()?;
                if shape.is_some_and(|s| tp.shape(s) != tp.shape(id)) {
                    return None;
                }
                shape = Some(id);
                id
            }
        };
    }
    for step in steps.iter().filter(|s| s.op == StepOp::Apply(Func::Clamp)) {
        let (lo, hi) = (scalars.get(step.b?)?, scalars.get(step.c?)?);
        if lo.is_nan() || hi.is_nan() || lo > hi {
            return None;
        }
    }
    let shape = shape.map_or_else(|| IxDyn(&[]), |id| tp.value_of(id).shape.clone());
    Some(Checked { shape, sized: true })
}

/// Records that a plan (written by `grad!`, never by hand) is not one.
fn malformed<T: Float, R>(tp: &mut Tape<T>) -> Option<R> {
    let kind = ErrorKind::InvalidArgument {
        name: "fused region",
        value: f64::NAN,
        expected: "a plan whose steps read earlier steps, its leaves and its parameters",
    };
    tp.record(GradError::new("grad!", kind, Vec::new(), Location::caller()));
    None
}

struct Walker<'a, T: Float> {
    tp: &'a mut Tape<T>,
    steps: &'a [Step],
    sites: &'a [&'static Location<'static>],
    leaves: &'a [Operand<T>],
    scalars: Scalars<'a, T>,
    ids: &'a mut [NodeId],
    /// The shape a folded `sum` or `mean` reduces.
    fold_shape: Option<IxDyn>,
}

impl<T: Float> Walker<'_, T> {
    /// Checks step `k` after the steps it reads; its value as an operand.
    fn visit(&mut self, k: usize) -> Option<Seen> {
        let step = self.steps[k];
        let srcs = [Some(step.a), step.b, step.c];
        let mut seen = [None, None, None];
        for (slot, src) in seen.iter_mut().zip(srcs) {
            if let Some(Src::Step(j)) = src {
                if j >= k {
                    return malformed(self.tp);
                }
                *slot = Some(self.visit(j)?);
            }
        }
        for (slot, src) in seen.iter_mut().zip(srcs) {
            if let (None, Some(src)) = (&slot, src) {
                *slot = Some(self.resolve(src)?);
            }
        }
        let [Some(a), b, _] = seen else { return malformed(self.tp) };
        self.apply(k, step, a, b)
    }

    /// A leaf or parameter operand.
    fn resolve(&mut self, src: Src) -> Option<Seen> {
        match src {
            Src::Param(i) if i < self.scalars.params.len() => Some(Seen::Scalar),
            Src::Leaf(i) if i < self.leaves.len() => Some(match self.leaves[i] {
                Operand::Scalar(_) => {
                    self.ids[i] = SCALAR_LEAF;
                    Seen::Scalar
                }
                Operand::Var(v) => match self.tp.check(v) {
                    Ok(id) => {
                        self.ids[i] = id;
                        Seen::Tensor { shape: IxDyn(self.tp.shape(id)) }
                    }
                    Err(kind) => Seen::Bad(kind),
                },
            }),
            _ => malformed(self.tp),
        }
    }

    /// The number `src` names, for `clamp`'s bounds.
    fn number(&self, src: Option<Src>) -> Option<T> {
        match src? {
            Src::Leaf(i) => match self.leaves.get(i)? {
                Operand::Scalar(s) => Some(*s),
                Operand::Var(_) => None,
            },
            src => self.scalars.get(src),
        }
    }

    /// Step `k`'s own checks, once its operands are known.
    fn apply(&mut self, k: usize, step: Step, a: Seen, b: Option<Seen>) -> Option<Seen> {
        let op = step.op;
        let binary = matches!(op, StepOp::Add | StepOp::Sub | StepOp::Mul | StepOp::Div);
        let b = b.filter(|_| binary);
        let name = op_name(op, !matches!(a, Seen::Scalar), b.as_ref().is_some_and(|b| !matches!(b, Seen::Scalar)));
        let bad = [Some(&a), b.as_ref()].into_iter().flatten().find_map(|x| match x {
            Seen::Bad(kind) => Some(kind.clone()),
            _ => None,
        });
        if let Some(kind) = bad {
            return self.fail(k, name, kind, unfused_shapes(op, &a, b.as_ref()));
        }
        if op == StepOp::Apply(Func::Clamp) {
            let (Some(lo), Some(hi)) = (self.number(step.b), self.number(step.c)) else { return malformed(self.tp) };
            if lo.is_nan() || hi.is_nan() || lo > hi {
                let kind = ErrorKind::InvalidArgument {
                    name: "lo",
                    value: lo.to_f64(),
                    expected: "lo <= hi (and neither NaN)",
                };
                return self.fail(k, name, kind, unfused_shapes(op, &a, None));
            }
        }
        match (op, a, b) {
            (_, a, Some(b)) => self.broadcast(k, name, a, b),
            (StepOp::Sum | StepOp::Mean, Seen::Tensor { shape }, None) => {
                self.fold_shape = Some(shape);
                Some(Seen::Tensor { shape: IxDyn(&[]) })
            }
            (_, Seen::Tensor { shape }, None) => Some(Seen::Tensor { shape }),
            // `-s` of a Rust scalar: a constant, as `dsl::neg` makes it.
            _ => Some(Seen::Tensor { shape: IxDyn(&[]) }),
        }
    }

    /// The value of `a op b`: a tensor of their broadcast shape.
    fn broadcast(&mut self, k: usize, name: &'static str, a: Seen, b: Seen) -> Option<Seen> {
        use Seen::{Scalar, Tensor};
        match (a, b) {
            (Tensor { shape: sa }, Tensor { shape: sb }) => match broadcast_shapes(sa.slice(), sb.slice()) {
                Some(shape) => Some(Tensor { shape }),
                None => self.fail(k, name, ErrorKind::Broadcast, vec![sa.slice().to_vec(), sb.slice().to_vec()]),
            },
            (Tensor { shape }, Scalar) | (Scalar, Tensor { shape }) => Some(Tensor { shape }),
            // Two numbers: a constant, as the `dsl` helpers make it.
            _ => Some(Tensor { shape: IxDyn(&[]) }),
        }
    }

    fn fail<R>(&mut self, k: usize, name: &'static str, kind: ErrorKind, shapes: Vec<Vec<usize>>) -> Option<R> {
        self.tp.record(GradError::new(name, kind, shapes, self.sites[k]));
        None
    }
}

/// The op the unfused expansion runs for `op` on a tensor (`true`) or a
/// number (`false`) on each side: the `dsl` helpers pick `g_adds` for a
/// scalar, `s - x` starts with `g_neg`, a scalar divisor is a constant.
fn op_name(op: StepOp, a_tensor: bool, b_tensor: bool) -> &'static str {
    match (op, a_tensor, b_tensor) {
        (StepOp::Add, true, true) => "g_add",
        (StepOp::Add, ..) => "g_adds",
        (StepOp::Sub, true, true) => "g_sub",
        (StepOp::Sub, false, true) => "g_neg",
        (StepOp::Sub, ..) => "g_adds",
        (StepOp::Mul, true, true) => "g_mul",
        (StepOp::Mul, ..) => "g_muls",
        (StepOp::Div, ..) => "g_div",
        (StepOp::Neg, ..) => "g_neg",
        (StepOp::Apply(f), ..) => f.name(),
        (StepOp::Sum, ..) => "g_sum",
        (StepOp::Mean, ..) => "g_mean",
    }
}

/// The shapes of the valid tensors the unfused op takes, in its argument
/// order, as its error lists them: a scalar divisor or dividend is a
/// constant of shape `[]`.
fn unfused_shapes(op: StepOp, a: &Seen, b: Option<&Seen>) -> Vec<Vec<usize>> {
    let shape = |x: &Seen| match x {
        Seen::Tensor { shape, .. } => Some(shape.slice().to_vec()),
        Seen::Scalar if op == StepOp::Div => Some(Vec::new()),
        _ => None,
    };
    [Some(a), b].into_iter().flatten().filter_map(shape).collect()
}
