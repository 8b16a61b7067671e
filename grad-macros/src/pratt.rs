//! The expression parser: a Pratt parser over `proc_macro2` tokens.
//!
//! Precedence as NumPy: binary `+ -` bind loosest, then `* / @` (`@` is
//! not a Rust operator, which is why syn's parser cannot be used), then
//! unary `-`, then postfix `.method()` calls; all binary operators are
//! left-associative. Every failure is an [`Error`] on the offending tokens.

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};

use crate::ast::{Arg, BinOp, Callee, Expr, ExprKind, Path};
use crate::builtins::{self, Kind};
use crate::error::{Error, Result, SpanRange};
use crate::literal::Number;

/// Binding power of unary minus: tighter than every binary operator.
const PREFIX: u8 = 3;

const OPERATORS: &str = "the operators are `+ - * /`, `@` (matrix product) and unary `-`";

/// Parses all of `tokens` as one expression. `around` spans the tokens'
/// context, for a message about an empty run.
pub(crate) fn parse_expr(tokens: &[TokenTree], around: Span) -> Result<Expr> {
    if tokens.is_empty() {
        return Err(Error::at(around, "expected an expression here"));
    }
    let mut parser = Parser { tokens, pos: 0 };
    let expr = parser.expr(0)?;
    match parser.peek() {
        None => Ok(expr),
        Some(TokenTree::Punct(p)) if p.as_char() == ',' => Err(Error::at(
            p.span(),
            "unexpected `,`: to return several values write a tuple in parentheses, `(a, b)`, as the last item",
        )),
        Some(_) => Err(parser.expected_operator()),
    }
}

/// Splits a group's tokens at top-level commas; a trailing comma is allowed,
/// an empty piece elsewhere is an error.
pub(crate) fn split_commas(group: &Group) -> Result<Vec<Vec<TokenTree>>> {
    let mut pieces = vec![Vec::new()];
    for tree in group.stream() {
        match &tree {
            TokenTree::Punct(p) if p.as_char() == ',' => {
                if pieces.last().is_some_and(Vec::is_empty) {
                    return Err(Error::at(p.span(), "expected an item before this `,`"));
                }
                pieces.push(Vec::new());
            }
            _ => pieces.last_mut().expect("invariant: starts with one piece").push(tree),
        }
    }
    if pieces.last().is_some_and(Vec::is_empty) {
        pieces.pop();
    }
    Ok(pieces)
}

