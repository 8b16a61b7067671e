//! `ops/attention.rs`: scaled dot-product attention as one op.

use grad_runtime::*;
use ndarray::{Array2, ArrayD, IxDyn};

use crate::common::{Rng, assert_close, check_finite_differences, check_second_order};
use crate::oracle::Case;

/// The oracle cases of this module's op.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    (case.op() == "attention").then(|| g_attention(tp, case.x(0), case.x(1), case.x(2), case.flag("causal")))
}

/// The same attention as five ops: the product, the scale, the mask, softmax, the product.
fn unfused(tp: &mut Tape<f64>, [q, k, v]: [Var; 3], causal: bool) -> Var {
    let shape = tp.value(q).shape().to_vec();
    let (n, tk) = (shape.len(), tp.value(k).shape()[shape.len() - 2]);
    let kt = g_transpose(tp, k);
    let scores = g_matmul(tp, q, kt);
    let scores = g_muls(tp, scores, 1.0 / (shape[n - 1] as f64).sqrt());
    let scores = if causal {
        let above = Array2::from_shape_fn((shape[n - 2], tk), |(i, j)| j > i);
        g_masked_fill(tp, scores, &above, f64::NEG_INFINITY)
    } else {
        scores
    };
    let probs = g_softmax(tp, scores, -1);
    g_matmul(tp, probs, v)
}

/// (queries, keys, values) shapes: heads in leading dims, keys longer than
/// queries, values of another width, one query, no leading dim, features
/// of width 0 (every key weighs the same), and a context long beside the
/// widths (more probabilities than inputs: backward recomputes them from
/// each query's statistics; the others keep them).
const SHAPES: [[&[usize]; 3]; 7] = [
    [&[2, 2, 5, 4], &[2, 2, 5, 4], &[2, 2, 5, 4]],
    [&[2, 3, 4], &[2, 6, 4], &[2, 6, 3]],
    [&[1, 3, 8], &[1, 5, 8], &[1, 5, 2]],
    [&[3, 1, 4], &[3, 2, 4], &[3, 2, 4]],
    [&[4, 3], &[4, 3], &[4, 5]],
    [&[2, 3, 0], &[2, 4, 0], &[2, 4, 2]],
    [&[2, 9, 2], &[2, 11, 2], &[2, 11, 1]],
];

#[test]
fn attention_finite_differences() {
    let mut rng = Rng::new(120);
    for shapes in SHAPES {
        for causal in [false, true] {
            let inputs: Vec<ArrayD<f64>> = shapes.iter().map(|s| rng.normal_array(s)).collect();
            let program = |tp: &mut Tape<f64>, v: &[Var]| g_attention(tp, v[0], v[1], v[2], causal);
            check_finite_differences("g_attention", &program, &inputs, 121);
        }
    }
}

#[test]
fn attention_equals_its_five_ops_in_value_and_gradient() {
    // Not at d = 0: the five ops scale by 1/√0 there (NaN); the op uses 1.
    let shapes: Vec<_> = SHAPES.into_iter().filter(|shapes| shapes[0].last() != Some(&0)).collect();
    equals_its_five_ops(&shapes, 122);
}

/// Contexts longer than the backward's block of 64 queries: several
/// blocks, a last one part full, causal blocks over fewer keys than the
/// whole; probabilities kept (wide features) and recomputed (narrow ones),
/// more keys than queries and fewer.
#[test]
fn long_contexts_in_blocks_of_queries_equal_the_five_ops() {
    let shapes: [[&[usize]; 3]; 4] = [
        [&[1, 70, 40], &[1, 70, 40], &[1, 70, 40]],
        [&[2, 130, 3], &[2, 140, 3], &[2, 140, 2]],
        [&[1, 150, 2], &[1, 90, 2], &[1, 90, 3]],
        [&[65, 4], &[65, 4], &[65, 1]],
    ];
    equals_its_five_ops(&shapes, 127);
}

