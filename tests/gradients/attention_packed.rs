//! `ops/attention_packed.rs`: attention over a packed `qkv`.

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn};

use crate::common::{Rng, check_finite_differences, check_second_order};
use crate::oracle::Case;

/// The oracle cases of this module's op.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    (case.op() == "attention_packed")
        .then(|| g_attention_packed(tp, case.x(0), case.index("heads"), case.flag("causal")))
}

/// The same attention as nanoGPT writes it without the packed op: each
/// third of the last dim sliced, split into heads and permuted to the
/// batch dims, `g_attention`, the heads permuted back and merged.
fn unpacked(tp: &mut Tape<f64>, qkv: Var, heads: usize, causal: bool) -> Var {
    let shape = tp.value(qkv).shape().to_vec();
    let rank = shape.len();
    let width = shape[rank - 1] / 3;
    let mut split = shape[..rank - 1].to_vec();
    split.extend([heads, width / heads]);
    let mut order: Vec<usize> = (0..rank + 1).collect();
    order.swap(rank - 2, rank - 1);
    let [q, k, v] = [0, 1, 2].map(|part| {
        let mut starts = vec![0; rank];
        let mut stops = shape.clone();
        (starts[rank - 1], stops[rank - 1]) = (part * width, (part + 1) * width);
        let x = g_slice(tp, qkv, &starts, &stops);
        let x = g_reshape(tp, x, &split);
        g_permute(tp, x, &order)
    });
    let y = g_attention(tp, q, k, v, causal);
    let y = g_permute(tp, y, &order);
    let mut out = shape;
    out[rank - 1] = width;
    g_reshape(tp, y, &out)
}

/// (`qkv` shape, heads): two heads of a batch, one head, two leading dims,
/// no leading dim, heads of width 0, a context long beside the width (the
/// probabilities recomputed in backward; the others keep them), contexts
/// longer than a block of 64 queries, one sequence large enough for its
/// heads to be shared out to threads, and heads 32 and 64 wide (copied
/// as arrays).
const CASES: [(&[usize], usize); 11] = [
    (&[2, 5, 18], 2),
    (&[3, 4, 6], 1),
    (&[2, 2, 3, 12], 2),
    (&[7, 9], 1),
    (&[2, 3, 0], 4),
    (&[1, 30, 6], 1),
    (&[2, 70, 12], 2),
    (&[1, 130, 6], 2),
    (&[1, 130, 48], 2),
    (&[2, 5, 192], 2),
    (&[1, 6, 192], 1),
];

#[test]
fn attention_packed_finite_differences() {
    let mut rng = Rng::new(140);
    // The long contexts take the check's 2 · n forward passes over n inputs: the first six.
    for (shape, heads) in &CASES[..6] {
        for causal in [false, true] {
            let inputs = [rng.normal_array(shape)];
            let program = |tp: &mut Tape<f64>, v: &[Var]| g_attention_packed(tp, v[0], *heads, causal);
            check_finite_differences("g_attention_packed", &program, &inputs, 141);
        }
    }
}

/// The packed op against the slices, reshapes and permutes around
/// `g_attention`: the same kernels on the same numbers, so the same bits,
/// in value and in the gradient of a weighted sum of the output.
#[test]
fn attention_packed_equals_its_heads_sliced_out_to_the_bit() {
    let mut rng = Rng::new(142);
    for (shape, heads) in CASES {
        for causal in [false, true] {
            let qkv = rng.normal_array(shape);
            let mut out = shape.to_vec();
            *out.last_mut().unwrap() /= 3;
            let weights = rng.normal_array(&out);
            let run = |packed: bool| {
                let mut tp = Tape::<f64>::new();
                let x = tp.param(&qkv);
                let y = if packed {
                    g_attention_packed(&mut tp, x, heads, causal)
                } else {
                    unpacked(&mut tp, x, heads, causal)
                };
                let w = tp.constant(&weights);
                let yw = g_mul(&mut tp, y, w);
                let loss = g_sum(&mut tp, yw);
                tp.backward(loss).unwrap();
                (tp.value(y).to_owned(), tp.grad(x).to_owned())
            };
            let ((y1, g1), (y2, g2)) = (run(true), run(false));
            let bits = |a: &ArrayD<f64>, b: &ArrayD<f64>| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
            assert_eq!(y1.shape(), y2.shape());
            assert!(bits(&y1, &y2), "value of {shape:?}, {heads} heads, causal {causal}");
            assert!(bits(&g1, &g2), "gradient of {shape:?}, {heads} heads, causal {causal}");
        }
    }
}

