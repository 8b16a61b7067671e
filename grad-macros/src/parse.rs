//! The block parser: splits the input at top-level `;` into the tape, the
//! shape declarations, the `let` statements and the result, and parses
//! each part (expressions with the Pratt parser in `pratt.rs`). A mistake
//! in one part does not stop the others from being parsed, so one compile
//! reports them all.

use std::collections::HashSet;

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};

use crate::ast::{Block, Decl, DeclDim, Let, Output, tokens_text};
use crate::error::{Error, Errors, PartErrors, Result, SpanRange};
use crate::literal::{DeclaredSize, declared_size};
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

/// The parsed block and the mistakes found in its parts; `Err` only when
/// there is no block at all (no tape, no body). The validation stage runs
/// on the parts that parsed, so one compile reports every mistake.
pub(crate) fn parse(input: TokenStream) -> Result<(Block, PartErrors)> {
    let all: Vec<TokenTree> = input.into_iter().collect();
    if all.is_empty() {
        let message = format!("grad! needs a tape and a body, as in {EXAMPLE}");
        return Err(Error::at(Span::call_site(), message));
    }
    let (fuse, tokens) = options(&all)?;
    let segments = split_semicolons(tokens);
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
    let mut parts = Parts::default();
    for (part, segment) in body.iter().enumerate() {
        parts.part = part;
        parts.add(segment, std::ptr::eq(*segment, last));
    }
    parts.part = body.len();
    check_duplicates(&parts.decls).into_iter().for_each(|e| parts.push(e));
    let block = Block {
        tape: tape.tokens.iter().cloned().collect(),
        tape_span: tape.span(),
        decls: parts.decls,
        stmts: parts.stmts,
        result: parts.result.unwrap_or(Output::Tuple(Vec::new())),
        result_part: body.len() - 1,
        fuse,
    };
    Ok((block, parts.errors))
}

/// The block's option, `#[nofuse]` before the tape (every operation its
/// own node: to compare with, or debug, the fused form), and the tokens
/// after it.
fn options(tokens: &[TokenTree]) -> Result<(bool, &[TokenTree])> {
    let [TokenTree::Punct(hash), TokenTree::Group(attr), rest @ ..] = tokens else { return Ok((true, tokens)) };
    if hash.as_char() != '#' || attr.delimiter() != Delimiter::Bracket {
        return Ok((true, tokens));
    }
    let span = SpanRange { first: hash.span(), last: attr.span() };
    let known = matches!(attr.stream().into_iter().collect::<Vec<_>>().as_slice(),
        [TokenTree::Ident(name)] if name == "nofuse");
    if !known {
        let message = format!(
            "unknown grad! option `#[{}]`: the one option is `#[nofuse]`, before the tape, which records every \
             operation as its own node, as in `grad!(#[nofuse] tape; ...)`",
            tokens_text(attr.stream())
        );
        return Err(Error::new(span, message));
    }
    if rest.is_empty() {
        return Err(Error::new(span, format!("after `#[nofuse]`, grad! needs a tape and a body, as in {EXAMPLE}")));
    }
    Ok((false, rest))
}

/// The body's parts as they are parsed, and the mistakes found so far.
#[derive(Default)]
struct Parts {
    decls: Vec<Decl>,
    stmts: Vec<Let>,
    result: Option<Output>,
    /// The first part that is code, quoted when declarations follow it.
    first_code: Option<String>,
    /// The position of the part being parsed.
    part: usize,
    errors: PartErrors,
}

impl Parts {
    fn push(&mut self, error: Error) {
        self.errors.push(self.part, error);
    }

    fn keep<T>(&mut self, result: Result<T>) -> Option<T> {
        self.errors.keep(self.part, result)
    }

    fn add(&mut self, segment: &Segment, is_last: bool) {
        if is_declaration(segment.tokens) {
            return self.declarations(segment, is_last);
        }
        self.first_code.get_or_insert_with(|| tokens_text(segment.tokens.iter().cloned().collect()));
        if starts_with(segment.tokens, "let") {
            self.statement(segment, is_last);
        } else if is_last {
            self.result = self.keep(parse_output(segment));
        } else {
            self.push(not_a_statement(segment));
        }
    }

    fn declarations(&mut self, segment: &Segment, is_last: bool) {
        if let Some(code) = &self.first_code {
            let message = format!(
                "shape declarations go first, right after the tape: move `{}` before `{code}`",
                tokens_text(segment.tokens.iter().cloned().collect())
            );
            self.push(Error::new(segment.span(), message));
        } else if let Some(parsed) = self.keep(parse_decls(segment)) {
            self.decls.extend(parsed);
        }
        if is_last {
            let message = "nothing to compute: after the shape declarations, write the expression to return";
            self.push(Error::new(segment.span(), message));
        }
    }

    fn statement(&mut self, segment: &Segment, is_last: bool) {
        let Some(mut stmt) = self.keep(parse_let(segment)) else { return };
        stmt.part = self.part;
        if is_last {
            let message = format!(
                "missing result: the block ends with a `let`; add the value to return after it, as in `...; {}`",
                stmt.name
            );
            self.push(Error::new(segment.span(), message));
        }
        self.stmts.push(stmt);
    }
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
            [TokenTree::Literal(lit)] => match declared_size(lit) {
                DeclaredSize::Size(n) => DeclDim::Fixed(n, lit.span()),
                DeclaredSize::TooLarge => return Err(Error::at(lit.span(), "this size is too large")),
                DeclaredSize::NotWhole => {
                    return Err(Error::at(lit.span(), format!("a dim is a whole number, not `{lit}`; {usage}")));
                }
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
    Ok(Let { name, value, part: 0 })
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
            if let Some(e) = errors.keep(parse_expr(&piece, g.span())) {
                items.push(e);
            }
        }
        return errors.finish(Output::Tuple(items));
    }
    let expr = parse_expr(segment.tokens, segment.semi.unwrap_or_else(Span::call_site))?;
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