/// The op against the five ops it stands for, in value and in the gradients
/// of a weighted sum of its output.
fn equals_its_five_ops(cases: &[[&[usize]; 3]], seed: u64) {
    let mut rng = Rng::new(seed);
    for &shapes in cases {
        for causal in [false, true] {
            let inputs: Vec<ArrayD<f64>> = shapes.iter().map(|s| rng.normal_array(s)).collect();
            let weights = rng.normal_array(&{
                let mut out = shapes[0].to_vec();
                *out.last_mut().unwrap() = *shapes[2].last().unwrap();
                out
            });
            let run = |fused: bool| {
                let mut tp = Tape::<f64>::new();
                let vars = [0, 1, 2].map(|i| tp.param(&inputs[i]));
                let y = if fused {
                    g_attention(&mut tp, vars[0], vars[1], vars[2], causal)
                } else {
                    unfused(&mut tp, vars, causal)
                };
                let w = tp.constant(&weights);
                let yw = g_mul(&mut tp, y, w);
                let loss = g_sum(&mut tp, yw);
                tp.backward(loss).unwrap();
                let value = tp.value(y).to_owned();
                (value, vars.map(|v| tp.grad(v).to_owned()))
            };
            let ((y1, g1), (y2, g2)) = (run(true), run(false));
            assert_close("attention value", &y1, &y2, 1e-12, 1e-12);
            for (a, b) in g1.iter().zip(&g2) {
                assert_close("attention gradient", a, b, 1e-11, 1e-12);
            }
        }
    }
}

#[test]
fn recomputed_probabilities_give_the_gradients_of_kept_ones() {
    // The same 12 queries over 12 keys, once with features wide enough for
    // the weights to be kept (d = 8: 144 weights, 288 inputs) and once
    // padded the other way (d = 2, with 6 zero features in the values'
    // place: 144 weights, 72 inputs, recomputed). Zero features add exact
    // zeros to every score, so the two runs compute the same function
    // (to rounding: the narrow queries are scaled to the wide scale).
    let mut rng = Rng::new(126);
    let (q, k, v) = (rng.normal_array(&[1, 12, 2]), rng.normal_array(&[1, 12, 2]), rng.normal_array(&[1, 12, 2]));
    let padded = |x: &ArrayD<f64>| {
        let mut wide = ArrayD::zeros(IxDyn(&[1, 12, 8]));
        wide.slice_mut(ndarray::s![.., .., ..2]).assign(x);
        wide
    };
    let run = |inputs: [ArrayD<f64>; 3]| {
        let mut tp = Tape::<f64>::new();
        let vars = inputs.map(|x| tp.param(x));
        let y = g_attention(&mut tp, vars[0], vars[1], vars[2], true);
        let loss = g_sum(&mut tp, y);
        tp.backward(loss).unwrap();
        vars.map(|x| tp.grad(x).slice(ndarray::s![.., .., ..2]).to_owned().into_dyn())
    };
    // The scale is 1/√d: scale the narrow queries to match the wide ones'.
    let narrow = run([&q * 0.5, k.clone(), v.clone()]); // √2 / √8
    let wide = run([padded(&q), padded(&k), padded(&v)]);
    assert_close("keys' gradient", &narrow[1], &wide[1], 1e-12, 1e-13);
    assert_close("values' gradient", &narrow[2], &wide[2], 1e-12, 1e-13);
}

#[test]
fn attention_second_order() {
    let mut rng = Rng::new(123);
    for causal in [false, true] {
        let inputs: Vec<ArrayD<f64>> = SHAPES[1].iter().map(|s| rng.normal_array(s)).collect();
        let program = |tp: &mut Tape<f64>, v: &[Var]| {
            let y = g_attention(tp, v[0], v[1], v[2], causal);
            g_tanh(tp, y)
        };
        check_second_order("g_attention", &program, &inputs, 124);
    }
}

