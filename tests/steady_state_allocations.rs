//! `reset_to` recycles tensor buffers: once a training loop has run a
//! step, later identical steps allocate nothing on the tape. Allocation
//! counts are deterministic, so they are pinned exactly.

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
#[path = "common/custom_ops.rs"]
mod custom_ops;

use counting_alloc::allocations_in;
use grad_runtime::*;
use ndarray::{Array1, Array2, Array3};

/// W2 of the benchmarks: 1000 × `x = tanh(x * 0.9 + 0.1)`, sum, backward.
fn small_op_chain(tape: &mut Tape<f32>, x: Var) -> Var {
    let mut h = x;
    for _ in 0..1000 {
        let scaled = g_muls(tape, h, 0.9);
        let shifted = g_adds(tape, scaled, 0.1);
        h = g_tanh(tape, shifted);
    }
    g_sum(tape, h)
}

#[test]
fn a_chain_of_small_ops_allocates_nothing_after_the_first_step() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array1::from_shape_fn(16, |i| i as f32 / 16.0));
    let mark = tape.mark();
    let mut counts = Vec::new();
    for _ in 0..4 {
        let (n, ()) = allocations_in(|| {
            let loss = small_op_chain(&mut tape, x);
            tape.backward(loss).unwrap();
            tape.reset_to(mark);
        });
        counts.push(n);
    }
    assert!(counts[0] > 3000, "the first step fills the pool: {counts:?}");
    assert_eq!(&counts[1..], [0, 0, 0], "steady state: {counts:?}");
}

/// W2 written with `grad!`: each `tanh(h * 0.9 + 0.1)` is one fused node
/// with pooled buffers for its inputs and scalars.
fn fused_chain(tape: &mut Tape<f32>, x: Var) -> Var {
    let mut h = x;
    for _ in 0..1000 {
        h = grad!(tape; tanh(h * 0.9 + 0.1));
    }
    grad!(tape; sum(h))
}

/// Custom ops with one and three inputs, inside and outside `grad!`.
fn custom_chain(tape: &mut Tape<f32>, x: Var, w: Var) -> Var {
    let mut h = x;
    for _ in 0..100 {
        let rounded = custom_ops::straight_through(tape, h);
        h = custom_ops::mul_add(tape, rounded, w, h);
        h = grad!(tape; custom_ops::stable_softplus(h * 0.5) - 1.0);
    }
    g_sum(tape, h)
}

#[test]
fn a_chain_of_custom_ops_allocates_nothing_after_the_first_step() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array1::from_shape_fn(16, |i| i as f32 / 4.0));
    let w = tape.param(Array1::from_elem(16, 0.5f32));
    let mark = tape.mark();
    let mut counts = Vec::new();
    for _ in 0..4 {
        let (n, ()) = allocations_in(|| {
            let loss = custom_chain(&mut tape, x, w);
            tape.backward(loss).unwrap();
            tape.reset_to(mark);
        });
        counts.push(n);
    }
    assert!(counts[0] > 300, "the first step fills the pool: {counts:?}");
    assert_eq!(&counts[1..], [0, 0, 0], "steady state: {counts:?}");
}

#[test]
fn a_chain_of_fused_regions_allocates_nothing_after_the_first_step() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array1::from_shape_fn(16, |i| i as f32 / 16.0));
    let mark = tape.mark();
    let mut counts = Vec::new();
    for _ in 0..4 {
        let (n, ()) = allocations_in(|| {
            let loss = fused_chain(&mut tape, x);
            tape.backward(loss).unwrap();
            assert_eq!(tape.len(), 1 + 1001);
            tape.reset_to(mark);
        });
        counts.push(n);
    }
    assert!(counts[0] > 1000, "the first step fills the pool: {counts:?}");
    assert_eq!(&counts[1..], [0, 0, 0], "steady state: {counts:?}");
}

