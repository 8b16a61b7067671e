//! Code generation: one `::grad_runtime::g_*` call per DSL operation, each
//! bound to a temporary (nested calls would borrow the tape twice) and
//! spanned on the user's operator or function name, so the location a
//! `GradError` records (`#[track_caller]`) is that sub-expression's.
//!
//! Operands have a kind: a `Var` (a sub-expression, a `let` or declared
//! name), a number (a literal), or ambiguous (a free Rust identifier, a
//! path, a `{ block }`: a `Var` or a scalar of the tape's type, which only
//! the type checker knows). Known kinds become the direct call (`g_add`,
//! `g_adds`, `g_muls`); ambiguous ones in `+ - * /` go through a helper of
//! `grad_runtime::dsl` that dispatches on the type.

mod kernel;
mod region;

use std::collections::HashMap;

use proc_macro2::{Ident, Literal, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};

use crate::ast::{Arg, BinOp, Block, Callee, DeclDim, Expr, ExprKind, Output};
use crate::builtins::{self, Builtin, Kind};
use crate::error::{Error, Errors, Result};
use crate::fuse::{self, Name};
use crate::literal::{Size, size};
use crate::operand::{
    Value, as_written, as_written_number, dispatch_operand, matmul_number, negate, negative_number, not_a_number,
    number, unbraced,
};

/// What a name bound inside the block is.
#[derive(Clone, Copy)]
enum NameKind {
    Var,
    Number,
    Ambiguous,
}

