//! The parsed DSL: the tape, shape declarations, `let` statements and the
//! result. Every node keeps the spans of the user's tokens it came from.

use std::fmt;

use proc_macro2::{Ident, Span, TokenStream, TokenTree};

use crate::builtins::{Builtin, Kind};
use crate::error::SpanRange;
use crate::literal::Number;

/// `grad!(TAPE; DECLS; let a = ...; ...; RESULT)`.
pub(crate) struct Block {
    /// The tape expression's tokens, as written.
    pub(crate) tape: TokenStream,
    pub(crate) tape_span: SpanRange,
    pub(crate) decls: Vec<Decl>,
    pub(crate) stmts: Vec<Let>,
    pub(crate) result: Output,
    /// The result's position among the `;`-separated parts.
    pub(crate) result_part: usize,
    /// Whether elementwise chains are fused (false under `#[nofuse]`).
    pub(crate) fuse: bool,
}

impl Block {
    /// The declared names the block passes as a built-in's integer
    /// indices (`embedding(table, &ids)` with `ids: [B, T]`): Rust data, not
    /// tensors, whose declared shapes the shape pass reads and the run
    /// time checks.
    pub(crate) fn index_decls(&self) -> Vec<String> {
        let mut used = Vec::new();
        let stmts = self.stmts.iter().map(|s| &s.value);
        for expr in stmts.chain(self.result.exprs()) {
            walk(expr, &mut |e| {
                let ExprKind::Call { args, callee: Callee::Builtin(builtin), .. } = &e.kind else { return };
                for (param, arg) in builtin.params.iter().zip(args) {
                    if let (Kind::Indices, Arg::Rust(tokens, _)) = (param.kind, arg)
                        && let Some(name) = indices_name(tokens)
                    {
                        used.push(name.to_string());
                    }
                }
            });
        }
        self.decls.iter().map(|d| d.name.to_string()).filter(|name| used.contains(name)).collect()
    }
}

/// The name of an indices argument written `name` or `&name`.
pub(crate) fn indices_name(tokens: &TokenStream) -> Option<Ident> {
    let tokens: Vec<TokenTree> = tokens.clone().into_iter().collect();
    match tokens.as_slice() {
        [TokenTree::Ident(name)] => Some(name.clone()),
        [TokenTree::Punct(amp), TokenTree::Ident(name)] if amp.as_char() == '&' => Some(name.clone()),
        _ => None,
    }
}

/// Calls `f` on `expr` and on every expression inside it.
pub(crate) fn walk(expr: &Expr, f: &mut impl FnMut(&Expr)) {
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

/// What the block returns: one `Var`, or a tuple of them.
pub(crate) enum Output {
    Single(Expr),
    Tuple(Vec<Expr>),
}

impl Output {
    pub(crate) fn exprs(&self) -> &[Expr] {
        match self {
            Output::Single(e) => std::slice::from_ref(e),
            Output::Tuple(es) => es,
        }
    }
}

/// `x: [B, 784]`: an input and its declared shape.
pub(crate) struct Decl {
    pub(crate) name: Ident,
    pub(crate) dims: Vec<DeclDim>,
    /// From the name to the closing bracket.
    pub(crate) span: SpanRange,
}

/// One dim of a declaration.
pub(crate) enum DeclDim {
    /// A literal size, `784`.
    Fixed(u64, Span),
    /// A symbolic size, `B`: bound to the real size at its first occurrence.
    Sym(Ident),
    /// `_`: any size.
    Any(Span),
}

/// `let name = value`.
pub(crate) struct Let {
    pub(crate) name: Ident,
    pub(crate) value: Expr,
    /// Its position among the block's `;`-separated parts (errors are
    /// reported in part order).
    pub(crate) part: usize,
}

/// An expression and the range of tokens it was parsed from.
pub(crate) struct Expr {
    pub(crate) kind: ExprKind,
    pub(crate) span: SpanRange,
}

pub(crate) enum ExprKind {
    /// An identifier: a `let` name, a declared input, or a free Rust
    /// variable (a `Var` or a scalar, the macro cannot tell which).
    Name(Ident),
    /// A numeric literal.
    Number(Number),
    /// `true` or `false`.
    Bool(Ident),
    /// A Rust expression passed through as written: a path (`cfg::SCALE`),
    /// a field (`self.w`) or a block (`{ lr * 0.5 }`).
    Rust(TokenStream),
    /// `-operand`.
    Neg { op: Span, operand: Box<Expr> },
    /// `lhs op rhs`.
    Binary { op: BinOp, op_span: Span, lhs: Box<Expr>, rhs: Box<Expr> },
    /// `f(args)`, or `args[0].f(args[1..])` when `method` is set; the
    /// callee is resolved once, by the parser.
    Call { func: Path, args: Vec<Arg>, method: bool, callee: Callee },
    /// `[a, b, ...]`: the dims of `reshape`, the starts and stops of `slice`.
    List(Vec<Expr>),
}

/// What a call calls.
pub(crate) enum Callee {
    /// The row of the built-in table with this name and argument count.
    Builtin(&'static Builtin),
    /// A built-in name with an argument count no row takes: the rows of
    /// that name, for the message.
    WrongArity(Vec<&'static Builtin>),
    /// A function the DSL does not know: `f(a, b)` becomes `f(tape, a, b)`.
    User,
}

/// A call argument: a DSL expression, or Rust tokens passed through
/// untouched (a built-in's `targets`, `ids`, `rng`).
pub(crate) enum Arg {
    Expr(Expr),
    Rust(TokenStream, SpanRange),
}

impl Arg {
    pub(crate) fn span(&self) -> SpanRange {
        match self {
            Arg::Expr(e) => e.span,
            Arg::Rust(_, span) => *span,
        }
    }
}

/// A function name: one identifier (`relu`, a user's `linear`) or a path
/// (`layers::linear`), which never names a built-in.
pub(crate) struct Path {
    pub(crate) tokens: Vec<TokenTree>,
    pub(crate) span: SpanRange,
}

impl Path {
    /// The identifier, when the path is a single one.
    pub(crate) fn ident(&self) -> Option<&Ident> {
        match self.tokens.as_slice() {
            [TokenTree::Ident(ident)] => Some(ident),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    MatMul,
}

impl BinOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::MatMul => "@",
        }
    }

    /// Binding power, as numpy: `@` binds like `*`, both tighter than `+`.
    pub(crate) fn precedence(self) -> u8 {
        match self {
            BinOp::Add | BinOp::Sub => 1,
            BinOp::Mul | BinOp::Div | BinOp::MatMul => 2,
        }
    }
}

/// Writes expressions back as DSL source, for messages: `relu(x @ w + b)`.
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::Name(ident) | ExprKind::Bool(ident) => write!(f, "{ident}"),
            ExprKind::Number(n) => write!(f, "{}", n.token),
            ExprKind::Rust(tokens) => f.write_str(&tokens_text(tokens.clone())),
            ExprKind::Neg { operand, .. } => {
                if matches!(operand.kind, ExprKind::Binary { .. }) {
                    write!(f, "-({operand})")
                } else {
                    write!(f, "-{operand}")
                }
            }
            ExprKind::Binary { op, lhs, rhs, .. } => {
                write_operand(f, lhs, op.precedence(), false)?;
                write!(f, " {} ", op.symbol())?;
                write_operand(f, rhs, op.precedence(), true)
            }
            ExprKind::Call { func, args, method, .. } => {
                let name = tokens_text(func.tokens.iter().cloned().collect());
                let (receiver, rest) = match (method, args.split_first()) {
                    (true, Some((first, rest))) => (Some(first), rest),
                    _ => (None, args.as_slice()),
                };
                if let Some(receiver) = receiver {
                    match receiver {
                        Arg::Expr(e) if matches!(e.kind, ExprKind::Binary { .. } | ExprKind::Neg { .. }) => {
                            write!(f, "({e}).")?
                        }
                        other => write!(f, "{other}.")?,
                    }
                }
                write!(f, "{name}(")?;
                for (i, arg) in rest.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{arg}")?;
                }
                write!(f, ")")
            }
            ExprKind::List(items) => {
                write!(f, "[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{item}")?;
                }
                write!(f, "]")
            }
        }
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Expr(e) => write!(f, "{e}"),
            Arg::Rust(tokens, _) => f.write_str(&tokens_text(tokens.clone())),
        }
    }
}

