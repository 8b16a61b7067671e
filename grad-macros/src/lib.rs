//! The `grad!` macro: a small differentiable DSL expanded into
//! `grad_runtime` tape calls. Use it through `grad_runtime`, which
//! re-exports it and documents the language (`grad_runtime::grad`).
//!
//! The pipeline reads as four stages, each a module testable on
//! `proc_macro2::TokenStream` without a compiler:
//! `parse.rs` (the block, with the Pratt parser in `pratt.rs`; each call is
//! resolved to its built-in row once, here) →
//! `valid.rs` (every built-in call's arguments against its row) →
//! `check.rs` (the shape pass, with the rules in `rules.rs` and their
//! messages in `explain.rs`) →
//! `expand.rs` (code generation, with `operand.rs`), which asks `fuse.rs`
//! for the fused region rooted at each expression and expands it with
//! `expand/region.rs`, as a `static` plan the runtime interprets, with
//! the kernel small regions run instead (`expand/kernel.rs`).
//! `builtins.rs` is the one table of built-in functions; `literal.rs` owns numbers (literals,
//! axes, dims-list entries). Every mistake is a spanned `compile_error!`,
//! several at once when they are independent, in the order they are
//! written; the macro never panics.
//!
//! `#[derive(Params)]` (re-exported as `grad_runtime::Params`) lives in
//! `params/`: it reads a struct and lists its parameters by dotted path.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod ast;
mod builtins;
mod check;
mod error;
mod expand;
mod explain;
mod fuse;
mod literal;
mod operand;
mod params;
mod parse;
mod pratt;
mod rules;
mod shape;
mod valid;

#[cfg(test)]
mod tests;

use proc_macro::TokenStream;

/// Records a block of tensor math on a tape: `grad!(tape; let y = relu(x @ w + b); mse(y, t))`.
///
/// See `grad_runtime::grad` for the language.
#[proc_macro]
pub fn grad(input: TokenStream) -> TokenStream {
    expand_grad(input.into()).into()
}

/// The built-in table as `&[(DSL form, runtime function)]`, checked against
/// `grad_runtime`'s exports by its link test. Not an API.
#[doc(hidden)]
#[proc_macro]
pub fn __builtin_table(_input: TokenStream) -> TokenStream {
    builtins::link_table().into()
}

/// Lists the parameters of a model struct by dotted path (`layers.0.w`):
/// implements `grad_runtime::Params`.
///
/// See `grad_runtime::Params` for what fields may hold and the options
/// `#[params(skip)]` and `#[params(rename = "name")]`.
#[proc_macro_derive(Params, attributes(params))]
pub fn derive_params(input: TokenStream) -> TokenStream {
    params::derive_params(input.into()).into()
}

/// The whole macro on `proc_macro2` tokens: the expansion, or the errors.
fn expand_grad(input: proc_macro2::TokenStream) -> proc_macro2::TokenStream {
    match run(input) {
        Ok(tokens) => tokens,
        Err(error) => error.to_compile_error(),
    }
}

fn run(input: proc_macro2::TokenStream) -> error::Result<proc_macro2::TokenStream> {
    let (block, mut errors) = parse::parse(input)?;
    errors.extend(valid::validate(&block));
    let block = errors.finish(block)?;
    let checked = check::check(&block);
    let expanded = expand::expand(&block);
    match (checked, expanded) {
        (Ok(()), Ok(tokens)) => Ok(tokens),
        (Err(mut shapes), Err(kinds)) => {
            shapes.combine(kinds);
            Err(shapes)
        }
        (Err(error), Ok(_)) | (Ok(()), Err(error)) => Err(error),
    }
}
