//! No op panics or hangs on any input: thousands of random calls of every
//! op (random shapes with dims of 0, 1, 2^40 and isize::MAX, reshape targets
//! and slice bounds up to usize::MAX whose products overflow, axes and
//! indices far out of range, NaN and infinite scalars, handles from other
//! tapes and from before a reset, anomaly mode on and off) must each append
//! a node or record an error; backward and an optimizer step must then
//! succeed or return an error.

mod common;

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Rng, within};
use grad_runtime::dsl::OP_FUNCTIONS;
use grad_runtime::*;
use ndarray::{ArrayD, IxDyn};

const HUGE: usize = isize::MAX as usize;

fn small(rng: &mut Rng, below: usize) -> usize {
    (rng.uniform() * below as f64) as usize
}

/// Mostly a small dim; sometimes 0 or a huge one.
fn dim(rng: &mut Rng) -> usize {
    match small(rng, 24) {
        0 => HUGE,
        1 => 1 << 40,
        2 => 1 << 33,
        n => n % 5,
    }
}

/// A shape an ndarray array can have: a huge dim comes with a 0 (or is cut
/// to 2) so the array holds few elements, as any array in memory does.
fn random_shape(rng: &mut Rng) -> Vec<usize> {
    let rank = small(rng, 5);
    let mut shape: Vec<usize> = (0..rank).map(|_| dim(rng)).collect();
    let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    if elements.is_none_or(|n| n > 256) {
        let at = small(rng, rank);
        shape[at] = 0;
    }
    while shape.iter().filter(|&&d| d != 0).try_fold(1usize, |n, &d| n.checked_mul(d)).is_none_or(|n| n > HUGE) {
        let largest = (0..rank).max_by_key(|&i| shape[i]).unwrap_or(0);
        shape[largest] = 2;
    }
    shape
}

/// A number for a reshape target, a slice bound, an index: small, or extreme.
fn number(rng: &mut Rng) -> usize {
    match small(rng, 16) {
        0 => usize::MAX,
        1 => HUGE,
        2 => HUGE + 1,
        3 => 1 << 32,
        n => n % 5,
    }
}

fn list(rng: &mut Rng) -> Vec<usize> {
    (0..small(rng, 4)).map(|_| number(rng)).collect()
}

/// Class targets or ids: a `list`, shaped `[2, 2]` when it has 4 entries
/// (and `[1, 3]` when it has 3), drawing what `list` draws.
fn indices(rng: &mut Rng) -> ArrayD<usize> {
    let flat = list(rng);
    let shape = match flat.len() {
        4 => vec![2, 2],
        3 => vec![1, 3],
        n => vec![n],
    };
    ArrayD::from_shape_vec(shape, flat).expect("the shape has the list's length")
}

/// A window, stride, padding or dilation: two numbers, extreme ones included.
fn pair(rng: &mut Rng) -> [usize; 2] {
    [number(rng), number(rng)]
}

/// A small array of random shape (dims below 4) with elements from `element`:
/// gather indices, masks.
fn small_array<E>(rng: &mut Rng, mut element: impl FnMut(&mut Rng) -> E) -> ArrayD<E> {
    let shape: Vec<usize> = (0..small(rng, 4)).map(|_| small(rng, 4)).collect();
    let len = shape.iter().product();
    let data = (0..len).map(|_| element(rng)).collect();
    ArrayD::from_shape_vec(IxDyn(&shape), data).expect("the data fills the shape")
}

fn axis(rng: &mut Rng) -> isize {
    match small(rng, 20) {
        0 => isize::MIN,
        1 => isize::MAX,
        n => n as isize % 9 - 4,
    }
}

fn scalar(rng: &mut Rng) -> f64 {
    match small(rng, 20) {
        0 => f64::NAN,
        1 => f64::INFINITY,
        2 => -1e308,
        3 => 0.0,
        _ => rng.normal(),
    }
}

