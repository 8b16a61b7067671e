//! The fusion stage: which sub-expressions become one fused node. A region
//! is a maximal subtree of elementwise operations (`+ - * /`, unary `-`,
//! the elementwise built-ins, and a `sum(x)` or `mean(x)` at its root),
//! as a plan of steps in the order the unfused expansion would run them.
//! Its leaves are what it reads: names, Rust values and the results of
//! other operations (a matrix product, a user's function, a region that
//! was cut off). Its numbers, written as literals or held in Rust (a
//! number `let`, a scalar argument given by name), are its scalar
//! parameters. A region of one operation is not fused: it is its own
//! `g_*` call.
//!
//! The expansion asks for the region rooted at each expression it is about
//! to expand, so a `let` name and the block's result are always node
//! boundaries; `expand/region.rs` writes a region's plan.

use proc_macro2::{Ident, Span};

use crate::ast::{Arg, BinOp, Callee, Expr, ExprKind};
use crate::builtins::{Builtin, Fusion, Kind};

/// The most inputs a region reads: the runtime keeps a tile of each on
/// the stack. A larger expression is cut into several regions.
const MAX_LEAVES: usize = 16;

/// What a name is, as far as the expansion knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Name {
    /// A `Var`: a declared input or a `let` of a tensor expression.
    Tensor,
    /// A number: a `let` of a number expression.
    Number,
    /// A free Rust name, a `Var` or a scalar: only the type checker knows.
    Unknown,
}

/// One fused region.
pub(crate) struct Region<'a> {
    /// The whole expression, for the node's name.
    pub(crate) root: &'a Expr,
    /// The operations, each after the ones it reads; a fold is last.
    pub(crate) steps: Vec<Step>,
    pub(crate) leaves: Vec<Leaf<'a>>,
    /// The numbers it reads, literals and Rust values alike.
    pub(crate) params: Vec<&'a Expr>,
}

/// One operation of a region.
pub(crate) struct Step {
    pub(crate) op: StepOp,
    /// The operands: one or two for `+ - * /` and `-`; for a built-in its
    /// tensor, then its scalar parameters.
    pub(crate) args: Vec<Src>,
    /// The operator or the function's name: where its errors point.
    pub(crate) span: Span,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum StepOp {
    Binary(BinOp),
    Neg,
    Call(&'static Builtin),
    Fold(&'static Builtin),
}

/// Where an operand comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    Leaf(usize),
    Param(usize),
    Step(usize),
}

/// An input of a region.
pub(crate) struct Leaf<'a> {
    pub(crate) expr: &'a Expr,
    /// Read as a tensor by a built-in, so it must be a `Var` (an unknown
    /// name in `+ - * /` may be a scalar).
    pub(crate) strict: bool,
}

/// The region rooted at `e`, if `e` starts one of two operations or more.
/// `name` says what each identifier is.
pub(crate) fn region<'a>(e: &'a Expr, name: &dyn Fn(&Ident) -> Name) -> Option<Region<'a>> {
    let mut c = Collector { name, cuts: Vec::new(), steps: Vec::new(), leaves: Vec::new(), params: Vec::new() };
    match &e.kind {
        ExprKind::Call { func, args, callee: Callee::Builtin(b), .. } if b.fusion == Fusion::Fold => {
            let [Arg::Expr(x)] = args.as_slice() else { return None };
            if !c.is_op(x) {
                return None;
            }
            c.open_uses(x);
            let x = c.collect(x, true)?;
            c.steps.push(Step { op: StepOp::Fold(b), args: vec![x], span: func.span.first });
        }
        _ if c.is_op(e) => {
            c.open_uses(e);
            c.collect(e, false)?;
        }
        _ => return None,
    }
    let Collector { steps, leaves, params, .. } = c;
    (steps.len() >= 2).then_some(Region { root: e, steps, leaves, params })
}

struct Collector<'a, 'n> {
    name: &'n dyn Fn(&Ident) -> Name,
    /// The sub-expressions cut off to keep the region within `MAX_LEAVES`.
    cuts: Vec<*const Expr>,
    steps: Vec<Step>,
    leaves: Vec<Leaf<'a>>,
    params: Vec<&'a Expr>,
}

