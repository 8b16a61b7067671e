//! Reads the item `#[derive(Params)]` is attached to, by hand on
//! `proc_macro2` tokens: its name, generics, where clause and fields (each
//! with its `#[params(...)]` options and its type, kept as written). Types
//! are not classified here: the `Params` trait does that, with one impl per
//! kind of part (`Var`, `Vec`, arrays, `Option`, `Box`, nested structs).

use proc_macro2::{Delimiter, Ident, Literal, Spacing, Span, TokenStream, TokenTree};

use crate::error::{Error, Errors, Result, SpanRange};

/// The struct, as much of it as the expansion needs.
pub(crate) struct Input {
    pub(crate) name: Ident,
    pub(crate) generics: Vec<GenericParam>,
    /// `where ...` as written (without a trailing `;`), or empty.
    pub(crate) where_clause: TokenStream,
    pub(crate) fields: Vec<Field>,
}

/// One generic parameter, split into what `impl<...>` and `Name<...>` need.
pub(crate) enum GenericParam {
    /// `'a: 'b`: declared as written, used as `'a`.
    Lifetime { decl: TokenStream, name: TokenStream },
    /// `T: Bound = Default`: declared with `Params` added to its bounds and
    /// without the default, used as `T`.
    Type { name: Ident, bounds: TokenStream },
    /// `const N: usize = 3`: declared without the default, used as `N`.
    Const { decl: TokenStream, name: Ident },
}

/// One field of the struct.
pub(crate) struct Field {
    /// `self.w` or `self.0`.
    pub(crate) member: TokenTree,
    /// The name's part of the parameter path: the field name, its index
    /// for a tuple struct, or the `rename` option.
    pub(crate) name: String,
    pub(crate) ty: TokenStream,
    /// The first token of the type, where a type error is reported.
    pub(crate) ty_span: Span,
    pub(crate) skip: bool,
    /// `#[params(buffer)]`: its `Var`s are buffers, not parameters.
    pub(crate) buffer: bool,
}

const USAGE: &str = "`#[derive(Params)]` lists the parameters of a struct whose fields are `Var`s, other \
                     `#[derive(Params)]` structs, or `Vec`s, arrays, `Option`s or `Box`es of them";

pub(crate) fn parse(input: TokenStream) -> Result<Input> {
    let tokens: Vec<TokenTree> = input.into_iter().collect();
    let mut errors = Errors::default();
    let mut i = 0;
    while is_punct(tokens.get(i), '#') && is_group(tokens.get(i + 1), Delimiter::Bracket) {
        if let Some(TokenTree::Group(attr)) = tokens.get(i + 1)
            && attribute_is_params(attr.stream())
        {
            errors.push(Error::new(
                SpanRange { first: tokens[i].span(), last: attr.span() },
                "`#[params(...)]` goes on a field, not on the struct: `#[params(skip)]` leaves a field out, \
                 `#[params(buffer)]` makes it a buffer, `#[params(rename = \"weight\")]` names it",
            ));
        }
        i += 2;
    }
    i = skip_visibility(&tokens, i);
    let keyword = match tokens.get(i) {
        Some(TokenTree::Ident(ident)) => ident.clone(),
        other => return Err(Error::at(span_of(other), USAGE)),
    };
    let name = match tokens.get(i + 1) {
        Some(TokenTree::Ident(ident)) => ident.clone(),
        other => return Err(Error::at(span_of(other), USAGE)),
    };
    match keyword.to_string().as_str() {
        "struct" => {}
        kind @ ("enum" | "union") => {
            let article = if kind == "enum" { "an" } else { "a" };
            return Err(Error::new(
                SpanRange { first: keyword.span(), last: name.span() },
                format!(
                    "`#[derive(Params)]` works on structs, and `{name}` is {article} {kind}: a model's parameters \
                     must be the same whatever its state. Hold each alternative as an `Option<_>` field of a \
                     struct, or implement `Params` by hand"
                ),
            ));
        }
        _ => return Err(Error::at(keyword.span(), USAGE)),
    }
    i += 2;

    let generics = if is_punct(tokens.get(i), '<') {
        let close = matching_angle(&tokens, i).ok_or_else(|| Error::at(tokens[i].span(), "unclosed `<`"))?;
        let params = generic_params(&tokens[i + 1..close], &mut errors);
        i = close + 1;
        params
    } else {
        Vec::new()
    };

    let body = tokens[i..].iter().position(|t| matches!(t, TokenTree::Group(g) if g.delimiter() != Delimiter::None));
    let (where_clause, fields) = match body.map(|offset| (offset, &tokens[i + offset])) {
        Some((offset, TokenTree::Group(group))) if group.delimiter() == Delimiter::Brace => {
            let where_clause = tokens[i..i + offset].iter().cloned().collect();
            (where_clause, named_fields(group.stream(), &mut errors))
        }
        Some((offset, TokenTree::Group(group))) if group.delimiter() == Delimiter::Parenthesis => {
            // `struct S<T>(T) where T: Bound;`: the where clause follows the fields.
            let rest = &tokens[i + offset + 1..];
            let where_clause = rest.iter().take_while(|t| !is_punct(Some(t), ';')).cloned().collect();
            (where_clause, tuple_fields(group.stream(), &mut errors))
        }
        // A unit struct holds no parameters.
        _ => (tokens[i..].iter().take_while(|t| !is_punct(Some(t), ';')).cloned().collect(), Vec::new()),
    };
    errors.finish(Input { name, generics, where_clause, fields })
}

