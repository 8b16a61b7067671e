//! bf16 matrix products (`Tape::set_matmul_precision(Precision::Bf16)`):
//! values and gradients against `f64` products within the bound the
//! rounding allows, the same bits on the AVX512-BF16 path and its
//! emulation (each in a child process, as the path is chosen once per
//! process) and whatever the thread count, shapes at the edge of what can
//! exist, and a small MLP trained in bf16 staying near its `f32` run.
//!
//! The bound, for an element of an `m × k` by `k × n` product: each
//! operand rounded to bf16 is `x(1 + δ)` with `|δ| ≤ 2^-8`, so each
//! (exact) term is off by at most `(2^-7 + 2^-16)|a||b|`; summing `k`
//! terms in `f32` adds at most `(k + 2)·2^-24·Σ|a||b|` (one rounding per
//! term and per block of the sum, with room for the rounded operands);
//! flushed underflows add below `2^-125` a term:
//!
//! `|c − a·b| ≤ (2^-7 + (k + 2)·2^-23)·Σₚ|a_ip||b_pj| + k·2^-125`.
//!
//! Against `f64` products of the operands rounded to bf16 here (by a
//! rounding written independently of the library's), only the `f32` sum
//! is left: `(k + 2)·2^-23·Σₚ|ã_ip||b̃_pj|`.

mod common;

use std::time::Duration;

use common::{Rng, within};
use grad_runtime::*;
use ndarray::{Array2, ArrayD, Ix2, IxDyn};

/// `x` rounded to bf16 (to nearest, ties to even; denormals to zero), as
/// an `f32`: the two bf16 neighbours of `x` compared in `f64`.
fn to_bf16(x: f32) -> f32 {
    if !x.is_finite() || x.abs() < f32::MIN_POSITIVE {
        return if x.is_finite() { 0.0f32.copysign(x) } else { x };
    }
    let down = f32::from_bits(x.to_bits() & 0xffff_0000);
    let up = f32::from_bits((x.to_bits() & 0xffff_0000) + 0x1_0000);
    let (d_down, d_up) = ((f64::from(x) - f64::from(down)).abs(), (f64::from(up) - f64::from(x)).abs());
    let even = if (down.to_bits() >> 16) & 1 == 0 { down } else { up };
    if d_down < d_up {
        down
    } else if d_up < d_down {
        up
    } else {
        even
    }
}

fn f32_array(rng: &mut Rng, shape: &[usize]) -> ArrayD<f32> {
    rng.normal_array(shape).mapv(|v| v as f32)
}

/// `a @ b` in `f64` for 2-D `a`, `b` (after `map` on each element), with
/// `Σₚ|a_ip||b_pj|` beside each element.
fn reference(a: &ArrayD<f32>, b: &ArrayD<f32>, map: fn(f32) -> f32) -> (Array2<f64>, Array2<f64>) {
    let a = a.view().into_dimensionality::<Ix2>().expect("2-D").mapv(|v| f64::from(map(v)));
    let b = b.view().into_dimensionality::<Ix2>().expect("2-D").mapv(|v| f64::from(map(v)));
    (a.dot(&b), a.mapv(f64::abs).dot(&b.mapv(f64::abs)))
}

/// Checks a bf16 product `c` of `a` and `b` (2-D, inner dim `k`) against
/// both bounds of the module's header, naming `what`.
fn check_product(what: &str, c: &ArrayD<f32>, a: &ArrayD<f32>, b: &ArrayD<f32>) {
    let k = a.shape()[1] as f64;
    let (exact, scale) = reference(a, b, |v| v);
    let (rounded, rounded_scale) = reference(a, b, to_bf16);
    let c = c.view().into_dimensionality::<Ix2>().expect("2-D");
    for ((i, j), &value) in c.indexed_iter() {
        let value = f64::from(value);
        let bound = (2f64.powi(-7) + (k + 2.0) * 2f64.powi(-23)) * scale[[i, j]] + k * 2f64.powi(-125);
        let error = (value - exact[[i, j]]).abs();
        assert!(
            error <= bound,
            "{what}: element ({i}, {j}) is {value}, the product {}: off by {error:e} > {bound:e}",
            exact[[i, j]]
        );
        let sum_bound = (k + 2.0) * 2f64.powi(-23) * rounded_scale[[i, j]];
        let error = (value - rounded[[i, j]]).abs();
        assert!(
            error <= sum_bound,
            "{what}: element ({i}, {j}) is {value}, the product of bf16s {}: off by {error:e} > {sum_bound:e}",
            rounded[[i, j]]
        );
    }
}

