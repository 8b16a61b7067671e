//! Plans written by hand as `grad!` writes them, against the unfused ops:
//! the interpreter (flat, by rows, folded, in parallel, tiles of every
//! length) gives the same bits.

use ndarray::{ArrayD, IxDyn};

use super::plan::step::*;
use super::{Plan, Region, fused};
use crate::dsl::{Operand, here};
use crate::ops::reduce::sum_slice;
use crate::{Rng, Tape, Var, g_add, g_adds, g_mul, g_muls, g_sigmoid, g_sum, g_tanh};

/// `tanh(x * 0.9 + 0.1)`.
static CHAIN: Plan = Plan::new(
    "fused tanh(x * 0.9 + 0.1)",
    &[mul(leaf(0), param(0)), add(step(0), param(1)), tanh(step(1))],
    &[here(), here(), here()],
    1,
    2,
);

/// `sum(sigmoid(x) * x)`.
static SUM_SIGMOID_X: Plan = Plan::new(
    "fused sum(sigmoid(x) * x)",
    &[sigmoid(leaf(0)), mul(step(0), leaf(0)), sum(step(1))],
    &[here(), here(), here()],
    1,
    0,
);

/// `(a + b) * c`.
static ADD_MUL: Plan =
    Plan::new("fused (a + b) * c", &[add(leaf(0), leaf(1)), mul(step(0), leaf(2))], &[here(), here()], 3, 0);

fn random(shape: &[usize], seed: u64) -> ArrayD<f32> {
    let mut rng = Rng::new(seed);
    ArrayD::from_shape_fn(IxDyn(shape), |_| rng.normal() as f32)
}

fn bits(tape: &Tape<f32>, v: Var) -> Vec<u32> {
    tape.value(v).iter().map(|x| x.to_bits()).collect()
}

