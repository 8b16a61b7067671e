//! `reset_to` recycles tensor buffers: once a training loop has run a
//! step, later identical steps allocate nothing on the tape. Allocation
//! counts are deterministic, so they are pinned exactly.

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

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
fn a_model_step_allocates_only_inside_the_gemm() {
    // Every op except the matrix products draws from the pool; the GEMM
    // (matrixmultiply) allocates one packing buffer per call.
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
    let counts: Vec<usize> = (0..4).map(|_| allocations_in(|| step(&mut tape)).0).collect();
    // 2 products forward + 2 × 2 backward (w1's input is an embedding that needs its gradient).
    const GEMM_CALLS: usize = 6;
    assert_eq!(&counts[1..], [GEMM_CALLS; 3], "steady state: {counts:?}");

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
    let counts: Vec<usize> = (0..4).map(|_| allocations_in(|| fused_step(&mut tape)).0).collect();
    assert_eq!(&counts[1..], [GEMM_CALLS; 3], "steady state, fused: {counts:?}");
}

#[test]
fn a_conv_step_allocates_only_inside_the_gemm() {
    // conv2d's im2col columns come from the pool; per image and group it
    // makes one GEMM forward and two backward (to the kernel, to the
    // input), each allocating matrixmultiply's packing buffer.
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
    const GEMM_CALLS: usize = 3 * 2 * 2; // 3 per image and group, 2 images, 2 groups
    assert_eq!(&counts[1..], [GEMM_CALLS; 3], "steady state: {counts:?}");
}
