//! The block parser: splits the input at top-level `;` into the tape, the
//! shape declarations, the `let` statements and the result, parses each
//! part (expressions with the Pratt parser in `pratt.rs`), and checks each
//! built-in call's arguments against the table. A mistake in one part does
//! not stop the others from being parsed, so one compile reports them all.

use std::collections::HashSet;

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};

use crate::ast::{Arg, Block, Decl, DeclDim, Expr, ExprKind, Let, Output, tokens_text};
use crate::builtins::{self, Kind};
use crate::error::{Error, Errors, Result, SpanRange};
use crate::pratt::{keyword, parse_expr, split_commas, two_char_operator};

const EXAMPLE: &str = "`grad!(tape; let y = relu(x @ w + b); mse(y, t))`";

/// One `;`-separated part of the input and the `;` that ends it.
struct Segment<'a> {
    tokens: &'a [TokenTree],
    semi: Option<Span>,
}

impl Segment<'_> {
    fn span(&self) -> SpanRange {
        SpanRange::of_tokens(self.tokens, self.semi.unwrap_or_else(Span::call_site))
    }
}

pub(crate) fn parse(input: TokenStream) -> Result<Block> {
    let tokens: Vec<TokenTree> = input.into_iter().collect();
    if tokens.is_empty() {
        let message = format!("grad! needs a tape and a body, as in {EXAMPLE}");
        return Err(Error::at(Span::call_site(), message));
    }
    let segments = split_semicolons(&tokens);
    let tape = &segments[0];
    if segments.len() == 1 {
        return Err(no_semicolon(tape));
    }
    check_tape(tape)?;
    let body: Vec<&Segment> = segments[1..].iter().filter(|s| !s.tokens.is_empty()).collect();
    let Some(&last) = body.last() else {
        let message = format!("empty body: after the tape, write what to compute, as in {EXAMPLE}");
        return Err(Error::at(tape.semi.expect("more than one segment"), message));
    };

    let mut errors = Errors::default();
    let (mut decls, mut stmts, mut result) = (Vec::new(), Vec::new(), None);
    let mut first_code: Option<String> = None;
    for segment in &body {
        let is_last = std::ptr::eq(*segment, last);
        if is_declaration(segment.tokens) {
            if let Some(code) = &first_code {
                let message = format!(
                    "shape declarations go first, right after the tape: move `{}` before `{code}`",
                    tokens_text(segment.tokens.iter().cloned().collect())
                );
                errors.push(Error::new(segment.span(), message));
            } else if let Some(parsed) = errors.keep(parse_decls(segment)) {
                decls.extend(parsed);
            }
            if is_last {
                let message = "nothing to compute: after the shape declarations, write the expression to return";
                errors.push(Error::new(segment.span(), message));
            }
            continue;
        }
        first_code.get_or_insert_with(|| tokens_text(segment.tokens.iter().cloned().collect()));
        if starts_with(segment.tokens, "let") {
            if let Some(stmt) = errors.keep(parse_let(segment)) {
                if is_last {
                    let message = format!(
                        "missing result: the block ends with a `let`; add the value to return after it, as in \
                         `...; {}`",
                        stmt.name
                    );
                    errors.push(Error::new(segment.span(), message));
                }
                stmts.push(stmt);
            }
        } else if is_last {
            result = errors.keep(parse_output(segment));
        } else {
            errors.push(not_a_statement(segment));
        }
    }
    check_duplicates(&decls).into_iter().for_each(|e| errors.push(e));
    let block = Block {
        tape: tape.tokens.iter().cloned().collect(),
        tape_span: tape.span(),
        decls,
        stmts,
        result: result.unwrap_or(Output::Tuple(Vec::new())),
    };
    errors.finish(block)
}

fn split_semicolons(tokens: &[TokenTree]) -> Vec<Segment<'_>> {
    let mut segments = Vec::new();
    let mut start = 0;
    for (i, tree) in tokens.iter().enumerate() {
        if let TokenTree::Punct(p) = tree
            && p.as_char() == ';'
        {
            segments.push(Segment { tokens: &tokens[start..i], semi: Some(p.span()) });
            start = i + 1;
        }
    }
    segments.push(Segment { tokens: &tokens[start..], semi: None });
    segments
}

