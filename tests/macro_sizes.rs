//! Arithmetic in the sizes of `grad!`'s dims lists (`C / H`, `2 * C`,
//! `T - 1`): the sizes the ops get, and a quotient that is not whole or a
//! difference below zero, known only at run time, poisoning the tape with
//! an error located at its operator.

use grad_runtime::{ErrorKind, Tape, g_permute, g_reshape, g_slice, grad};
use ndarray::Array3;

/// The 1-based column of the first `needle` on `line` of this file.
fn column_of(line: u32, needle: &str) -> u32 {
    let text = include_str!("macro_sizes.rs").lines().nth(line as usize - 1).expect("a line of this file");
    text.find(needle).map(|c| c as u32 + 1).unwrap_or_else(|| panic!("`{needle}` not on line {line}: {text}"))
}

#[test]
fn heads_split_by_a_quotient_of_declared_sizes_equal_the_hand_computed_sizes() {
    let mut tape = Tape::<f32>::new();
    let x0 = Array3::from_shape_fn((2, 3, 12), |(b, t, c)| (b * 100 + t * 10 + c) as f32);
    let x = tape.param(&x0);
    let h = 4;
    let (heads, second) = grad!(tape; x: [B, T, C];
        (permute(reshape(x, [B, T, h, C / h]), [0, 2, 1, 3]), slice(x, [0, 1, C / 3], [B, T, 2 * C / 3])));
    let (b, t, c) = (2, 3, 12);
    let by_hand = {
        let r = g_reshape(&mut tape, x, &[b, t, h, c / h]);
        g_permute(&mut tape, r, &[0, 2, 1, 3])
    };
    let second_by_hand = g_slice(&mut tape, x, &[0, 1, c / 3], &[b, t, 2 * c / 3]);
    assert!(tape.is_ok(), "{:?}", tape.error());
    assert_eq!(tape.value(heads).shape(), &[2, 4, 3, 3]);
    assert_eq!(tape.value(heads), tape.value(by_hand));
    assert_eq!(tape.value(second).shape(), &[2, 2, 4]);
    assert_eq!(tape.value(second), tape.value(second_by_hand));
    let shifted = grad!(tape; x: [B, T, C]; slice(x, [0, 0, 0], [B, T - 1, C + 0]));
    assert_eq!(tape.value(shifted).shape(), &[2, 2, 12]);
}

#[test]
fn an_inexact_quotient_known_at_run_time_poisons_the_tape_at_its_operator() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array3::<f32>::zeros((2, 3, 10)));
    let h = 4;
    let line = line!() + 1;
    let y = grad!(tape; x: [B, T, C]; reshape(x, [B, T, h, C / h]));
    assert!(y.is_poisoned());
    let error = tape.error().cloned().expect("the tape holds an error");
    assert_eq!(error.op(), "grad!");
    assert_eq!(error.kind(), &ErrorKind::SizeArithmetic { size: "C / h", left: 10, op: '/', right: 4 });
    assert_eq!((error.location().line(), error.location().column()), (line, column_of(line, "/ h")));
    assert_eq!(error.location().file(), file!());
    let message = error.to_string();
    assert!(message.starts_with("grad!: the size `C / h` is 10 / 4, not a whole number (10 = 2 * 4 + 2)"), "{message}");
    assert_eq!(tape.backward(y).unwrap_err(), error);

    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array3::<f32>::zeros((2, 3, 10)));
    let zero = 0;
    let y = grad!(tape; x: [B, T, C]; reshape(x, [B, T, C / zero, zero]));
    assert!(y.is_poisoned());
    let message = tape.error().unwrap().to_string();
    assert!(message.starts_with("grad!: the size `C / zero` divides by zero (10 / 0)"), "{message}");
}

#[test]
fn a_difference_below_zero_poisons_the_tape_and_a_later_op_changes_nothing() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array3::<f32>::zeros((2, 0, 10)));
    let len = tape.len();
    let y = grad!(tape; x: [B, T, C]; let s = slice(x, [0, 0, 0], [B, T - 1, C]); s * 2.0);
    assert!(y.is_poisoned());
    assert_eq!(tape.len(), len, "no op recorded a node");
    let error = tape.error().unwrap();
    assert_eq!(error.kind(), &ErrorKind::SizeArithmetic { size: "T - 1", left: 0, op: '-', right: 1 });
    assert!(error.to_string().starts_with("grad!: the size `T - 1` is 0 - 1, below zero"), "{error}");
}
