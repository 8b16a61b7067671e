//! The shape pass: infers the shape of every intermediate value from the
//! declarations and reports each op whose inputs cannot fit, spanned on
//! the whole sub-expression. A failed op's result has an unknown shape, so
//! one mistake is reported once and independent mistakes are all reported.

use std::collections::{HashMap, HashSet};

use proc_macro2::TokenStream;

use crate::ast::{Arg, BinOp, Block, Callee, DeclDim, Expr, ExprKind, indices_name};
use crate::builtins::{self, Kind};
use crate::error::{Error, Errors, Result};
use crate::literal::{Size, integer_value, size};
use crate::rules::{self, Operand, Rule, Site};
use crate::shape::{Dim, Shape};

/// What the pass knows of a name.
struct Binding {
    shape: Shape,
    /// `declared`, or the `let` it came from.
    origin: String,
    /// A number, not a tensor (`let s = 0.5`).
    scalar: bool,
}

pub(crate) fn check(block: &Block) -> Result<()> {
    let mut checker = Checker {
        env: HashMap::new(),
        symbols: HashSet::new(),
        index_decls: block.index_decls(),
        errors: Errors::default(),
    };
    for decl in &block.decls {
        let dims = decl
            .dims
            .iter()
            .map(|d| match d {
                DeclDim::Fixed(n, _) => Dim::fixed(u128::from(*n)),
                DeclDim::Sym(name) => {
                    checker.symbols.insert(name.to_string());
                    Dim::sym(&name.to_string())
                }
                DeclDim::Any(_) => Dim::Unknown,
            })
            .collect();
        let binding = Binding { shape: Shape::Known(dims), origin: "declared".to_string(), scalar: false };
        checker.env.insert(decl.name.to_string(), binding);
    }
    for stmt in &block.stmts {
        let shape = checker.infer(&stmt.value);
        let scalar = checker.is_scalar(&stmt.value);
        let origin = format!("from `let {} = {}`", stmt.name, stmt.value);
        checker.env.insert(stmt.name.to_string(), Binding { shape, origin, scalar });
    }
    for expr in block.result.exprs() {
        checker.infer(expr);
    }
    checker.errors.finish(())
}

struct Checker {
    env: HashMap<String, Binding>,
    /// The symbols of the declarations (`B`, `T`).
    symbols: HashSet<String>,
    /// The declared names that are integer indices (`ids: [B, T]`).
    index_decls: Vec<String>,
    errors: Errors,
}

impl Checker {
    fn infer(&mut self, e: &Expr) -> Shape {
        match &e.kind {
            ExprKind::Name(name) => self.env.get(&name.to_string()).map_or(Shape::Unknown, |b| b.shape.clone()),
            ExprKind::Number(_) => Shape::scalar(),
            ExprKind::Bool(_) | ExprKind::Rust(_) | ExprKind::List(_) => Shape::Unknown,
            ExprKind::Neg { operand, .. } => self.infer(operand),
            ExprKind::Binary { op, lhs, rhs, .. } => {
                let tensors = vec![self.operand(lhs), self.operand(rhs)];
                let (_, rule) = builtins::operator(*op);
                if rule != Rule::Broadcast && (self.is_scalar(lhs) || self.is_scalar(rhs)) {
                    return Shape::Unknown; // the expansion reports a number where a tensor belongs
                }
                let site = Site {
                    text: e.to_string(),
                    name: op.symbol().to_string(),
                    tensors,
                    ints: Vec::new(),
                    flags: Vec::new(),
                    lists: Vec::new(),
                    indices: Vec::new(),
                };
                self.apply(rule, &site, e)
            }
            ExprKind::Call { args, callee, .. } => match callee {
                Callee::Builtin(builtin) => self.builtin(builtin, args, e),
                Callee::User | Callee::WrongArity(_) => {
                    for arg in args {
                        if let Arg::Expr(inner) = arg {
                            self.infer(inner);
                        }
                    }
                    Shape::Unknown
                }
            },
        }
    }

