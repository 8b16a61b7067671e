//! Gradient slots keep their buffers through `reset_to` (a rebuilt graph
//! writes its first contributions there), but never their values: a
//! rebuilt graph of other shapes, a smaller one, or a node backward does
//! not reach reads exactly as on a fresh tape.

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::allocations_in;
use grad_runtime::*;
use ndarray::{Array1, ArrayD};

/// `sum(tanh(x * w + 0.5) * x)` over the first `n` elements of `x`, with
/// `w` of the same length: every backward rule's first contribution lands
/// in a slot (a product with both operands wanted, a scalar, a unary, a
/// reduction).
fn loss(tape: &mut Tape<f64>, x: Var, w: Var, n: usize) -> (Var, Var) {
    let head = g_slice(tape, x, &[0], &[n]);
    let xw = g_mul(tape, head, w);
    let shifted = g_adds(tape, xw, 0.5);
    let t = g_tanh(tape, shifted);
    let tx = g_mul(tape, t, head);
    (g_sum(tape, tx), t)
}

fn input(n: usize) -> Array1<f64> {
    Array1::from_shape_fn(n, |i| (i as f64 * 0.37).sin())
}

/// The gradients of `x`, `w` and the intermediate `t` on a fresh tape.
fn fresh(n: usize) -> [ArrayD<f64>; 3] {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(input(8));
    let w = tape.param(input(n) * 0.5);
    let (loss, t) = loss(&mut tape, x, w, n);
    tape.backward(loss).unwrap();
    [x, w, t].map(|v| tape.grad(v).to_owned())
}

#[test]
fn graphs_rebuilt_after_a_reset_with_other_shapes_get_a_fresh_tapes_gradients() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(input(8));
    let mark = tape.mark();
    // Longer, shorter and equal lengths at the same node positions: each
    // slot restarts with its stale buffer or swaps it for another size.
    for n in [8, 3, 3, 8, 5, 8, 1] {
        let w = tape.param(input(n) * 0.5);
        let (loss, t) = loss(&mut tape, x, w, n);
        tape.backward(loss).unwrap();
        let got = [x, w, t].map(|v| tape.grad(v).to_owned());
        assert_eq!(got, fresh(n), "n = {n}");
        tape.reset_to(mark);
        assert!(tape.grad(x).iter().all(|&g| g == 0.0), "reset_to zeroes the parameters' gradients");
    }
}

#[test]
fn a_node_backward_does_not_reach_reads_zeros_not_a_stale_gradient() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(input(4));
    let mark = tape.mark();
    let y = g_muls(&mut tape, x, 3.0);
    let loss = g_sum(&mut tape, y);
    tape.backward(loss).unwrap();
    assert_eq!(tape.grad(y).sum(), 4.0);
    tape.reset_to(mark);
    // The same positions, but `y` is now a constant: no gradient reaches it.
    let y = tape.constant(input(4));
    let z = g_mul(&mut tape, y, x);
    let loss = g_sum(&mut tape, z);
    assert!(tape.grad(y).iter().all(|&g| g == 0.0), "before backward");
    tape.backward(loss).unwrap();
    assert!(tape.grad(y).iter().all(|&g| g == 0.0), "after backward");
    assert_eq!(tape.grad(x).to_owned(), input(4).into_dyn());
}

#[test]
fn intermediate_gradients_are_recomputed_and_parameters_accumulate() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(input(8));
    let w = tape.param(input(8) * 0.5);
    let (loss, t) = loss(&mut tape, x, w, 8);
    tape.backward(loss).unwrap();
    tape.backward(loss).unwrap();
    let [gx, gw, gt] = fresh(8);
    assert_eq!(tape.grad(x).to_owned(), &gx * 2.0);
    assert_eq!(tape.grad(w).to_owned(), &gw * 2.0);
    assert_eq!(tape.grad(t).to_owned(), gt);
}

#[test]
fn alternating_graph_sizes_reach_a_steady_state_without_allocating() {
    // Slots that trade buffers of two sizes at every reset, and slots
    // past a smaller graph handed back: memory stays bounded.
    let mut tape = Tape::<f64>::new();
    let x = tape.param(input(8));
    let mark = tape.mark();
    let weights = [input(3), input(8)];
    let mut step = |n: usize, links: usize| {
        let w = &weights[usize::from(n == 8)];
        allocations_in(|| {
            let w = tape.param(w);
            let (mut loss, _) = loss(&mut tape, x, w, n);
            for _ in 0..links {
                loss = g_muls(&mut tape, loss, 0.5);
            }
            tape.backward(loss).unwrap();
            tape.reset_to(mark);
        })
        .0
    };
    let counts: Vec<usize> = (0..12).map(|k| if k % 2 == 0 { step(8, 50) } else { step(3, 0) }).collect();
    assert_eq!(&counts[4..], [0; 8], "{counts:?}");
}

#[test]
fn without_intermediate_gradients_parameters_get_the_same_bits_and_reading_one_is_an_error() {
    let mut tape = Tape::<f64>::new();
    tape.set_keep_intermediate_grads(false);
    assert!(!tape.keeps_intermediate_grads());
    let x = tape.param(input(8));
    let mark = tape.mark();
    for n in [8, 3, 8] {
        let w = tape.param(input(n) * 0.5);
        let (loss, t) = loss(&mut tape, x, w, n);
        tape.backward(loss).unwrap();
        // Only the parameters' gradient buffers are left: x's and w's.
        let kept: usize = [x, w].iter().map(|&v| tape.grad(v).len() * 8).sum();
        assert_eq!(tape.memory().grads, kept, "n = {n}");
        let [gx, gw, _] = fresh(n);
        assert_eq!((tape.grad(x).to_owned(), tape.grad(w).to_owned()), (gx, gw), "n = {n}");
        let error = tape.try_grad(t).unwrap_err();
        assert_eq!((error.op(), error.kind()), ("Tape::grad", &ErrorKind::GradNotKept));
        assert!(tape.is_ok(), "try_grad does not poison");
        let _ = tape.grad(t);
        assert_eq!(tape.error().map(GradError::kind), Some(&ErrorKind::GradNotKept), "grad does");
        tape.reset_to(mark);
    }
}