#[test]
fn a_model_step_allocates_nothing_after_the_second_step() {
    // The first backward's first contribution to a node can keep, in the
    // node's gradient slot, a buffer that a backward rule had taken from
    // the pool and handed back; the second step allocates that rule's
    // buffer again (a softmax and a matmul here), and from then on every
    // buffer is where the step before left it.
    let mut tape = Tape::<f32>::new();
    let w1 = tape.param(Array2::from_elem((12, 8), 0.1f32));
    let b1 = tape.param(Array1::from_elem(8, 0.0f32));
    let w2 = tape.param(Array2::from_elem((8, 3), -0.1f32));
    let table = tape.param(Array2::from_elem((10, 12), 0.5f32));
    let (gamma, beta) = (tape.param(Array1::<f32>::ones(8)), tape.param(Array1::<f32>::zeros(8)));
    let mark = tape.mark();
    let target = Array3::from_elem((2, 2, 3), 0.25f32);
    let step = |tape: &mut Tape<f32>| {
        let x = g_embedding(tape, table, &[1, 4, 4, 9]);
        let t = tape.constant(&target);
        let xw = g_matmul(tape, x, w1);
        let z = g_add(tape, xw, b1);
        let n = g_layer_norm(tape, z, gamma, beta, 1e-5);
        let h = g_gelu(tape, n);
        let y = g_matmul(tape, h, w2);
        let y = g_reshape(tape, y, &[2, 2, 3]);
        let p = g_softmax(tape, y, -1);
        let classes = g_reshape(tape, y, &[4, 3]);
        let ce = g_cross_entropy(tape, classes, &[0, 2, 1, 1]);
        let mse = g_mse(tape, p, t);
        let loss = g_add(tape, ce, mse);
        tape.backward(loss).unwrap();
        tape.reset_to(mark);
    };
    let counts: Vec<usize> = (0..5).map(|_| allocations_in(|| step(&mut tape)).0).collect();
    // The GEMM packs into scratch from the tape's pool: nothing to allocate either.
    assert!(counts[1] <= 3, "the second step: {counts:?}");
    assert_eq!(&counts[2..], [0; 3], "steady state: {counts:?}");

    // The same model with grad!, its elementwise chains fused.
    let fused_step = |tape: &mut Tape<f32>| {
        let x = g_embedding(tape, table, &[1, 4, 4, 9]);
        let t = tape.constant(&target);
        let loss = grad!(tape;
            let h = gelu(layer_norm(x @ w1 + b1, gamma, beta, 1e-5) * 0.5 + 0.1);
            let y = reshape(h @ w2, [2, 2, 3]);
            let p = softmax(y, -1);
            cross_entropy(reshape(y, [4, 3]), &[0, 2, 1, 1]) + mse(p, t) + mean(sigmoid(h) * h));
        tape.backward(loss).unwrap();
        tape.reset_to(mark);
    };
    let counts: Vec<usize> = (0..5).map(|_| allocations_in(|| fused_step(&mut tape)).0).collect();
    assert!(counts[1] <= 3, "the second step, fused: {counts:?}");
    assert_eq!(&counts[2..], [0; 3], "steady state, fused: {counts:?}");
}

#[test]
fn a_w1_training_step_with_adam_allocates_nothing() {
    // W1 of the benchmarks, GEMM and Adam included. On one thread: nothing.
    // On two, the tape, the GEMM and Adam still allocate nothing, but on a
    // thread outside grad's team (another test's thread may have formed
    // it) each hand-off to the pool goes through rayon's injector queue,
    // which allocates a 63-slot block every 63 hand-offs: at most one per step.
    // (One test, so the thread count is not changed under another.)
    set_num_threads(1).unwrap();
    let counts = w1_step_allocations();
    assert_eq!(&counts[2..], [0; 3], "steady state on one thread: {counts:?}");
    set_num_threads(2).unwrap();
    let counts = w1_step_allocations();
    assert!(counts[2..].iter().all(|&n| n <= 1), "steady state on two threads: {counts:?}");
    set_num_threads(0).unwrap();
}

/// Allocations of each of five W1 steps: products large enough to run on
/// the thread pool, and an Adam step whose largest parameter is split over
/// threads.
fn w1_step_allocations() -> Vec<usize> {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::from_shape_fn((64, 784), |(i, j)| ((i * 7 + j) % 13) as f32 / 13.0 - 0.5));
    let t = tape.constant(Array2::from_shape_fn((64, 10), |(i, j)| ((i + j) % 3) as f32));
    let w1 = tape.param(Array2::from_shape_fn((784, 256), |(i, j)| ((i * 3 + j * 5) % 17) as f32 / 170.0 - 0.05));
    let b1 = tape.param(Array1::from_elem(256, 0.01f32));
    let w2 = tape.param(Array2::from_shape_fn((256, 10), |(i, j)| ((i + j * 7) % 11) as f32 / 110.0 - 0.05));
    let b2 = tape.param(Array1::from_elem(10, 0.0f32));
    let mut adam = Adam::new(1e-3);
    for p in [w1, b1, w2, b2] {
        adam.add(&tape, p, 0.0).unwrap();
    }
    let mark = tape.mark();
    let mut step = |tape: &mut Tape<f32>| {
        let loss = grad!(tape; let h = relu(x @ w1 + b1); mse(h @ w2 + b2, t));
        tape.backward(loss).unwrap();
        adam.step(tape).unwrap();
        tape.reset_to(mark);
    };
    (0..5).map(|_| allocations_in(|| step(&mut tape)).0).collect()
}