/// The error for an input without `;`: the tape alone, or a body alone.
fn no_semicolon(only: &Segment) -> Error {
    let looks_like_tape = only.tokens.iter().all(|t| match t {
        TokenTree::Ident(_) => true,
        TokenTree::Punct(p) => matches!(p.as_char(), '.' | '&'),
        _ => false,
    });
    let message = if looks_like_tape {
        format!("missing body: after the tape, write `;` and what to compute, as in {EXAMPLE}")
    } else {
        format!(
            "missing tape: the first item of grad! is the tape to record on (a `Tape` or `&mut Tape`) and `;`, as in {EXAMPLE}"
        )
    };
    Error::new(only.span(), message)
}

/// Rejects a first part that is clearly not a tape (the tape was left out).
fn check_tape(tape: &Segment) -> Result<()> {
    let missing = |what: &str| {
        format!(
            "missing tape: the first item of grad! is the tape to record on (a `Tape` or `&mut Tape`) and `;`, but \
             this is {what}; as in {EXAMPLE}"
        )
    };
    if tape.tokens.is_empty() {
        let span = tape.semi.expect("a `;` follows the tape");
        return Err(Error::at(span, missing("an empty tape expression")));
    }
    let message = if starts_with(tape.tokens, "let") {
        missing("a `let` statement")
    } else if is_declaration(tape.tokens) {
        missing("a shape declaration")
    } else if tape.tokens.iter().any(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == '@')) {
        missing("an expression")
    } else {
        return Ok(());
    };
    Err(Error::new(tape.span(), message))
}

fn starts_with(tokens: &[TokenTree], keyword: &str) -> bool {
    matches!(tokens.first(), Some(TokenTree::Ident(i)) if i == keyword)
}

/// `name :` (a single colon, not a `::` path).
fn is_declaration(tokens: &[TokenTree]) -> bool {
    match tokens {
        [TokenTree::Ident(name), TokenTree::Punct(colon), rest @ ..] => {
            name != "let"
                && colon.as_char() == ':'
                && colon.spacing() == proc_macro2::Spacing::Alone
                && !matches!(rest.first(), Some(TokenTree::Punct(p)) if p.as_char() == ':')
        }
        _ => false,
    }
}

/// `x: [B, 784], w: [784, 10]`.
fn parse_decls(segment: &Segment) -> Result<Vec<Decl>> {
    let group = proc_macro2::Group::new(Delimiter::None, segment.tokens.iter().cloned().collect());
    let mut errors = Errors::default();
    let mut decls = Vec::new();
    for item in split_commas(&group)? {
        if let Some(decl) = errors.keep(parse_decl(&item)) {
            decls.push(decl);
        }
    }
    errors.finish(decls)
}

fn parse_decl(item: &[TokenTree]) -> Result<Decl> {
    let span = SpanRange::of_tokens(item, Span::call_site());
    let usage = "a shape declaration is `name: [dims]`, each dim a number, a symbol like `B`, or `_`";
    let (name, list) = match item {
        [TokenTree::Ident(name), TokenTree::Punct(colon), TokenTree::Group(list)]
            if colon.as_char() == ':' && list.delimiter() == Delimiter::Bracket =>
        {
            (name.clone(), list)
        }
        [TokenTree::Ident(name), TokenTree::Punct(_), rest @ ..] => {
            let message = format!("expected the shape of `{name}` in brackets, as in `{name}: [B, 784]`");
            return Err(Error::new(SpanRange::of_tokens(rest, name.span()), message));
        }
        _ => return Err(Error::new(span, usage)),
    };
    let mut dims = Vec::new();
    for dim in split_commas(list)? {
        let dim = match dim.as_slice() {
            [TokenTree::Ident(i)] if i == "_" => DeclDim::Any(i.span()),
            [TokenTree::Ident(i)] => DeclDim::Sym(i.clone()),
            [TokenTree::Literal(lit)] => match crate::ast::Number::parse(lit) {
                Some(n) if !n.is_float && matches!(n.suffix.as_str(), "" | "usize") => match n.int {
                    Some(v) if v <= u64::MAX as u128 => DeclDim::Fixed(v as u64, lit.span()),
                    _ => return Err(Error::at(lit.span(), "this size is too large")),
                },
                _ => return Err(Error::at(lit.span(), format!("a dim is a whole number, not `{lit}`; {usage}"))),
            },
            other => return Err(Error::new(SpanRange::of_tokens(other, list.span()), usage)),
        };
        dims.push(dim);
    }
    Ok(Decl { name, dims, span })
}

