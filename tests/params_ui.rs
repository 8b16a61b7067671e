//! `#[derive(Params)]` misuse is a compile error on the user's tokens that
//! says what a field may hold and how to leave one out; every message is
//! pinned in a `.stderr` file beside its program.

#[test]
fn params_derive_misuse_is_a_compile_error() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/params_fail/*.rs");
}