/// Parenthesizes an operand that binds looser than its parent operator
/// (or equally, on the right: `a - (b - c)`).
fn write_operand(f: &mut fmt::Formatter<'_>, e: &Expr, parent: u8, right: bool) -> fmt::Result {
    match &e.kind {
        ExprKind::Binary { op, .. } if op.precedence() < parent || (right && op.precedence() == parent) => {
            write!(f, "({e})")
        }
        _ => write!(f, "{e}"),
    }
}

/// Rust tokens as a person writes them: `self.w`, `cfg::SCALE`, `&ids`,
/// `x: [B, 3]`, `let h = relu(x)`.
pub(crate) fn tokens_text(tokens: TokenStream) -> String {
    let mut out = String::new();
    // Whether the next token is glued to the previous one (after `.`, `::`, `&`, an opening).
    let mut glued = true;
    for tree in tokens {
        let text = match &tree {
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    proc_macro2::Delimiter::Parenthesis => ("(", ")"),
                    proc_macro2::Delimiter::Bracket => ("[", "]"),
                    proc_macro2::Delimiter::Brace => ("{ ", " }"),
                    proc_macro2::Delimiter::None => ("", ""),
                };
                format!("{open}{}{close}", tokens_text(group.stream()))
            }
            other => other.to_string(),
        };
        let (space_before, glue_after) = match &tree {
            TokenTree::Punct(p) => match p.as_char() {
                '.' => (false, true),
                ',' | ';' => (false, false),
                ':' if p.spacing() == proc_macro2::Spacing::Joint => (false, true),
                // The second `:` of `::` glues to the name after it; a lone `:` is spaced after.
                ':' => (false, out.ends_with(':')),
                '&' | '!' => (true, true),
                _ => (true, false),
            },
            // A call or index binds to its callee: `f(x)`, `[a, b]` after `,` keeps its space.
            TokenTree::Group(g) if g.delimiter() != proc_macro2::Delimiter::Brace => {
                (!out.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '!'), false)
            }
            _ => (true, false),
        };
        if !out.is_empty() && space_before && !glued {
            out.push(' ');
        }
        out.push_str(&text);
        glued = glue_after;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_tokens_print_compactly() {
        let tokens: TokenStream = "self.w".parse().unwrap();
        assert_eq!(tokens_text(tokens), "self.w");
        let tokens: TokenStream = "cfg::SCALE".parse().unwrap();
        assert_eq!(tokens_text(tokens), "cfg::SCALE");
        for text in
            ["x: [B, 3]", "let h = relu(x @ w)", "&mut rng", "::std::f32::consts::PI", "f(a, b).c", "{ n as f32 }"]
        {
            assert_eq!(tokens_text(text.parse().unwrap()), text);
        }
    }
}