fn check_duplicates(decls: &[Decl]) -> Vec<Error> {
    let mut seen = HashSet::new();
    decls
        .iter()
        .filter(|d| !seen.insert(d.name.to_string()))
        .map(|d| Error::new(d.span, format!("`{}` is declared twice", d.name)))
        .collect()
}

/// `let name = expr`.
fn parse_let(segment: &Segment) -> Result<Let> {
    let tokens = segment.tokens;
    let let_span = tokens[0].span();
    let name = match tokens.get(1) {
        Some(TokenTree::Ident(name)) if name == "mut" => {
            let bound = match tokens.get(2) {
                Some(TokenTree::Ident(bound)) => bound.to_string(),
                _ => "y".to_string(),
            };
            let message = format!("`let mut` is not needed: a grad! name is bound once; write `let {bound} = ...`");
            return Err(Error::new(SpanRange::single(let_span).to(SpanRange::of(&tokens[1])), message));
        }
        Some(TokenTree::Ident(name)) => name.clone(),
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => {
            let message = "destructuring is not part of grad!: bind one name per `let`";
            return Err(Error::at(g.span(), message));
        }
        Some(other) => return Err(Error::at(other.span(), "expected a name after `let`")),
        None => return Err(Error::at(let_span, "expected a name after `let`, as in `let y = relu(x)`")),
    };
    match tokens.get(2) {
        Some(TokenTree::Punct(p)) if p.as_char() == '=' && p.spacing() == proc_macro2::Spacing::Alone => {}
        Some(TokenTree::Punct(p)) if p.as_char() == ':' => {
            let message = format!(
                "`let {name}: ...`: annotations are not part of grad!; declare input shapes at the top of the block, \
                 as in `grad!(tape; x: [B, 784]; ...)`"
            );
            return Err(Error::at(p.span(), message));
        }
        _ => {
            let message = format!("expected `=` after `let {name}`");
            return Err(Error::new(SpanRange::single(let_span).to(SpanRange::single(name.span())), message));
        }
    }
    if tokens.len() == 3 {
        return Err(Error::at(tokens[2].span(), format!("expected an expression after `let {name} =`")));
    }
    let value = parse_expr(&tokens[3..], tokens[2].span())?;
    validate(&value)?;
    Ok(Let { name, value })
}

/// The last item: an expression or a parenthesized tuple of expressions.
fn parse_output(segment: &Segment) -> Result<Output> {
    if let [TokenTree::Group(g)] = segment.tokens
        && g.delimiter() == Delimiter::Parenthesis
        && g.stream().into_iter().any(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ','))
    {
        let mut errors = Errors::default();
        let mut items = Vec::new();
        for piece in split_commas(g)? {
            if let Some(e) = errors.keep(parse_expr(&piece, g.span()).and_then(|e| validate(&e).map(|()| e))) {
                items.push(e);
            }
        }
        return errors.finish(Output::Tuple(items));
    }
    let expr = parse_expr(segment.tokens, segment.semi.unwrap_or_else(Span::call_site))?;
    validate(&expr)?;
    Ok(Output::Single(expr))
}

