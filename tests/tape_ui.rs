//! Compile-fail tests: views of values and gradients borrow the tape, so
//! using one after `reset_to`, after the tape is dropped, or while another
//! op mutates the tape does not compile.

#[test]
fn views_cannot_outlive_their_nodes() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/tape/*.rs");
}