fn grad_bits(tape: &mut Tape<f32>, v: Var) -> Vec<u32> {
    tape.grad(v).iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_chain_equals_its_ops_for_every_size() {
    // Short tiles padded to whole blocks; whole tiles read in place; a
    // last tile that is not a whole number of blocks; threads.
    for n in [1, 15, 16, 17, 31, 63, 64, 65, 100, 255, 256, 257, 1000, 40_000, 100_003] {
        let x0 = random(&[n], n as u64);
        let mut fused_tape = Tape::<f32>::new();
        let x = fused_tape.param(&x0);
        let y = fused(&mut fused_tape, const { &Region::new(&CHAIN, None) }, [Operand::Var(x)], [0.9, 0.1]);
        let loss = g_sum(&mut fused_tape, y);
        fused_tape.backward(loss).unwrap();
        assert_eq!(fused_tape.len(), 3);

        let mut tape = Tape::<f32>::new();
        let x2 = tape.param(&x0);
        let scaled = g_muls(&mut tape, x2, 0.9);
        let shifted = g_adds(&mut tape, scaled, 0.1);
        let y2 = g_tanh(&mut tape, shifted);
        let loss2 = g_sum(&mut tape, y2);
        tape.backward(loss2).unwrap();
        assert_eq!(bits(&fused_tape, y), bits(&tape, y2), "n = {n}");
        assert_eq!(grad_bits(&mut fused_tape, x), grad_bits(&mut tape, x2), "n = {n}");
    }
}

#[test]
fn a_folded_sum_equals_its_ops_in_the_same_tree() {
    for n in [0, 1, 17, 100, 1023, 1024, 1025, 5000, 70_001] {
        let x0 = random(&[n], 7);
        let mut fused_tape = Tape::<f32>::new();
        let x = fused_tape.param(&x0);
        let loss = fused(&mut fused_tape, const { &Region::new(&SUM_SIGMOID_X, None) }, [Operand::Var(x)], []);
        fused_tape.backward(loss).unwrap();

        let mut tape = Tape::<f32>::new();
        let x2 = tape.param(&x0);
        let s = g_sigmoid(&mut tape, x2);
        let sx = g_mul(&mut tape, s, x2);
        let loss2 = g_sum(&mut tape, sx);
        tape.backward(loss2).unwrap();
        assert_eq!(bits(&fused_tape, loss), bits(&tape, loss2), "n = {n}");
        assert_eq!(grad_bits(&mut fused_tape, x), grad_bits(&mut tape, x2), "n = {n}");
        let direct: Vec<f32> = x0.iter().map(|&v| crate::Float::tape_sigmoid(v) * v).collect();
        assert_eq!(sum_slice(&direct).to_bits(), fused_tape.scalar(loss).to_bits());
    }
}

#[test]
fn broadcast_inputs_walk_by_rows_and_sum_their_gradients_back() {
    for (sa, sb, sc) in [
        (&[4, 3][..], &[3][..], &[4, 3][..]),
        (&[4, 1], &[1, 1], &[4, 33]),
        (&[1, 40], &[1], &[300, 40]),
        (&[2, 1, 5], &[3, 1], &[2, 3, 5]),
        (&[300, 200], &[200], &[1]),
        (&[], &[7], &[2, 7]),
        // Small enough for one tile of its own size, one input a single element.
        (&[2, 16], &[], &[1]),
        (&[16], &[1], &[16]),
    ] {
        let (a0, b0, c0) = (random(sa, 1), random(sb, 2), random(sc, 3));
        let mut fused_tape = Tape::<f32>::new();
        let [a, b, c] = [&a0, &b0, &c0].map(|v| fused_tape.param(v));
        let y = fused(&mut fused_tape, const { &Region::new(&ADD_MUL, None) }, [a, b, c].map(Operand::Var), []);
        let loss = g_sum(&mut fused_tape, y);
        fused_tape.backward(loss).unwrap();

        let mut tape = Tape::<f32>::new();
        let [a2, b2, c2] = [&a0, &b0, &c0].map(|v| tape.param(v));
        let ab = g_add(&mut tape, a2, b2);
        let y2 = g_mul(&mut tape, ab, c2);
        let loss2 = g_sum(&mut tape, y2);
        tape.backward(loss2).unwrap();
        assert_eq!(bits(&fused_tape, y), bits(&tape, y2), "{sa:?} {sb:?} {sc:?}");
        let ab_shape = crate::broadcast::broadcast_shapes(sa, sb).unwrap();
        let y_shape = tape.value(y2).shape().to_vec();
        // One node either way: a broadcast `a + b` is interpreted on whole tensors.
        assert_eq!(fused_tape.len(), 5, "one fused node ({ab_shape:?} -> {y_shape:?})");
        for (f, u) in [(a, a2), (b, b2), (c, c2)] {
            assert_eq!(grad_bits(&mut fused_tape, f), grad_bits(&mut tape, u), "{sa:?} {sb:?} {sc:?}");
        }
    }
}

#[test]
fn a_shape_error_is_the_unfused_ops_error_at_its_site() {
    let mut tape = Tape::<f32>::new();
    let (a, b, c) = (tape.param(random(&[4, 3], 1)), tape.param(random(&[2], 2)), tape.param(random(&[3], 3)));
    let y = fused(&mut tape, const { &Region::new(&ADD_MUL, None) }, [a, b, c].map(Operand::Var), []);
    assert!(y.is_poisoned());
    let err = tape.error().unwrap();
    assert_eq!(err.op(), "g_add");
    assert_eq!(err.shapes(), &[vec![4, 3], vec![2]]);
    assert_eq!(err.location(), ADD_MUL.sites[0]);
    assert_eq!(tape.len(), 3, "nothing recorded");

    let mut tape = Tape::<f32>::new();
    let (a, b, c) = (tape.param(random(&[4, 3], 1)), tape.param(random(&[3], 2)), tape.param(random(&[5], 3)));
    fused(&mut tape, const { &Region::new(&ADD_MUL, None) }, [a, b, c].map(Operand::Var), []);
    let err = tape.error().unwrap();
    assert_eq!((err.op(), err.shapes()), ("g_mul", &[vec![4, 3], vec![5]][..]));
    assert_eq!(err.location(), ADD_MUL.sites[1]);
}

#[test]
fn rust_scalar_leaves_are_splatted() {
    let mut tape = Tape::<f64>::new();
    let c = tape.param(ndarray::array![1.0, 2.0]);
    let y = fused(
        &mut tape,
        const { &Region::new(&ADD_MUL, None) },
        [Operand::Scalar(0.5), Operand::Scalar(0.25), Operand::Var(c)],
        [],
    );
    assert_eq!(tape.value(y), ndarray::array![0.75, 1.5].into_dyn());
    tape.backward(y).unwrap();
    assert_eq!(tape.grad(c), ndarray::array![0.75, 0.75].into_dyn());
}

/// `clamp(x * s, lo, hi)`: three scalars, one more than a node keeps inline.
static CLAMP_SCALED: Plan = Plan::new(
    "fused clamp(x * s, lo, hi)",
    &[mul(leaf(0), param(0)), clamp(step(0), param(1), param(2))],
    &[here(), here()],
    1,
    3,
);

#[test]
fn a_nodes_scalars_are_inline_up_to_two_and_pooled_beyond() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(ndarray::array![-2.0, 0.5, 3.0]);
    // Two Rust scalars: inline; the node's one buffer holds its three leaves.
    let inline = fused(
        &mut tape,
        const { &Region::new(&ADD_MUL, None) },
        [Operand::Scalar(0.5), Operand::Scalar(0.25), Operand::Var(x)],
        [],
    );
    let saved = tape.memory().saved;
    assert_eq!(saved, 3 * size_of::<usize>());
    // Three parameters: a pooled buffer of three (its one leaf is inline).
    let pooled = fused(&mut tape, const { &Region::new(&CLAMP_SCALED, None) }, [Operand::Var(x)], [2.0, -1.0, 4.0]);
    assert_eq!(tape.memory().saved, saved + 3 * size_of::<f64>());
    assert_eq!(tape.value(inline), ndarray::array![-1.5, 0.375, 2.25].into_dyn());
    assert_eq!(tape.value(pooled), ndarray::array![-1.0, 1.0, 4.0].into_dyn());
    // Both read their scalars back: backward, and the replay of `grad_graph`.
    let (a, b) = (g_sum(&mut tape, inline), g_sum(&mut tape, pooled));
    let loss = g_add(&mut tape, a, b);
    let recorded = tape.grad_graph(loss, &[x]).unwrap()[0];
    let expected = ndarray::array![0.75, 2.75, 0.75].into_dyn();
    assert_eq!(tape.value(recorded), expected);
    tape.backward(loss).unwrap();
    assert_eq!(tape.grad(x), expected);
}

