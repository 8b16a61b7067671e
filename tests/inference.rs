//! `Tape::inference`: the same values as a training forward, no node
//! left behind, no allocation per pass after the first, less memory, and
//! backward refused inside it.

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
#[path = "../benches/common/gpt.rs"]
#[allow(dead_code)]
mod gpt;

use counting_alloc::allocations_in;
use grad_runtime::*;
use ndarray::{Array2, Array3, ArrayD};

fn model(tape: &mut Tape<f32>) -> (gpt::Gpt, Array2<usize>) {
    let mut rng = Rng::new(21);
    let config = gpt::Config { vocab: 19, block: 16, n_layer: 3, n_head: 2, n_embd: 16 };
    let model = gpt::Gpt::new(tape, &mut rng, config);
    let ids = Array2::from_shape_fn((2, 16), |(b, t)| (b * 7 + t * 3) % 19);
    (model, ids)
}

fn logits(tape: &mut Tape<f32>, model: &gpt::Gpt, ids: &Array2<usize>) -> Var {
    let embedded = model.embed(tape, ids.view());
    model.logits(tape, embedded)
}

#[test]
fn inference_computes_the_training_forward_and_leaves_nothing_on_the_tape() {
    let mut tape = Tape::<f32>::new();
    let (model, ids) = model(&mut tape);
    let mark = tape.mark();
    let y = logits(&mut tape, &model, &ids);
    let trained = tape.value(y).to_owned();
    let training_peak = tape.memory().peak;
    tape.reset_to(mark);

    tape.reset_peak_memory();
    let before = tape.len();
    let inferred = tape
        .inference(|t| {
            let y = logits(t, &model, &ids);
            assert!(t.is_inference());
            t.value(y).to_owned()
        })
        .unwrap();
    assert!(!tape.is_inference());
    let inference_peak = tape.memory().peak;
    assert_eq!(tape.len(), before);
    let same = inferred.iter().zip(&trained).all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(same, "inference computes the same values, bit for bit");
    // Training keeps what backward reads (attention's weights, the norms'
    // statistics, the activations' inputs) beside the same values.
    assert!(
        inference_peak * 5 < training_peak * 3,
        "peak {inference_peak} bytes in inference, {training_peak} in training"
    );
}

#[test]
fn an_inference_pass_allocates_nothing_after_the_first() {
    let mut tape = Tape::<f32>::new();
    let (model, ids) = model(&mut tape);
    let mut out = ArrayD::<f32>::zeros(vec![2, 16, 19]);
    let mut counts = Vec::new();
    for _ in 0..4 {
        let (n, result) = allocations_in(|| {
            tape.inference(|t| {
                let y = logits(t, &model, &ids);
                out.assign(&t.value(y));
            })
        });
        result.unwrap();
        counts.push(n);
    }
    assert!(counts[0] > 0, "the first pass fills the pool: {counts:?}");
    assert_eq!(&counts[1..], [0, 0, 0], "steady state: {counts:?}");
}

#[test]
fn backward_grad_graph_and_hvp_are_refused_inside_and_gradients_survive_it() {
    let mut tape = Tape::<f64>::new();
    let w = tape.param(Array2::from_shape_fn((3, 3), |(i, j)| (i + 2 * j) as f64 / 4.0));
    let x = tape.constant(Array2::from_elem((2, 3), 0.5));
    let loss = grad!(tape; sum(tanh(x @ w)));
    tape.backward(loss).unwrap();
    let gradient = tape.grad(w).to_owned();
    tape.inference(|t| {
        let y = grad!(t; sum(tanh(x @ w)));
        let error = t.backward(y).unwrap_err();
        assert_eq!((error.op(), error.kind()), ("Tape::backward", &ErrorKind::InInference));
        assert!(error.to_string().contains("inference"), "{error}");
        let error = t.grad_graph(y, &[w]).unwrap_err();
        assert_eq!((error.op(), error.kind()), ("Tape::grad_graph", &ErrorKind::InInference));
        let v = t.constant(Array2::from_elem((3, 3), 1.0));
        let error = t.hvp(y, &[w], &[v]).unwrap_err();
        assert_eq!((error.op(), error.kind()), ("Tape::hvp", &ErrorKind::InInference));
        // Nothing here carries a gradient.
        let scaled = g_muls(t, w, 2.0);
        assert_eq!(t.value(y).len(), 1);
        let _ = scaled;
    })
    .unwrap();
    assert!(tape.is_ok());
    assert_eq!(tape.grad(w), gradient);
    // Outside the scope, backward works again.
    let loss = grad!(tape; sum(x @ w));
    tape.backward(loss).unwrap();
}

#[test]
fn a_failure_inside_is_returned_and_the_tape_is_as_it_was() {
    let mut tape = Tape::<f32>::new();
    let w = tape.param(Array3::<f32>::ones((2, 3, 4)));
    let before = tape.len();
    let handle = std::cell::Cell::new(None);
    let error = tape
        .inference(|t| {
            let bad = g_matmul(t, w, w);
            handle.set(Some(bad));
        })
        .unwrap_err();
    assert_eq!(error.op(), "g_matmul");
    assert!(tape.is_ok(), "the scope's failure is returned, not kept");
    assert_eq!(tape.len(), before);
    assert_eq!(tape.value(w), Array3::<f32>::ones((2, 3, 4)).into_dyn());

    // A handle made inside is stale outside.
    let inside = tape.inference(|t| g_muls(t, w, 3.0)).unwrap();
    let _ = tape.value(inside);
    assert_eq!(tape.error().map(GradError::kind), Some(&ErrorKind::StaleVar));

    // A tape already poisoned does not run the scope.
    let ran = std::cell::Cell::new(false);
    assert!(tape.inference(|_| ran.set(true)).is_err());
    assert!(!ran.get());
}
