//! How shape-rule messages read: a summary line naming the sub-expression
//! and both shapes, indented details (each operand's shape and where it
//! came from, which dims disagree), and a `help:` with a likely fix.

use crate::rules::Operand;
use crate::shape::Dim;

/// A message: a summary line, indented detail lines, and an optional help.
pub(crate) fn message(summary: String, details: &[String], help: Option<String>) -> String {
    let mut text = summary;
    for line in details {
        text.push_str("\n  ");
        text.push_str(line);
    }
    if let Some(help) = help {
        text.push_str("\nhelp: ");
        text.push_str(&help);
    }
    text
}

/// `` `x` is [B, 3] `` plus where the shape came from.
pub(crate) fn is(op: &Operand) -> String {
    match &op.origin {
        Some(origin) => format!("`{}` is {} ({origin})", op.text, op.shape),
        None => format!("`{}` is {}", op.text, op.shape),
    }
}

/// A note when a disagreement involves a symbol, which a newcomer may
/// expect to match any size.
pub(crate) fn symbol_note(a: &Dim, b: &Dim) -> Option<String> {
    match (a.has_symbol(), b.has_symbol()) {
        (true, true) => Some(format!(
            "{a} and {b} are different symbols: each stands for one size throughout the block, and two symbols \
             are never assumed equal"
        )),
        (true, false) | (false, true) => {
            let (symbol, number) = if a.has_symbol() { (a, b) } else { (b, a) };
            Some(format!(
                "{symbol} is a symbol: it stands for one size throughout the block and is never assumed equal to \
                 {number}; declare both with the same symbol or the same number"
            ))
        }
        (false, false) => None,
    }
}

pub(crate) fn with_note(mut details: Vec<String>, note: Option<String>) -> Vec<String> {
    details.extend(note);
    details
}
