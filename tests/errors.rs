//! Bad input never panics and never reads a wrong number: each op records a
//! `GradError` naming the op, the input shapes and the caller's location;
//! the tape keeps the first error and `backward` returns it.

use grad_runtime::*;
use ndarray::{Array1, Array2, Array3, ArrayD, IxDyn};

fn zeros(shape: &[usize]) -> ArrayD<f32> {
    ArrayD::zeros(IxDyn(shape))
}

/// Runs `op` on fresh inputs of the given shapes and returns the error it raised.
fn error_of(shapes: &[&[usize]], op: impl FnOnce(&mut Tape<f32>, &[Var]) -> Var) -> GradError {
    let mut tape = Tape::<f32>::new();
    let vars: Vec<Var> = shapes.iter().map(|s| tape.param(zeros(s))).collect();
    let out = op(&mut tape, &vars);
    assert!(out.is_poisoned(), "a failed op returns the poisoned handle");
    assert!(!tape.is_ok());
    let error = tape.backward(out).expect_err("backward returns the op's error");
    assert_eq!(tape.error(), Some(&error));
    error
}

fn assert_message(error: &GradError, op: &str, parts: &[&str]) {
    let message = error.to_string();
    assert_eq!(error.op(), op, "{message}");
    assert!(message.starts_with(op), "{message}");
    for part in parts {
        assert!(message.contains(part), "message lacks {part:?}: {message}");
    }
    assert!(message.contains("tests/errors.rs:"), "message lacks the caller location: {message}");
}

#[test]
fn broadcasting_failures_name_the_op_and_both_shapes() {
    // Closures, not fn pointers: a call through a fn pointer reports the
    // op's own definition as the caller (Rust's #[track_caller] rule).
    type Binary = fn(&mut Tape<f32>, Var, Var) -> Var;
    let ops: [(&str, Binary); 4] = [
        ("g_add", |tp, a, b| g_add(tp, a, b)),
        ("g_sub", |tp, a, b| g_sub(tp, a, b)),
        ("g_mul", |tp, a, b| g_mul(tp, a, b)),
        ("g_div", |tp, a, b| g_div(tp, a, b)),
    ];
    for (op, f) in ops {
        let error = error_of(&[&[2, 3], &[4]], |tp, v| f(tp, v[0], v[1]));
        assert_eq!(error.kind(), &ErrorKind::Broadcast);
        assert_eq!(error.shapes(), &[vec![2, 3], vec![4]]);
        assert_message(&error, op, &["[2, 3] and [4]", "broadcast"]);
    }
}

#[test]
fn matrix_product_failures_name_the_dims_that_disagree() {
    let error = error_of(&[&[64, 784], &[783, 256]], |tp, v| g_matmul(tp, v[0], v[1]));
    assert_eq!(error.kind(), &ErrorKind::InnerDim { left: 784, right: 783 });
    assert_message(&error, "g_matmul", &["784 vs 783", "[64, 784] and [783, 256]"]);

    let error = error_of(&[&[3], &[3, 2]], |tp, v| g_matmul(tp, v[0], v[1]));
    assert!(matches!(error.kind(), ErrorKind::Rank { got: 1, .. }));
    assert_message(&error, "g_matmul", &["1-D", "[3] and [3, 2]"]);

    let error = error_of(&[&[2, 3, 4], &[5, 4, 6]], |tp, v| g_bmm(tp, v[0], v[1]));
    assert_eq!(error.kind(), &ErrorKind::BatchDim { left: 2, right: 5 });
    assert_message(&error, "g_bmm", &["2 vs 5", "[2, 3, 4] and [5, 4, 6]"]);

    let error = error_of(&[&[2, 3, 4], &[2, 5, 6]], |tp, v| g_bmm(tp, v[0], v[1]));
    assert_eq!(error.kind(), &ErrorKind::InnerDim { left: 4, right: 5 });

    let error = error_of(&[&[3, 4], &[4, 6]], |tp, v| g_bmm(tp, v[0], v[1]));
    assert_message(&error, "g_bmm", &["3-D", "[3, 4] and [4, 6]"]);
}

#[test]
fn mse_of_different_shapes_is_an_error_not_a_broadcast() {
    let error = error_of(&[&[64, 10], &[10]], |tp, v| g_mse(tp, v[0], v[1]));
    assert_eq!(error.kind(), &ErrorKind::ShapeMismatch);
    assert_message(&error, "g_mse", &["[64, 10] and [10]"]);
}

#[test]
fn bad_axes_are_reported_with_the_valid_range() {
    let error = error_of(&[&[3, 4]], |tp, v| g_softmax(tp, v[0], 2));
    assert_eq!(error.kind(), &ErrorKind::Axis { axis: 2, ndim: 2 });
    assert_message(&error, "g_softmax", &["axis 2", "-2 to 1", "[3, 4]"]);
    let error = error_of(&[&[3, 4]], |tp, v| g_softmax(tp, v[0], -3));
    assert_eq!(error.kind(), &ErrorKind::Axis { axis: -3, ndim: 2 });
    let error = error_of(&[&[2, 3], &[2, 3]], |tp, v| g_concat(tp, v[0], v[1], 2));
    assert_message(&error, "g_concat", &["axis 2", "[2, 3] and [2, 3]"]);
    let error = error_of(&[&[5]], |tp, v| g_transpose(tp, v[0]));
    assert_message(&error, "g_transpose", &["1-D", "[5]"]);
}