pub(crate) fn expand(block: &Block) -> Result<TokenStream> {
    let mut ex = Expander::new(block);
    let mut errors = Errors::default();
    for stmt in &block.stmts {
        ex.statement(&stmt.name, &stmt.value, &mut errors);
    }
    let tail = ex.tail(&block.result, &mut errors);
    let checks = ex.declaration_checks(block);
    let tape = &ex.tape;
    let tape_expr = &block.tape;
    let as_tape = quote_spanned!(block.tape_span.first=> (#tape_expr).as_tape());
    let stmts = &ex.stmts;
    let expansion = quote! {
        {
            use ::grad_runtime::dsl::AsTape as _;
            let #tape = #as_tape;
            #checks
            #(#stmts)*
            #tail
        }
    };
    errors.finish(expansion)
}

/// The block's value must be a `Var` (or a tuple of them).
fn result(value: Value, e: &Expr) -> Result<TokenStream> {
    match value {
        Value::Var(t) | Value::Ambiguous(t) => Ok(t),
        Value::Number { .. } | Value::Flag(_) => {
            Err(Error::new(e.span, format!("grad! returns tensors (`Var`), but `{e}` is a number")))
        }
    }
}

struct Expander {
    tape: Ident,
    names: HashMap<String, NameKind>,
    /// The declared symbols, in order of first appearance.
    symbols: Vec<String>,
    /// The symbols a `reshape` or `slice` list reads at run time.
    used_symbols: Vec<String>,
    stmts: Vec<TokenStream>,
    temps: usize,
    /// Whether elementwise chains become fused regions (not under `#[nofuse]`).
    fuse: bool,
    /// The fused regions declared so far.
    regions: usize,
    /// Inside `checkpoint(..)`, whose expression becomes a closure: its
    /// name's span.
    checkpoint: Option<Span>,
}

impl Expander {
    /// An expander that knows the block's declared inputs and symbols.
    fn new(block: &Block) -> Expander {
        let mut ex = Expander {
            tape: Ident::new("__tape", Span::mixed_site()),
            names: HashMap::new(),
            symbols: Vec::new(),
            used_symbols: Vec::new(),
            stmts: Vec::new(),
            temps: 0,
            fuse: block.fuse,
            regions: 0,
            checkpoint: None,
        };
        for decl in &block.decls {
            ex.names.insert(decl.name.to_string(), NameKind::Var);
            for dim in &decl.dims {
                if let DeclDim::Sym(sym) = dim
                    && !ex.symbols.contains(&sym.to_string())
                {
                    ex.symbols.push(sym.to_string());
                }
            }
        }
        ex
    }

    /// `let name = value;`, remembering what kind of value `name` holds.
    fn statement(&mut self, name: &Ident, value: &Expr, errors: &mut Errors) {
        let Some(value) = errors.keep(self.value(value)) else {
            self.names.insert(name.to_string(), NameKind::Ambiguous);
            return;
        };
        let kind = match &value {
            Value::Var(_) => NameKind::Var,
            Value::Number { .. } => NameKind::Number,
            Value::Ambiguous(_) | Value::Flag(_) => NameKind::Ambiguous,
        };
        let tokens = match value {
            Value::Var(t) | Value::Number { typed: t, .. } | Value::Ambiguous(t) | Value::Flag(t) => t,
        };
        self.stmts.push(quote!(let #name = #tokens;));
        self.names.insert(name.to_string(), kind);
    }

    /// The block's value: one `Var` or a tuple of them.
    fn tail(&mut self, output: &Output, errors: &mut Errors) -> Option<TokenStream> {
        match output {
            Output::Single(e) => errors.keep(self.value(e).and_then(|v| result(v, e))),
            Output::Tuple(items) => {
                // Every part but the last is bound first, so the ops run (and
                // fail) in the order they are written.
                let mut parts = Vec::new();
                for (i, e) in items.iter().enumerate() {
                    let value = if i + 1 < items.len() { self.operand(e) } else { self.value(e) };
                    parts.extend(errors.keep(value.and_then(|v| result(v, e))));
                }
                Some(quote!((#(#parts),*)))
            }
        }
    }

    /// What the block knows a name to be, for the fusion plan.
    fn name_kind(&self, ident: &Ident) -> Name {
        match self.names.get(&ident.to_string()) {
            Some(NameKind::Var) => Name::Tensor,
            Some(NameKind::Number) => Name::Number,
            Some(NameKind::Ambiguous) | None => Name::Unknown,
        }
    }

    /// The value of `e`; a call is returned unbound. An elementwise chain
    /// rooted at `e` is one fused region.
    fn value(&mut self, e: &Expr) -> Result<Value> {
        if self.fuse
            && let Some(region) = fuse::region(e, &|ident| self.name_kind(ident))
        {
            return self.region(&region);
        }
        match &e.kind {
            ExprKind::Name(ident) => Ok(match self.names.get(&ident.to_string()) {
                Some(NameKind::Var) => Value::Var(ident.to_token_stream()),
                Some(NameKind::Number) => {
                    Value::Number { typed: ident.to_token_stream(), raw: ident.to_token_stream() }
                }
                Some(NameKind::Ambiguous) | None => Value::Ambiguous(ident.to_token_stream()),
            }),
            ExprKind::Number(n) => number(n, e),
            ExprKind::Bool(b) => Ok(Value::Flag(b.to_token_stream())),
            ExprKind::Rust(tokens) => Ok(Value::Ambiguous(unbraced(tokens))),
            ExprKind::Neg { op, operand } => {
                let value = self.operand(operand)?;
                let tape = &self.tape;
                match (&operand.kind, value) {
                    (ExprKind::Number(n), _) => negative_number(n, *op, e),
                    (_, Value::Var(x)) => {
                        let neg = Ident::new(builtins::NEG, *op);
                        Ok(Value::Var(quote_spanned!(*op=> ::grad_runtime::#neg(#tape, #x))))
                    }
                    (_, Value::Number { typed, raw }) => Ok(Value::Number {
                        typed: quote_spanned!(*op=> ::grad_runtime::dsl::sneg(#typed)),
                        raw: quote_spanned!(*op=> -#raw),
                    }),
                    (_, Value::Ambiguous(x)) => {
                        Ok(Value::Var(quote_spanned!(*op=> ::grad_runtime::dsl::neg(#tape, #x))))
                    }
                    (_, Value::Flag(_)) => Err(not_a_number(operand)),
                }
            }
            ExprKind::Binary { op, op_span, lhs, rhs } => {
                let (a, b) = (self.operand(lhs)?, self.operand(rhs)?);
                self.binary(*op, *op_span, (a, lhs), (b, rhs))
            }
            ExprKind::Call { func, args, callee, .. } => match callee {
                Callee::Builtin(builtin) => self.builtin(builtin, func.span.first, args),
                // Validation reported a wrong arity before expansion runs.
                Callee::User | Callee::WrongArity(_) => self.user_call(func, args),
            },
            ExprKind::List(_) => Err(Error::new(e.span, "a list is only an argument of `reshape` or `slice`")),
        }
    }

    /// The value of `e` as an operand: a call is bound to a temporary first.
    fn operand(&mut self, e: &Expr) -> Result<Value> {
        let value = self.value(e)?;
        let Value::Var(tokens) = &value else { return Ok(value) };
        if let [TokenTree::Ident(_)] = tokens.clone().into_iter().collect::<Vec<_>>().as_slice() {
            return Ok(value);
        }
        let temp = Ident::new(&format!("__t{}", self.temps), Span::mixed_site());
        self.temps += 1;
        self.stmts.push(quote!(let #temp = #tokens;));
        Ok(Value::Var(temp.into_token_stream()))
    }

    fn binary(&mut self, op: BinOp, span: Span, (a, ea): (Value, &Expr), (b, eb): (Value, &Expr)) -> Result<Value> {
        use Value::{Ambiguous, Flag, Number, Var};
        let tape = &self.tape;
        let call = |f: &str, x: &TokenStream, y: &TokenStream| {
            let f = Ident::new(f, span);
            Value::Var(quote_spanned!(span=> ::grad_runtime::#f(#tape, #x, #y)))
        };
        let dsl = |f: &str, x: &TokenStream, y: &TokenStream| {
            let f = Ident::new(f, span);
            Value::Var(quote_spanned!(span=> ::grad_runtime::dsl::#f(#tape, #x, #y)))
        };
        if op == BinOp::MatMul {
            return match (&a, &b) {
                (Number { .. } | Flag(_), _) => Err(matmul_number(ea)),
                (_, Number { .. } | Flag(_)) => Err(matmul_number(eb)),
                (Var(x) | Ambiguous(x), Var(y) | Ambiguous(y)) => Ok(call("g_matmul", x, y)),
            };
        }
        let name = match op {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::MatMul => unreachable!("handled above"),
        };
        Ok(match (&a, &b) {
            (Flag(_), _) => return Err(not_a_number(ea)),
            (_, Flag(_)) => return Err(not_a_number(eb)),
            (Var(x), Var(y)) => call(builtins::operator(op).0, x, y),
            (Var(x), Number { typed: s, .. }) => match op {
                BinOp::Add => call(builtins::ADD_SCALAR, x, s),
                BinOp::Sub => call(builtins::ADD_SCALAR, x, &negate(eb, s)),
                BinOp::Mul => call(builtins::MUL_SCALAR, x, s),
                _ => dsl("divs", x, s),
            },
            (Number { typed: s, .. }, Var(x)) => match op {
                BinOp::Add => call(builtins::ADD_SCALAR, x, s),
                BinOp::Sub => dsl("rsubs", s, x),
                BinOp::Mul => call(builtins::MUL_SCALAR, x, s),
                _ => dsl("rdivs", s, x),
            },
            (Number { typed: s, .. }, Number { typed: t, .. }) => {
                let f = Ident::new(&format!("s{name}"), span);
                Number {
                    typed: quote_spanned!(span=> ::grad_runtime::dsl::#f(#s, #t)),
                    raw: quote_spanned!(span=> ::grad_runtime::dsl::#f(#s, #t)),
                }
            }
            // One side is a free identifier: the helper dispatches on its
            // type. A number is wrapped so that its type is inferred too.
            _ => dsl(name, &dispatch_operand(&a), &dispatch_operand(&b)),
        })
    }

    fn builtin(&mut self, builtin: &Builtin, span: Span, args: &[Arg]) -> Result<Value> {
        if builtin.name == builtins::CHECKPOINT
            && let [Arg::Expr(body)] = args
        {
            return self.checkpoint(builtin, span, body);
        }
        let mut passed = Vec::with_capacity(builtin.params.len());
        let mut errors = Errors::default();
        for (i, param) in builtin.params.iter().enumerate() {
            let tokens = match args.get(i) {
                None => param.default.unwrap_or_default().parse().expect("invariant: defaults are Rust tokens"),
                Some(Arg::Rust(tokens, span)) => match errors.keep(self.capturable(tokens, *span)) {
                    Some(()) => tokens.clone(),
                    None => continue,
                },
                Some(Arg::Expr(e)) => match errors.keep(self.argument(builtin, param.name, param.kind, e)) {
                    Some(tokens) => tokens,
                    None => continue,
                },
            };
            passed.push(tokens);
        }
        errors.finish(())?;
        let tape = &self.tape;
        let f = Ident::new(builtin.func, span);
        Ok(Value::Var(quote_spanned!(span=> ::grad_runtime::#f(#tape, #(#passed),*))))
    }

    /// `checkpoint(body)`: `body`'s statements and value become a `move`
    /// closure of the tape (the same name, shadowed), which captures the
    /// handles, numbers and sizes it reads; it runs again in backward.
    fn checkpoint(&mut self, builtin: &Builtin, span: Span, body: &Expr) -> Result<Value> {
        let outer = std::mem::take(&mut self.stmts);
        let enclosing = self.checkpoint.replace(span);
        let value = self.argument(builtin, "x", Kind::Var, body);
        self.checkpoint = enclosing;
        let inner = std::mem::replace(&mut self.stmts, outer);
        let value = value?;
        let (tape, f) = (&self.tape, Ident::new(builtin.func, span));
        Ok(Value::Var(quote_spanned!(span=>
            ::grad_runtime::#f(#tape, move |#tape: &mut ::grad_runtime::Tape<_>| { #(#inner)* #value })
        )))
    }

    /// Rust tokens passed to a call: inside `checkpoint(..)` a borrow
    /// (`&targets`, `&mut rng`) cannot be kept by the closure that runs
    /// again in backward.
    fn capturable(&self, tokens: &TokenStream, span: crate::error::SpanRange) -> Result<()> {
        let borrow = matches!(tokens.clone().into_iter().next(), Some(TokenTree::Punct(p)) if p.as_char() == '&');
        match self.checkpoint {
            Some(_) if borrow => Err(Error::new(
                span,
                "`checkpoint(..)` runs its expression again in backward, so it cannot keep a borrow of Rust data \
                 (`&...`): compute this call outside the checkpoint, or call `tape.checkpoint` with a closure \
                 that owns the data",
            )),
            _ => Ok(()),
        }
    }

    fn argument(&mut self, builtin: &Builtin, param: &str, kind: Kind, e: &Expr) -> Result<TokenStream> {
        let wrong = |what: &str| {
            let message = format!("`{param}` of `{}` must be {what}, but `{e}` is not", builtin.name);
            Error::new(e.span, message)
        };
        match kind {
            Kind::Var => match self.operand(e)? {
                Value::Var(t) | Value::Ambiguous(t) => Ok(t),
                Value::Number { .. } | Value::Flag(_) => Err(wrong("a tensor")),
            },
            Kind::Scalar => match self.operand(e)? {
                Value::Number { typed: t, .. } | Value::Ambiguous(t) => Ok(t),
                Value::Var(_) | Value::Flag(_) => Err(wrong("a number")),
            },
            Kind::Axis | Kind::Count | Kind::Flag | Kind::Rust | Kind::Indices => as_written(e),
            Kind::Dims => match &e.kind {
                ExprKind::List(items) => {
                    let dims: Vec<TokenStream> = items.iter().map(|item| self.size(item)).collect();
                    Ok(quote_spanned!(e.span.first=> &[#(#dims),*]))
                }
                _ => Err(wrong("a list of sizes `[...]`")),
            },
            Kind::Pair => match &e.kind {
                ExprKind::List(items) => {
                    let dims: Vec<TokenStream> = items.iter().map(|item| self.size(item)).collect();
                    Ok(quote_spanned!(e.span.first=> [#(#dims),*]))
                }
                _ => as_written(e),
            },
        }
    }

    /// An entry of a dims list as a `usize` expression (validation checked
    /// that every entry is one).
    fn size(&mut self, e: &Expr) -> TokenStream {
        match size(e) {
            Some(size) => self.size_tokens(&size),
            None => as_written(e).unwrap_or_else(|error| error.to_compile_error()),
        }
    }

    fn size_tokens(&mut self, size: &Size) -> TokenStream {
        match size {
            Size::Literal(n) => {
                let mut lit = Literal::u128_unsuffixed(n.int.unwrap_or_default());
                lit.set_span(n.token.span());
                lit.into_token_stream()
            }
            Size::Name(ident) if self.symbols.contains(&ident.to_string()) => {
                let name = ident.to_string();
                if !self.used_symbols.contains(&name) {
                    self.used_symbols.push(name.clone());
                }
                symbol_ident(&name).into_token_stream()
            }
            Size::Name(ident) => ident.to_token_stream(),
            Size::Arith { op, op_span, lhs, rhs, expr } => {
                let (a, b) = (self.size_tokens(lhs), self.size_tokens(rhs));
                let checked = match op {
                    // A product is a factor as it is; a sum is parenthesised.
                    BinOp::Mul => return quote_spanned!(*op_span=> #a * #b),
                    BinOp::Add => return quote_spanned!(*op_span=> (#a + #b)),
                    BinOp::Div => Ident::new("size_div", *op_span),
                    _ => Ident::new("size_sub", *op_span),
                };
                // A quotient must be exact and a difference at least 0: a
                // checked helper, located at the operator, poisons the tape
                // otherwise. It runs before the op (which reads the tape).
                let temp = Ident::new(&format!("__size{}", self.temps), Span::mixed_site());
                self.temps += 1;
                let (tape, text) = (&self.tape, expr.to_string());
                self.stmts
                    .push(quote_spanned!(*op_span=> let #temp = ::grad_runtime::dsl::#checked(#tape, #a, #b, #text);));
                temp.into_token_stream()
            }
            // A `{ block }` keeps its braces: it may be a factor of a product.
            Size::Rust(tokens) => (*tokens).clone(),
        }
    }

    fn user_call(&mut self, func: &crate::ast::Path, args: &[Arg]) -> Result<Value> {
        let mut passed = Vec::with_capacity(args.len());
        let mut errors = Errors::default();
        for arg in args {
            let Arg::Expr(e) = arg else { continue };
            if let Some(number) = as_written_number(e) {
                passed.push(number);
                continue;
            }
            let value = errors.keep(self.operand(e));
            passed.extend(value.map(|v| match v {
                Value::Var(t) | Value::Ambiguous(t) | Value::Flag(t) | Value::Number { raw: t, .. } => t,
            }));
        }
        errors.finish(())?;
        let tape = &self.tape;
        let path: TokenStream = func.tokens.iter().cloned().collect();
        let span = func.span.first;
        Ok(Value::Var(quote_spanned!(span=> #path(#tape, #(#passed),*))))
    }

    /// The run-time check of the declared shapes, once per execution: it
    /// binds each symbol to the real size at its first occurrence.
    fn declaration_checks(&self, block: &Block) -> TokenStream {
        if block.decls.is_empty() {
            return TokenStream::new();
        }
        let shapes = Ident::new("__shapes", Span::mixed_site());
        let tape = &self.tape;
        let symbols = &self.symbols;
        let indices = block.index_decls();
        let mut out = quote!(let mut #shapes = ::grad_runtime::dsl::Declared::new([#(#symbols),*]););
        for decl in &block.decls {
            let dims = decl.dims.iter().map(|d| match d {
                DeclDim::Fixed(n, span) => {
                    let mut n = Literal::u64_unsuffixed(*n);
                    n.set_span(*span);
                    quote_spanned!(*span=> ::grad_runtime::dsl::Dim::Fixed(#n))
                }
                DeclDim::Sym(sym) => {
                    let index = self.symbols.iter().position(|s| sym == s).expect("collected above");
                    let index = Literal::usize_unsuffixed(index);
                    quote_spanned!(sym.span()=> ::grad_runtime::dsl::Dim::Sym(#index))
                }
                DeclDim::Any(span) => quote_spanned!(*span=> ::grad_runtime::dsl::Dim::Any),
            });
            let name = &decl.name;
            let text = name.to_string();
            out.extend(if indices.contains(&text) {
                quote_spanned!(name.span()=> #shapes.check_indices(#tape, #text, &#name, &[#(#dims),*]);)
            } else {
                quote_spanned!(name.span()=> #shapes.check(#tape, #text, #name, &[#(#dims),*]);)
            });
        }
        if !self.used_symbols.is_empty() {
            let bound = self
                .symbols
                .iter()
                .map(|s| if self.used_symbols.contains(s) { symbol_ident(s).into_token_stream() } else { quote!(_) });
            out.extend(quote!(let [#(#bound),*] = #shapes.sizes();));
        }
        out
    }
}

fn symbol_ident(name: &str) -> Ident {
    Ident::new(&format!("__dim_{name}"), Span::mixed_site())
}
