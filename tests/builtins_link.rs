//! The link between the two crates: every `grad!` built-in and operator
//! expands to a function `grad_runtime` exports (the table below compiles
//! only if each exists), and every op `grad_runtime` exports is reachable
//! from `grad!` or is listed here with the reason it is not.

use grad_runtime::dsl::OP_FUNCTIONS;

/// Runtime ops deliberately left out of the DSL, and why.
const WITHOUT_BUILTIN: &[(&str, &str)] = &[
    ("argmax", "not differentiable: it reads a finished value (`argmax(&tape, logits, -1)`) after the block"),
    ("g_custom", "a user's op: called from a block through the user's own function that wraps it"),
];

#[test]
fn every_builtin_expands_to_an_exported_runtime_function() {
    let table = grad_runtime::__builtin_table!();
    for (form, function) in table {
        assert!(
            OP_FUNCTIONS.contains(function),
            "`{form}` expands to `{function}`, which grad_runtime does not export"
        );
    }
}

#[test]
fn every_runtime_op_has_a_builtin_or_a_reason() {
    let table = grad_runtime::__builtin_table!();
    for function in OP_FUNCTIONS {
        let linked = table.iter().any(|(_, f)| f == function);
        let excused = WITHOUT_BUILTIN.iter().any(|(f, _)| f == function);
        assert!(
            linked != excused,
            "`{function}`: {}",
            if linked {
                "has a built-in, so remove it from WITHOUT_BUILTIN"
            } else {
                "has no built-in in grad-macros/src/builtins.rs and no reason in WITHOUT_BUILTIN"
            }
        );
    }
    for (function, _) in WITHOUT_BUILTIN {
        assert!(OP_FUNCTIONS.contains(function), "`{function}` is listed as DSL-less but is not exported");
    }
}