/// The fields of `{ a: A, pub b: B }`.
fn named_fields(body: TokenStream, errors: &mut Errors) -> Vec<Field> {
    let tokens: Vec<TokenTree> = body.into_iter().collect();
    let mut fields = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let (options, next) = field_attributes(&tokens, i, errors);
        i = skip_visibility(&tokens, next);
        let Some(TokenTree::Ident(ident)) = tokens.get(i) else {
            errors.push(Error::at(span_of(tokens.get(i)), "expected a field name"));
            return fields;
        };
        if !is_punct(tokens.get(i + 1), ':') {
            errors.push(Error::at(span_of(tokens.get(i + 1)), "expected `:` and the field's type"));
            return fields;
        }
        let (ty, next) = type_until_comma(&tokens, i + 2);
        let default_name = ident.to_string().trim_start_matches("r#").to_string();
        fields.push(field(TokenTree::Ident(ident.clone()), default_name, ty, options, ident.span()));
        i = next;
    }
    fields
}

/// The fields of `(A, pub B)`, named by position as PyTorch names the
/// layers of a `Sequential`: `0`, `1`, ...
fn tuple_fields(body: TokenStream, errors: &mut Errors) -> Vec<Field> {
    let tokens: Vec<TokenTree> = body.into_iter().collect();
    let mut fields = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let (options, next) = field_attributes(&tokens, i, errors);
        i = skip_visibility(&tokens, next);
        let span = span_of(tokens.get(i));
        let (ty, next) = type_until_comma(&tokens, i);
        let index = fields.len();
        let mut member = Literal::usize_unsuffixed(index);
        member.set_span(span);
        fields.push(field(TokenTree::Literal(member), index.to_string(), ty, options, span));
        i = next;
    }
    fields
}

fn field(member: TokenTree, default_name: String, ty: Vec<TokenTree>, options: Options, span: Span) -> Field {
    let ty_span = ty.first().map_or(span, TokenTree::span);
    Field {
        member,
        name: options.rename.unwrap_or(default_name),
        ty: ty.into_iter().collect(),
        ty_span,
        skip: options.skip,
        buffer: options.buffer,
    }
}

/// What `#[params(...)]` said about one field.
#[derive(Default)]
struct Options {
    skip: bool,
    buffer: bool,
    rename: Option<String>,
}