fn bf16_tape() -> Tape<f32> {
    let mut tape = Tape::<f32>::new();
    tape.set_matmul_precision(Precision::Bf16).expect("an f32 tape computes in bf16");
    tape
}

/// `loss = Σ (a @ b) ⊙ w` for a random constant `w`, so that the gradient
/// `g = w` reaching the product is random too; returns the product's value
/// and the gradients of `a` and `b`.
fn product_and_gradients(
    tape: &mut Tape<f32>,
    rng: &mut Rng,
    a: &ArrayD<f32>,
    b: &ArrayD<f32>,
    product: fn(&mut Tape<f32>, Var, Var) -> Var,
) -> (ArrayD<f32>, ArrayD<f32>, ArrayD<f32>, ArrayD<f32>) {
    let (va, vb) = (tape.param(a.clone()), tape.param(b.clone()));
    let c = product(tape, va, vb);
    let w = f32_array(rng, tape.value(c).shape());
    let vw = tape.constant(w.clone());
    let weighted = g_mul(tape, c, vw);
    let loss = g_sum(tape, weighted);
    tape.backward(loss).expect("a well-formed product");
    (tape.value(c).to_owned(), w, tape.grad(va).to_owned(), tape.grad(vb).to_owned())
}

fn t(x: &ArrayD<f32>) -> ArrayD<f32> {
    x.t().as_standard_layout().into_owned()
}

/// Small, odd and larger shapes (several blocks of the inner dim, ragged
/// tiles): the product and both gradients, whose products read a
/// transposed operand (`g @ bᵀ`, `aᵀ @ g`), within the bounds.
#[test]
fn products_and_gradients_are_within_the_bf16_bound() {
    let mut rng = Rng::new(1);
    for (m, k, n) in [(1, 1, 1), (2, 3, 4), (7, 13, 5), (33, 301, 17), (13, 2051, 40), (130, 70, 97)] {
        let mut tape = bf16_tape();
        let (a, b) = (f32_array(&mut rng, &[m, k]), f32_array(&mut rng, &[k, n]));
        let (c, g, ga, gb) = product_and_gradients(&mut tape, &mut rng, &a, &b, g_matmul);
        let shape = format!("{m}x{k}x{n}");
        check_product(&format!("a @ b, {shape}"), &c, &a, &b);
        check_product(&format!("g @ bᵀ, {shape}"), &ga, &g, &t(&b));
        check_product(&format!("aᵀ @ g, {shape}"), &gb, &t(&a), &g);
    }
}

/// Batched products: `g_bmm`, and `g_matmul` of a stack by a matrix (one
/// folded product) and of broadcast stacks, each matrix within the bound.
#[test]
fn batched_products_are_within_the_bf16_bound() {
    let mut rng = Rng::new(2);
    let (batch, m, k, n) = (3, 9, 67, 11);
    let mut tape = bf16_tape();
    let (a, b) = (f32_array(&mut rng, &[batch, m, k]), f32_array(&mut rng, &[batch, k, n]));
    let (c, g, ga, gb) = product_and_gradients(&mut tape, &mut rng, &a, &b, g_bmm);
    let matrix = |x: &ArrayD<f32>, i: usize| x.index_axis(ndarray::Axis(0), i).to_owned().into_dyn();
    for i in 0..batch {
        let (ai, bi, gi) = (matrix(&a, i), matrix(&b, i), matrix(&g, i));
        check_product(&format!("bmm product {i}"), &matrix(&c, i), &ai, &bi);
        check_product(&format!("bmm g @ bᵀ {i}"), &matrix(&ga, i), &gi, &t(&bi));
        check_product(&format!("bmm aᵀ @ g {i}"), &matrix(&gb, i), &t(&ai), &gi);
    }

    // [batch, m, k] @ [k, n]: one product of batch·m rows; b's gradient sums the batch.
    let mut tape = bf16_tape();
    let w = f32_array(&mut rng, &[k, n]);
    let (c, g, _, gw) = product_and_gradients(&mut tape, &mut rng, &a, &w, g_matmul);
    let rows = |x: &ArrayD<f32>| {
        x.to_shape((x.len() / x.shape()[x.ndim() - 1], x.shape()[x.ndim() - 1])).unwrap().to_owned().into_dyn()
    };
    check_product("stack @ matrix", &rows(&c), &rows(&a), &w);
    check_product("stackᵀ @ g", &gw, &t(&rows(&a)), &rows(&g));

    // [2, 1, m, k] @ [3, k, n] broadcasts to [2, 3, m, n].
    let mut tape = bf16_tape();
    let (x, y) = (f32_array(&mut rng, &[2, 1, m, k]), f32_array(&mut rng, &[3, k, n]));
    let (vx, vy) = (tape.param(x.clone()), tape.param(y.clone()));
    let c = g_matmul(&mut tape, vx, vy);
    let c = tape.value(c).to_owned();
    assert_eq!(c.shape(), &[2, 3, m, n]);
    for (i, j) in [(0, 0), (1, 2)] {
        let xi = x.index_axis(ndarray::Axis(0), i).index_axis(ndarray::Axis(0), 0).to_owned().into_dyn();
        let ci = c.index_axis(ndarray::Axis(0), i).index_axis(ndarray::Axis(0), j).to_owned().into_dyn();
        check_product(&format!("broadcast product ({i}, {j})"), &ci, &xi, &matrix(&y, j));
    }
}