#[test]
fn a_conv_step_allocates_nothing_after_the_first_step() {
    // conv2d's im2col columns and its GEMMs' packing come from the pool.
    let mut tape = Tape::<f32>::new();
    let x = tape.param(ndarray::Array4::from_shape_fn((2, 4, 6, 6), |(n, c, h, w)| (n + c + h * w) as f32 / 40.0));
    let k = tape.param(ndarray::Array4::from_elem((6, 2, 3, 3), 0.1f32));
    let b = tape.param(Array1::from_elem(6, 0.0f32));
    let mark = tape.mark();
    let step = |tape: &mut Tape<f32>| {
        let y = g_conv2d(tape, x, k, Some(b), [1, 1], [1, 1], [1, 1], 2);
        let h = g_relu(tape, y);
        let m = g_max_pool2d(tape, h, [2, 2], [2, 2], [0, 0]);
        let a = g_avg_pool2d(tape, m, [3, 3], [1, 1], [1, 1]);
        let loss = g_sum(tape, a);
        tape.backward(loss).unwrap();
        tape.reset_to(mark);
    };
    let counts: Vec<usize> = (0..4).map(|_| allocations_in(|| step(&mut tape)).0).collect();
    assert_eq!(&counts[1..], [0; 3], "steady state: {counts:?}");
}

/// A gradient penalty step: `grad(y, x)` inside a block (one
/// `Tape::grad_graph`), then backward through it.
fn penalty_step(tape: &mut Tape<f32>, x: Var, w: Var) -> Var {
    grad!(tape; x: [8, 4], w: [4, 3];
        let gx = grad(sum(tanh(x @ w)), x);
        mean(pow(sqrt(sum(gx * gx, 1)) - 1.0, 2.0)))
}

#[test]
fn a_gradient_penalty_step_allocates_nothing_after_the_second_step() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(Array2::from_shape_fn((8, 4), |(i, j)| (i as f32 - j as f32) / 8.0));
    let w = tape.param(Array2::from_shape_fn((4, 3), |(i, j)| (i + 2 * j) as f32 / 10.0 - 0.3));
    let mark = tape.mark();
    let mut counts = Vec::new();
    for _ in 0..5 {
        let (n, ()) = allocations_in(|| {
            let loss = penalty_step(&mut tape, x, w);
            tape.backward(loss).unwrap();
            tape.reset_to(mark);
        });
        counts.push(n);
    }
    assert!(counts[0] > 20, "the first step fills the pools: {counts:?}");
    assert_eq!(&counts[2..], [0, 0, 0], "steady state: {counts:?}");

    // Tape::grad_graph itself allocates only the Vec it returns.
    for _ in 0..3 {
        let y = grad!(tape; sum(tanh(x @ w)));
        let (n, grads) = allocations_in(|| tape.grad_graph(y, &[x, w]).unwrap());
        let (gx, gw) = (grads[0], grads[1]);
        let hv = grad!(tape; sum(gx * gx) + sum(gw));
        tape.backward(hv).unwrap();
        tape.reset_to(mark);
        assert_eq!(n, 1, "the returned Vec");
    }
}

#[test]
fn a_hessian_vector_product_loop_allocates_nothing_after_the_second_step() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::from_shape_fn((8, 4), |(i, j)| (i as f32 - j as f32) / 8.0));
    let w = tape.param(Array2::from_shape_fn((4, 3), |(i, j)| (i + 2 * j) as f32 / 10.0 - 0.3));
    let v = tape.constant(Array2::from_shape_fn((4, 3), |(i, j)| (i * 3 + j) as f32 / 12.0));
    let mark = tape.mark();
    let mut counts = Vec::new();
    for _ in 0..5 {
        let (n, ()) = allocations_in(|| {
            let loss = grad!(tape; x: [8, 4], w: [4, 3]; sum(tanh(x @ w) * (x @ w)));
            tape.hvp(loss, &[w], &[v]).unwrap();
            tape.reset_to(mark);
        });
        counts.push(n);
    }
    assert!(counts[0] > 10, "the first step fills the pools: {counts:?}");
    assert_eq!(&counts[2..], [0, 0, 0], "steady state: {counts:?}");
}