/// Calls the op `name` (one of `OP_FUNCTIONS`) on random arguments; `None`
/// for a name this test does not know, which fails the coverage check.
fn call_op(name: &str, rng: &mut Rng, tape: &mut Tape<f64>, pick: &mut dyn FnMut(&mut Rng) -> Var) -> Option<Var> {
    let (a, b) = (pick(rng), pick(rng));
    let s = scalar(rng);
    Some(match name {
        "g_add" => g_add(tape, a, b),
        "g_sub" => g_sub(tape, a, b),
        "g_mul" => g_mul(tape, a, b),
        "g_div" => g_div(tape, a, b),
        "g_neg" => g_neg(tape, a),
        "g_adds" => g_adds(tape, a, s),
        "g_muls" => g_muls(tape, a, s),
        "g_relu" => g_relu(tape, a),
        "g_sigmoid" => g_sigmoid(tape, a),
        "g_tanh" => g_tanh(tape, a),
        "g_exp" => g_exp(tape, a),
        "g_log" => g_log(tape, a),
        "g_sqrt" => g_sqrt(tape, a),
        "g_pow" => g_pow(tape, a, s),
        "g_abs" => g_abs(tape, a),
        "g_leaky_relu" => g_leaky_relu(tape, a, s),
        "g_gelu" => g_gelu(tape, a),
        "g_silu" => g_silu(tape, a),
        "g_softplus" => g_softplus(tape, a),
        "g_clamp" => g_clamp(tape, a, s, scalar(rng)),
        "g_sum" => g_sum(tape, a),
        "g_mean" => g_mean(tape, a),
        "g_sum_axis" => g_sum_axis(tape, a, axis(rng), small(rng, 2) == 0),
        "g_mean_axis" => g_mean_axis(tape, a, axis(rng), small(rng, 2) == 0),
        "g_max_axis" => g_max_axis(tape, a, axis(rng), small(rng, 2) == 0),
        "g_min_axis" => g_min_axis(tape, a, axis(rng), small(rng, 2) == 0),
        "argmax" => {
            let _ = argmax(tape, a, axis(rng));
            a
        }
        "g_matmul" => g_matmul(tape, a, b),
        "g_bmm" => g_bmm(tape, a, b),
        "g_transpose" => g_transpose(tape, a),
        "g_reshape" => g_reshape(tape, a, &list(rng)),
        "g_slice" => g_slice(tape, a, &list(rng), &list(rng)),
        "g_concat" => g_concat(tape, a, b, number(rng)),
        "g_softmax" => g_softmax(tape, a, axis(rng)),
        "g_log_softmax" => g_log_softmax(tape, a, axis(rng)),
        "g_mse" => g_mse(tape, a, b),
        "g_cross_entropy" => g_cross_entropy(tape, a, &indices(rng)),
        "g_embedding" => g_embedding(tape, a, &indices(rng)),
        "g_layer_norm" => {
            let beta = pick(rng);
            g_layer_norm(tape, a, b, beta, s.abs())
        }
        "g_dropout" => g_dropout(tape, a, rng.uniform() * 1.2, &mut grad_runtime::Rng::new(1), small(rng, 4) > 0),
        "g_flatten" => g_flatten(tape, a, axis(rng)),
        "g_conv2d" => {
            let bias = (small(rng, 2) == 0).then(|| pick(rng));
            g_conv2d(tape, a, b, bias, pair(rng), pair(rng), pair(rng), number(rng))
        }
        "g_max_pool2d" => g_max_pool2d(tape, a, pair(rng), pair(rng), pair(rng)),
        "g_avg_pool2d" => g_avg_pool2d(tape, a, pair(rng), pair(rng), pair(rng)),
        "g_gather" => g_gather(tape, a, axis(rng), &small_array(rng, number)),
        "g_index_select" => g_index_select(tape, a, axis(rng), &list(rng)),
        "g_where" => g_where(tape, &small_array(rng, |rng| small(rng, 2) == 0), a, b),
        "g_masked_fill" => g_masked_fill(tape, a, &small_array(rng, |rng| small(rng, 2) == 0), s),
        "g_cumsum" => g_cumsum(tape, a, axis(rng)),
        "g_batch_norm" => {
            let (mean, var, beta) = (pick(rng), pick(rng), pick(rng));
            g_batch_norm(tape, a, mean, var, b, beta, small(rng, 2) == 0, rng.uniform() * 1.2, s.abs())
        }
        "g_group_norm" => {
            let beta = pick(rng);
            g_group_norm(tape, a, number(rng), b, beta, s.abs())
        }
        "g_detach" => g_detach(tape, a),
        "g_permute" => g_permute(tape, a, &list(rng)),
        "g_attention" => {
            let c = pick(rng);
            g_attention(tape, a, b, c, small(rng, 2) == 0)
        }
        "g_attention_packed" => g_attention_packed(tape, a, number(rng), small(rng, 2) == 0),
        "g_custom" => match small(rng, 3) {
            0 => common::custom_ops::stable_softplus(tape, a),
            1 => g_custom(tape, &common::custom_ops::CheckedLog, &[a]),
            _ => {
                let c = pick(rng);
                common::custom_ops::mul_add(tape, a, b, c)
            }
        },
        "g_checkpoint" => g_checkpoint(tape, move |t| g_mul(t, a, b)),
        "g_grad" => {
            // Of a scalar made from `a` (or of `a` itself, perhaps not one).
            let y = if small(rng, 3) == 0 { a } else { g_sum(tape, a) };
            g_grad(tape, y, b)
        }
        _ => return None,
    })
}