struct Parser<'a> {
    tokens: &'a [TokenTree],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&TokenTree> {
        self.tokens.get(self.pos)
    }

    fn peek_at(&self, k: usize) -> Option<&TokenTree> {
        self.tokens.get(self.pos + k)
    }

    fn punct_at(&self, k: usize) -> Option<char> {
        match self.peek_at(k) {
            Some(TokenTree::Punct(p)) => Some(p.as_char()),
            _ => None,
        }
    }

    /// The span of the last token consumed (or the first, before any).
    fn last_span(&self) -> Span {
        self.tokens[self.pos.saturating_sub(1).min(self.tokens.len() - 1)].span()
    }

    fn expr(&mut self, min_prec: u8) -> Result<Expr> {
        let mut lhs = self.prefix()?;
        while let Some((op, op_span)) = self.operator()? {
            if op.precedence() <= min_prec {
                break;
            }
            self.pos += 1;
            if self.peek().is_none() {
                return Err(Error::at(op_span, format!("expected an expression after `{}`", op.symbol())));
            }
            let rhs = self.expr(op.precedence())?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr { kind: ExprKind::Binary { op, op_span, lhs: Box::new(lhs), rhs: Box::new(rhs) }, span };
        }
        Ok(lhs)
    }

    /// The binary operator at the cursor, `None` at the end of the run; an
    /// error for any other token there.
    fn operator(&self) -> Result<Option<(BinOp, Span)>> {
        let Some(tree) = self.peek() else { return Ok(None) };
        let TokenTree::Punct(p) = tree else { return Err(self.expected_operator()) };
        let joint = p.spacing() == proc_macro2::Spacing::Joint;
        if let (true, Some(next)) = (joint, self.punct_at(1)) {
            let pair: String = [p.as_char(), next].iter().collect();
            if let Some(message) = two_char_operator(&pair) {
                let span = SpanRange { first: p.span(), last: self.peek_at(1).expect("checked").span() };
                return Err(Error::new(span, message));
            }
        }
        let op = match p.as_char() {
            '+' => BinOp::Add,
            '-' => BinOp::Sub,
            '*' => BinOp::Mul,
            '/' => BinOp::Div,
            '@' => BinOp::MatMul,
            ',' => return Ok(None),
            c => return Err(Error::at(p.span(), one_char_operator(c))),
        };
        Ok(Some((op, p.span())))
    }

    fn expected_operator(&self) -> Error {
        let tree = self.peek().expect("called with a token at the cursor");
        let message = match tree {
            TokenTree::Group(g) if g.delimiter() == Delimiter::Bracket => {
                "indexing is not part of grad!: take part of a tensor with `slice(x, [starts], [stops])`".to_string()
            }
            TokenTree::Ident(i) if i == "as" => {
                "`as` casts are Rust, not grad!: compute the scalar in a Rust block, e.g. `{ n as f32 }`".to_string()
            }
            TokenTree::Ident(i) if i == "let" => {
                "`let` starts a new statement: end the previous one with `;`".to_string()
            }
            _ => format!("expected an operator before `{}`: {OPERATORS}", short(tree)),
        };
        Error::at(tree.span(), message)
    }

    fn prefix(&mut self) -> Result<Expr> {
        let Some(tree) = self.peek().cloned() else {
            return Err(Error::at(self.last_span(), "expected an expression"));
        };
        let primary = match &tree {
            TokenTree::Punct(p) if p.as_char() == '-' => {
                self.pos += 1;
                if self.peek().is_none() {
                    return Err(Error::at(p.span(), "expected an expression after unary `-`"));
                }
                let operand = self.expr(PREFIX)?;
                let span = SpanRange::single(p.span()).to(operand.span);
                return Ok(Expr { kind: ExprKind::Neg { op: p.span(), operand: Box::new(operand) }, span });
            }
            TokenTree::Punct(p) if p.as_char() == ':' && self.punct_at(1) == Some(':') => self.path()?,
            TokenTree::Punct(p) => return Err(Error::at(p.span(), prefix_punct(p.as_char()))),
            TokenTree::Ident(_) => self.path()?,
            TokenTree::Literal(lit) => {
                self.pos += 1;
                let Some(number) = Number::parse(lit) else {
                    let message = format!("expected a number or a tensor expression, found `{lit}`");
                    return Err(Error::at(lit.span(), message));
                };
                Expr { kind: ExprKind::Number(number), span: SpanRange::of(&tree) }
            }
            TokenTree::Group(group) => {
                self.pos += 1;
                group_expr(group)?
            }
        };
        self.postfix(primary)
    }

    /// An identifier or a path (`a::b`, `::c::d`), a call of it, or a keyword.
    fn path(&mut self) -> Result<Expr> {
        let start = self.pos;
        if let Some(TokenTree::Ident(ident)) = self.peek().cloned() {
            let name = ident.to_string();
            // A keyword that names a built-in (`where`) is the built-in when called.
            let called = matches!(self.tokens.get(self.pos + 1), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis);
            if let Some(message) = keyword(&name)
                && !(called && builtins::rows(&name).next().is_some())
            {
                return Err(Error::at(ident.span(), message));
            }
            if name == "true" || name == "false" {
                self.pos += 1;
                return Ok(Expr { kind: ExprKind::Bool(ident.clone()), span: SpanRange::single(ident.span()) });
            }
        }
        loop {
            if self.punct_at(0) == Some(':') && self.punct_at(1) == Some(':') {
                self.pos += 2;
            }
            match self.peek() {
                Some(TokenTree::Ident(_)) => self.pos += 1,
                _ => return Err(Error::at(self.last_span(), "expected a name after `::`")),
            }
            if !(self.punct_at(0) == Some(':') && self.punct_at(1) == Some(':')) {
                break;
            }
            if self.punct_at(2) == Some('<') {
                return Err(Error::at(
                    self.last_span(),
                    "turbofish `::<...>` is not part of grad!: call a Rust helper in a block, `{ f::<T>() }`",
                ));
            }
        }
        let tokens = self.tokens[start..self.pos].to_vec();
        let span = SpanRange::of_tokens(&tokens, self.last_span());
        let path = Path { tokens, span };
        if let Some(TokenTree::Group(group)) = self.peek().cloned()
            && group.delimiter() == Delimiter::Parenthesis
        {
            self.pos += 1;
            let name = path.ident().map(ToString::to_string);
            let (args, callee) = call_args(&group, name.as_deref(), 0)?;
            let span = path.span.to(SpanRange::single(group.span()));
            return Ok(Expr { kind: ExprKind::Call { func: path, args, method: false, callee }, span });
        }
        let kind = match path.ident() {
            Some(ident) if ident == "_" => {
                return Err(Error::at(
                    ident.span(),
                    "`_` is only allowed as a dim in a shape declaration, `x: [_, 10]`",
                ));
            }
            Some(ident) => ExprKind::Name(ident.clone()),
            None => ExprKind::Rust(path.tokens.iter().cloned().collect()),
        };
        Ok(Expr { kind, span: path.span })
    }

    /// Method calls `x.relu()` and field accesses `self.w` after an operand.
    fn postfix(&mut self, mut expr: Expr) -> Result<Expr> {
        loop {
            match self.peek() {
                Some(TokenTree::Punct(p)) if p.as_char() == '.' => {
                    let dot = p.span();
                    self.pos += 1;
                    expr = self.member(expr, dot)?;
                }
                Some(TokenTree::Punct(p)) if p.as_char() == '?' => {
                    let message = "`?` is not needed in grad!: ops never return early, a failure poisons the tape \
                                   and `tape.backward(loss)?` reports it";
                    return Err(Error::at(p.span(), message));
                }
                Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => {
                    return Err(Error::at(g.span(), "only a name can be called: write `f(x)`, not `(f)(x)`"));
                }
                _ => return Ok(expr),
            }
        }
    }

    fn member(&mut self, receiver: Expr, dot: Span) -> Result<Expr> {
        let member = match self.peek() {
            Some(tree @ (TokenTree::Ident(_) | TokenTree::Literal(_))) => tree.clone(),
            _ => return Err(Error::at(dot, "expected a method or field name after `.`")),
        };
        self.pos += 1;
        if let (TokenTree::Ident(name), Some(TokenTree::Group(group))) = (&member, self.peek().cloned())
            && group.delimiter() == Delimiter::Parenthesis
        {
            self.pos += 1;
            let method = name.to_string();
            if builtins::rows(&method).next().is_none() {
                let message = format!(
                    "`.{method}()` is not a built-in: the method form is for built-ins (`x.relu()`); \
                     call your own function as `{method}(x, ...)`"
                );
                return Err(Error::new(SpanRange::single(name.span()).to(SpanRange::single(group.span())), message));
            }
            if let Some(row) = builtins::rows(&method).find(|b| b.params[0].kind != Kind::Var) {
                let message = format!(
                    "`.{method}()` has no method form: its first argument `{}` is not a tensor; call it as `{}`",
                    row.params[0].name,
                    row.usage()
                );
                return Err(Error::new(SpanRange::single(name.span()).to(SpanRange::single(group.span())), message));
            }
            let (rest, callee) = call_args(&group, Some(&method), 1)?;
            let mut args = vec![Arg::Expr(receiver)];
            args.extend(rest);
            let span = args[0].span().to(SpanRange::single(group.span()));
            let func = Path { tokens: vec![TokenTree::Ident(name.clone())], span: SpanRange::single(name.span()) };
            return Ok(Expr { kind: ExprKind::Call { func, args, method: true, callee }, span });
        }
        let mut tokens: TokenStream = match receiver.kind {
            ExprKind::Name(ident) => TokenTree::Ident(ident).into(),
            ExprKind::Rust(tokens) => tokens,
            _ => {
                let message = format!("`{receiver}` is a tensor expression: it has no field `{member}`");
                return Err(Error::new(receiver.span.to(SpanRange::of(&member)), message));
            }
        };
        let mut dot_token = proc_macro2::Punct::new('.', proc_macro2::Spacing::Alone);
        dot_token.set_span(dot);
        tokens.extend([TokenTree::Punct(dot_token), member.clone()]);
        Ok(Expr { kind: ExprKind::Rust(tokens), span: receiver.span.to(SpanRange::of(&member)) })
    }
}