/// The setting changes the products, and only them: the same graph in
/// `f32` differs, and the values a bf16 product reads stay `f32`.
#[test]
fn the_setting_applies_to_the_products_alone() {
    let mut rng = Rng::new(3);
    let (a, b) = (f32_array(&mut rng, &[40, 300]), f32_array(&mut rng, &[300, 20]));
    let run = |precision: Precision| {
        let mut tape = Tape::<f32>::new();
        tape.set_matmul_precision(precision).unwrap();
        assert_eq!(tape.matmul_precision(), precision);
        let (va, vb) = (tape.param(a.clone()), tape.param(b.clone()));
        let c = g_matmul(&mut tape, va, vb);
        let e = g_exp(&mut tape, va); // not a product: f32 either way
        (tape.value(c).to_owned(), tape.value(e).to_owned(), tape.value(va).to_owned())
    };
    let (c32, e32, a32) = run(Precision::F32);
    let (c16, e16, a16) = run(Precision::Bf16);
    assert!(c32 != c16, "bf16 products differ from f32 ones");
    assert_eq!(e32, e16);
    assert_eq!((a32, a16.clone()), (a.clone(), a));
}

/// `sum((a @ b)²)` on `tape`: the parameters and the loss.
fn squared_product(tape: &mut Tape<f32>, a: &ArrayD<f32>, b: &ArrayD<f32>) -> (Var, Var, Var) {
    let (va, vb) = (tape.param(a.clone()), tape.param(b.clone()));
    let c = g_matmul(tape, va, vb);
    let squared = g_mul(tape, c, c);
    (va, vb, g_sum(tape, squared))
}

/// A node keeps the precision it was recorded with: its backward products
/// are bf16 even when the tape is back to `f32` by the time backward runs.
#[test]
fn backward_uses_the_precision_of_the_forward() {
    let mut rng = Rng::new(4);
    let (a, b) = (f32_array(&mut rng, &[30, 70]), f32_array(&mut rng, &[70, 25]));
    let run = |switch_back: bool| {
        let mut tape = bf16_tape();
        let (va, vb, loss) = squared_product(&mut tape, &a, &b);
        if switch_back {
            tape.set_matmul_precision(Precision::F32).unwrap();
        }
        tape.backward(loss).unwrap();
        (tape.grad(va).to_owned(), tape.grad(vb).to_owned())
    };
    let (ga, gb) = run(false);
    assert_eq!(run(true), (ga.clone(), gb));
    // And bf16 gradients differ from f32 ones.
    let mut tape = Tape::<f32>::new();
    let (va, _, loss) = squared_product(&mut tape, &a, &b);
    tape.backward(loss).unwrap();
    assert!(tape.grad(va).to_owned() != ga);
}

#[test]
fn recorded_gradients_use_the_precision_of_the_forward_too() {
    // grad_graph records a product's gradient products in the product's
    // precision: the same values whatever the tape's setting when it runs,
    // and those of the kernel backward.
    let mut rng = Rng::new(5);
    let (a, b) = (f32_array(&mut rng, &[20, 40]), f32_array(&mut rng, &[40, 15]));
    let run = |switch_back: bool| {
        let mut tape = bf16_tape();
        let (va, vb, loss) = squared_product(&mut tape, &a, &b);
        if switch_back {
            tape.set_matmul_precision(Precision::F32).unwrap();
        }
        let recorded = tape.grad_graph(loss, &[va, vb]).unwrap();
        tape.backward(loss).unwrap();
        assert_eq!(tape.matmul_precision(), if switch_back { Precision::F32 } else { Precision::Bf16 });
        let values: Vec<ArrayD<f32>> = recorded.iter().map(|&g| tape.value(g).to_owned()).collect();
        (values, [tape.grad(va).to_owned(), tape.grad(vb).to_owned()])
    };
    let (recorded, kernel) = run(false);
    assert_eq!(run(true).0, recorded);
    assert_eq!(recorded, kernel.to_vec());
}