#[test]
fn every_exported_op_is_exercised() {
    let mut rng = Rng::new(1);
    let mut tape = Tape::<f64>::new();
    let x = tape.param(ArrayD::zeros(IxDyn(&[2, 2])));
    let unknown: Vec<&str> =
        OP_FUNCTIONS.iter().copied().filter(|name| call_op(name, &mut rng, &mut tape, &mut |_| x).is_none()).collect();
    assert!(unknown.is_empty(), "add these ops to call_op: {unknown:?}");
}

#[test]
fn thousands_of_random_calls_at_extreme_sizes_never_panic_or_hang() {
    // The op under way, so a hang names it.
    let progress = Arc::new(Mutex::new(String::new()));
    let watched = Arc::clone(&progress);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        within(Duration::from_secs(120), "the random calls", move || random_calls(&watched))
    }));
    if let Err(panic) = outcome {
        eprintln!("last call started: {}", progress.lock().unwrap_or_else(|e| e.into_inner()));
        std::panic::resume_unwind(panic);
    }
}

fn random_calls(progress: &Mutex<String>) {
    let mut rng = Rng::new(99);
    let mut other = Tape::<f64>::new();
    let foreign = other.param(ArrayD::zeros(IxDyn(&[2])));
    let (mut appended, mut refused, mut too_large, mut non_finite) = (0, 0, 0, 0);
    let mut called = BTreeSet::new();
    for episode in 0..800 {
        let mut tape = Tape::<f64>::new();
        tape.set_detect_anomaly(episode % 3 == 0);
        let params: Vec<Var> = (0..3)
            .map(|_| {
                let shape = random_shape(&mut rng);
                tape.param(rng.normal_array(&shape))
            })
            .collect();
        let mut opt = Adam::new(1e-3);
        for &p in &params {
            opt.add(&tape, p, 1e-4).expect("a parameter");
        }
        let mut vars = params.clone();
        let mark = tape.mark();
        let stale = tape.constant(ArrayD::zeros(IxDyn(&[1])));
        tape.reset_to(mark);
        vars.push(stale);
        for _ in 0..20 {
            let name = OP_FUNCTIONS[small(&mut rng, OP_FUNCTIONS.len())];
            called.insert(name);
            *progress.lock().unwrap() = format!("episode {episode}: {name} on {tape:?}");
            let mut pick = |rng: &mut Rng| if small(rng, 50) == 0 { foreign } else { vars[small(rng, vars.len())] };
            let result = catch_unwind(AssertUnwindSafe(|| call_op(name, &mut rng, &mut tape, &mut pick)));
            let Ok(Some(v)) = result else { panic!("episode {episode}: {name} panicked") };
            if v.is_poisoned() {
                refused += 1;
                match tape.error().map(GradError::kind) {
                    Some(ErrorKind::TooLarge { .. }) => too_large += 1,
                    Some(ErrorKind::NonFinite { .. }) => non_finite += 1,
                    _ => {}
                }
                tape.reset_to(mark);
                vars.truncate(4); // the parameters and the stale handle
            } else {
                appended += 1;
                vars.push(v);
            }
        }
        let last = *vars.last().unwrap();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if tape.backward(last).is_ok() {
                let _ = tape.grad(vars[0]).len();
                let _ = opt.step(&mut tape);
            }
        }));
        assert!(outcome.is_ok(), "episode {episode}: backward or step panicked");
    }
    println!("{appended} ops appended a node, {refused} were refused ({too_large} too large, {non_finite} non-finite)");
    assert!(appended > 3000 && refused > 3000, "both paths exercised: {appended} / {refused}");
    assert!(too_large > 10 && non_finite > 10, "the size and anomaly checks exercised: {too_large} / {non_finite}");
    assert_eq!(called.len(), OP_FUNCTIONS.len(), "every op called");
}