#[test]
fn slices_out_of_range_name_the_axis_and_bounds() {
    let error = error_of(&[&[5, 6]], |tp, v| g_slice(tp, v[0], &[1, 2], &[4, 7]));
    assert_eq!(error.kind(), &ErrorKind::SliceRange { axis: 1, start: 2, stop: 7, len: 6 });
    assert_message(&error, "g_slice", &["2..7", "axis 1", "[5, 6]"]);
    let error = error_of(&[&[5, 6]], |tp, v| g_slice(tp, v[0], &[3, 0], &[2, 6]));
    assert_eq!(error.kind(), &ErrorKind::SliceRange { axis: 0, start: 3, stop: 2, len: 5 });
    let error = error_of(&[&[5, 6]], |tp, v| g_slice(tp, v[0], &[1], &[4]));
    assert_eq!(error.kind(), &ErrorKind::SliceArity { starts: 1, stops: 1, ndim: 2 });
}

#[test]
fn reshape_to_a_different_element_count_is_an_error() {
    let error = error_of(&[&[2, 3, 4]], |tp, v| g_reshape(tp, v[0], &[5, 5]));
    assert_eq!(error.kind(), &ErrorKind::ElementCount { from: 24, to: 25 });
    assert_message(&error, "g_reshape", &["24 elements", "25", "[2, 3, 4]"]);
    let error = error_of(&[&[2, 3, 4]], |tp, v| g_reshape(tp, v[0], &[usize::MAX, 3]));
    assert_eq!(error.kind(), &ErrorKind::ElementCount { from: 24, to: usize::MAX }, "an overflowing shape is refused");
}

#[test]
fn concat_of_mismatched_dims_names_the_axis() {
    let error = error_of(&[&[2, 3], &[4, 5]], |tp, v| g_concat(tp, v[0], v[1], 0));
    assert_eq!(error.kind(), &ErrorKind::ConcatDim { axis: 1, left: 3, right: 5 });
    assert_message(&error, "g_concat", &["3 vs 5", "[2, 3] and [4, 5]"]);
    let error = error_of(&[&[2, 3], &[3]], |tp, v| g_concat(tp, v[0], v[1], 0));
    assert_eq!(error.kind(), &ErrorKind::RankMismatch { left: 2, right: 1 });
}

#[test]
fn the_first_error_is_kept_and_later_ops_do_nothing() {
    let mut tape = Tape::<f32>::new();
    let a = tape.param(Array2::<f32>::zeros((2, 3)));
    let b = tape.param(Array1::<f32>::zeros(4));
    let bad = g_add(&mut tape, a, b);
    let first = tape.error().unwrap().clone();
    let len = tape.len();
    // The log of a poisoned value, and a second mistake: no-ops, no new error.
    let logged = g_log(&mut tape, bad);
    let again = g_matmul(&mut tape, a, a);
    assert!(logged.is_poisoned() && again.is_poisoned());
    assert_eq!(tape.len(), len, "a poisoned tape appends nothing");
    assert_eq!(tape.error(), Some(&first));
    assert_eq!(tape.backward(again), Err(first));
}

#[test]
fn a_failed_episode_leaves_parameters_and_their_gradients_untouched() {
    let mut tape = Tape::<f32>::new();
    let w = tape.param(Array1::from(vec![1.0f32, 2.0]));
    let mark = tape.mark();
    let x = tape.constant(Array1::from(vec![3.0f32, 4.0]));
    let y = g_mul(&mut tape, w, x);
    let loss = g_sum(&mut tape, y);
    tape.backward(loss).unwrap();
    let grad_before = tape.grad(w).to_owned();
    let wrong = tape.constant(Array1::<f32>::zeros(3));
    let bad = g_add(&mut tape, y, wrong);
    assert!(tape.backward(bad).is_err());
    assert!(tape.backward(loss).is_err(), "a poisoned tape refuses every backward");
    assert_eq!(tape.grad(w), grad_before);
    assert_eq!(tape.value(w), Array1::from(vec![1.0f32, 2.0]).into_dyn());
    tape.reset_to(mark);
    assert!(tape.is_ok(), "reset_to clears an error raised after the mark");
}

#[test]
fn an_error_raised_before_the_mark_survives_reset() {
    let mut tape = Tape::<f32>::new();
    let a = tape.param(Array1::<f32>::zeros(2));
    let b = tape.param(Array1::<f32>::zeros(3));
    g_add(&mut tape, a, b);
    let mark = tape.mark();
    tape.reset_to(mark);
    assert_eq!(tape.error().map(GradError::op), Some("g_add"));
}

