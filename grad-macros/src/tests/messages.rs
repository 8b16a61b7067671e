//! The message of each kind of mistake, and which tokens it points at;
//! checked on tokens, without a compiler (the trybuild `.stderr` files pin
//! the same messages as rustc shows them).

use super::{errors, run};

/// `input` fails with exactly one message, containing every one of `parts`.
fn assert_error(input: &str, parts: &[&str]) {
    let got = errors(input);
    assert_eq!(got.len(), 1, "`{input}` gave {got:#?}");
    for part in parts {
        assert!(got[0].contains(part), "`{input}`: expected a message containing {part:?}, got {:?}", got[0]);
    }
}

/// `input` fails with exactly these messages, each given by a part of it.
fn assert_errors(input: &str, expected: &[&str]) {
    let got = errors(input);
    assert_eq!(got.len(), expected.len(), "`{input}` gave {got:#?}");
    for (message, part) in got.iter().zip(expected) {
        assert!(message.contains(part), "`{input}`: expected a message containing {part:?}, got {message:?}");
    }
}

#[test]
fn structural_mistakes() {
    assert_error("", &["needs a tape and a body"]);
    assert_error("tape", &["missing body"]);
    assert_error("tape;", &["empty body"]);
    assert_error("relu(x @ w)", &["missing tape"]);
    assert_error("let y = relu(x); y", &["missing tape", "a `let` statement"]);
    assert_error("x: [B]; x", &["missing tape", "a shape declaration"]);
    assert_error("; x", &["missing tape", "an empty tape expression"]);
    assert_error("tape; y = relu(x); y", &["bind the value with `let y = ...`"]);
    assert_error("tape; relu(x); y", &["this value is thrown away", "`let name = relu(x)`"]);
    assert_error("tape; let y = relu(x)", &["missing result", "`...; y`"]);
    assert_error("tape; x: [B, 3]", &["nothing to compute"]);
    assert_error("tape; while go { x }; x", &["`while` is Rust"]);
    assert_error("tape; x, y", &["a tuple in parentheses"]);
    assert_error("tape; let a = x; b: [3]; a", &["declarations go first", "move `b: [3]` before `let a = x`"]);
    assert_error("tape; x: [B], x: [B]; x", &["`x` is declared twice"]);
    assert_error("tape; x: [B, 1.5]; x", &["a dim is a whole number"]);
    assert_error("tape; x: B; x", &["in brackets", "`x: [B, 784]`"]);
}

#[test]
fn operator_mistakes() {
    assert_error("tape; x % y", &["`%` (remainder) is not an operator"]);
    assert_error("tape; x ** 2", &["`**`", "`pow(x, 2)`"]);
    assert_error("tape; x == y", &["comparisons"]);
    assert_error("tape; x && y", &["logical operators"]);
    assert_error("tape; x += y; x", &["`+=` assigns in place"]);
    assert_error("tape; x +", &["expected an expression after `+`"]);
    assert_error("tape; * x", &["`*` needs an operand on its left"]);
    assert_error("tape; x y", &["expected an operator before `y`"]);
    assert_error("tape; x[0]", &["indexing is not part of grad!"]);
    assert_error("tape; x as f32", &["`as` casts are Rust"]);
    assert_error("tape; x?", &["`?` is not needed"]);
    assert_error("tape; -", &["expected an expression after unary `-`"]);
    assert_error("tape; (a, b) + c", &["a tuple is only allowed as the result"]);
    assert_error("tape; ()", &["empty parentheses"]);
    assert_error("tape; \"text\"", &["expected a number or a tensor expression"]);
}

