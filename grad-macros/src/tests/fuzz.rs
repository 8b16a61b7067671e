//! The macro on thousands of random and mutated inputs: it must return an
//! expansion or spanned errors, and never panic. Deterministic (a fixed
//! seed), and fast enough for every `cargo test`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use proc_macro2::{Span, TokenStream, TokenTree};

use super::snapshots::CASES;

/// SplitMix64: seedable and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Lexemes the generator draws from: the language's words, its neighbours'
/// (Rust keywords, other operators), and odd literals.
const WORDS: &[&str] = &[
    "tape",
    "tp",
    "x",
    "w",
    "b",
    "t",
    "B",
    "T",
    "D",
    "_",
    "let",
    "mut",
    "fn",
    "if",
    "as",
    "self",
    "true",
    "false",
    "relu",
    "sum",
    "mean",
    "softmax",
    "reshape",
    "slice",
    "concat",
    "matmul",
    "bmm",
    "transpose",
    "mse",
    "dropout",
    "cross_entropy",
    "embedding",
    "layer_norm",
    "clamp",
    "pow",
    "max",
    "linear",
    "0",
    "1",
    "2",
    "-1",
    "784",
    "0.5",
    "1e-3",
    "2.0f32",
    "3usize",
    "0x1f",
    "99999999999999999999999999999999999999999",
    "\"s\"",
    "'c'",
    "+",
    "-",
    "*",
    "/",
    "@",
    "%",
    "^",
    "=",
    "==",
    "**",
    "..",
    "::",
    ":",
    ";",
    ",",
    ".",
    "&",
    "&mut",
    "!",
    "?",
    "<",
    ">",
    "->",
    "|",
    "#",
    "$",
];

const OPEN: &[(&str, &str)] = &[("(", ")"), ("[", "]"), ("{", "}")];

/// A random balanced run of lexemes, at most `depth` groups deep.
fn random_text(rng: &mut Rng, depth: usize, out: &mut Vec<String>) {
    let len = rng.below(12);
    for _ in 0..len {
        if depth > 0 && rng.below(5) == 0 {
            let (open, close) = OPEN[rng.below(OPEN.len())];
            out.push(open.to_string());
            random_text(rng, depth - 1, out);
            out.push(close.to_string());
        } else {
            out.push(rng.pick(WORDS).to_string());
        }
    }
}

/// The lexemes of `tokens`, groups flattened to their delimiters.
fn lexemes(tokens: TokenStream, out: &mut Vec<String>) {
    let mut glued = String::new();
    for tree in tokens {
        match tree {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    proc_macro2::Delimiter::Parenthesis => ("(", ")"),
                    proc_macro2::Delimiter::Bracket => ("[", "]"),
                    proc_macro2::Delimiter::Brace => ("{", "}"),
                    proc_macro2::Delimiter::None => ("", ""),
                };
                out.push(open.to_string());
                lexemes(g.stream(), out);
                out.push(close.to_string());
            }
            // A joint punct glues to the next (`::`, `..`), so it is not a lexeme of its own.
            TokenTree::Punct(p) if p.spacing() == proc_macro2::Spacing::Joint => {
                glued.push(p.as_char());
                continue;
            }
            TokenTree::Punct(p) => {
                glued.push(p.as_char());
                out.push(std::mem::take(&mut glued));
            }
            other => out.push(other.to_string()),
        }
    }
}

/// One to three edits of a valid input: delete, duplicate, swap, insert or replace lexemes.
fn mutate(rng: &mut Rng, mut words: Vec<String>) -> Vec<String> {
    for _ in 0..1 + rng.below(3) {
        if words.is_empty() {
            words.push(rng.pick(WORDS).to_string());
            continue;
        }
        let i = rng.below(words.len());
        match rng.below(5) {
            0 => {
                words.remove(i);
            }
            1 => words.insert(i, words[i].clone()),
            2 => {
                let j = rng.below(words.len());
                words.swap(i, j);
            }
            3 => words.insert(i, rng.pick(WORDS).to_string()),
            _ => words[i] = rng.pick(WORDS).to_string(),
        }
    }
    words
}

/// Runs the macro on `text` (skipped if it does not lex, as rustc would
/// reject it before the macro) and checks the outcome.
fn check(text: &str) -> bool {
    let Ok(tokens) = text.parse::<TokenStream>() else { return false };
    let bounds = byte_bounds(tokens.clone());
    let outcome = catch_unwind(AssertUnwindSafe(|| crate::run(tokens)));
    let Ok(result) = outcome else { panic!("the macro panicked on: {text}") };
    if let Err(error) = result {
        assert!(!error.messages().is_empty(), "an error without a message on: {text}");
        for message in error.messages() {
            assert!(!message.text.is_empty(), "an empty message on: {text}");
            if let Some((lo, hi)) = bounds {
                for span in [message.span.first, message.span.last] {
                    let range = span.byte_range();
                    assert!(
                        lo <= range.start && range.end <= hi,
                        "message {:?} points outside the input ({range:?} not in {lo}..{hi}): {text}",
                        message.text
                    );
                }
            }
        }
    }
    true
}

/// The byte range the input's tokens cover, `None` for an empty input
/// (whose error may only point at the call site).
fn byte_bounds(tokens: TokenStream) -> Option<(usize, usize)> {
    let spans: Vec<Span> = tokens.into_iter().map(|t| t.span()).collect();
    Some((spans.first()?.byte_range().start, spans.last()?.byte_range().end))
}

#[test]
fn random_token_streams_give_an_expansion_or_spanned_errors() {
    let mut rng = Rng(0x5eed_0001);
    let mut ran = 0;
    for _ in 0..3000 {
        let mut words = Vec::new();
        if rng.below(2) == 0 {
            words.extend(["tape".to_string(), ";".to_string()]);
        }
        random_text(&mut rng, 3, &mut words);
        ran += usize::from(check(&words.join(" ")));
    }
    assert!(ran > 2500, "only {ran} inputs lexed");
}

#[test]
fn mutated_valid_inputs_give_an_expansion_or_spanned_errors() {
    let mut rng = Rng(0x5eed_0002);
    let mut ran = 0;
    // Many cases hold brackets (tuples, lists, `#[nofuse]`), and a mutant
    // that drops one does not lex: about a quarter are skipped.
    const ROUNDS: usize = 6000;
    for round in 0..ROUNDS {
        let (_, input) = CASES[round % CASES.len()];
        let mut words = Vec::new();
        lexemes(input.parse().expect("cases lex"), &mut words);
        ran += usize::from(check(&mutate(&mut rng, words).join(" ")));
    }
    assert!(ran > ROUNDS * 7 / 10, "only {ran} of {ROUNDS} inputs lexed");
}

#[test]
fn every_case_is_accepted_or_rejected_without_panicking() {
    for (_, input) in CASES {
        assert!(check(input));
    }
}
