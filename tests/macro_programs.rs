//! Random `grad!` programs against the hand-written `g_*` calls they stand
//! for: the same values, the same gradients (bit for bit) and the same
//! nodes. The programs are written by `build.rs` (a proc macro runs at
//! compile time): operators with NumPy's precedence and the fewest
//! parentheses, scalars on either side, unary minus, `@`, built-ins and
//! their method forms, `let` bindings and fan-out, half of them with
//! declared shapes. `GRAD_PROPTEST_SCALE=100` builds 100 times as many.

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn};

pub struct Program {
    source: &'static str,
    dsl: fn(&mut Tape<f64>, [Var; 3]) -> Var,
    hand: fn(&mut Tape<f64>, [Var; 3]) -> Var,
}

include!(concat!(env!("OUT_DIR"), "/macro_programs.rs"));

/// Runs a program on parameters of `n`: its nodes, its output and every
/// input's gradient of the output's sum, as bits.
fn run(program: fn(&mut Tape<f64>, [Var; 3]) -> Var, n: usize, seed: u64) -> (usize, Vec<u64>, Vec<u64>) {
    let mut rng = Rng::new(seed);
    let mut tape = Tape::<f64>::new();
    let mut input = |shape: &[usize]| tape.param(ArrayD::from_shape_fn(IxDyn(shape), |_| rng.normal()));
    let inputs = [input(&[n, n]), input(&[n, n]), input(&[n])];
    let out = program(&mut tape, inputs);
    assert!(tape.is_ok(), "{:?}", tape.error());
    let nodes = tape.len();
    let values: Vec<u64> = tape.value(out).iter().map(|v| v.to_bits()).collect();
    let loss = g_sum(&mut tape, out);
    tape.backward(loss).expect("a valid program");
    let grads = inputs.iter().flat_map(|&v| tape.grad(v).iter().map(|g| g.to_bits()).collect::<Vec<_>>()).collect();
    (nodes, values, grads)
}

#[test]
fn random_grad_programs_equal_their_hand_written_calls() {
    for (k, program) in PROGRAMS.iter().enumerate() {
        for n in [1, 3] {
            let seed = k as u64 * 31 + n as u64;
            let (dsl, hand) = (run(program.dsl, n, seed), run(program.hand, n, seed));
            assert_eq!(dsl.0, hand.0, "program {k} (N = {n}), node count: grad!({})", program.source);
            assert_eq!(dsl.1, hand.1, "program {k} (N = {n}), values: grad!({})", program.source);
            assert_eq!(dsl.2, hand.2, "program {k} (N = {n}), gradients: grad!({})", program.source);
        }
    }
    println!("{} random grad! programs equal their hand-written calls", PROGRAMS.len());
}