/// The error for a part that is not the last but not a `let` either: an
/// assignment, Rust control flow, or an expression whose value is lost.
fn not_a_statement(segment: &Segment) -> Error {
    let tokens = segment.tokens;
    if let Some(TokenTree::Ident(first)) = tokens.first()
        && let Some(message) = keyword(&first.to_string())
    {
        return Error::at(first.span(), message);
    }
    for (i, tree) in tokens.iter().enumerate() {
        let TokenTree::Punct(p) = tree else { continue };
        let joint = p.spacing() == proc_macro2::Spacing::Joint;
        match (p.as_char(), tokens.get(i + 1)) {
            (c, Some(TokenTree::Punct(next))) if joint && next.as_char() == '=' && c != '=' && c != '!' => {
                let pair = format!("{c}=");
                if let Some(message) = two_char_operator(&pair) {
                    return Error::new(SpanRange { first: p.span(), last: next.span() }, message);
                }
            }
            ('=', _) if !joint => {
                let name = match tokens.first() {
                    Some(TokenTree::Ident(name)) if i == 1 => name.to_string(),
                    _ => "name".to_string(),
                };
                let message = format!("assignment is not part of grad!: bind the value with `let {name} = ...`");
                return Error::new(segment.span(), message);
            }
            _ => {}
        }
    }
    let text = tokens_text(tokens.iter().cloned().collect());
    let message = format!(
        "this value is thrown away: only the last item of grad! is returned, and the items before it must be \
         `let` statements; to keep it, write `let name = {text}`"
    );
    Error::new(segment.span(), message)
}

/// Checks every built-in call in `expr` against the table: the number of
/// arguments and the form of axis, flag and dims arguments.
fn validate(expr: &Expr) -> Result<()> {
    let mut errors = Errors::default();
    walk(expr, &mut |e| {
        if let ExprKind::Call { func, args, method } = &e.kind
            && let Some(name) = func.ident()
        {
            errors.keep(validate_call(&name.to_string(), args, *method, e));
        }
    });
    errors.finish(())
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

fn validate_call(name: &str, args: &[Arg], method: bool, call: &Expr) -> Result<()> {
    let builtin = match builtins::resolve(name, args.len()) {
        Ok(Some(builtin)) => builtin,
        Ok(None) => return Ok(()),
        Err(rows) => return Err(arity_error(name, args.len(), method, &rows, call)),
    };
    let mut errors = Errors::default();
    for (param, arg) in builtin.params.iter().zip(args) {
        let Arg::Expr(e) = arg else { continue };
        let ok = match (param.kind, &e.kind) {
            (_, ExprKind::Name(_) | ExprKind::Rust(_)) => true,
            (Kind::Var, kind) => !matches!(kind, ExprKind::Bool(_) | ExprKind::List(_) | ExprKind::Number(_)),
            (Kind::Scalar, kind) => !matches!(kind, ExprKind::Bool(_) | ExprKind::List(_)),
            (Kind::Axis, kind) => integer(kind, true),
            (Kind::Index, kind) => integer(kind, false),
            (Kind::Flag, kind) => matches!(kind, ExprKind::Bool(_)),
            (Kind::Dims, ExprKind::List(items)) => items.iter().all(|item| size(&item.kind)),
            (Kind::Dims | Kind::Rust, _) => false,
        };
        if !ok {
            errors.push(Error::new(e.span, argument_message(name, param.name, param.kind, e)));
        }
    }
    errors.finish(())
}

/// An integer literal (negated, when `signed`).
fn integer(kind: &ExprKind, signed: bool) -> bool {
    match kind {
        ExprKind::Number(n) => !n.is_float && n.int.is_some(),
        ExprKind::Neg { operand, .. } if signed => matches!(&operand.kind, ExprKind::Number(n) if !n.is_float),
        _ => false,
    }
}

/// An entry of a dims list: a whole number, a name, a Rust block, or a product.
fn size(kind: &ExprKind) -> bool {
    match kind {
        ExprKind::Number(n) => !n.is_float && n.int.is_some(),
        ExprKind::Name(_) | ExprKind::Rust(_) => true,
        ExprKind::Binary { op: crate::ast::BinOp::Mul, lhs, rhs, .. } => size(&lhs.kind) && size(&rhs.kind),
        _ => false,
    }
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
        Kind::Rust => "a Rust expression",
    };
    format!("`{param}` of `{func}` must be {expected}, but it is `{arg}`")
}

fn arity_error(name: &str, given: usize, method: bool, rows: &[&builtins::Builtin], call: &Expr) -> Error {
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