/// The attention test's random `q`, `k`, `v` and loss weights `w`, each `[2, 40, 24]`.
fn attention_inputs() -> [ArrayD<f32>; 4] {
    let mut rng = Rng::new(12);
    [(); 4].map(|_| f32_array(&mut rng, &[2, 40, 24]))
}

/// Attention's output and gradients in `precision` (causal, on
/// [`attention_inputs`]), for the loss `Σ out ⊙ w`.
fn attention_and_gradients(precision: Precision, switch_back: bool) -> [ArrayD<f32>; 4] {
    let [q, k, v, w] = attention_inputs();
    let mut tape = Tape::<f32>::new();
    tape.set_matmul_precision(precision).unwrap();
    let [q, k, v] = [q, k, v].map(|x| tape.param(x));
    let out = g_attention(&mut tape, q, k, v, true);
    if switch_back {
        tape.set_matmul_precision(Precision::F32).unwrap();
    }
    let w = tape.constant(w);
    let weighted = g_mul(&mut tape, out, w);
    let loss = g_sum(&mut tape, weighted);
    tape.backward(loss).unwrap();
    [tape.value(out).to_owned(), tape.grad(q).to_owned(), tape.grad(k).to_owned(), tape.grad(v).to_owned()]
}

/// Attention computes its products (scores, weighted values and the
/// products of its backward) in the precision it was recorded with.
///
/// Forward, element by element: the scores of bf16-rounded operands are
/// off by at most `E_ij = (2^-7 + (d + 2)·2^-23)·Σ|q_ip||k_jp|/√d` (the
/// product's bound), so each probability by a factor within
/// `exp(±2·max_j E_ij)`; rounding the probabilities and the values adds
/// `(1 + 2^-8)² − 1`, the `f32` sums and softmax `(tk + 8)·2^-23`, all
/// relative to `Σ_j p_ij |v_jc|`. Backward: five rounded stages (the
/// scores, the probabilities, `g vᵀ`, the scores' gradient, and the
/// operand each gradient product reads), each at most `2^-7` relative,
/// bound the gradients normwise, beside the forward's factor.
#[test]
fn attention_products_follow_the_setting() {
    let [out, gq, gk, gv] = attention_and_gradients(Precision::Bf16, false);
    let f32_run = attention_and_gradients(Precision::F32, false);
    assert!(out != f32_run[0] && gq != f32_run[1], "bf16 attention differs from f32");
    assert_eq!(attention_and_gradients(Precision::Bf16, true), [out.clone(), gq.clone(), gk.clone(), gv.clone()]);

    // The exact attention in f64, and the gradients of an f64 tape.
    let [q, k, v, w] = attention_inputs().map(|x| x.mapv(f64::from));
    let inputs = [q, k, v];
    let (t, d) = (40, 24);
    let mut worst_rho = 0.0f64;
    for h in 0..2 {
        for i in 0..t {
            let at = |x: &ArrayD<f64>, r: usize, c: usize| x[[h, r, c]];
            let scores: Vec<f64> =
                (0..=i).map(|j| (0..d).map(|p| at(&inputs[0], i, p) * at(&inputs[1], j, p)).sum::<f64>()).collect();
            let scale = 1.0 / (d as f64).sqrt();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max) * scale;
            let exps: Vec<f64> = scores.iter().map(|s| (s * scale - max).exp()).collect();
            let total: f64 = exps.iter().sum();
            let e = (0..=i)
                .map(|j| {
                    let abs: f64 = (0..d).map(|p| (at(&inputs[0], i, p) * at(&inputs[1], j, p)).abs()).sum();
                    (2f64.powi(-7) + (d as f64 + 2.0) * 2f64.powi(-23)) * abs * scale
                })
                .fold(0.0, f64::max);
            let rho = (2.0 * e).exp() - 1.0;
            worst_rho = worst_rho.max(rho);
            for c in 0..d {
                let exact: f64 = (0..=i).map(|j| exps[j] / total * at(&inputs[2], j, c)).sum();
                let weight: f64 = (0..=i).map(|j| exps[j] / total * at(&inputs[2], j, c).abs()).sum();
                let relative = (1.0 + rho) * (1.0 + 2f64.powi(-8)).powi(2) - 1.0 + (t as f64 + 8.0) * 2f64.powi(-23);
                let error = (f64::from(out[[h, i, c]]) - exact).abs();
                assert!(error <= relative * weight, "out[{h}, {i}, {c}] off by {error:e} > {:e}", relative * weight);
            }
        }
    }
    let mut tape = Tape::<f64>::new();
    let [q, k, v] = inputs.map(|x| tape.param(x));
    let out64 = g_attention(&mut tape, q, k, v, true);
    let w = tape.constant(w);
    let weighted = g_mul(&mut tape, out64, w);
    let loss = g_sum(&mut tape, weighted);
    tape.backward(loss).unwrap();
    let bound = worst_rho + 5.0 * 2f64.powi(-7);
    for (name, got, var) in [("q", &gq, q), ("k", &gk, k), ("v", &gv, v)] {
        let exact = tape.grad(var);
        let error = got.iter().zip(exact.iter()).map(|(&a, &b)| (f64::from(a) - b).powi(2)).sum::<f64>().sqrt();
        let norm = exact.iter().map(|b| b * b).sum::<f64>().sqrt();
        assert!(error <= bound * norm, "the gradient of {name} is off by {:e} of its norm > {bound:e}", error / norm);
    }
}

