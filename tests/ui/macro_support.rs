//! Shared by the `grad!` pass programs: run a program through the macro and
//! by hand on fresh tapes, and compare outputs and gradients bit for bit.
#![allow(dead_code)] // each program uses a subset

use grad_runtime::{Float, Tape, Var};
use ndarray::ArrayD;

/// Runs `program` on a fresh tape whose parameters are `inputs`, then
/// backward from its output (summed if not a scalar). Returns the output
/// and each input's gradient; panics if the tape reports an error.
pub fn run<T: Float>(inputs: &[ArrayD<T>], program: impl Fn(&mut Tape<T>, &[Var]) -> Var) -> (ArrayD<T>, Vec<ArrayD<T>>) {
    let mut tape = Tape::<T>::new();
    let vars: Vec<Var> = inputs.iter().map(|x| tape.param(x)).collect();
    let out = program(&mut tape, &vars);
    tape.backward(out).unwrap_or_else(|e| panic!("the program failed: {e}"));
    let value = tape.value(out).to_owned();
    (value, vars.iter().map(|&v| tape.grad(v).to_owned()).collect())
}

/// Asserts equal shapes and bit-identical elements.
pub fn assert_bits<T: Float>(what: &str, got: &ArrayD<T>, want: &ArrayD<T>) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(Float::to_f64(*g).to_bits(), Float::to_f64(*w).to_bits(), "{what}: element {i}: {g} vs {w}");
    }
}

/// Asserts that `dsl` and `by_hand` compute the same output and the same
/// gradient of every input, bit for bit.
pub fn assert_same<T: Float>(
    name: &str,
    inputs: &[ArrayD<T>],
    dsl: impl Fn(&mut Tape<T>, &[Var]) -> Var,
    by_hand: impl Fn(&mut Tape<T>, &[Var]) -> Var,
) {
    let (value, grads) = run(inputs, dsl);
    let (want_value, want_grads) = run(inputs, by_hand);
    assert_bits(&format!("{name}: value"), &value, &want_value);
    for (k, (g, w)) in grads.iter().zip(&want_grads).enumerate() {
        assert_bits(&format!("{name}: gradient of input {k}"), g, w);
    }
}

/// A deterministic array of `shape` with values in about [-1, 1], none 0.
pub fn data<T: Float>(shape: &[usize], seed: u64) -> ArrayD<T> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    ArrayD::from_shape_fn(shape, |_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
        T::from_f64(if unit < 0.5 { unit - 0.55 } else { unit - 0.45 } * 2.0)
    })
}
