//! Operands of the expansion: the [`Value`] of a sub-expression, and how
//! numbers and Rust values are written into it. A number becomes a scalar
//! of the tape's type, read exactly as the compiler reads the literal for
//! that type; a Rust value is passed as written.

use proc_macro2::{Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};

use crate::ast::{Expr, ExprKind};
use crate::error::{Error, Result};
use crate::literal::Number;

/// An operand ready to pass.
#[derive(Clone)]
pub(crate) enum Value {
    /// A `Var`: a temporary, a name, or (before binding) a call.
    Var(TokenStream),
    /// A number: `typed` is a `T` expression, `raw` the tokens as written
    /// (what a user function receives, where `3` may be a `usize`).
    Number { typed: TokenStream, raw: TokenStream },
    /// A `Var` or a `T`, known only to the type checker.
    Ambiguous(TokenStream),
    /// `true` / `false`.
    Flag(TokenStream),
}

/// A literal as a scalar of the tape's type: `lit(2.0f32, 2.0f64)` reads
/// the digits exactly as Rust would for either type.
pub(crate) fn number(n: &Number, e: &Expr) -> Result<Value> {
    scalar_literal(n, false, e)
}

pub(crate) fn negative_number(n: &Number, op: Span, e: &Expr) -> Result<Value> {
    let Value::Number { typed, raw } = scalar_literal(n, true, e)? else { unreachable!("a number") };
    let minus = TokenTree::Punct({
        let mut p = Punct::new('-', Spacing::Alone);
        p.set_span(op);
        p
    });
    let mut raw_neg = TokenStream::from(minus);
    raw_neg.extend(raw);
    Ok(Value::Number { typed, raw: raw_neg })
}

fn scalar_literal(n: &Number, negative: bool, e: &Expr) -> Result<Value> {
    let span = n.token.span();
    let sign = if negative { quote_spanned!(span=> -) } else { TokenStream::new() };
    let raw = n.token.to_token_stream();
    let typed = match n.suffix.as_str() {
        "f32" | "f64" => quote!(#sign #raw),
        "" => {
            let digits = n.float_digits().ok_or_else(|| Error::new(e.span, "this number is too large"))?;
            let suffixed = |ty: &str| {
                let mut lit: Literal = format!("{digits}{ty}").parse().expect("invariant: digits of a literal");
                lit.set_span(span);
                lit
            };
            let (single, double) = (suffixed("f32"), suffixed("f64"));
            quote_spanned!(span=> ::grad_runtime::dsl::lit(#sign #single, #sign #double))
        }
        _ => {
            let message = format!(
                "`{}` is an integer; a scalar of the tape's float type is written `{}`",
                n.token,
                n.float_digits().unwrap_or_default()
            );
            return Err(Error::new(e.span, message));
        }
    };
    Ok(Value::Number { typed, raw })
}

/// `-s` for a scalar operand (a literal's sign folded into it).
pub(crate) fn negate(e: &Expr, typed: &TokenStream) -> TokenStream {
    match &e.kind {
        ExprKind::Number(n) => match scalar_literal(n, true, e) {
            Ok(Value::Number { typed, .. }) => typed,
            _ => quote!(::grad_runtime::dsl::sneg(#typed)),
        },
        _ => quote!(::grad_runtime::dsl::sneg(#typed)),
    }
}

/// Tokens of an argument passed as written (an axis, a flag, a Rust value);
/// the parser has checked that it is one of these forms.
pub(crate) fn as_written(e: &Expr) -> Result<TokenStream> {
    match &e.kind {
        ExprKind::Name(ident) | ExprKind::Bool(ident) => Ok(ident.to_token_stream()),
        ExprKind::Number(n) => Ok(n.token.to_token_stream()),
        ExprKind::Rust(tokens) => Ok(unbraced(tokens)),
        ExprKind::Neg { op, operand } => {
            let inner = as_written(operand)?;
            Ok(quote_spanned!(*op=> -#inner))
        }
        _ => Err(Error::new(e.span, format!("expected a number or a Rust value here, found `{e}`"))),
    }
}

/// A number passed to a dispatching helper, as `Operand::Scalar(..)`.
pub(crate) fn dispatch_operand(value: &Value) -> TokenStream {
    match value {
        Value::Number { typed, .. } => quote!(::grad_runtime::dsl::Operand::Scalar(#typed)),
        Value::Var(t) | Value::Ambiguous(t) | Value::Flag(t) => t.clone(),
    }
}

/// The expression inside a `{ block }` that is one expression (no `;`),
/// which is how it is passed: braces around an argument would trip
/// rustc's `unused_braces` lint in the user's code.
pub(crate) fn unbraced(tokens: &TokenStream) -> TokenStream {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    if let [TokenTree::Group(g)] = trees.as_slice()
        && g.delimiter() == proc_macro2::Delimiter::Brace
        && !g.stream().into_iter().any(|t| matches!(&t, TokenTree::Punct(p) if p.as_char() == ';'))
    {
        return g.stream();
    }
    tokens.clone()
}

pub(crate) fn not_a_number(e: &Expr) -> Error {
    Error::new(e.span, format!("`{e}` is a `bool`; arithmetic needs tensors or numbers"))
}

pub(crate) fn matmul_number(e: &Expr) -> Error {
    let message = format!("`@` multiplies tensors, but `{e}` is a number; to scale a tensor use `*`");
    Error::new(e.span, message)
}

/// A number, or a negated one, exactly as written: what a user function
/// receives (`dense(x, 3)` may take a `usize`).
pub(crate) fn as_written_number(e: &Expr) -> Option<TokenStream> {
    match &e.kind {
        ExprKind::Number(n) => Some(n.token.to_token_stream()),
        ExprKind::Neg { op, operand } => {
            let inner = as_written_number(operand)?;
            Some(quote_spanned!(*op=> -#inner))
        }
        _ => None,
    }
}
