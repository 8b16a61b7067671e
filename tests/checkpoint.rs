//! `Tape::checkpoint`: gradients bit-identical to the run without
//! segments (nanoGPT's GPT checkpointed per block, dropout inside a
//! segment, nested segments, second order through `grad_graph`), the
//! memory a segment saves, and its errors.

#[path = "../benches/common/gpt.rs"]
#[allow(dead_code)]
mod gpt;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use grad_runtime::*;
use ndarray::{Array2, ArrayD};

/// Every parameter's gradient, by name, and the loss, after one backward.
fn gradients(tape: &mut Tape<f32>, model: &impl Params, loss: Var) -> (f32, Vec<(String, ArrayD<f32>)>) {
    let grads = model.named_params().into_iter().map(|(name, v)| (name, tape.grad(v).to_owned())).collect();
    (tape.scalar(loss), grads)
}

fn tokens(rng: &mut Rng, batch: usize, t: usize, vocab: usize) -> Array2<usize> {
    Array2::from_shape_fn((batch, t), |_| (rng.next_u64() % vocab as u64) as usize)
}

fn gpt_step(tape: &mut Tape<f32>, model: &gpt::Gpt, ids: &Array2<usize>, targets: &Array2<usize>) -> Var {
    let embedded = model.embed(tape, ids.view());
    let logits = model.logits(tape, embedded);
    model.loss(tape, logits, targets.view())
}

#[test]
fn a_gpt_checkpointed_per_block_has_the_same_loss_and_gradients_bit_for_bit() {
    let mut rng = Rng::new(11);
    let mut tape = Tape::<f32>::new();
    let config = gpt::Config { vocab: 17, block: 16, n_layer: 3, n_head: 2, n_embd: 16 };
    let mut model = gpt::Gpt::new(&mut tape, &mut rng, config);
    let (ids, targets) = (tokens(&mut rng, 3, 16, 17), tokens(&mut rng, 3, 16, 17));
    let mark = tape.mark();

    let loss = gpt_step(&mut tape, &model, &ids, &targets);
    let plain_nodes = tape.len() - mark.len();
    tape.backward(loss).unwrap();
    let plain = gradients(&mut tape, &model, loss);
    tape.reset_to(mark);

    model.checkpoint = true;
    // The second round also frees intermediate gradients as backward goes.
    for round in 0..2 {
        tape.set_keep_intermediate_grads(round == 0);
        let loss = gpt_step(&mut tape, &model, &ids, &targets);
        let checkpointed_nodes = tape.len() - mark.len();
        assert!(checkpointed_nodes < plain_nodes / 2, "{checkpointed_nodes} nodes against {plain_nodes}");
        tape.backward(loss).unwrap();
        let again = gradients(&mut tape, &model, loss);
        assert_eq!(again.0.to_bits(), plain.0.to_bits(), "round {round}");
        for ((name, a), (_, b)) in again.1.iter().zip(&plain.1) {
            let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "round {round}: {name} differs");
        }
        // Backward dropped what it recomputed: the tape is as the forward left it.
        assert_eq!(tape.len() - mark.len(), checkpointed_nodes);
        tape.reset_to(mark);
    }
}

#[test]
fn a_checkpointed_gpt_holds_less_at_its_peak() {
    let mut rng = Rng::new(5);
    let mut tape = Tape::<f32>::new();
    let config = gpt::Config { vocab: 17, block: 32, n_layer: 4, n_head: 2, n_embd: 32 };
    let mut model = gpt::Gpt::new(&mut tape, &mut rng, config);
    let (ids, targets) = (tokens(&mut rng, 4, 32, 17), tokens(&mut rng, 4, 32, 17));
    let mark = tape.mark();
    // The second of two steps: the first leaves gradient buffers sized
    // for its own graph, which the next backward resizes.
    let peak = |tape: &mut Tape<f32>, model: &gpt::Gpt| {
        let mut memory = MemoryStats::default();
        for _ in 0..2 {
            tape.reset_peak_memory();
            let loss = gpt_step(tape, model, &ids, &targets);
            tape.backward(loss).unwrap();
            memory = tape.memory();
            assert!(memory.held >= memory.values + memory.saved + memory.grads, "{memory:?}");
            tape.reset_to(mark);
        }
        memory.peak
    };
    let plain = peak(&mut tape, &model);
    model.checkpoint = true;
    let checkpointed = peak(&mut tape, &model);
    let weights = tape.memory().values;
    let (plain, checkpointed) = (plain - weights, checkpointed - weights);
    assert!(checkpointed * 5 < plain * 2, "peak {checkpointed} bytes beyond the weights checkpointed, {plain} not");
}

