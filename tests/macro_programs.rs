//! Random `grad!` programs against the hand-written `g_*` calls they stand
//! for: with `#[nofuse]`, the same values, the same gradients (bit for bit)
//! and the same nodes; fused, the same values (a NaN's sign aside), no more
//! nodes, and gradients within the fusion bound. The programs are written by `build.rs` (a proc macro runs at
//! compile time): operators with NumPy's precedence and the fewest
//! parentheses, scalars on either side, unary minus, `@`, built-ins and
//! their method forms, `let` bindings and fan-out, half of them with
//! declared shapes. `GRAD_PROPTEST_SCALE=10` builds 10 times as many,
//! `GRAD_PROPTEST_BATCH=b` other ones (the guide,
//! `grad-runtime/src/guide/reliability.md`).

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn};

pub struct Program {
    source: &'static str,
    /// The block with `#[nofuse]`: every op a node, as hand-written.
    dsl: fn(&mut Tape<f64>, [Var; 3]) -> Var,
    /// The block as written: elementwise chains fused.
    fused: fn(&mut Tape<f64>, [Var; 3]) -> Var,
    hand: fn(&mut Tape<f64>, [Var; 3]) -> Var,
}

include!(concat!(env!("OUT_DIR"), "/macro_programs.rs"));

/// Runs a program on parameters of `n`: its nodes, its output and every
/// input's gradient of the output's sum, as bits.
fn run(program: fn(&mut Tape<f64>, [Var; 3]) -> Var, n: usize, seed: u64) -> (usize, Vec<u64>, Vec<Vec<u64>>) {
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
    let grads = inputs.iter().map(|&v| tape.grad(v).iter().map(|g| g.to_bits()).collect()).collect();
    (nodes, values, grads)
}

/// The relative agreement a fused gradient may also meet: far above the
/// roundings the batches of the 100x run met (at most 6 ulps, 1.3e-15,
/// where `x1` is read three times in `x2 * x1 / x1 @ x1`), far below the
/// error of a wrong derivative.
const RELATIVE: f64 = 1e-12;

/// A fused region's gradients: bit for bit where each input is read once,
/// else NaN where the hand-written one is (a NaN's sign may differ with the
/// order of operations), or within 4 ulps of `scale`, the largest value or
/// gradient element of the program, or within [`RELATIVE`] of themselves.
/// Contributions summed in another order differ by a rounding of the
/// contributions (the manual's fan-out bound), which where they cancel, as
/// in `x2 / (x2 * x1)`, is many ulps of their sum; a wrong derivative is
/// off by far more.
fn within_fusion_bound(fused: &[u64], hand: &[u64], scale: f64, what: &str) {
    let (f, h): (Vec<f64>, Vec<f64>) =
        (fused.iter().map(|&b| f64::from_bits(b)).collect(), hand.iter().map(|&b| f64::from_bits(b)).collect());
    let ulp = if scale > 0.0 { f64::EPSILON * scale } else { f64::MIN_POSITIVE };
    for (i, (a, b)) in f.iter().zip(&h).enumerate() {
        assert!(
            (a - b).abs() <= (4.0 * ulp).max(RELATIVE * a.abs().max(b.abs()))
                || a.to_bits() == b.to_bits()
                || (a.is_nan() && b.is_nan()),
            "{what}: element {i}: fused {a:e}, hand {b:e}"
        );
    }
}

/// The largest magnitude among `bits` read as f64.
fn largest(bits: &[u64]) -> f64 {
    bits.iter().fold(0.0f64, |m, &b| m.max(f64::from_bits(b).abs()))
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
            let fused = run(program.fused, n, seed);
            assert!(fused.0 <= hand.0, "program {k} (N = {n}), fused node count: grad!({})", program.source);
            let same = |a: &u64, b: &u64| a == b || (f64::from_bits(*a).is_nan() && f64::from_bits(*b).is_nan());
            let values_agree = fused.1.len() == hand.1.len() && fused.1.iter().zip(&hand.1).all(|(a, b)| same(a, b));
            assert!(values_agree, "program {k} (N = {n}), fused values: grad!({})", program.source);
            let scale = hand.2.iter().map(|g| largest(g)).fold(largest(&hand.1), f64::max);
            for (input, (f, h)) in fused.2.iter().zip(&hand.2).enumerate() {
                let what = format!("program {k} (N = {n}), input {input}: grad!({})", program.source);
                within_fusion_bound(f, h, scale, &what);
            }
        }
    }
    println!("{} random grad! programs equal their hand-written calls", PROGRAMS.len());
}
