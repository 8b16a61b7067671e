//! The `grad!` macro, compiled as a user would: programs that must compile
//! and run (their `main` asserts values and gradients bit for bit against
//! hand-written `g_*` calls), and programs that must not compile, with
//! every message pinned in a `.stderr` file beside them.

#[test]
fn macro_programs_compile_and_match_hand_written_ops() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/macro_pass/*.rs");
    t.pass("tests/ui/shape_pass/*.rs");
}

#[test]
fn macro_misuse_is_a_compile_error_that_says_what_to_write() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/macro_fail/*.rs");
}

#[test]
fn shape_mistakes_are_compile_errors_naming_both_shapes() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/shape_fail/*.rs");
}
