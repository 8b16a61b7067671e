//! No op panics on user input: thousands of random calls (random shapes,
//! axes, slice bounds, reshape targets, indices, handles from other tapes
//! and from before a reset) must each append a node or record an error,
//! and backward must then succeed or return that error.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::Rng;
use grad_runtime::*;
use ndarray::{ArrayD, IxDyn};

fn random_shape(rng: &mut Rng) -> Vec<usize> {
    let rank = (rng.uniform() * 4.0) as usize;
    (0..rank).map(|_| (rng.uniform() * 4.0) as usize).collect()
}

fn small(rng: &mut Rng, below: usize) -> usize {
    (rng.uniform() * below as f64) as usize
}

fn axis(rng: &mut Rng) -> isize {
    small(rng, 9) as isize - 4
}

/// One random op on random live (or stale, or foreign) handles.
fn random_op(rng: &mut Rng, tape: &mut Tape<f64>, vars: &[Var], foreign: Var) -> Var {
    let pick = |rng: &mut Rng| if small(rng, 50) == 0 { foreign } else { vars[small(rng, vars.len())] };
    let (a, b) = (pick(rng), pick(rng));
    let s = rng.normal();
    let list = |rng: &mut Rng| (0..small(rng, 4)).map(|_| small(rng, 5)).collect::<Vec<usize>>();
    match small(rng, 36) {
        0 => g_add(tape, a, b),
        1 => g_sub(tape, a, b),
        2 => g_mul(tape, a, b),
        3 => g_div(tape, a, b),
        4 => g_neg(tape, a),
        5 => g_adds(tape, a, s),
        6 => g_muls(tape, a, s),
        7 => g_relu(tape, a),
        8 => g_sigmoid(tape, a),
        9 => g_tanh(tape, a),
        10 => g_exp(tape, a),
        11 => g_log(tape, a),
        12 => g_sqrt(tape, a),
        13 => g_sum(tape, a),
        14 => g_mean(tape, a),
        15 => g_mse(tape, a, b),
        16 => g_matmul(tape, a, b),
        17 => g_bmm(tape, a, b),
        18 => g_transpose(tape, a),
        19 => g_reshape(tape, a, &list(rng)),
        20 => g_softmax(tape, a, axis(rng)),
        21 => g_slice(tape, a, &list(rng), &list(rng)),
        22 => g_concat(tape, a, b, small(rng, 4)),
        23 => g_sum_axis(tape, a, axis(rng), small(rng, 2) == 0),
        24 => g_mean_axis(tape, a, axis(rng), small(rng, 2) == 0),
        25 => g_max_axis(tape, a, axis(rng), small(rng, 2) == 0),
        26 => g_log_softmax(tape, a, axis(rng)),
        27 => g_cross_entropy(tape, a, &list(rng)),
        28 => g_pow(tape, a, s),
        29 => g_clamp(tape, a, s, rng.normal()),
        30 => g_embedding(tape, a, &list(rng)),
        31 => g_layer_norm(tape, a, b, pick(rng), s.abs()),
        32 => g_dropout(tape, a, rng.uniform() * 1.2, &mut grad_runtime::Rng::new(1), true),
        33 => g_gelu(tape, a),
        34 => g_softplus(tape, a),
        _ => g_leaky_relu(tape, a, s),
    }
}

#[test]
fn thousands_of_random_calls_never_panic() {
    let mut rng = Rng::new(99);
    let mut other = Tape::<f64>::new();
    let foreign = other.param(ArrayD::zeros(IxDyn(&[2])));
    let (mut appended, mut refused) = (0, 0);
    for episode in 0..400 {
        let mut tape = Tape::<f64>::new();
        let mut vars: Vec<Var> = (0..3)
            .map(|_| {
                let shape = random_shape(&mut rng);
                tape.param(rng.normal_array(&shape))
            })
            .collect();
        let mark = tape.mark();
        let stale = tape.constant(ArrayD::zeros(IxDyn(&[1])));
        tape.reset_to(mark);
        vars.push(stale);
        for _ in 0..15 {
            let result = catch_unwind(AssertUnwindSafe(|| random_op(&mut rng, &mut tape, &vars, foreign)));
            let Ok(v) = result else { panic!("episode {episode}: an op panicked") };
            if v.is_poisoned() {
                refused += 1;
                tape.reset_to(mark);
                vars.truncate(4); // the parameters and the stale handle
            } else {
                appended += 1;
                vars.push(v);
            }
        }
        let last = *vars.last().unwrap();
        let outcome = catch_unwind(AssertUnwindSafe(|| tape.backward(last).map(|()| tape.grad(vars[0]).len())));
        assert!(outcome.is_ok(), "episode {episode}: backward panicked");
    }
    println!("{appended} ops appended a node, {refused} were refused with an error");
    assert!(appended > 1000 && refused > 1000, "both paths exercised: {appended} / {refused}");
}