    fn builtin(&mut self, builtin: &builtins::Builtin, args: &[Arg], e: &Expr) -> Shape {
        let mut site = Site {
            text: e.to_string(),
            name: builtin.name.to_string(),
            tensors: Vec::new(),
            ints: Vec::new(),
            flags: Vec::new(),
            lists: Vec::new(),
            indices: Vec::new(),
        };
        let mut has_number = false;
        for (param, arg) in builtin.params.iter().zip(args) {
            if let (Kind::Indices, Arg::Rust(tokens, _)) = (param.kind, arg) {
                site.indices.push(self.indices(tokens));
                continue;
            }
            let Arg::Expr(arg) = arg else { continue };
            match param.kind {
                Kind::Var => {
                    has_number |= self.is_scalar(arg);
                    let operand = self.operand(arg);
                    site.tensors.push(operand);
                }
                Kind::Scalar => {
                    self.infer(arg);
                }
                Kind::Axis | Kind::Count => site.ints.push(integer_value(arg)),
                Kind::Flag => site.flags.push(match &arg.kind {
                    ExprKind::Bool(b) => Some(b == "true"),
                    _ => None,
                }),
                Kind::Dims | Kind::Pair => site.lists.push(match &arg.kind {
                    ExprKind::List(items) => items.iter().map(|item| self.dim(item)).collect(),
                    _ => Vec::new(),
                }),
                Kind::Rust | Kind::Indices => {}
            }
        }
        if has_number {
            return Shape::Unknown; // the expansion reports a number where a tensor belongs
        }
        self.apply(builtin.rule, &site, e)
    }

    fn apply(&mut self, rule: Rule, site: &Site, e: &Expr) -> Shape {
        rules::apply(rule, site).unwrap_or_else(|message| {
            self.errors.push(Error::new(e.span, message));
            Shape::Unknown
        })
    }

    /// An indices argument: its declared shape when it is written `name`
    /// or `&name` for a declared `name`, else unknown.
    fn indices(&self, tokens: &TokenStream) -> Operand {
        let text = tokens.to_string().replace("& ", "&");
        let declared = indices_name(tokens).map(|name| name.to_string()).filter(|name| self.index_decls.contains(name));
        match declared.and_then(|name| self.env.get(&name)) {
            Some(binding) => Operand { text, shape: binding.shape.clone(), origin: Some(binding.origin.clone()) },
            None => Operand { text, shape: Shape::Unknown, origin: None },
        }
    }

    fn operand(&mut self, e: &Expr) -> Operand {
        let shape = self.infer(e);
        let origin = match &e.kind {
            ExprKind::Name(name) => self.env.get(&name.to_string()).map(|b| b.origin.clone()),
            _ => None,
        };
        Operand { text: e.to_string(), shape, origin }
    }

    /// A dim of a `reshape` or `slice` list: a number, a declared symbol,
    /// or arithmetic on them; a Rust value is unknown. A quotient of
    /// numbers that is not whole, or a difference below zero, is an error
    /// spanned on it (and its dim unknown).
    fn dim(&mut self, e: &Expr) -> Dim {
        size(e).map_or(Dim::Unknown, |size| self.size_dim(&size))
    }

    fn size_dim(&mut self, size: &Size) -> Dim {
        match size {
            Size::Literal(n) => n.int.map_or(Dim::Unknown, Dim::fixed),
            Size::Name(name) if self.symbols.contains(&name.to_string()) => Dim::sym(&name.to_string()),
            Size::Name(_) | Size::Rust(_) => Dim::Unknown,
            Size::Arith { op, lhs, rhs, expr, .. } => {
                let (a, b) = (self.size_dim(lhs), self.size_dim(rhs));
                let outcome = match op {
                    BinOp::Mul => Ok(a.times(&b)),
                    BinOp::Add => Ok(a.plus(&b)),
                    BinOp::Sub => match (a.value(), b.value()) {
                        (Some(x), Some(y)) if y > x => Err(format!("is below zero: {x} - {y} = -{}", y - x)),
                        _ => Ok(a.minus(&b)),
                    },
                    BinOp::Div => a.divided_by(&b),
                    BinOp::MatMul => Ok(Dim::Unknown),
                };
                outcome.unwrap_or_else(|why| {
                    let message = format!("the size `{expr}` {why}");
                    self.errors.push(Error::new(expr.span, message));
                    Dim::Unknown
                })
            }
        }
    }

    /// Whether `e` is a number (a literal, or arithmetic on numbers).
    fn is_scalar(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Number(_) => true,
            ExprKind::Name(name) => self.env.get(&name.to_string()).is_some_and(|b| b.scalar),
            ExprKind::Neg { operand, .. } => self.is_scalar(operand),
            ExprKind::Binary { lhs, rhs, .. } => self.is_scalar(lhs) && self.is_scalar(rhs),
            _ => false,
        }
    }
}