/// Reads the attributes before a field from `tokens[i..]`; returns the
/// options of its `#[params(...)]` attributes and the index after them.
fn field_attributes(tokens: &[TokenTree], mut i: usize, errors: &mut Errors) -> (Options, usize) {
    let mut options = Options::default();
    while is_punct(tokens.get(i), '#') && is_group(tokens.get(i + 1), Delimiter::Bracket) {
        if let Some(TokenTree::Group(attr)) = tokens.get(i + 1)
            && attribute_is_params(attr.stream())
        {
            let inner: Vec<TokenTree> = attr.stream().into_iter().collect();
            match inner.get(1) {
                Some(TokenTree::Group(args)) if args.delimiter() == Delimiter::Parenthesis && inner.len() == 2 => {
                    read_options(args.stream(), &mut options, errors);
                }
                _ => errors.push(Error::new(
                    SpanRange { first: tokens[i].span(), last: attr.span() },
                    "expected `#[params(skip)]`, `#[params(buffer)]` or `#[params(rename = \"name\")]`",
                )),
            }
        }
        i += 2;
    }
    (options, i)
}

/// `skip`, `buffer`, `rename = "name"`, separated by commas.
fn read_options(args: TokenStream, options: &mut Options, errors: &mut Errors) {
    let tokens: Vec<TokenTree> = args.into_iter().collect();
    for option in tokens.split(|t| is_punct(Some(t), ',')).filter(|o| !o.is_empty()) {
        let range = SpanRange::of_tokens(option, Span::call_site());
        match option {
            [TokenTree::Ident(id)] if id == "skip" && options.buffer || id == "buffer" && options.skip => {
                errors.push(Error::new(
                    range,
                    "a field is either left out (`skip`) or a buffer (`buffer`), not both: a buffer is saved \
                     and loaded with the model",
                ));
            }
            [TokenTree::Ident(id)] if id == "skip" => options.skip = true,
            [TokenTree::Ident(id)] if id == "buffer" => options.buffer = true,
            [TokenTree::Ident(id), rest @ ..] if id == "rename" => {
                let name = match rest {
                    [TokenTree::Punct(eq), TokenTree::Literal(lit)] if eq.as_char() == '=' => string_literal(lit),
                    _ => None,
                };
                match name {
                    Some(name) if is_valid_name(&name) => options.rename = Some(name),
                    _ => errors.push(Error::new(
                        range,
                        "`rename` takes a non-empty string without `.` (the separator of parameter paths): \
                         `#[params(rename = \"weight\")]`",
                    )),
                }
            }
            _ => errors.push(Error::new(
                range,
                "unknown `params` option: the options are `skip` (leave the field out), `buffer` (a \
                 tensor the model saves and loads but does not train, made with `tape.buffer`) and \
                 `rename = \"name\"` (its name in parameter paths and files)",
            )),
        }
    }
}

fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('.')
}

/// The value of a plain string literal (`"weight"`), without escapes.
fn string_literal(lit: &Literal) -> Option<String> {
    let text = lit.to_string();
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\') && !inner.contains('"')).then(|| inner.to_string())
}

/// Whether the inside of `#[...]` is a `params` attribute.
fn attribute_is_params(attr: TokenStream) -> bool {
    matches!(attr.into_iter().next(), Some(TokenTree::Ident(id)) if id == "params")
}

