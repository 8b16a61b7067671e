//! Handles misused through the read API: `value`, `grad` and `scalar` of a
//! stale, foreign or poisoned handle (or `scalar` of a tensor) still
//! return (an empty view, NaN) but never silently: the tape is poisoned,
//! so `is_ok`, the next op, `backward` and an optimizer step report it, and
//! `reset_to` clears it with the episode. Also: the tape is `Send + Sync`,
//! and handle identity does not wear out (u64 ids and generations).

use grad_runtime::*;
use ndarray::{Array1, Array2, array};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn a_tape_is_send_and_sync() {
    assert_send_sync::<Tape<f32>>();
    assert_send_sync::<Tape<f64>>();
    assert_send_sync::<Var>();
    assert_send_sync::<GradError>();
}

/// A tape with one parameter, a mark after it, and a handle made after the
/// mark and then dropped by `reset_to`.
fn tape_with_stale_handle() -> (Tape<f32>, Var, Mark, Var) {
    let mut tape = Tape::<f32>::new();
    let w = tape.param(array![1.0f32, 2.0]);
    let mark = tape.mark();
    let old = tape.constant(array![5.0f32, 6.0]);
    tape.reset_to(mark);
    (tape, w, mark, old)
}

#[test]
fn reading_a_stale_handle_is_reported_by_is_ok_the_next_op_and_backward() {
    let (mut tape, w, mark, old) = tape_with_stale_handle();
    let line = line!() + 1;
    let read = tape.value(old);
    assert_eq!(read.len(), 0, "the signature returns a view: an empty one");
    assert!(!tape.is_ok(), "but the read is not silent");
    let error = tape.error().unwrap().clone();
    assert_eq!((error.op(), error.kind()), ("Tape::value", &ErrorKind::StaleVar));
    assert_eq!((error.location().file(), error.location().line()), ("tests/handles.rs", line));
    assert!(error.to_string().contains("stale"), "{error}");

    let y = g_mul(&mut tape, w, w);
    assert!(y.is_poisoned(), "the next op does nothing");
    assert_eq!(tape.backward(y), Err(error.clone()));
    let mut opt = Sgd::new(0.1);
    opt.add(&tape, w, 0.0).unwrap();
    let refused = opt.step(&mut tape).unwrap_err();
    assert!(matches!(refused.kind(), ErrorKind::TapePoisoned { first } if **first == error));

    tape.reset_to(mark);
    assert!(tape.is_ok(), "the misuse belongs to the episode reset_to dropped");
    let y = g_mul(&mut tape, w, w);
    assert_eq!(tape.value(y), array![1.0f32, 4.0].into_dyn());
}

#[test]
fn grad_and_scalar_of_bad_handles_poison_too() {
    let mut other = Tape::<f32>::new();
    let foreign = other.param(array![1.0f32]);
    type Read = fn(&mut Tape<f32>, Var) -> bool;
    let reads: [(&str, Read); 3] = [
        ("Tape::value", |tp, v| tp.value(v).is_empty()),
        ("Tape::grad", |tp, v| tp.grad(v).is_empty()),
        ("Tape::scalar", |tp, v| tp.scalar(v).is_nan()),
    ];
    for (op, read) in reads {
        let (mut tape, w, mark, old) = tape_with_stale_handle();
        let bad = g_softmax(&mut tape, w, 5);
        tape.reset_to(mark);
        assert!(tape.is_ok());
        for (handle, kind) in
            [(old, ErrorKind::StaleVar), (foreign, ErrorKind::ForeignVar), (bad, ErrorKind::PoisonedVar)]
        {
            assert!(read(&mut tape, handle), "{op}: the empty view or NaN is still returned");
            let error = tape.error().unwrap_or_else(|| panic!("{op} of a {kind:?} handle is silent"));
            assert_eq!((error.op(), error.kind()), (op, &kind));
            tape.reset_to(mark);
        }
    }
}

#[test]
fn scalar_of_a_tensor_is_nan_and_poisons() {
    let mut tape = Tape::<f32>::new();
    let v = tape.constant(Array2::<f32>::zeros((2, 3)));
    assert!(tape.scalar(v).is_nan());
    let error = tape.error().unwrap();
    assert_eq!(error.kind(), &ErrorKind::NotScalar { elements: 6 });
    assert_eq!(error.shapes(), &[vec![2, 3]]);
}

#[test]
fn the_try_forms_report_without_poisoning() {
    let (mut tape, _, _, old) = tape_with_stale_handle();
    assert_eq!(tape.try_value(old).unwrap_err().kind(), &ErrorKind::StaleVar);
    assert_eq!(tape.try_grad(old).unwrap_err().kind(), &ErrorKind::StaleVar);
    assert_eq!(tape.try_scalar(old).unwrap_err().kind(), &ErrorKind::StaleVar);
    assert!(tape.is_ok());
}

#[test]
fn the_first_error_wins_over_a_later_misuse() {
    let (mut tape, w, _, old) = tape_with_stale_handle();
    let bad = g_matmul(&mut tape, w, w); // 1-D operands: an error
    let first = tape.error().unwrap().clone();
    assert_eq!(tape.value(old).len(), 0);
    assert_eq!(tape.error(), Some(&first));
    assert_eq!(tape.backward(bad), Err(first));
}

#[test]
fn a_misuse_before_the_mark_survives_reset_as_an_op_error_does() {
    let (tape, _, _, old) = tape_with_stale_handle();
    let _ = tape.value(old);
    let mut tape = tape;
    let after = tape.mark();
    tape.reset_to(after);
    assert_eq!(tape.error().map(GradError::op), Some("Tape::value"));
}

#[test]
fn handles_stay_distinct_across_many_tapes_and_resets() {
    // u64 ids and generations: a handle never matches a later node, and
    // these counters would need 584 years at one per nanosecond to wrap.
    let mut tape = Tape::<f32>::new();
    let keep = tape.param(Array1::<f32>::ones(1));
    let mark = tape.mark();
    let mut previous = tape.constant(Array1::<f32>::zeros(1));
    for _ in 0..10_000 {
        tape.reset_to(mark);
        let next = tape.constant(Array1::<f32>::zeros(1));
        assert_eq!(next.index(), previous.index());
        assert_ne!(next, previous);
        assert_eq!(tape.try_value(previous).unwrap_err().kind(), &ErrorKind::StaleVar);
        previous = next;
    }
    assert_eq!(tape.try_value(keep).map(|v| v.len()), Ok(1));
    let ids: std::collections::HashSet<Var> = (0..1000).map(|_| Tape::<f32>::new().constant(0.0f32)).collect();
    assert_eq!(ids.len(), 1000, "every tape has its own id");
    assert!(std::mem::size_of::<Var>() <= 24, "a Var stays a small Copy handle");
}