impl<'a> Collector<'a, '_> {
    /// `e` as an operand of the region: a step, a parameter or a leaf;
    /// `None` when the expression is not one the region can hold (a
    /// mistake the unfused expansion reports).
    fn collect(&mut self, e: &'a Expr, strict: bool) -> Option<Src> {
        if self.is_number(e) {
            return Some(self.number(e));
        }
        if !self.is_op(e) || self.cuts.contains(&(e as *const Expr)) {
            return self.leaf(e, strict);
        }
        let (op, args, span) = match &e.kind {
            ExprKind::Binary { op, op_span, lhs, rhs } => {
                let a = self.collect(lhs, false)?;
                (StepOp::Binary(*op), vec![a, self.collect(rhs, false)?], *op_span)
            }
            ExprKind::Neg { op, operand } => (StepOp::Neg, vec![self.collect(operand, false)?], *op),
            ExprKind::Call { func, args, callee: Callee::Builtin(b), .. } => {
                (StepOp::Call(b), self.call_args(b, args)?, func.span.first)
            }
            _ => return self.leaf(e, strict),
        };
        self.steps.push(Step { op, args, span });
        Some(Src::Step(self.steps.len() - 1))
    }

    /// A built-in's tensor, then its scalar parameters.
    fn call_args(&mut self, builtin: &Builtin, args: &'a [Arg]) -> Option<Vec<Src>> {
        let mut srcs = Vec::with_capacity(args.len());
        for (param, arg) in builtin.params.iter().zip(args) {
            let Arg::Expr(e) = arg else { return None };
            srcs.push(match param.kind {
                Kind::Var if !self.is_number(e) => self.collect(e, true)?,
                Kind::Scalar if self.is_scalar_argument(e) => self.number(e),
                _ => return None,
            });
        }
        (srcs.len() == builtin.params.len()).then_some(srcs)
    }

    /// A number: a parameter of the region.
    fn number(&mut self, e: &'a Expr) -> Src {
        self.params.push(e);
        Src::Param(self.params.len() - 1)
    }

    /// A leaf; one name read twice is one leaf.
    fn leaf(&mut self, e: &'a Expr, strict: bool) -> Option<Src> {
        if matches!(e.kind, ExprKind::Bool(_) | ExprKind::List(_) | ExprKind::Number(_)) {
            return None;
        }
        if let ExprKind::Name(ident) = &e.kind
            && let Some(k) = self.leaves.iter().position(|l| matches!(&l.expr.kind, ExprKind::Name(i) if i == ident))
        {
            self.leaves[k].strict |= strict;
            return Some(Src::Leaf(k));
        }
        self.leaves.push(Leaf { expr: e, strict });
        Some(Src::Leaf(self.leaves.len() - 1))
    }

    /// Whether `e` is an elementwise operation on a tensor.
    fn is_op(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Binary { op, .. } => *op != BinOp::MatMul && !self.is_number(e),
            ExprKind::Neg { .. } => !self.is_number(e),
            ExprKind::Call { callee: Callee::Builtin(b), .. } => b.fusion == Fusion::Elementwise,
            _ => false,
        }
    }

    /// Whether `e` is a number (a literal, a number `let`, or arithmetic on
    /// numbers): the expansion computes it in Rust, not on the tape.
    fn is_number(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Number(_) => true,
            ExprKind::Name(ident) => (self.name)(ident) == Name::Number,
            ExprKind::Neg { operand, .. } => self.is_number(operand),
            ExprKind::Binary { op, lhs, rhs, .. } => *op != BinOp::MatMul && self.is_number(lhs) && self.is_number(rhs),
            _ => false,
        }
    }

    /// Whether `e` may be a built-in's scalar argument: a number, or a Rust
    /// value (which must then be a scalar of the tape's type).
    fn is_scalar_argument(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Name(ident) => (self.name)(ident) != Name::Tensor,
            ExprKind::Rust(_) => true,
            _ => self.is_number(e),
        }
    }

    /// The leaf uses of the region open at `e`, after cutting off (into
    /// regions of their own, read as one leaf) the largest operands of
    /// every operation that would read more than `MAX_LEAVES`: bottom-up,
    /// so every region reads at most `MAX_LEAVES` leaves.
    fn open_uses(&mut self, e: &Expr) -> usize {
        if self.is_number(e) {
            return 0;
        }
        let operands: Vec<&Expr> = match &e.kind {
            _ if !self.is_op(e) => return 1,
            ExprKind::Binary { lhs, rhs, .. } => vec![lhs, rhs],
            ExprKind::Neg { operand, .. } => vec![operand],
            ExprKind::Call { args, .. } => match args.first() {
                Some(Arg::Expr(x)) => vec![x],
                _ => return 1,
            },
            _ => return 1,
        };
        let mut uses: Vec<usize> = operands.iter().map(|x| self.open_uses(x)).collect();
        while uses.iter().sum::<usize>() > MAX_LEAVES {
            let Some((largest, _)) = uses.iter().copied().enumerate().filter(|&(_, u)| u > 1).max_by_key(|&(_, u)| u)
            else {
                break;
            };
            self.cuts.push(operands[largest]);
            uses[largest] = 1;
        }
        uses.iter().sum()
    }
}