#[test]
fn a_fused_node_is_no_larger_than_the_largest_op() {
    assert!(std::mem::size_of::<super::Fused<f64>>() <= 64, "{}", std::mem::size_of::<super::Fused<f64>>());
    assert_eq!(std::mem::size_of::<crate::ops::Op<f64>>(), 64);
    // What the tape's comments on moving nodes say (`tape/append.rs`).
    assert_eq!(std::mem::size_of::<crate::tape::Node<f32>>(), 144);
}

#[test]
fn the_plans_live_steps_are_those_of_every_leaf_wanted() {
    // `x * 2 + 2 * 3`: its middle step reads scalars alone.
    static SCALAR_STEP: Plan = Plan::new(
        "fused x * 2 + 2 * 3",
        &[mul(leaf(0), param(0)), mul(param(0), param(1)), add(step(0), step(1))],
        &[here(), here(), here()],
        1,
        2,
    );
    for plan in [&CHAIN, &SUM_SIGMOID_X, &ADD_MUL, &SCALAR_STEP] {
        let live = super::tile::live_steps(plan.steps, plan.root(), (1 << plan.leaves) - 1);
        assert_eq!(plan.live_all, live, "{}", plan.name);
    }
    let live = SCALAR_STEP.live_all;
    assert_eq!([live.has(0), live.has(1), live.has(2)], [true, false, true]);
}