/// A parenthesized expression or a Rust block.
fn group_expr(group: &Group) -> Result<Expr> {
    let span = SpanRange::single(group.span());
    let tokens: Vec<TokenTree> = group.stream().into_iter().collect();
    match group.delimiter() {
        Delimiter::Brace if tokens.is_empty() => Err(Error::new(span, "empty block `{}`: expected a Rust expression")),
        Delimiter::Brace => Ok(Expr { kind: ExprKind::Rust(TokenTree::Group(group.clone()).into()), span }),
        Delimiter::Bracket => Err(Error::new(
            span,
            "a list `[...]` is only an argument of `reshape(x, [dims])` or `slice(x, [starts], [stops])`",
        )),
        Delimiter::Parenthesis | Delimiter::None => {
            if tokens.is_empty() {
                return Err(Error::new(span, "empty parentheses: expected an expression inside `( )`"));
            }
            if tokens.iter().any(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ',')) {
                return Err(Error::new(
                    span,
                    "a tuple is only allowed as the result, the last item of grad!: bind its parts with `let`",
                ));
            }
            let mut inner = parse_expr(&tokens, group.span())?;
            inner.span = span;
            Ok(inner)
        }
    }
}

/// The arguments of a call and what it calls: the built-in row of `name`
/// for this many arguments, resolved here once (its `Rust` parameters keep
/// their tokens, its `Dims` parameters must be lists), or a user function.
/// `offset` is 1 for the method form, whose receiver is argument 0.
pub(crate) fn call_args(group: &Group, name: Option<&str>, offset: usize) -> Result<(Vec<Arg>, Callee)> {
    let pieces = split_commas(group)?;
    let callee = match name.map(|name| builtins::resolve(name, pieces.len() + offset)) {
        Some(Ok(Some(builtin))) => Callee::Builtin(builtin),
        Some(Err(rows)) => Callee::WrongArity(rows),
        Some(Ok(None)) | None => Callee::User,
    };
    let mut args = Vec::with_capacity(pieces.len());
    for (i, piece) in pieces.into_iter().enumerate() {
        let kind = match &callee {
            Callee::Builtin(builtin) => builtin.params.get(i + offset).map(|p| p.kind),
            Callee::WrongArity(_) | Callee::User => None,
        };
        let span = SpanRange::of_tokens(&piece, group.span());
        let arg = match (kind, piece.as_slice()) {
            (Some(Kind::Rust | Kind::Indices), _) => Arg::Rust(piece.iter().cloned().collect(), span),
            (Some(Kind::Dims | Kind::Pair), [TokenTree::Group(list)]) if list.delimiter() == Delimiter::Bracket => {
                let items =
                    split_commas(list)?.iter().map(|item| parse_expr(item, list.span())).collect::<Result<Vec<_>>>()?;
                Arg::Expr(Expr { kind: ExprKind::List(items), span })
            }
            (Some(Kind::Dims), _) => {
                let name = name.unwrap_or_default();
                let message = format!("expected a list of sizes in brackets here, as in `{name}(x, [2, 3])`");
                return Err(Error::new(span, message));
            }
            _ => Arg::Expr(parse_expr(&piece, group.span())?),
        };
        args.push(arg);
    }
    Ok((args, callee))
}