#[test]
fn the_error_location_is_the_callers_line() {
    let mut tape = Tape::<f32>::new();
    let a = tape.param(Array1::<f32>::zeros(2));
    let line = line!() + 1;
    let bad = g_matmul(&mut tape, a, a);
    let error = tape.backward(bad).unwrap_err();
    assert_eq!(error.location().file(), "tests/errors.rs");
    assert_eq!(error.location().line(), line);
}

#[test]
fn stale_handles_are_errors_never_reads_of_another_node() {
    let mut tape = Tape::<f32>::new();
    let w = tape.param(Array1::from(vec![1.0f32, 2.0]));
    let mark = tape.mark();
    let old = tape.constant(Array1::from(vec![5.0f32, 6.0]));
    tape.reset_to(mark);
    // A new node now sits at the old handle's index.
    let new = tape.constant(Array1::from(vec![7.0f32, 8.0]));
    assert_eq!(old.index(), new.index());
    assert_eq!(tape.try_value(old).unwrap_err().kind(), &ErrorKind::StaleVar);
    assert!(tape.is_ok(), "try_value reports the error, it does not poison");
    let y = g_add(&mut tape, w, old);
    assert!(y.is_poisoned());
    let error = tape.error().unwrap();
    assert_eq!(error.kind(), &ErrorKind::StaleVar);
    assert!(error.to_string().contains("stale"), "{error}");
    assert_eq!(error.shapes(), &[vec![2]], "the valid input's shape is still named");

    tape.reset_to(mark);
    assert_eq!(tape.value(old).len(), 0, "a stale handle reads nothing");
    let error = tape.error().expect("and the read is not silent: it poisons the tape");
    assert_eq!((error.op(), error.kind()), ("Tape::value", &ErrorKind::StaleVar));
}

#[test]
fn handles_from_another_tape_are_errors() {
    let mut tape = Tape::<f32>::new();
    let mut other = Tape::<f32>::new();
    let mine = tape.param(Array1::<f32>::zeros(2));
    let theirs = other.param(Array1::<f32>::zeros(2));
    assert_eq!(mine.index(), theirs.index());
    let y = g_add(&mut tape, mine, theirs);
    assert!(y.is_poisoned());
    assert_eq!(tape.error().unwrap().kind(), &ErrorKind::ForeignVar);
    assert!(tape.error().unwrap().to_string().contains("different tape"));
    assert_eq!(tape.grad(theirs).len(), 0);
    assert_eq!(tape.try_grad(theirs).unwrap_err().kind(), &ErrorKind::ForeignVar);
    assert!(other.is_ok(), "the other tape is not affected");
}

#[test]
fn a_poisoned_handle_used_after_the_reset_is_an_error() {
    let mut tape = Tape::<f32>::new();
    let mark = tape.mark();
    let a = tape.constant(Array1::<f32>::zeros(2));
    let bad = g_softmax(&mut tape, a, 3);
    tape.reset_to(mark);
    assert!(tape.is_ok());
    let c = tape.constant(Array1::<f32>::zeros(2));
    g_add(&mut tape, c, bad);
    assert_eq!(tape.error().unwrap().kind(), &ErrorKind::PoisonedVar);
}

#[test]
fn foreign_and_stale_marks_poison_without_dropping_anything() {
    let mut tape = Tape::<f32>::new();
    let other = Tape::<f32>::new();
    tape.constant(Array1::<f32>::zeros(2));
    tape.reset_to(other.mark());
    assert_eq!(tape.error().unwrap().kind(), &ErrorKind::ForeignMark);
    assert_eq!(tape.len(), 1);

    let mut tape = Tape::<f32>::new();
    let start = tape.mark();
    tape.constant(Array1::<f32>::zeros(2));
    let later = tape.mark();
    tape.reset_to(start);
    tape.constant(Array1::<f32>::zeros(2));
    tape.reset_to(later);
    assert_eq!(tape.error().unwrap().kind(), &ErrorKind::StaleMark);
    assert_eq!(tape.len(), 1);
}

#[test]
fn scalar_reads_of_tensors_or_bad_handles_are_nan_with_a_reason() {
    let mut tape = Tape::<f32>::new();
    let v = tape.constant(Array3::<f32>::zeros((2, 2, 2)));
    assert!(tape.scalar(v).is_nan());
    let error = tape.try_scalar(v).unwrap_err();
    assert_eq!(error.kind(), &ErrorKind::NotScalar { elements: 8 });
    assert!(error.to_string().contains("[2, 2, 2]"), "{error}");
    let s = tape.constant(2.5f32);
    assert_eq!(tape.try_scalar(s), Ok(2.5));
}

#[test]
fn a_backward_seed_of_the_wrong_shape_is_an_error() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array2::<f32>::zeros((2, 3)));
    let error = tape.backward_with(x, &Array1::<f32>::zeros(3)).unwrap_err();
    assert_eq!(error.kind(), &ErrorKind::ShapeMismatch);
    assert_message(&error, "Tape::backward", &["[2, 3] and [3]"]);
}