/// `grad_graph` records attention's gradient (its products replayed) in
/// the precision attention was recorded with, whatever the setting then.
#[test]
fn recorded_attention_gradients_use_the_precision_of_the_forward() {
    let mut rng = Rng::new(13);
    let inputs = [(); 3].map(|_| f32_array(&mut rng, &[3, 20, 16]));
    let run = |precision: Precision, switch_back: bool| {
        let mut tape = Tape::<f32>::new();
        tape.set_matmul_precision(precision).unwrap();
        let [q, k, v] = inputs.clone().map(|x| tape.param(x));
        let out = g_attention(&mut tape, q, k, v, false);
        let squared = g_mul(&mut tape, out, out);
        let loss = g_sum(&mut tape, squared);
        if switch_back {
            tape.set_matmul_precision(Precision::F32).unwrap();
        }
        let recorded = tape.grad_graph(loss, &[q, k, v]).unwrap();
        recorded.iter().map(|&g| tape.value(g).to_owned()).collect::<Vec<_>>()
    };
    let bf16 = run(Precision::Bf16, false);
    assert_eq!(run(Precision::Bf16, true), bf16);
    assert!(run(Precision::F32, false) != bf16, "bf16 differs from f32");
}

#[test]
fn an_f64_tape_refuses_bf16_and_keeps_f32() {
    let mut tape = Tape::<f64>::new();
    let error = tape.set_matmul_precision(Precision::Bf16).unwrap_err();
    assert_eq!(error.kind(), &ErrorKind::PrecisionUnsupported { precision: "bf16", dtype: "f64" });
    assert_eq!(error.op(), "Tape::set_matmul_precision");
    let message = error.to_string();
    assert!(
        message.contains("bf16 matrix products need an f32 tape") && message.contains("tests/bf16.rs:"),
        "{message}"
    );
    assert_eq!(tape.matmul_precision(), Precision::F32);
    assert!(tape.is_ok(), "a refused setting does not poison the tape");
    tape.set_matmul_precision(Precision::F32).expect("f32 precision is the f64 tape's own");
}

