//! Tests of the whole pipeline on `proc_macro2` tokens, without a compiler:
//! expansion snapshots, the fuzz test, and the messages of every error.

mod fusion;
mod fuzz;
mod messages;
mod snapshots;

use proc_macro2::TokenStream;

use crate::error::Error;

/// The macro's result on `input`: the expansion or the errors.
fn run(input: &str) -> Result<TokenStream, Error> {
    let tokens: TokenStream = input.parse().unwrap_or_else(|e| panic!("test input does not lex: {input}: {e}"));
    crate::run(tokens)
}

/// The error messages for `input`, which must fail.
fn errors(input: &str) -> Vec<String> {
    match run(input) {
        Ok(tokens) => panic!("expected errors for `{input}`, got an expansion:\n{tokens}"),
        Err(error) => error.messages().iter().map(|m| m.text.clone()).collect(),
    }
}