/// The message for a two-character operator that grad! does not have.
pub(crate) fn two_char_operator(pair: &str) -> Option<String> {
    let message = match pair {
        "**" => "`**` is not an operator in grad! (nor in Rust): for a power write `pow(x, 2)`".to_string(),
        "==" | "!=" | "<=" | ">=" => format!("comparisons like `{pair}` are not part of grad!: {OPERATORS}"),
        "&&" | "||" => format!("logical operators like `{pair}` are not part of grad!: {OPERATORS}"),
        "+=" | "-=" | "*=" | "/=" | "%=" | "^=" | "&=" | "|=" => {
            format!("`{pair}` assigns in place, which grad! does not do: bind a new name, `let y = y + ...`")
        }
        ".." => "ranges are not part of grad!: take part of a tensor with `slice(x, [starts], [stops])`".to_string(),
        "<<" | ">>" | "->" | "=>" => format!("`{pair}` is not an operator in grad!: {OPERATORS}"),
        _ => return None,
    };
    Some(message)
}

fn one_char_operator(c: char) -> String {
    match c {
        '%' => format!("`%` (remainder) is not an operator in grad!: {OPERATORS}"),
        '^' => {
            "`^` is not an operator in grad! (in Rust it is bitwise xor, not a power): for a power write `pow(x, 2)`"
                .to_string()
        }
        '=' => "assignment is not part of grad!: bind a new name with `let y = ...`".to_string(),
        '<' | '>' => format!("comparisons like `{c}` are not part of grad!: {OPERATORS}"),
        _ => format!("`{c}` is not an operator in grad!: {OPERATORS}"),
    }
}