/// `x → tanh(x @ w) → dropout → * x`, with a segment around the middle (or not).
fn dropout_net(tape: &mut Tape<f64>, x: Var, w: Var, rng: &mut Rng, checkpoint: bool) -> Var {
    let body = move |t: &mut Tape<f64>, rng: &mut Rng| {
        let h = grad!(t; tanh(x @ w));
        g_dropout(t, h, 0.4, rng, true)
    };
    let h = if checkpoint { tape.checkpoint_with_rng(rng, body) } else { body(tape, rng) };
    grad!(tape; sum(h * x))
}

#[test]
fn dropout_in_a_segment_replays_its_mask() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(init::uniform(&mut Rng::new(1), &[6, 6], -1.0, 1.0));
    let w = tape.param(init::uniform(&mut Rng::new(2), &[6, 6], -1.0, 1.0));
    let mark = tape.mark();
    let mut results = Vec::new();
    for checkpoint in [false, true] {
        let mut rng = Rng::new(9);
        let loss = dropout_net(&mut tape, x, w, &mut rng, checkpoint);
        tape.backward(loss).unwrap();
        // The generator advanced the same way: the next draw agrees too.
        results.push((tape.scalar(loss), tape.grad(x).to_owned(), tape.grad(w).to_owned(), rng.next_u64()));
        tape.reset_to(mark);
    }
    assert_eq!(results[0], results[1]);
}

#[test]
fn nested_segments_and_a_segment_that_returns_its_input() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(init::uniform(&mut Rng::new(3), &[4, 5], -1.0, 1.0));
    let mark = tape.mark();
    let net = |tape: &mut Tape<f64>, nested: bool| {
        let inner = move |t: &mut Tape<f64>| grad!(t; sigmoid(x) * x);
        let outer = move |t: &mut Tape<f64>| {
            let a = if nested { t.checkpoint(inner) } else { inner(t) };
            grad!(t; exp(a) + a * x)
        };
        let y = if nested { tape.checkpoint(outer) } else { outer(tape) };
        let same = tape.checkpoint(move |_| y);
        assert_eq!(same, y, "a segment that computes nothing returns its input");
        grad!(tape; sum(y * y))
    };
    let mut grads = Vec::new();
    for nested in [false, true] {
        let loss = net(&mut tape, nested);
        tape.backward(loss).unwrap();
        grads.push(tape.grad(x).to_owned());
        tape.reset_to(mark);
    }
    assert_eq!(grads[0], grads[1]);
}

#[test]
fn grad_graph_differentiates_through_a_segment_to_second_order() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(init::uniform(&mut Rng::new(4), &[3, 4], -1.0, 1.0));
    let v = tape.constant(init::uniform(&mut Rng::new(5), &[3, 4], -1.0, 1.0));
    let mark = tape.mark();
    let mut results = Vec::new();
    for checkpoint in [false, true] {
        let body = move |t: &mut Tape<f64>| grad!(t; tanh(x * x) * sigmoid(x));
        let y = if checkpoint { tape.checkpoint(body) } else { body(&mut tape) };
        let loss = grad!(tape; sum(y));
        let dx = tape.grad_graph(loss, &[x]).unwrap()[0];
        let gv = grad!(tape; sum(dx * v));
        tape.backward(gv).unwrap();
        results.push((tape.value(dx).to_owned(), tape.grad(x).to_owned()));
        tape.reset_to(mark);
    }
    assert_eq!(results[0], results[1]);
    // A Hessian-vector product: finite differences of the gradient along v.
    let gradient = |x: &ArrayD<f64>| {
        x.mapv(|x| {
            let s = 1.0 / (1.0 + (-x).exp());
            2.0 * x * (1.0 - (x * x).tanh().powi(2)) * s + (x * x).tanh() * s * (1.0 - s)
        })
    };
    let (x0, v0) = (tape.value(x).to_owned(), tape.value(v).to_owned());
    let h = 1e-6;
    let fd = (gradient(&(&x0 + &(h * &v0))) - gradient(&(&x0 - &(h * &v0)))) / (2.0 * h);
    assert!(results[1].1.iter().zip(&fd).all(|(a, b)| (a - b).abs() < 1e-6));
}