/// Values and gradients of products large enough to be split over threads
/// (the rows of one product, a batch by product and in two halves, a
/// convolution by chunks of images, an attention by heads).
fn run_graph() -> Vec<ArrayD<f32>> {
    let mut rng = Rng::new(5);
    let mut tape = bf16_tape();
    let [x, w] = [[256, 384], [384, 320]].map(|shape| tape.param(f32_array(&mut rng, &shape)));
    let [p, q] = [(); 2].map(|_| tape.param(f32_array(&mut rng, &[16, 48, 64])));
    let [r, s] = [[8, 64, 64], [8, 64, 48]].map(|shape| tape.param(f32_array(&mut rng, &shape)));
    let y = g_matmul(&mut tape, x, w);
    let pq = g_transpose(&mut tape, q);
    let batch = g_bmm(&mut tape, p, pq);
    let halves = g_bmm(&mut tape, r, s);
    let [image, kernel] = [[32, 16, 16, 16], [16, 16, 3, 3]].map(|shape| tape.param(f32_array(&mut rng, &shape)));
    let conv = g_conv2d(&mut tape, image, kernel, None, [1, 1], [1, 1], [1, 1], 1);
    let [aq, ak, av] = [(); 3].map(|_| tape.param(f32_array(&mut rng, &[16, 64, 32])));
    let attention = g_attention(&mut tape, aq, ak, av, true);
    let la = g_sum(&mut tape, attention);
    let (sy, sb, sh) = (g_tanh(&mut tape, y), g_tanh(&mut tape, batch), g_tanh(&mut tape, halves));
    let (ly, lb, lh, lc) = (g_sum(&mut tape, sy), g_sum(&mut tape, sb), g_sum(&mut tape, sh), g_sum(&mut tape, conv));
    let l = g_add(&mut tape, ly, lb);
    let l = g_add(&mut tape, l, lh);
    let l = g_add(&mut tape, l, lc);
    let loss = g_add(&mut tape, l, la);
    tape.backward(loss).expect("a well-formed graph");
    let outputs = [y, batch, halves, conv, attention];
    let mut out: Vec<ArrayD<f32>> = outputs.iter().map(|&v| tape.value(v).to_owned()).collect();
    out.extend([x, w, p, q, r, s, image, kernel, aq, ak, av].iter().map(|&v| tape.grad(v).to_owned()));
    out
}

fn digest(tensors: &[ArrayD<f32>]) -> u64 {
    tensors
        .iter()
        .flatten()
        .fold(0xcbf2_9ce4_8422_2325, |h: u64, v| (h ^ u64::from(v.to_bits())).wrapping_mul(0x100_0000_01b3))
}

#[test]
fn the_same_bits_on_one_and_two_threads() {
    set_num_threads(1).unwrap();
    let one = run_graph();
    set_num_threads(2).unwrap();
    let two = run_graph();
    set_num_threads(0).unwrap();
    for (k, (x, y)) in one.iter().zip(&two).enumerate() {
        assert!(x.iter().zip(y).all(|(x, y)| x.to_bits() == y.to_bits()), "tensor {k} differs between 1 and 2 threads");
    }
}

/// Prints the digest of `run_graph` when run as a child of the test below.
#[test]
fn child_digest() {
    if std::env::var_os("GRAD_BF16_DIGEST_CHILD").is_some() {
        println!("digest {:016x}", digest(&run_graph()));
    }
}

/// `GRAD_SIMD=avx512` keeps AVX-512 but takes the emulation of
/// `vdpbf16ps` (as do `avx2` and `baseline`, at their widths): every
/// value and gradient has the bits of the CPU's own path.
#[test]
fn the_emulation_gives_the_bits_of_the_instruction() {
    let digest_at = |level: &str| {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_digest", "--nocapture", "--test-threads", "1"])
            .env("GRAD_BF16_DIGEST_CHILD", "1")
            .env("GRAD_SIMD", level)
            .output()
            .expect("the test binary runs itself");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let line = text.lines().find_map(|l| l.split("digest ").nth(1)).map(str::to_owned);
        line.unwrap_or_else(|| panic!("no digest from the child at GRAD_SIMD={level}: {text}"))
    };
    let widest = digest_at("widest");
    for level in ["avx512", "avx2", "baseline"] {
        assert_eq!(digest_at(level), widest, "GRAD_SIMD={level} differs from this CPU's widest path");
    }
}

/// The largest dim ndarray accepts.
const HUGE: usize = isize::MAX as usize;

