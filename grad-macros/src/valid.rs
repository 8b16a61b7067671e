//! The validation stage: every built-in call of the parsed block against
//! its row of the table (resolved once, by the parser): the number of
//! arguments, and the form of each axis, flag and dims argument. Runs over
//! every statement, so one compile reports every misuse.

use crate::ast::{Arg, Block, Callee, Expr, ExprKind};
use crate::builtins::{Builtin, Kind};
use crate::error::{Error, Errors, PartErrors, Result};
use crate::literal::{is_integer, size};

/// Checks every call in the block; each error is filed under its part.
pub(crate) fn validate(block: &Block) -> PartErrors {
    let mut errors = PartErrors::default();
    let stmts = block.stmts.iter().map(|s| (s.part, &s.value));
    let results = block.result.exprs().iter().map(|e| (block.result_part, e));
    for (part, expr) in stmts.chain(results) {
        walk(expr, &mut |e| {
            if let ExprKind::Call { func, args, method, callee } = &e.kind
                && let Some(name) = func.ident()
            {
                errors.keep(part, validate_call(&name.to_string(), callee, args, *method, e));
            }
        });
    }
    errors
}

fn walk(expr: &Expr, f: &mut impl FnMut(&Expr)) {
    f(expr);
    match &expr.kind {
        ExprKind::Neg { operand, .. } => walk(operand, f),
        ExprKind::Binary { lhs, rhs, .. } => {
            walk(lhs, f);
            walk(rhs, f);
        }
        ExprKind::Call { args, .. } => {
            for arg in args {
                if let Arg::Expr(e) = arg {
                    walk(e, f);
                }
            }
        }
        ExprKind::List(items) => items.iter().for_each(|e| walk(e, f)),
        ExprKind::Name(_) | ExprKind::Number(_) | ExprKind::Bool(_) | ExprKind::Rust(_) => {}
    }
}

fn validate_call(name: &str, callee: &Callee, args: &[Arg], method: bool, call: &Expr) -> Result<()> {
    let builtin = match callee {
        Callee::Builtin(builtin) => builtin,
        Callee::User => return Ok(()),
        Callee::WrongArity(rows) => return Err(arity_error(name, args.len(), method, rows, call)),
    };
    let mut errors = Errors::default();
    for (param, arg) in builtin.params.iter().zip(args) {
        let Arg::Expr(e) = arg else { continue };
        let ok = match (param.kind, &e.kind) {
            (_, ExprKind::Name(_) | ExprKind::Rust(_)) => true,
            (Kind::Var, kind) => !matches!(kind, ExprKind::Bool(_) | ExprKind::List(_) | ExprKind::Number(_)),
            (Kind::Scalar, kind) => !matches!(kind, ExprKind::Bool(_) | ExprKind::List(_)),
            (Kind::Axis, _) => is_integer(e, true),
            (Kind::Index, _) => is_integer(e, false),
            (Kind::Flag, kind) => matches!(kind, ExprKind::Bool(_)),
            (Kind::Dims, ExprKind::List(items)) => items.iter().all(|item| size(item).is_some()),
            (Kind::Pair, ExprKind::List(items)) => items.len() == 2 && items.iter().all(|item| size(item).is_some()),
            (Kind::Dims | Kind::Pair | Kind::Rust, _) => false,
        };
        if !ok {
            errors.push(Error::new(e.span, argument_message(name, param.name, param.kind, e)));
        }
    }
    errors.finish(())
}

fn argument_message(func: &str, param: &str, kind: Kind, arg: &Expr) -> String {
    let expected = match kind {
        Kind::Var => "a tensor",
        Kind::Scalar => "a number",
        Kind::Axis => "an axis: a whole number (negative counts from the end, `-1` is the last axis)",
        Kind::Index => "an axis: a whole number from 0",
        Kind::Flag => "`true` or `false`",
        Kind::Dims => {
            "a list of sizes: whole numbers, declared symbols like `B`, Rust `usize` names, or products `B * T`"
        }
        Kind::Pair => "a pair of sizes `[rows, columns]`: whole numbers, declared symbols or Rust `usize` names",
        Kind::Rust => "a Rust expression",
    };
    format!("`{param}` of `{func}` must be {expected}, but it is `{arg}`")
}

fn arity_error(name: &str, given: usize, method: bool, rows: &[&Builtin], call: &Expr) -> Error {
    let fewest = rows.iter().map(|b| b.required()).min().unwrap_or_default();
    let most = rows.iter().map(|b| b.params.len()).max().unwrap_or_default();
    let takes = match (fewest, most) {
        (1, 1) => "1 argument".to_string(),
        (r, n) if r == n => format!("{n} arguments"),
        (r, n) => format!("{r} to {n} arguments"),
    };
    let forms: Vec<String> = rows.iter().map(|b| format!("`{}`", b.usage())).collect();
    let mut message = format!("`{name}` takes {takes}, as in {}, but this call gives {given}", forms.join(" or "));
    if method {
        message.push_str(&format!(" (counting the receiver: `x.{name}(...)` is `{name}(x, ...)`)"));
    }
    if rows.iter().any(|b| b.params.iter().any(|p| p.kind == Kind::Axis)) && given < 2 {
        message.push_str(&format!("; for the last axis write `{name}(x, -1)`"));
    }
    Error::new(call.span, message)
}