#[test]
fn a_failing_segment_poisons_the_tape_and_leaves_no_node() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array2::<f32>::ones((2, 3)));
    let before = tape.len();
    let y = tape.checkpoint(move |t| g_matmul(t, x, x));
    assert_eq!(tape.len(), before);
    let error = tape.error().unwrap();
    assert_eq!(error.op(), "g_matmul");
    assert!(tape.backward(y).is_err());
}

#[test]
fn a_segment_returning_a_foreign_handle_is_an_error() {
    let mut other = Tape::<f32>::new();
    let foreign = other.param(Array2::<f32>::ones((2, 2)));
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array2::<f32>::ones((2, 2)));
    let before = tape.len();
    let _ = tape.checkpoint(move |t| {
        g_tanh(t, x);
        foreign
    });
    assert_eq!(tape.len(), before);
    let error = tape.error().unwrap();
    assert_eq!(
        (error.op(), error.kind()),
        ("Tape::checkpoint", &ErrorKind::Segment { reason: "returned a handle it did not compute" })
    );
    assert!(error.to_string().contains("checkpoint.rs"), "names the caller: {error}");
}

#[test]
fn a_segment_that_computes_another_shape_when_recomputed_fails_backward() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array2::<f32>::ones((4, 4)));
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let y = tape.checkpoint(move |t| {
        // Differs on its second run: a segment must not.
        let width = if counter.fetch_add(1, Ordering::Relaxed) == 0 { 4 } else { 2 };
        let part = g_slice(t, x, &[0, 0], &[4, width]);
        g_tanh(t, part)
    });
    let loss = g_sum(&mut tape, y);
    let len = tape.len();
    let error = tape.backward(loss).unwrap_err();
    assert_eq!(error.kind(), &ErrorKind::Segment { reason: "computed a value of another shape when recomputed" });
    assert!(error.to_string().contains("[4, 4]") && error.to_string().contains("[4, 2]"), "{error}");
    assert_eq!((tape.len(), runs.load(Ordering::Relaxed)), (len, 2));
    assert!(!tape.is_ok(), "no optimizer step may use the partial gradients");
}

#[test]
fn an_export_refuses_a_checkpointed_segment() {
    #[derive(Params)]
    struct Layer {
        w: Var,
    }
    let mut tape = Tape::<f32>::new();
    let layer = Layer { w: tape.param(Array2::<f32>::ones((3, 3))) };
    let x = tape.constant(Array2::<f32>::ones((2, 3)));
    let w = layer.w;
    let y = tape.checkpoint(move |t| grad!(t; tanh(x @ w)));
    let error = onnx::Export::new(&mut tape).params(&layer).input("x", x).output("y", y).to_bytes().unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::NotExportable { .. }), "{error}");
    assert_eq!(error.op(), "Tape::checkpoint");
}

#[test]
fn checkpoint_in_a_grad_block_is_one_node_with_the_same_gradients() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(init::uniform(&mut Rng::new(6), &[2, 3, 4], -1.0, 1.0));
    let w = tape.param(init::uniform(&mut Rng::new(7), &[4, 4], -1.0, 1.0));
    let mark = tape.mark();
    let mut runs = Vec::new();
    for checkpointed in [false, true] {
        let loss = if checkpointed {
            grad!(tape; x: [B, T, C], w: [C, C];
                let h = checkpoint(reshape(gelu(x @ w) * 2.0 + x, [B * T, C]));
                sum(h * h))
        } else {
            grad!(tape; x: [B, T, C], w: [C, C];
                let h = reshape(gelu(x @ w) * 2.0 + x, [B * T, C]);
                sum(h * h))
        };
        let nodes = tape.len() - mark.len();
        tape.backward(loss).unwrap();
        runs.push((nodes, tape.scalar(loss), tape.grad(x).to_owned(), tape.grad(w).to_owned()));
        tape.reset_to(mark);
    }
    let (plain, checkpointed) = (&runs[0], &runs[1]);
    assert_eq!(checkpointed.0, 2, "the segment and the fused sum(h * h): {} nodes", checkpointed.0);
    assert!(plain.0 > checkpointed.0);
    assert_eq!((plain.1, &plain.2, &plain.3), (checkpointed.1, &checkpointed.2, &checkpointed.3));
}