/// The type starting at `tokens[i]`, up to a comma outside angle brackets;
/// returns it and the index after the comma.
fn type_until_comma(tokens: &[TokenTree], start: usize) -> (Vec<TokenTree>, usize) {
    let mut depth = 0usize;
    let mut i = start;
    while let Some(token) = tokens.get(i) {
        match token {
            TokenTree::Punct(p) if p.as_char() == ',' && depth == 0 => {
                return (tokens[start..i].to_vec(), i + 1);
            }
            TokenTree::Punct(p) if p.as_char() == '<' => depth += 1,
            TokenTree::Punct(p) if p.as_char() == '>' && !follows_minus(tokens, i) => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    (tokens[start..].to_vec(), tokens.len())
}

/// The index of the `>` closing the `<` at `tokens[open]`.
fn matching_angle(tokens: &[TokenTree], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        match token {
            TokenTree::Punct(p) if p.as_char() == '<' => depth += 1,
            TokenTree::Punct(p) if p.as_char() == '>' && !follows_minus(tokens, i) => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The `>` of `->` (in a bound like `F: Fn() -> Var`) closes nothing.
fn follows_minus(tokens: &[TokenTree], i: usize) -> bool {
    i > 0 && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '-' && p.spacing() == Spacing::Joint)
}

/// Splits `'a, T: Bound, const N: usize` into parameters.
fn generic_params(tokens: &[TokenTree], errors: &mut Errors) -> Vec<GenericParam> {
    let mut params = Vec::new();
    let mut start = 0;
    while start < tokens.len() {
        let (param, next) = type_until_comma(tokens, start);
        start = next;
        // Attributes on a generic parameter (`#[cfg(...)]`) are dropped with it; none change its bounds.
        let mut j = 0;
        while is_punct(param.get(j), '#') && is_group(param.get(j + 1), Delimiter::Bracket) {
            j += 2;
        }
        let param = &param[j..];
        let without_default = |from: usize| -> TokenStream {
            let (decl, _) = split_at_default(&param[from..]);
            decl.iter().cloned().collect()
        };
        match param {
            [] => {}
            [TokenTree::Punct(quote), TokenTree::Ident(_), ..] if quote.as_char() == '\'' => {
                params.push(GenericParam::Lifetime {
                    decl: param.iter().cloned().collect(),
                    name: param[..2].iter().cloned().collect(),
                });
            }
            [TokenTree::Ident(kw), TokenTree::Ident(name), ..] if kw == "const" => {
                params.push(GenericParam::Const { decl: without_default(0), name: name.clone() });
            }
            [TokenTree::Ident(name), rest @ ..] => {
                let bounds = match rest.first() {
                    Some(TokenTree::Punct(colon)) if colon.as_char() == ':' => without_default(2),
                    _ => TokenStream::new(),
                };
                params.push(GenericParam::Type { name: name.clone(), bounds });
            }
            [first, ..] => errors.push(Error::at(first.span(), "expected a generic parameter")),
        }
    }
    params
}

/// `T: Bound = Default` → (`T: Bound`, `Default`): the `=` at angle depth 0.
fn split_at_default(tokens: &[TokenTree]) -> (&[TokenTree], &[TokenTree]) {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Punct(p) if p.as_char() == '<' => depth += 1,
            TokenTree::Punct(p) if p.as_char() == '>' && !follows_minus(tokens, i) => depth = depth.saturating_sub(1),
            TokenTree::Punct(p) if p.as_char() == '=' && depth == 0 => return (&tokens[..i], &tokens[i + 1..]),
            _ => {}
        }
    }
    (tokens, &[])
}

/// Skips `pub`, `pub(crate)`, `pub(in path)`.
fn skip_visibility(tokens: &[TokenTree], i: usize) -> usize {
    match tokens.get(i) {
        Some(TokenTree::Ident(id)) if id == "pub" => {
            if is_group(tokens.get(i + 1), Delimiter::Parenthesis) {
                i + 2
            } else {
                i + 1
            }
        }
        _ => i,
    }
}

fn is_punct(token: Option<&TokenTree>, ch: char) -> bool {
    matches!(token, Some(TokenTree::Punct(p)) if p.as_char() == ch)
}

fn is_group(token: Option<&TokenTree>, delimiter: Delimiter) -> bool {
    matches!(token, Some(TokenTree::Group(g)) if g.delimiter() == delimiter)
}

fn span_of(token: Option<&TokenTree>) -> Span {
    token.map_or_else(Span::call_site, TokenTree::span)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn names(input: &Input) -> Vec<(String, String, bool)> {
        input.fields.iter().map(|f| (f.name.clone(), f.ty.to_string(), f.skip)).collect()
    }

    #[test]
    fn named_fields_with_options_and_generic_types() {
        let input = parse(quote! {
            #[doc = "a model"]
            pub(crate) struct Net<'a, L: Clone = Dense, const N: usize = 2> where L: Default {
                /// the layers
                pub layers: Vec<L>,
                #[params(rename = "weight")] w: Var,
                #[params(skip)] name: &'a str,
                map: HashMap<String, Vec<Var>>,
                f: Box<dyn Fn(Var) -> Var>,
                last: [Dense; N]
            }
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(input.name.to_string(), "Net");
        assert_eq!(input.where_clause.to_string(), "where L : Default");
        assert_eq!(
            names(&input),
            [
                ("layers".into(), "Vec < L >".into(), false),
                ("weight".into(), "Var".into(), false),
                ("name".into(), "& 'a str".into(), true),
                ("map".into(), "HashMap < String , Vec < Var >>".into(), false),
                ("f".into(), "Box < dyn Fn (Var) -> Var >".into(), false),
                ("last".into(), "[Dense ; N]".into(), false),
            ]
        );
        let kinds: Vec<String> = input
            .generics
            .iter()
            .map(|g| match g {
                GenericParam::Lifetime { decl, .. } => format!("lifetime {decl}"),
                GenericParam::Type { name, bounds } => format!("type {name}: {bounds}"),
                GenericParam::Const { decl, .. } => format!("const {decl}"),
            })
            .collect();
        assert_eq!(kinds, ["lifetime 'a", "type L: Clone", "const const N : usize"]);
    }

    #[test]
    fn tuple_and_unit_structs() {
        let input = parse(quote! { struct Seq<T>(pub Dense, #[params(skip)] T) where T: Copy; }).unwrap();
        assert_eq!(names(&input), [("0".into(), "Dense".into(), false), ("1".into(), "T".into(), true)]);
        assert_eq!(input.where_clause.to_string(), "where T : Copy");
        assert!(parse(quote! { struct Nothing; }).unwrap().fields.is_empty());
    }

    #[test]
    fn every_prefix_and_every_token_dropped_is_an_answer_not_a_panic() {
        let full: Vec<TokenTree> = quote! {
            #[derive(Params)] pub struct Net<'a, L: Fn() -> Var = Dense, const N: usize = 2> where L: Default {
                #[params(rename = "weight", skip)] pub(crate) layers: Vec<HashMap<u8, [L; N]>>,
                #[params] b: &'a Option<Box<dyn Fn(Var) -> Var>>,
            }
            struct Seq(#[params(skip)] A, pub B) where A: Copy;
        }
        .into_iter()
        .collect();
        for end in 0..=full.len() {
            let _ = parse(full[..end].iter().cloned().collect());
            for skip in 0..end {
                let _ =
                    parse(full[..end].iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, t)| t.clone()).collect());
            }
        }
    }

    #[test]
    fn enums_unions_and_bad_options_are_errors() {
        let message = |tokens| parse(tokens).err().map(|e| e.messages()[0].text.clone()).unwrap();
        assert!(message(quote! { enum E { A(Var) } }).contains("`E` is an enum"));
        assert!(message(quote! { union U { a: u32 } }).contains("`U` is a union"));
        assert!(message(quote! { struct S { #[params(skp)] a: Var } }).starts_with("unknown `params` option"));
        assert!(message(quote! { struct S { #[params(rename = "a.b")] a: Var } }).contains("without `.`"));
        assert!(message(quote! { struct S { #[params] a: Var } }).starts_with("expected `#[params(skip)]`"));
        assert!(message(quote! { #[params(skip)] struct S { a: Var } }).contains("goes on a field"));
    }
}