/// Empty products, 1 × 1, and shapes at the usize limit: products that
/// exist are made (zeros where the inner dim is 0), those that cannot are
/// refused with `TooLarge`, nothing panics or walks a huge dim.
#[test]
fn extreme_shapes_neither_panic_nor_hang() {
    within(Duration::from_secs(20), "bf16 products of extreme shapes", || {
        let zeros = |shape: &[usize]| ArrayD::<f32>::zeros(IxDyn(shape));
        let mut tape = bf16_tape();
        let mark = tape.mark();
        for (sa, sb, out) in [
            (&[3, 0][..], &[0, 4][..], &[3, 4][..]),
            (&[0, 5], &[5, 2], &[0, 2]),
            (&[0, HUGE], &[HUGE, 0], &[0, 0]),
            (&[1, 1], &[1, 1], &[1, 1]),
            (&[HUGE, 0, 0], &[HUGE, 0, 0], &[HUGE, 0, 0]),
        ] {
            let (a, b) = (tape.param(zeros(sa)), tape.param(zeros(sb)));
            let c = if sa.len() == 3 { g_bmm(&mut tape, a, b) } else { g_matmul(&mut tape, a, b) };
            assert!(tape.is_ok(), "{sa:?} @ {sb:?}: {:?}", tape.error());
            assert_eq!(tape.value(c).shape(), out);
            assert!(tape.value(c).iter().all(|&v| v == 0.0));
            let loss = g_sum(&mut tape, c);
            tape.backward(loss).expect("backward over empty products");
            assert_eq!(tape.grad(a).shape(), sa);
            tape.reset_to(mark);
        }
        let one = |tape: &mut Tape<f32>, v: f32| tape.param(ndarray::arr2(&[[v]]));
        let (a, b) = (one(&mut tape, 1.0 + 1.0 / 1024.0), one(&mut tape, 3.0));
        let c = g_matmul(&mut tape, a, b);
        assert_eq!(tape.value(c)[[0, 0]], 3.0, "1 + 2^-10 rounds to the bf16 1");
        tape.reset_to(mark);
        // Attention with no query, no feature, or values of no width.
        for shapes in
            [[[2, 0, 8], [2, 5, 8], [2, 5, 3]], [[2, 4, 0], [2, 5, 0], [2, 5, 3]], [[2, 4, 8], [2, 5, 8], [2, 5, 0]]]
        {
            let [q, k, v] = shapes.map(|shape| tape.param(zeros(&shape)));
            let out = g_attention(&mut tape, q, k, v, true);
            assert!(tape.is_ok(), "attention of {shapes:?}: {:?}", tape.error());
            let loss = g_sum(&mut tape, out);
            tape.backward(loss).expect("backward over an empty attention");
            for (x, shape) in [q, k, v].into_iter().zip(shapes) {
                let grad = tape.grad(x).to_owned();
                assert!(grad.shape() == shape && grad.iter().all(|g| g.is_finite()), "the gradient of {shape:?}");
            }
            tape.reset_to(mark);
        }
        // One query, one key: the probability is 1, the value rounded to bf16.
        let [q, k, v] = [2.0, 3.0, 1.0 + 1.0 / 1024.0].map(|x| tape.param(ArrayD::from_elem(IxDyn(&[1, 1, 1]), x)));
        let out = g_attention(&mut tape, q, k, v, false);
        assert_eq!(tape.value(out)[[0, 0, 0]], 1.0, "1 + 2^-10 rounds to the bf16 1");
        tape.reset_to(mark);
        for (sa, sb, refused) in [
            (&[HUGE, 0][..], &[0, HUGE][..], &[HUGE, HUGE][..]),
            (&[1 << 31, 0], &[0, 1 << 31], &[1 << 31, 1 << 31]),
            (&[1, HUGE, 0], &[1, 0, HUGE], &[1, HUGE, HUGE]),
        ] {
            let (a, b) = (tape.param(zeros(sa)), tape.param(zeros(sb)));
            let c = if sa.len() == 3 { g_bmm(&mut tape, a, b) } else { g_matmul(&mut tape, a, b) };
            assert!(c.is_poisoned());
            match tape.error().map(GradError::kind) {
                Some(ErrorKind::TooLarge { shape, .. }) => assert_eq!(shape, refused),
                other => panic!("{sa:?} @ {sb:?}: expected TooLarge, got {other:?}"),
            }
            tape.reset_to(mark);
            assert!(tape.is_ok());
        }
    });
}