/// The message for a punctuation token where an expression must start.
fn prefix_punct(c: char) -> String {
    match c {
        '+' => "unary `+` is not part of grad!: remove it".to_string(),
        '&' => "`&` is not needed in grad!: a `Var` is `Copy`, write `x`; to pass a Rust reference to your own \
                function use a block, `{ &x }`"
            .to_string(),
        '!' => "`!` is not part of grad!: to negate a tensor write `-x`".to_string(),
        '|' => "closures are not part of grad!: write a Rust function and call it, `f(x)`".to_string(),
        '*' | '/' | '@' => format!("`{c}` needs an operand on its left: expected an expression before it"),
        c => format!("expected an expression, found `{c}`"),
    }
}

/// The message for a Rust keyword where a DSL expression must start.
pub(crate) fn keyword(name: &str) -> Option<String> {
    let message = match name {
        "let" => "`let` starts a statement: end the previous one with `;`".to_string(),
        "if" | "match" | "loop" | "while" | "for" | "return" | "break" | "continue" | "fn" | "move" | "unsafe"
        | "async" | "await" | "mut" | "ref" | "in" | "where" | "impl" | "dyn" | "struct" | "enum" | "const"
        | "static" | "use" | "mod" | "type" | "trait" | "pub" | "extern" | "as" => format!(
            "`{name}` is Rust, not part of grad!: the body is `let` statements and a final expression; put \
             control flow in Rust around the macro"
        ),
        _ => return None,
    };
    Some(message)
}

/// A token as a short quote for a message: `y`, `(`, `{`.
fn short(tree: &TokenTree) -> String {
    match tree {
        TokenTree::Group(g) => match g.delimiter() {
            Delimiter::Parenthesis => "(".to_string(),
            Delimiter::Bracket => "[".to_string(),
            Delimiter::Brace => "{".to_string(),
            Delimiter::None => g.stream().to_string(),
        },
        other => other.to_string(),
    }
}