#[test]
fn call_mistakes() {
    assert_error("tape; softmax(x)", &["`softmax` takes 2 arguments", "`softmax(x, -1)`"]);
    assert_error("tape; sum(x, 0, true, 1)", &["`sum` takes 1 to 3 arguments"]);
    assert_error("tape; x.softmax()", &["counting the receiver"]);
    assert_error("tape; x.dense(w)", &["`.dense()` is not a built-in"]);
    assert_error("tape; softmax(x, 1.5)", &["`axis` of `softmax` must be an axis"]);
    assert_error("tape; concat(a, b, 0.5)", &["`axis` of `concat` must be an axis: a whole number"]);
    assert_error("tape; sofmax(x, -1)", &["did you mean `softmax`?", "call it by path, as in `self::sofmax(x, -1)`"]);
    assert_errors("tape; sigmiod(x) + laye_norm(x, g, b, 1e-5)", &["did you mean `sigmoid`?", "`layer_norm`?"]);
    assert!(super::run("tape; self::sofmax(x, -1) + elu(x) + dense(x)").is_ok());
    assert_error(
        "tape; x: [B, T, 8]; reshape(x, [B * T, D])",
        &["`D` in `reshape(x, [B * T, D])` is not a symbol this block declares (B, T)", "write `{D}`"],
    );
    assert!(super::run("tape; x: [B, T, 8]; reshape(x, [B * T, {D}, d, n_rows])").is_ok());
    assert!(super::run("tape; reshape(x, [B * T, D])").is_ok());
    assert_error("tape; sum(x, 0, 1)", &["`keepdim` of `sum` must be `true` or `false`"]);
    assert_error("tape; reshape(x, 4)", &["a list of sizes in brackets"]);
    assert_error("tape; reshape(x, [2.5])", &["`dims` of `reshape` must be a list of sizes"]);
    assert_error("tape; relu(2.0)", &["`x` of `relu` must be a tensor"]);
    assert_error("tape; pow(x, relu(x))", &["`p` of `pow` must be a number"]);
    assert_error("tape; 2.0 @ x", &["`@` multiplies tensors"]);
    assert_error("tape; x * 2usize", &["`2usize` is an integer", "`2.0`"]);
    assert_error("tape; let s = 2.0; s", &["returns tensors", "`s` is a number"]);
    assert_error("tape; f(a,, b)", &["expected an item before this `,`"]);
}

#[test]
fn independent_mistakes_are_all_reported() {
    assert_errors("tape; let a = x % y; let b = relu(x, y); a ** b", &["`%`", "`relu` takes 1 argument", "`**`"]);
    assert_errors(
        "tape; x: [B, 3], w: [4, 2], b: [5]; (x @ w, x + b, softmax(x, 2))",
        &["inner dims", "cannot add [B, 3] and [5]", "axis 2 is out of range"],
    );
}

#[test]
fn a_failed_op_is_reported_once_not_at_every_later_use() {
    // `a` has an unknown shape after the failed product, so neither of its
    // uses is reported again.
    assert_errors("tape; x: [B, 3], w: [4, 2], v: [7]; let a = x @ w; relu(a) @ v + a", &["differ (3 vs 4)"]);
}

#[test]
fn shapes_are_inferred_through_every_rule() {
    let accepted = [
        "tape; x: [B, 784], w: [784, 10], b: [10]; softmax(x @ w + b, -1)",
        "tape; x: [B, T, D], w: [D, E]; reshape(x @ w, [B * T, E])",
        "tape; q: [B, T, D], k: [B, T, D]; bmm(q, transpose(k)) * 0.5",
        "tape; a: [B, 3], b: [B, 5]; slice(concat(a, b, 1), [0, 2], [B, 8])",
        "tape; x: [B, T, D], g: [D], b: [D]; layer_norm(x, g, b, 1e-5)",
        "tape; e: [V, D], w: [D, C]; cross_entropy(embedding(e, &ids) @ w, &t)",
        "tape; x: [B, 10]; (sum(x, 1), mean(x, -1, true), max(x, 0), sum(x))",
        "tape; x: [B, 10], t: [B, 10]; mse(x * 2.0 - 1, t)",
        "tape; x: [_, 10], t: [N, 10]; mse(x, t)",
        "tape; x: [B, 10]; mse(x, y)",
        "tape; x: [B, 10]; reshape(x, [rows, 10])",
        "tape; f(x, 3usize, -2, 2.5f32)",
        // Size arithmetic: exact quotients of symbols, sums and differences.
        "tape; x: [B, T, C]; let y = reshape(x, [B, T, h, C / h]); reshape(y, [B * T, C])",
        "tape; x: [B, T, C]; slice(reshape(x, [B * T / T, T, C]), [0, 0, C / 2], [B, T - 1, C])",
        "tape; x: [B, T, 12]; let y = reshape(x, [B, T, 2, 12 / 2]); mse(y, reshape(x, [B, T, 2, 3 + 3]))",
        "tape; x: [B, 8]; reshape(x, [B, (2 + 2) * 2])",
        // Declared indices: ids [B, T] give [B, T, D]; targets [B, T] fit logits [B, T, V].
        "tape; e: [V, D], ids: [B, T]; reshape(embedding(e, &ids), [B * T, D])",
        "tape; e: [V, D], ids: [B, T], t: [B, T]; cross_entropy(embedding(e, ids) @ transpose(e), &t)",
        "tape; x: [B, T, V], t: [_]; cross_entropy(x, &t)",
        "tape; x: [B, T, V]; cross_entropy(x, &t)",
    ];
    for input in accepted {
        assert!(run(input).is_ok(), "`{input}` was rejected: {:?}", run(input).err().map(|e| e.messages().to_vec()));
    }
}

