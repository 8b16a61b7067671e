//! `#[derive(Params)]`: `parse.rs` reads the struct, `expand.rs` writes
//! the `Params` impl that lists its parameters by dotted path.

mod expand;
mod parse;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// The derive on `proc_macro2` tokens: the impl, or the errors.
pub(crate) fn derive_params(input: TokenStream) -> TokenStream {
    match parse::parse(input) {
        Ok(input) => expand::expand(&input),
        Err(error) => as_items(error.to_compile_error()),
    }
}

/// `grad!` renders its errors as a block expression `{ compile_error!{..}; ... }`;
/// a derive's output stands where items do, so the invocations are
/// returned bare (a brace-delimited macro call is an item; the `;`s are not).
fn as_items(block: TokenStream) -> TokenStream {
    block
        .into_iter()
        .flat_map(|tree| match tree {
            TokenTree::Group(group) if group.delimiter() == Delimiter::Brace => group.stream(),
            other => TokenStream::from(other),
        })
        .filter(|tree| !matches!(tree, TokenTree::Punct(p) if p.as_char() == ';'))
        .collect()
}

#[cfg(test)]
mod tests {
    use quote::quote;

    #[test]
    fn errors_are_items() {
        let out = super::derive_params(quote! { enum E { A } }).to_string();
        assert!(out.starts_with(":: core :: compile_error ! {"), "{out}");
    }
}
