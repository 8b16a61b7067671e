//! `ops/dropout.rs`: inverted dropout, a composite of a mask and `g_mul`.

use grad_runtime::*;

use crate::common::{Rng as TestRng, check_finite_differences};

#[test]
fn dropout_is_reproducible_differentiable_and_the_identity_in_eval() {
    let x = TestRng::new(48).normal_array(&[4, 6]);
    let program = |tp: &mut Tape<f64>, v: &[Var]| g_dropout(tp, v[0], 0.3, &mut Rng::new(9), true);
    check_finite_differences("g_dropout", &program, std::slice::from_ref(&x), 8);

    let mut tape = Tape::<f64>::new();
    let v = tape.param(&x);
    let y = g_dropout(&mut tape, v, 0.5, &mut Rng::new(1), true);
    let again = g_dropout(&mut tape, v, 0.5, &mut Rng::new(1), true);
    assert_eq!(tape.value(y), tape.value(again), "same seed, same mask");
    let loss = g_sum(&mut tape, y);
    tape.backward(loss).unwrap();
    let mask = tape.value(y).to_owned() / &x;
    assert!(mask.iter().all(|&m| m == 0.0 || m == 2.0), "kept elements are scaled by 1/(1-p)");
    assert_eq!(tape.grad(v), mask, "the gradient is the mask itself");

    assert_eq!(g_dropout(&mut tape, v, 0.5, &mut Rng::new(1), false), v, "eval mode is the identity");
    g_dropout(&mut tape, v, 1.0, &mut Rng::new(1), true);
    assert!(tape.error().unwrap().to_string().contains("p = 1 is invalid: expected a probability in [0, 1)"));
}