#[test]
fn a_shape_error_spans_the_whole_sub_expression() {
    let input = "tape; x: [B, 3], w: [4, 2];\nrelu(x @ w)";
    let error = run(input).unwrap_err();
    let span = error.messages()[0].span;
    let (first, last) = (span.first.start(), span.last.end());
    assert_eq!((first.line, first.column), (2, 5), "starts at `x`");
    assert_eq!((last.line, last.column), (2, 10), "ends after `w`");
}

#[test]
fn a_syntax_error_points_at_the_offending_token() {
    let error = run("tape;\nx % y").unwrap_err();
    let span = error.messages()[0].span;
    assert_eq!((span.first.start().line, span.first.start().column), (2, 2));
}

#[test]
fn sizes_that_are_not_whole_are_errors_on_their_tokens() {
    assert_error(
        "tape; x: [B, 12]; reshape(x, [B, 5, 12 / 5])",
        &["the size `12 / 5` is not a whole number: 12 = 2 * 5 + 2"],
    );
    assert_error("tape; x: [B, 12]; reshape(x, [B, 12 / 0])", &["the size `12 / 0` divides by zero"]);
    assert_error("tape; x: [B, 12]; slice(x, [0, 0], [B, 2 - 3])", &["the size `2 - 3` is below zero: 2 - 3 = -1"]);
    // An exact quotient of symbols keeps checking the element count.
    assert_error("tape; x: [B, T, C]; reshape(x, [B * T * C / T, 2])", &["cannot reshape [B, T, C] into [B * C, 2]"]);
    let error = run("tape; x: [B, 12];\nreshape(x, [B, 2, 12 / 5])").unwrap_err();
    let span = error.messages()[0].span;
    assert_eq!((span.first.start().line, span.first.start().column), (2, 18), "starts at `12`");
    assert_eq!((span.last.end().line, span.last.end().column), (2, 24), "ends after `5`");
}

#[test]
fn declared_indices_give_the_shapes_of_embedding_and_cross_entropy() {
    assert_error(
        "tape; e: [V, D], ids: [B, T]; reshape(embedding(e, &ids), [B, D])",
        &["cannot reshape [B, T, D] into [B, D]"],
    );
    assert_error(
        "tape; x: [B, T, V], t: [T, B]; cross_entropy(x, &t)",
        &["the targets are [T, B], but the rows of the logits are [B, T]", "`&t` is [T, B] (declared)"],
    );
    assert_error(
        "tape; x: [B, V], t: [B, 1]; cross_entropy(x, &t)",
        &["the targets are [B, 1], but the rows of the logits are [B]"],
    );
    assert_error("tape; x: [B, T, V], t: [4]; cross_entropy(x, &t)", &["a flat list of B * T"]);
    // Undeclared ids: the rank of the rows is unknown, so nothing is claimed.
    assert!(run("tape; e: [V, D]; reshape(embedding(e, &ids), [B, T, D])").is_err(), "B and T are undeclared");
    assert!(run("tape; e: [V, D], x: [B, T, D]; embedding(e, &ids) + x").is_ok());
}
