//! `step` allocates nothing: a counting global allocator watches every
//! optimizer's steps (with clipping, momentum, L2, a skipped parameter).

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::allocations_in;
use grad_runtime::{Adam, AdamW, Optimizer, Sgd, Tape, g_add, g_matmul, g_mse, g_relu};
use ndarray::{Array1, Array2};

/// Trains `relu(x @ w + b)` with `opt` (plus a parameter no loss uses) and
/// returns the allocations of each of five steps. The state was sized by
/// `add`, so even the first step allocates nothing.
fn step_allocations(opt: &mut impl Optimizer<f32>) -> Vec<usize> {
    let mut tape = Tape::<f32>::new();
    let w = tape.param(Array2::from_shape_fn((8, 4), |(i, j)| ((i + 2 * j) % 5) as f32 / 10.0 - 0.2));
    let b = tape.param(Array1::from_elem(4, 0.1f32));
    let unused = tape.param(Array1::from_elem(3, 1.0f32));
    opt.add(&tape, w, 1e-3).unwrap();
    opt.add(&tape, b, 0.0).unwrap();
    opt.add(&tape, unused, 1e-3).unwrap();
    opt.set_clip(0.5).unwrap();
    let x = Array2::from_shape_fn((16, 8), |(i, j)| ((i * 3 + j) % 7) as f32 / 7.0 - 0.5);
    let t = Array2::from_shape_fn((16, 4), |(i, j)| ((i + j) % 3) as f32 / 3.0);
    let mark = tape.mark();
    let mut counts = Vec::new();
    for _ in 0..5 {
        let xc = tape.constant(&x);
        let tc = tape.constant(&t);
        let xw = g_matmul(&mut tape, xc, w);
        let z = g_add(&mut tape, xw, b);
        let y = g_relu(&mut tape, z);
        let loss = g_mse(&mut tape, y, tc);
        tape.backward(loss).unwrap();
        let (count, ()) = allocations_in(|| opt.step(&mut tape).unwrap());
        counts.push(count);
        tape.reset_to(mark);
    }
    assert_eq!(opt.steps(), 5);
    counts
}

#[test]
fn a_steady_state_step_allocates_nothing() {
    assert_eq!(allocations_in(|| vec![0u8; 16]).0, 1, "the counter sees zeroed allocations");
    assert_eq!(step_allocations(&mut Sgd::new(0.1)), [0; 5], "Sgd");
    assert_eq!(step_allocations(&mut Sgd::new(0.1).momentum(0.9).nesterov(true)), [0; 5], "Sgd with Nesterov");
    assert_eq!(step_allocations(&mut Adam::new(0.01)), [0; 5], "Adam");
    assert_eq!(step_allocations(&mut AdamW::new(0.01)), [0; 5], "AdamW");
}
