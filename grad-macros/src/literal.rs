//! Numbers in the DSL, in one place: classifying a literal token, and the
//! forms every stage reads the same way: an integer argument (an axis), an
//! entry of a dims list (`B * T`), and a declared dim.

use proc_macro2::{Ident, Literal, Span, TokenStream};

use crate::ast::{BinOp, Expr, ExprKind};

/// A numeric literal, classified.
#[derive(Clone)]
pub(crate) struct Number {
    pub(crate) token: Literal,
    /// The literal without its suffix.
    pub(crate) digits: String,
    pub(crate) suffix: String,
    /// The exact value of an integer literal (`None` for a float, or an
    /// integer too large for `u128`).
    pub(crate) int: Option<u128>,
    pub(crate) is_float: bool,
}

impl Number {
    /// Classifies a literal token; `None` for anything but a number.
    pub(crate) fn parse(token: &Literal) -> Option<Number> {
        let text = token.to_string();
        if !text.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        let radix = match text.get(..2) {
            Some("0x") => 16,
            Some("0o") => 8,
            Some("0b") => 2,
            _ => 10,
        };
        const SUFFIXES: [&str; 14] =
            ["f32", "f64", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize"];
        let suffix =
            SUFFIXES.iter().find(|s| text.ends_with(*s) && !(radix == 16 && s.starts_with('f'))).map_or("", |s| s);
        let digits = &text[..text.len() - suffix.len()];
        let is_float = suffix.starts_with('f') || (radix == 10 && digits.contains(['.', 'e', 'E']));
        let int = if is_float {
            None
        } else {
            let body: String = digits.chars().skip(if radix == 10 { 0 } else { 2 }).filter(|&c| c != '_').collect();
            u128::from_str_radix(&body, radix).ok()
        };
        Some(Number { token: token.clone(), digits: digits.to_string(), suffix: suffix.to_string(), int, is_float })
    }

    /// The literal as a float without suffix (`2` → `2.0`, `1.` → `1.0`),
    /// or `None` for an integer too large to read.
    pub(crate) fn float_digits(&self) -> Option<String> {
        if self.is_float {
            let mut digits = self.digits.clone();
            if digits.ends_with('.') {
                digits.push('0');
            }
            Some(digits)
        } else {
            self.int.map(|n| format!("{n}.0"))
        }
    }
}

/// Whether `e` is an integer literal, or a negated one when `signed`: the
/// form of an axis (`-1`) or index (`0`) argument.
pub(crate) fn is_integer(e: &Expr, signed: bool) -> bool {
    match &e.kind {
        ExprKind::Number(n) => !n.is_float && n.int.is_some(),
        ExprKind::Neg { operand, .. } if signed => matches!(&operand.kind, ExprKind::Number(n) if !n.is_float),
        _ => false,
    }
}

/// The value of an integer literal, negated or not; `None` for anything
/// else (a Rust expression's value is known only at run time).
pub(crate) fn integer_value(e: &Expr) -> Option<i128> {
    match &e.kind {
        ExprKind::Number(n) if !n.is_float => n.int.and_then(|v| i128::try_from(v).ok()),
        ExprKind::Neg { operand, .. } => integer_value(operand).map(|v| -v),
        _ => None,
    }
}

/// An entry of a dims list (`reshape(x, [B * T, 4])`, `[B, T, H, C / H]`).
pub(crate) enum Size<'a> {
    /// A whole number.
    Literal(&'a Number),
    /// A declared symbol (`B`) or a Rust `usize` variable.
    Name(&'a Ident),
    /// A `{ block }` or a path, evaluated at run time.
    Rust(&'a TokenStream),
    /// `lhs op rhs` for `op` one of `* / + -`; a quotient must be exact
    /// and a difference at least 0. `expr` is the whole entry as written.
    Arith { op: BinOp, op_span: Span, lhs: Box<Size<'a>>, rhs: Box<Size<'a>>, expr: &'a Expr },
}

/// `e` as an entry of a dims list, or `None` if it is not one.
pub(crate) fn size(e: &Expr) -> Option<Size<'_>> {
    match &e.kind {
        ExprKind::Number(n) if !n.is_float && n.int.is_some() => Some(Size::Literal(n)),
        ExprKind::Name(ident) => Some(Size::Name(ident)),
        ExprKind::Rust(tokens) => Some(Size::Rust(tokens)),
        ExprKind::Binary { op: op @ (BinOp::Mul | BinOp::Div | BinOp::Add | BinOp::Sub), op_span, lhs, rhs } => {
            Some(Size::Arith {
                op: *op,
                op_span: *op_span,
                lhs: Box::new(size(lhs)?),
                rhs: Box::new(size(rhs)?),
                expr: e,
            })
        }
        _ => None,
    }
}

/// A literal dim of a shape declaration (`x: [B, 784]`).
pub(crate) enum DeclaredSize {
    Size(u64),
    TooLarge,
    NotWhole,
}

/// Reads a literal dim of a shape declaration.
pub(crate) fn declared_size(lit: &Literal) -> DeclaredSize {
    match Number::parse(lit) {
        Some(n) if !n.is_float && matches!(n.suffix.as_str(), "" | "usize") => match n.int {
            Some(v) if v <= u64::MAX as u128 => DeclaredSize::Size(v as u64),
            _ => DeclaredSize::TooLarge,
        },
        _ => DeclaredSize::NotWhole,
    }
}

#[cfg(test)]
mod tests {
    use proc_macro2::TokenTree;

    use super::*;

    fn number(text: &str) -> Number {
        let TokenTree::Literal(lit) = text.parse::<TokenStream>().unwrap().into_iter().next().unwrap() else {
            panic!("not a literal: {text}")
        };
        Number::parse(&lit).unwrap()
    }

    #[test]
    fn numbers_are_classified_with_their_suffix_and_value() {
        let n = number("2");
        assert!(!n.is_float);
        assert_eq!((n.int, n.float_digits().unwrap()), (Some(2), "2.0".to_string()));
        let n = number("1_000usize");
        assert_eq!((n.int, n.suffix.as_str()), (Some(1000), "usize"));
        let n = number("0x1f32");
        assert_eq!((n.int, n.suffix.as_str(), n.is_float), (Some(0x1f32), "", false));
        let n = number("1e-3");
        assert!(n.is_float && n.int.is_none());
        let n = number("2.5f32");
        assert_eq!((n.digits.as_str(), n.suffix.as_str(), n.is_float), ("2.5", "f32", true));
        assert_eq!(number("1.").float_digits().unwrap(), "1.0");
        assert_eq!(number("0b101").int, Some(5));
    }
}