#[test]
fn a_causal_query_sees_only_the_keys_before_it() {
    // The first query's output is the first value whatever the other keys are.
    let mut tp = Tape::<f64>::new();
    let q = tp.param(ndarray::arr2(&[[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]]));
    let k = tp.param(ndarray::arr2(&[[0.1, 0.2], [9.0, 9.0], [-4.0, 7.0]]));
    let v = tp.param(ndarray::arr2(&[[1.0, -1.0], [5.0, 6.0], [7.0, 8.0]]));
    let y = g_attention(&mut tp, q, k, v, true);
    assert_eq!(tp.value(y).slice(ndarray::s![0, ..]).to_vec(), vec![1.0, -1.0]);
    // ... and no gradient reaches the keys and values it cannot see from it.
    let first = g_slice(&mut tp, y, &[0, 0], &[1, 2]);
    let loss = g_sum(&mut tp, first);
    tp.backward(loss).unwrap();
    assert_eq!(tp.grad(k).slice(ndarray::s![1.., ..]).iter().copied().collect::<Vec<_>>(), vec![0.0; 4]);
    assert_eq!(tp.grad(v).slice(ndarray::s![1.., ..]).iter().copied().collect::<Vec<_>>(), vec![0.0; 4]);
}

#[test]
fn mismatched_shapes_are_errors_naming_them() {
    let mut tp = Tape::<f64>::new();
    let mark = tp.mark();
    let cases: [([&[usize]; 3], &str); 5] = [
        ([&[2, 3, 4], &[2, 3, 5], &[2, 3, 4]], "inner dimensions differ"),
        ([&[2, 3, 4], &[3, 3, 4], &[2, 3, 4]], "batch"),
        ([&[2, 3, 4], &[2, 3, 4], &[2, 2, 4]], "inner dimensions differ"),
        ([&[3, 4], &[2, 3, 4], &[2, 3, 4]], "dims"),
        ([&[4], &[4], &[4]], "got a 1-d one"),
    ];
    for (shapes, words) in cases {
        let [q, k, v] = shapes.map(|s| tp.param(ArrayD::<f64>::zeros(IxDyn(s))));
        let y = g_attention(&mut tp, q, k, v, false);
        assert!(y.is_poisoned());
        let error = tp.error().unwrap().to_string();
        assert!(error.starts_with("g_attention: "), "{error}");
        assert!(error.to_lowercase().contains(words), "{shapes:?}: {error}");
        tp.reset_to(mark);
    }
}

/// The gradients of a second backward on the same tape equal a fresh
/// tape's to the bit: the op writes every element of each gradient, as
/// it reuses the buffers of the backward before (`scratch_for`), which
/// hold that backward's gradients.
#[test]
fn a_second_backward_overwrites_every_gradient_of_the_first() {
    let mut rng = Rng::new(131);
    let shapes: [[&[usize]; 3]; 3] = [
        [&[2, 130, 3], &[2, 140, 3], &[2, 140, 2]],
        [&[1, 150, 2], &[1, 90, 2], &[1, 90, 3]],
        [&[2, 64, 8], &[2, 64, 8], &[2, 64, 8]],
    ];
    for shapes in shapes {
        for causal in [false, true] {
            let inputs: Vec<ArrayD<f64>> = shapes.iter().map(|s| rng.normal_array(s)).collect();
            let mut out_shape = shapes[0].to_vec();
            *out_shape.last_mut().unwrap() = *shapes[2].last().unwrap();
            let weights = [rng.normal_array(&out_shape), rng.normal_array(&out_shape)];
            let step = |tp: &mut Tape<f64>, vars: [Var; 3], w: &ArrayD<f64>| {
                let y = g_attention(tp, vars[0], vars[1], vars[2], causal);
                let w = tp.constant(w);
                let yw = g_mul(tp, y, w);
                let loss = g_sum(tp, yw);
                tp.backward(loss).unwrap();
                vars.map(|v| tp.grad(v).to_owned())
            };
            let mut reused = Tape::<f64>::new();
            let vars = [0, 1, 2].map(|i| reused.param(&inputs[i]));
            let mark = reused.mark();
            step(&mut reused, vars, &weights[0]);
            reused.reset_to(mark);
            let second = step(&mut reused, vars, &weights[1]);
            let mut fresh = Tape::<f64>::new();
            let fresh_vars = [0, 1, 2].map(|i| fresh.param(&inputs[i]));
            let expected = step(&mut fresh, fresh_vars, &weights[1]);
            for (k, (a, b)) in second.iter().zip(&expected).enumerate() {
                let same = a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "gradient {k} of {shapes:?}, causal {causal}");
            }
        }
    }
}
