//! The minibatch pattern: parameters registered once, a mark, then many
//! steps of build / backward / reset_to. Every step must see the same
//! parameters, fresh gradients, and a tape back at the mark.

mod common;

use common::Rng;
use grad_runtime::*;
use ndarray::{Array2, ArrayD};

struct Model {
    w: ArrayD<f64>,
    b: ArrayD<f64>,
}

/// One step's loss on `tape`: mse(relu(x @ w + b), t).
fn loss(tape: &mut Tape<f64>, w: Var, b: Var, x: &ArrayD<f64>, t: &ArrayD<f64>) -> Var {
    let x = tape.constant(x);
    let t = tape.constant(t);
    let xw = g_matmul(tape, x, w);
    let z = g_add(tape, xw, b);
    let y = g_relu(tape, z);
    g_mse(tape, y, t)
}

/// The gradients of one step computed on a tape of their own.
fn reference(model: &Model, x: &ArrayD<f64>, t: &ArrayD<f64>) -> (f64, ArrayD<f64>, ArrayD<f64>) {
    let mut tape = Tape::new();
    let (w, b) = (tape.param(&model.w), tape.param(&model.b));
    let l = loss(&mut tape, w, b, x, t);
    tape.backward(l).unwrap();
    (tape.scalar(l), tape.grad(w).to_owned(), tape.grad(b).to_owned())
}

#[test]
fn a_thousand_steps_of_build_backward_reset_stay_exact() {
    let mut rng = Rng::new(31);
    let model = Model { w: rng.normal_array(&[5, 3]), b: rng.normal_array(&[3]) };
    let mut tape = Tape::<f64>::new();
    let (w, b) = (tape.param(&model.w), tape.param(&model.b));
    let mark = tape.mark();
    assert_eq!(mark.len(), 2);

    for step in 0..1000 {
        // Batch sizes vary, so node shapes (and recycled buffers) vary too.
        let batch = 1 + step % 7;
        let x = rng.normal_array(&[batch, 5]);
        let t = rng.normal_array(&[batch, 3]);
        let l = loss(&mut tape, w, b, &x, &t);
        tape.backward(l).unwrap();

        let (want_loss, want_w, want_b) = reference(&model, &x, &t);
        assert_eq!(tape.scalar(l), want_loss, "step {step}");
        assert_eq!(tape.grad(w), want_w, "step {step}: grad w");
        assert_eq!(tape.grad(b), want_b, "step {step}: grad b");

        tape.reset_to(mark);
        assert_eq!(tape.len(), mark.len(), "step {step}: back to the mark");
        assert!(tape.is_ok());
        assert_eq!(tape.value(w), model.w, "step {step}: parameters survive");
        assert_eq!(tape.value(b), model.b);
        assert!(tape.grad(w).iter().all(|&g| g == 0.0), "step {step}: gradients cleared");
        assert!(tape.grad(b).iter().all(|&g| g == 0.0));
        assert!(tape.try_value(l).is_err(), "step {step}: the step's handles are stale");
    }
}

#[test]
fn backward_twice_accumulates_into_parameters_only() {
    let mut tape = Tape::<f64>::new();
    let w = tape.param(Array2::from_shape_fn((2, 2), |(i, j)| (i * 2 + j) as f64));
    let x = tape.constant(Array2::from_elem((3, 2), 1.5));
    let y = g_matmul(&mut tape, x, w);
    let l = g_sum(&mut tape, y);
    tape.backward(l).unwrap();
    let once = tape.grad(w).to_owned();
    let y_grad_once = tape.grad(y).to_owned();
    tape.backward(l).unwrap();
    assert_eq!(tape.grad(w), &once * 2.0, "parameter gradients accumulate, as in PyTorch");
    assert_eq!(tape.grad(y), y_grad_once, "intermediate gradients are recomputed, not doubled");
    assert_eq!(tape.grad(x), ArrayD::<f64>::zeros(ndarray::IxDyn(&[3, 2])), "constants get no gradient");
}
