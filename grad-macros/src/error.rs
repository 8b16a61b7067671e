//! Spanned errors. Each message covers a range of the user's tokens; several
//! messages combine into one error, so one compile shows every mistake
//! (as `syn::Error::combine` does).

use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};

/// The tokens `first..=last` of the user's input. `Span::join` is
/// nightly-only, so a range is kept as its two ends and rendered the way
/// syn does it (see [`Error::to_compile_error`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SpanRange {
    pub(crate) first: Span,
    pub(crate) last: Span,
}

impl SpanRange {
    pub(crate) fn single(span: Span) -> SpanRange {
        SpanRange { first: span, last: span }
    }

    /// The range from the start of `self` to the end of `other`.
    pub(crate) fn to(self, other: SpanRange) -> SpanRange {
        SpanRange { first: self.first, last: other.last }
    }

    /// The range of a token tree (a group spans its delimiters).
    pub(crate) fn of(tree: &TokenTree) -> SpanRange {
        SpanRange::single(tree.span())
    }

    /// The range covering a non-empty run of tokens, or `fallback` when empty.
    pub(crate) fn of_tokens(tokens: &[TokenTree], fallback: Span) -> SpanRange {
        match (tokens.first(), tokens.last()) {
            (Some(first), Some(last)) => SpanRange { first: first.span(), last: last.span() },
            _ => SpanRange::single(fallback),
        }
    }
}

/// One message and the tokens it is about.
#[derive(Clone, Debug)]
pub(crate) struct Message {
    pub(crate) span: SpanRange,
    pub(crate) text: String,
}

/// One or more spanned messages.
#[derive(Clone, Debug)]
pub(crate) struct Error {
    messages: Vec<Message>,
}

pub(crate) type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn new(span: SpanRange, text: impl Into<String>) -> Error {
        Error { messages: vec![Message { span, text: text.into() }] }
    }

    pub(crate) fn at(span: Span, text: impl Into<String>) -> Error {
        Error::new(SpanRange::single(span), text)
    }

    /// Appends `other`'s messages after this error's.
    pub(crate) fn combine(&mut self, other: Error) {
        self.messages.extend(other.messages);
    }

    #[cfg(test)]
    pub(crate) fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// A block of `compile_error!` invocations, one per message. The last
    /// is the block's value, so the macro call still has a (type-error)
    /// expression and the user sees these errors, not a cascade of others.
    ///
    /// A message spans `first..=last` the syn way: the `compile_error` path
    /// carries the first span and the delimited argument the last, and
    /// rustc underlines from the start of one to the end of the other.
    pub(crate) fn to_compile_error(&self) -> TokenStream {
        let mut body = TokenStream::new();
        for (i, message) in self.messages.iter().enumerate() {
            if i > 0 {
                body.extend([punct(';', Spacing::Alone, message.span.first)]);
            }
            body.extend(compile_error(message));
        }
        TokenStream::from(TokenTree::Group(Group::new(Delimiter::Brace, body)))
    }
}

/// Collects errors from independent parts of the input.
#[derive(Default)]
pub(crate) struct Errors(Option<Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// Keeps the value of `result`, recording its error.
    pub(crate) fn keep<T>(&mut self, result: Result<T>) -> Option<T> {
        result.map_err(|e| self.push(e)).ok()
    }

    /// `Ok(value)` when nothing was recorded.
    pub(crate) fn finish<T>(self, value: T) -> Result<T> {
        match self.0 {
            Some(error) => Err(error),
            None => Ok(value),
        }
    }
}

/// Errors from the `;`-separated parts of a block, found by different
/// stages (parsing, validation): reported in the order of the parts, so a
/// user reads them top to bottom whichever stage found them.
#[derive(Default)]
pub(crate) struct PartErrors(Vec<(usize, Error)>);

impl PartErrors {
    /// Records `error`, found in part `part` (its position in the block).
    pub(crate) fn push(&mut self, part: usize, error: Error) {
        self.0.push((part, error));
    }

    /// Keeps the value of `result`, recording its error as part `part`'s.
    pub(crate) fn keep<T>(&mut self, part: usize, result: Result<T>) -> Option<T> {
        result.map_err(|e| self.push(part, e)).ok()
    }

    /// Adds `other`'s errors.
    pub(crate) fn extend(&mut self, other: PartErrors) {
        self.0.extend(other.0);
    }

    /// `Ok(value)` when nothing was recorded; else every error, by part
    /// (errors of one part keep the order they were found in).
    pub(crate) fn finish<T>(mut self, value: T) -> Result<T> {
        self.0.sort_by_key(|&(part, _)| part);
        let mut errors = Errors::default();
        self.0.into_iter().for_each(|(_, error)| errors.push(error));
        errors.finish(value)
    }
}

fn compile_error(message: &Message) -> TokenStream {
    let (first, last) = (message.span.first, message.span.last);
    let mut text = Literal::string(&message.text);
    text.set_span(last);
    let mut argument = Group::new(Delimiter::Brace, TokenStream::from(TokenTree::Literal(text)));
    argument.set_span(last);
    TokenStream::from_iter([
        punct(':', Spacing::Joint, first),
        punct(':', Spacing::Alone, first),
        TokenTree::Ident(Ident::new("core", first)),
        punct(':', Spacing::Joint, first),
        punct(':', Spacing::Alone, first),
        TokenTree::Ident(Ident::new("compile_error", first)),
        punct('!', Spacing::Alone, first),
        TokenTree::Group(argument),
    ])
}

fn punct(ch: char, spacing: Spacing, span: Span) -> TokenTree {
    let mut punct = Punct::new(ch, spacing);
    punct.set_span(span);
    TokenTree::Punct(punct)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_errors_become_one_block_of_compile_errors() {
        let mut error = Error::at(Span::call_site(), "first");
        error.combine(Error::at(Span::call_site(), "second \"quoted\""));
        let text = error.to_compile_error().to_string();
        assert_eq!(
            text,
            "{ :: core :: compile_error ! { \"first\" } ; :: core :: compile_error ! { \"second \\\"quoted\\\"\" } }"
        );
    }

    #[test]
    fn errors_accumulate_and_finish() {
        let mut errors = Errors::default();
        assert_eq!(errors.keep(Ok::<_, Error>(3)), Some(3));
        assert!(Errors::default().finish(()).is_ok());
        errors.keep::<()>(Err(Error::at(Span::call_site(), "a")));
        errors.push(Error::at(Span::call_site(), "b"));
        let texts: Vec<_> = errors.finish(()).unwrap_err().messages().iter().map(|m| m.text.clone()).collect();
        assert_eq!(texts, ["a", "b"]);
    }
}