#[test]
fn attention_packed_second_order() {
    let mut rng = Rng::new(143);
    for causal in [false, true] {
        let inputs = [rng.normal_array(&[2, 4, 12])];
        let program = |tp: &mut Tape<f64>, v: &[Var]| {
            let y = g_attention_packed(tp, v[0], 2, causal);
            g_tanh(tp, y)
        };
        check_second_order("g_attention_packed", &program, &inputs, 144);
    }
}

#[test]
fn a_causal_position_sees_only_the_positions_before_it() {
    // Head 1's output at position 0 is its own value, whatever comes after.
    let mut rng = Rng::new(145);
    let mut tp = Tape::<f64>::new();
    let qkv = tp.param(rng.normal_array(&[1, 4, 12]));
    let y = g_attention_packed(&mut tp, qkv, 2, true);
    let (value, y0) = (tp.value(qkv).to_owned(), tp.value(y).to_owned());
    for c in 0..4 {
        assert_eq!(y0[[0, 0, c]], value[[0, 0, 8 + c]]);
    }
    // ... and no gradient reaches the later positions from it.
    let first = g_slice(&mut tp, y, &[0, 0, 0], &[1, 1, 4]);
    let loss = g_sum(&mut tp, first);
    tp.backward(loss).unwrap();
    assert!(tp.grad(qkv).slice(ndarray::s![0, 1.., ..]).iter().all(|&g| g == 0.0));
}

#[test]
fn bad_shapes_and_head_counts_are_errors_naming_them() {
    let mut tp = Tape::<f64>::new();
    let mark = tp.mark();
    let cases: [(&[usize], usize, &str); 5] = [
        (&[12], 2, "got a 1-D one"),
        (&[2, 4, 12], 0, "heads"),
        (&[2, 4, 12], 3, "multiple of 3"),
        (&[2, 4, 13], 1, "multiple of 3"),
        (&[2, 4, 12], usize::MAX, "heads"),
    ];
    for (shape, heads, words) in cases {
        let qkv = tp.param(ArrayD::<f64>::zeros(IxDyn(shape)));
        let y = g_attention_packed(&mut tp, qkv, heads, false);
        assert!(y.is_poisoned());
        let error = tp.error().unwrap().to_string();
        assert!(error.starts_with("g_attention_packed: "), "{error}");
        assert!(error.contains(words), "{shape:?}, {heads} heads: {error}");
        tp.reset_to(mark);
    }
    // Heads that overflow with the batches of an empty tensor.
    let qkv = tp.param(ArrayD::<f64>::zeros(IxDyn(&[1 << 40, 2, 0])));
    let y = g_attention_packed(&mut tp, qkv, 1 << 40, false);
    assert!(y.is_poisoned());
    assert!(tp.error().unwrap().to_string().contains("overflows"), "{}", tp.error().unwrap());
}

/// A second backward on the same tape gives a fresh tape's gradient to the
/// bit: the op writes every element of the gradient, as it reuses the
/// buffer of the backward before (`scratch_for`).
#[test]
fn a_second_backward_overwrites_every_gradient_of_the_first() {
    let mut rng = Rng::new(146);
    for (shape, heads) in [(&[2usize, 70, 12][..], 2), (&[1, 130, 6], 2), (&[3, 8, 9], 3), (&[1, 130, 48], 2)] {
        for causal in [false, true] {
            let qkv = rng.normal_array(shape);
            let mut out = shape.to_vec();
            *out.last_mut().unwrap() /= 3;
            let weights = [rng.normal_array(&out), rng.normal_array(&out)];
            let step = |tp: &mut Tape<f64>, x: Var, w: &ArrayD<f64>| {
                let y = g_attention_packed(tp, x, heads, causal);
                let w = tp.constant(w);
                let yw = g_mul(tp, y, w);
                let loss = g_sum(tp, yw);
                tp.backward(loss).unwrap();
                tp.grad(x).to_owned()
            };
            let mut reused = Tape::<f64>::new();
            let x = reused.param(&qkv);
            let mark = reused.mark();
            step(&mut reused, x, &weights[0]);
            reused.reset_to(mark);
            let second = step(&mut reused, x, &weights[1]);
            let mut fresh = Tape::<f64>::new();
            let fresh_x = fresh.param(&qkv);
            let expected = step(&mut fresh, fresh_x, &weights[1]);
            assert!(second.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits()), "{shape:?}");
        }
    }
}