/// A kernel for [`ADD_MUL`] that marks what it computed: each value is
/// its first leaf's plus 1000, each gradient its leaf's number plus one.
struct Marking;

impl super::Kernel<f64> for Marking {
    fn run(lanes: super::Lanes<'_, f64>) {
        match lanes {
            super::Lanes::Forward { x, out, .. } => {
                assert!(x.len() == 3 && out.len() == super::BLOCK && x.iter().all(|x| x.len() == out.len()));
                out.iter_mut().zip(x[0]).for_each(|(o, a)| *o = a + 1000.0);
            }
            super::Lanes::Backward { x, y, g, d, .. } => {
                assert!(x.len() == 3 && d.len() == 3 && [y.len(), g.len()].iter().all(|&n| n == x[0].len()));
                for (i, d) in d.iter_mut().enumerate() {
                    assert_eq!(d.len(), y.len());
                    d.fill(i as f64 + 1.0);
                }
            }
        }
    }
}

#[test]
fn a_region_of_at_most_kernel_max_elements_read_flat_runs_its_kernel() {
    static MARKED: Region<f64> = Region::new(&ADD_MUL, super::kernel::<f64, Marking>());
    let max = super::lanes::KERNEL_MAX;
    // Not on an x86-64 CPU without AVX2 (nor at `GRAD_SIMD=baseline`).
    let runs_here = MARKED.kernel.and_then(|k| k.here()).is_some();
    for n in [1, 2, 16, max - 1, max, max + 1, 4 * max] {
        let mut tape = Tape::<f64>::new();
        let a0 = ArrayD::from_shape_fn(IxDyn(&[n]), |i| i[0] as f64);
        let (a, b) = (tape.param(&a0), tape.param(ArrayD::from_elem(IxDyn(&[n]), 2.0)));
        let c = tape.constant(ArrayD::from_elem(IxDyn(&[n]), 3.0));
        // A Rust scalar leaf (repeated for the kernel) and a constant one,
        // whose gradient is not wanted (computed into spare lanes).
        let y = fused(&mut tape, &MARKED, [Operand::Var(a), Operand::Var(b), Operand::Var(c)], []);
        let z = fused(&mut tape, &MARKED, [Operand::Scalar(0.5), Operand::Var(b), Operand::Var(c)], []);
        let (ys, zs) = (g_sum(&mut tape, y), g_sum(&mut tape, z));
        let loss = g_add(&mut tape, ys, zs);
        tape.backward(loss).unwrap();
        let compiled = n <= max && runs_here;
        let (ga, gb) = (tape.grad(a).to_owned(), tape.grad(b).to_owned());
        let (y, z) = (tape.value(y), tape.value(z));
        for j in 0..n {
            let a = j as f64;
            if compiled {
                assert_eq!([y[j], z[j], ga[j], gb[j]], [a + 1000.0, 1000.5, 1.0, 4.0], "n = {n}");
            } else {
                assert_eq!([y[j], z[j], ga[j], gb[j]], [(a + 2.0) * 3.0, 7.5, 3.0, 6.0], "n = {n}");
            }
        }
    }
    // A leaf of one element whose gradient is wanted: the kernel's
    // gradient along the region (its marks), summed back to the leaf.
    if !runs_here {
        return;
    }
    let mut tape = Tape::<f64>::new();
    let a = tape.param(ArrayD::from_elem(IxDyn(&[1]), 1.0));
    let (b, c) = (tape.param(ArrayD::from_elem(IxDyn(&[4]), 2.0)), tape.param(ArrayD::from_elem(IxDyn(&[4]), 3.0)));
    let y = fused(&mut tape, &MARKED, [a, b, c].map(Operand::Var), []);
    let loss = g_sum(&mut tape, y);
    tape.backward(loss).unwrap();
    assert_eq!(tape.grad(a).as_slice().unwrap(), &[4.0]);
    assert_eq!(tape.grad(b).as_slice().unwrap(), &[2.0; 4]);
}
