//! The validation stage: every built-in call of the parsed block against
//! its row of the table (resolved once, by the parser): the number of
//! arguments, and the form of each axis, flag and dims argument. Runs over
//! every statement, so one compile reports every misuse.

use crate::ast::{Arg, Block, Callee, DeclDim, Expr, ExprKind, walk};
use proc_macro2::Ident;

use crate::builtins::{BUILTINS, Builtin, Kind};
use crate::error::{Error, Errors, PartErrors, Result, SpanRange};
use crate::literal::{Size, is_integer, size};

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
                if let Callee::User = callee {
                    errors.keep(part, near_miss(name, e));
                }
                if let Callee::Builtin(builtin) = callee {
                    errors.keep(part, undeclared_symbols(block, builtin, args, e));
                }
            }
        });
    }
    errors
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
            (Kind::Count, _) => is_integer(e, false),
            (Kind::Flag, kind) => matches!(kind, ExprKind::Bool(_)),
            (Kind::Dims, ExprKind::List(items)) => items.iter().all(|item| size(item).is_some()),
            (Kind::Pair, ExprKind::List(items)) => items.len() == 2 && items.iter().all(|item| size(item).is_some()),
            (Kind::Dims | Kind::Pair | Kind::Rust | Kind::Indices, _) => false,
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
        Kind::Count => "a whole number from 0",
        Kind::Flag => "`true` or `false`",
        Kind::Dims => {
            "a list of sizes: whole numbers, declared symbols like `B`, Rust `usize` names, or arithmetic on \
             them (`B * T`, `C / H`, `T - 1`)"
        }
        Kind::Pair => "a pair of sizes `[rows, columns]`: whole numbers, declared symbols or Rust `usize` names",
        Kind::Rust => "a Rust expression",
        Kind::Indices => "Rust integer indices (`&ids`)",
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

/// In a block that declares symbols, a dims-list entry written like one
/// (capitals, digits and `_`: `D`, `SEQ`) that the block does not declare
/// is an error: it would otherwise be read as a Rust `usize` variable, and
/// rustc's message about it suggests a `Var`. A Rust constant of that style
/// is written `{D}`. A block with no symbols reads every name as Rust.
fn undeclared_symbols(block: &Block, builtin: &Builtin, args: &[Arg], call: &Expr) -> Result<()> {
    let declared: Vec<String> = (block.decls.iter().flat_map(|d| &d.dims))
        .filter_map(|dim| match dim {
            DeclDim::Sym(ident) => Some(ident.to_string()),
            _ => None,
        })
        .collect();
    if declared.is_empty() {
        return Ok(());
    }
    let mut errors = Errors::default();
    for (param, arg) in builtin.params.iter().zip(args) {
        let (Kind::Dims, Arg::Expr(Expr { kind: ExprKind::List(items), .. })) = (param.kind, arg) else { continue };
        let mut names = Vec::new();
        items.iter().filter_map(size).for_each(|s| names_of(&s, &mut names));
        for name in names {
            let text = name.to_string();
            let symbol_like = text.starts_with(|c: char| c.is_ascii_uppercase())
                && text.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if symbol_like && !declared.contains(&text) {
                let message = format!(
                    "`{text}` in `{call}` is not a symbol this block declares ({}): declare it in an input's \
                     shape (`x: [.., {text}]`), or, for a Rust `usize` constant, write `{{{text}}}`",
                    declared.join(", ")
                );
                errors.push(Error::new(SpanRange::single(name.span()), message));
            }
        }
    }
    errors.finish(())
}

/// The names in a dims-list entry (`B * T` has two).
fn names_of<'a>(size: &Size<'a>, out: &mut Vec<&'a Ident>) {
    match size {
        Size::Name(ident) => out.push(ident),
        Size::Arith { lhs, rhs, .. } => {
            names_of(lhs, out);
            names_of(rhs, out);
        }
        Size::Literal(_) | Size::Rust(_) => {}
    }
}

/// A call by a single name that is no built-in but one slip away from one
/// (`sofmax`, `sigmod`, `relu_`) is an error: the DSL cannot tell a typo
/// from a user's function of that name, and rustc's "cannot find function"
/// would not name the built-in. One slip is one edit (an insertion, a
/// deletion, a substitution or two neighbours swapped), or two for names of
/// 7 letters or more; names under 4 letters are never near (`elu`, `mlp`).
/// A user's own function of such a name is called by path, which never
/// names a built-in: `self::sofmax(x, -1)`.
fn near_miss(name: &Ident, call: &Expr) -> Result<()> {
    let written = name.to_string();
    let allowed = match written.chars().count() {
        0..4 => return Ok(()),
        4..7 => 1,
        _ => 2,
    };
    let nearest = BUILTINS.iter().map(|b| (edit_distance(&written, b.name), b.name)).min();
    match nearest {
        Some((distance, builtin)) if distance <= allowed => Err(Error::new(
            SpanRange::single(name.span()),
            format!(
                "`{written}` is not a built-in of grad!: did you mean `{builtin}`? \
                 If `{written}` is your own function, call it by path, as in `self::{call}`"
            ),
        )),
        _ => Ok(()),
    }
}

/// Edit distance with adjacent transpositions (optimal string alignment).
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn slips_are_one_edit_and_other_names_are_far() {
        assert_eq!(edit_distance("sofmax", "softmax"), 1);
        assert_eq!(edit_distance("sigmiod", "sigmoid"), 1);
        assert_eq!(edit_distance("relu_", "relu"), 1);
        assert_eq!(edit_distance("linear", "layer_norm"), 7);
        assert_eq!(edit_distance("dense", "dropout"), 6);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