/// A small MLP (x[64, 32] → 64 relu → 10, mse) trained 30 Adam steps from
/// the same start with f32 and with bf16 products: the loss curves stay
/// within 1% of each other (0.15% measured), the trained weights within 3%
/// (relative L2; 1.3% and 0.7% measured).
#[test]
fn an_mlp_trained_in_bf16_stays_near_its_f32_run() {
    let mut rng = Rng::new(6);
    let x = f32_array(&mut rng, &[64, 32]);
    let target = f32_array(&mut rng, &[64, 10]);
    let w1 = f32_array(&mut rng, &[32, 64]).mapv(|v| v * 0.2);
    let w2 = f32_array(&mut rng, &[64, 10]).mapv(|v| v * 0.2);
    let train = |precision: Precision| {
        let mut tape = Tape::<f32>::new();
        tape.set_matmul_precision(precision).unwrap();
        let (p1, b1) = (tape.param(w1.clone()), tape.param(ArrayD::<f32>::zeros(IxDyn(&[64]))));
        let (p2, b2) = (tape.param(w2.clone()), tape.param(ArrayD::<f32>::zeros(IxDyn(&[10]))));
        let mut opt = Adam::new(1e-2);
        for p in [p1, b1, p2, b2] {
            opt.add(&tape, p, 0.0).unwrap();
        }
        let mark = tape.mark();
        let mut losses = Vec::new();
        for _ in 0..30 {
            let (xv, tv) = (tape.constant(x.clone()), tape.constant(target.clone()));
            let loss = grad!(tape; mse(relu(xv @ p1 + b1) @ p2 + b2, tv));
            tape.backward(loss).unwrap();
            losses.push(tape.scalar(loss));
            opt.step(&mut tape).unwrap();
            tape.reset_to(mark);
        }
        (losses, tape.value(p1).to_owned(), tape.value(p2).to_owned())
    };
    let (l32, w1_32, w2_32) = train(Precision::F32);
    let (l16, w1_16, w2_16) = train(Precision::Bf16);
    assert!(l32[29] < 0.7 * l32[0], "the f32 run learns: {l32:?}");
    for (step, (a, b)) in l32.iter().zip(&l16).enumerate() {
        assert!((a - b).abs() <= 0.01 * a, "step {step}: loss {b} in bf16, {a} in f32");
    }
    let relative = |a: &ArrayD<f32>, b: &ArrayD<f32>| {
        let diff: f32 = a.iter().zip(b).map(|(a, b)| (a - b) * (a - b)).sum();
        (diff / a.iter().map(|a| a * a).sum::<f32>()).sqrt()
    };
    assert!(relative(&w1_32, &w1_16) <= 0.03, "w1 {}", relative(&w1_32, &w1_16));
    assert!(relative(&w2_32, &w2_16) <= 0.03, "w2 {}", relative(&w2_32, &w2_16));
    assert!(l32 != l16, "the bf16 run computes in bf16");
}

/// `g_conv2d` lowers to products, which follow the setting: its value and
/// both gradients within the bound against `f64` (each scale `Σ|x||w|` is
/// the same convolution of the absolute values, in `f64`).
#[test]
fn conv2d_products_are_within_the_bf16_bound() {
    let mut rng = Rng::new(7);
    let (x, w) = (f32_array(&mut rng, &[2, 6, 9, 9]), f32_array(&mut rng, &[4, 3, 3, 3]));
    let r = f32_array(&mut rng, &[2, 4, 5, 5]);
    // (value, gradient of x, gradient of w) of Σ conv(x, w) ⊙ r, on `tape`.
    fn run<T: Float>(tape: &mut Tape<T>, [x, w, r]: [ArrayD<T>; 3]) -> [ArrayD<T>; 3] {
        let (vx, vw, vr) = (tape.param(x), tape.param(w), tape.constant(r));
        let y = g_conv2d(tape, vx, vw, None, [2, 2], [1, 1], [1, 1], 2);
        let weighted = g_mul(tape, y, vr);
        let loss = g_sum(tape, weighted);
        tape.backward(loss).expect("a well-formed convolution");
        [tape.value(y).to_owned(), tape.grad(vx).to_owned(), tape.grad(vw).to_owned()]
    }
    let wide = |a: &ArrayD<f32>, abs: bool| a.mapv(|v| if abs { f64::from(v).abs() } else { f64::from(v) });
    let got = run(&mut bf16_tape(), [x.clone(), w.clone(), r.clone()]);
    let exact = run(&mut Tape::<f64>::new(), [wide(&x, false), wide(&w, false), wide(&r, false)]);
    let scale = run(&mut Tape::<f64>::new(), [wide(&x, true), wide(&w, true), wide(&r, true)]);
    // Terms per element: 3·3·3 for the value, 2·3·3 (output channels of a group
    // by the kernel) for x's gradient, 2·5·5 (images by output positions) for w's.
    for (((what, k), got), (exact, scale)) in
        [("value", 27.0), ("x's gradient", 18.0), ("w's gradient", 50.0)].iter().zip(&got).zip(exact.iter().zip(&scale))
    {
        for ((&v, &e), &s) in got.iter().zip(exact).zip(scale) {
            let bound = (2f64.powi(-7) + (k + 2.0) * 2f64.powi(-23)) * s + k * 2f64.powi(-125);
            assert!((f64::from(v) - e).abs() <= bound, "conv2d {what}: {v} against {e}, bound {bound:e}");
        }
    }
    let f32_run = run(&mut Tape::<f32>::new(), [x, w, r]);
    assert!(f32_run[0] != got[0] && f32_run[2] != got[2], "the convolution's products are bf16");
}
