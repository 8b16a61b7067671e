//! Results do not depend on the thread count: the same large graph (fused
//! regions included, by rows and folded, and a convolution) run with 1, 2 and 5 threads gives
//! the same bits in every value and gradient, and the same parameters after
//! Adam and AdamW steps.
//! (Kernels cut work into fixed-size pieces and sum in a fixed tree.)
//!
//! Nor on the vector width: the same graph computed with the kernels built
//! for the baseline, for AVX2 and for AVX-512 (`GRAD_SIMD`, each in a child
//! process, as the level is chosen once per process) gives the same bits.

mod common;

use common::Rng;
use grad_runtime::*;
use ndarray::ArrayD;

/// Values and gradients of a graph touching every parallel kernel, on
/// tensors large enough to be split.
fn run(threads: usize) -> Vec<ArrayD<f32>> {
    set_num_threads(threads).expect("a valid thread count");
    assert_eq!(num_threads(), threads);
    let mut rng = Rng::new(17);
    let mut tape = Tape::<f32>::new();
    let x = tape.param(rng.normal_array(&[320, 512]).mapv(|v| v as f32));
    let w = tape.param(rng.normal_array(&[512, 512]).mapv(|v| v as f32 * 0.05));
    let b = tape.param(rng.normal_array(&[512]).mapv(|v| v as f32));
    // A batch of products each too small to split, shared out by product.
    let [qa, qb] = [(); 2].map(|_| tape.param(rng.normal_array(&[16, 64, 64]).mapv(|v| v as f32)));
    let batched = g_bmm(&mut tape, qa, qb);
    // Medium products, cut in two for the caller and the helper thread:
    // one product (2^20 multiply-adds), and a batch forward and backward.
    let [ma, mb] = [[256, 64], [64, 64]].map(|shape| tape.param(rng.normal_array(&shape).mapv(|v| v as f32)));
    let medium = g_matmul(&mut tape, ma, mb);
    let [pa, pb] = [(); 2].map(|_| tape.param(rng.normal_array(&[8, 64, 64]).mapv(|v| v as f32)));
    let paired = g_bmm(&mut tape, pa, pb);
    // Medium elementwise passes (32K elements), cut in two the same way.
    let soft = g_softmax(&mut tape, paired, -1);
    let medium_tanh = g_tanh(&mut tape, soft);
    let medium_product = g_mul(&mut tape, soft, medium_tanh);
    // A convolution, shared out by chunks of images.
    let image = tape.param(rng.normal_array(&[8, 8, 24, 24]).mapv(|v| v as f32));
    let kernel = tape.param(rng.normal_array(&[16, 8, 3, 3]).mapv(|v| v as f32 * 0.1));
    let conv = g_conv2d(&mut tape, image, kernel, None, [1, 1], [1, 1], [1, 1], 1);
    // Attention shared out by heads, over blocks of queries, the
    // probabilities recomputed in backward (a context long beside the width).
    let [aq, ak, av] = [(); 3].map(|_| tape.param(rng.normal_array(&[4, 2, 130, 16]).mapv(|v| v as f32)));
    let attended = g_attention(&mut tape, aq, ak, av, true);
    // Packed attention, shared out by batches, and one sequence's by heads.
    let qkv = tape.param(rng.normal_array(&[6, 70, 48]).mapv(|v| v as f32));
    let packed = g_attention_packed(&mut tape, qkv, 2, true);
    let sequence = tape.param(rng.normal_array(&[1, 130, 48]).mapv(|v| v as f32));
    let one = g_attention_packed(&mut tape, sequence, 2, true);
    let s = g_sigmoid(&mut tape, x);
    let sx = g_mul(&mut tape, s, x);
    let t = g_tanh(&mut tape, sx);
    let h = g_matmul(&mut tape, t, w);
    let z = g_add(&mut tape, h, b);
    let e = g_exp(&mut tape, z);
    let p = g_softmax(&mut tape, e, -1);
    let l = g_log_softmax(&mut tape, z, 0);
    let pl = g_mul(&mut tape, p, l);
    let m = g_mean_axis(&mut tape, pl, 0, false);
    let total = g_sum(&mut tape, z);
    let loss = g_sum(&mut tape, m);
    let loss = g_add(&mut tape, loss, total);
    // Layer norms by groups of rows: a large one (the pool) and a medium
    // one (the caller and the helper thread).
    let [gamma, beta] = [(); 2].map(|_| tape.param(rng.normal_array(&[512]).mapv(|v| v as f32)));
    let [gamma64, beta64] = [(); 2].map(|_| tape.param(rng.normal_array(&[64]).mapv(|v| v as f32)));
    let normed = g_layer_norm(&mut tape, z, gamma, beta, 1e-5);
    let normed_medium = g_layer_norm(&mut tape, paired, gamma64, beta64, 1e-5);
    // Fused regions: by rows (`b` broadcast), and a folded sum.
    let f = grad!(tape; gelu(h + b) * 0.5 - z / 4.0);
    let folded = grad!(tape; sum(sigmoid(x) * x));
    let loss = grad!(tape; loss + sum(f * f) + folded + sum(batched * batched) + sum(conv * conv)
        + sum(medium * medium) + sum(paired * paired) + sum(medium_tanh * medium_tanh) + sum(medium_product)
        + sum(tanh(normed)) + sum(tanh(normed_medium)) + sum(attended * attended) + sum(packed * packed)
        + sum(one * one));
    tape.backward(loss).expect("the graph is well formed");
    let mut out: Vec<ArrayD<f32>> =
        [s, sx, t, h, z, e, p, l, m, f, folded, batched, conv, medium, paired, soft, medium_tanh, medium_product]
            .iter()
            .map(|&v| tape.value(v).to_owned())
            .collect();
    out.extend([normed, normed_medium, attended, packed, one, loss].iter().map(|&v| tape.value(v).to_owned()));
    let grads =
        [x, w, b, qa, qb, ma, mb, pa, pb, image, kernel, gamma, beta, gamma64, beta64, aq, ak, av, qkv, sequence];
    out.extend(grads.iter().map(|&v| tape.grad(v).to_owned()));
    for v in [qb, ma, mb, pa, pb, image, kernel, gamma, beta, gamma64, beta64, aq, ak, av, qkv, sequence] {
        tape.freeze(v).expect("a parameter of this tape");
    }
    // x and w are shared out over the pool, qa (65,536 elements) cut in two
    // for the caller and the helper.
    let mut adam = Adam::new(1e-2);
    let mut adamw = AdamW::new(1e-2);
    adam.add(&tape, x, 1e-4).unwrap();
    adamw.add(&tape, w, 1e-2).unwrap();
    adamw.add(&tape, b, 0.0).unwrap();
    adamw.add(&tape, qa, 1e-2).unwrap();
    for _ in 0..2 {
        adam.step(&mut tape).unwrap();
        adamw.step(&mut tape).unwrap();
    }
    out.extend([x, w, b, qa].iter().map(|&v| tape.value(v).to_owned()));
    out
}

/// A digest of every bit of `tensors`.
fn digest(tensors: &[ArrayD<f32>]) -> u64 {
    tensors
        .iter()
        .flat_map(|t| t.iter())
        .fold(0xcbf2_9ce4_8422_2325, |h, v| (h ^ u64::from(v.to_bits())).wrapping_mul(0x0100_0000_01b3))
}

#[test]
fn every_value_and_gradient_is_bit_identical_whatever_the_thread_count() {
    let one = run(1);
    for threads in [2, 5] {
        let many = run(threads);
        for (k, (a, b)) in one.iter().zip(&many).enumerate() {
            let same = a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "tensor {k} differs between 1 and {threads} threads");
        }
    }
    set_num_threads(0).unwrap();
}

/// Prints the digest of `run(2)` when run as a child of the test below.
#[test]
fn child_digest() {
    if std::env::var_os("GRAD_DIGEST_CHILD").is_some() {
        println!("digest {:016x}", digest(&run(2)));
    }
}

#[test]
fn every_value_and_gradient_is_bit_identical_whatever_the_vector_width() {
    let digest_at = |level: &str| {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_digest", "--nocapture", "--test-threads", "1"])
            .env("GRAD_DIGEST_CHILD", "1")
            .env("GRAD_SIMD", level)
            .output()
            .expect("the test binary runs itself");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let line = text.lines().find_map(|l| l.split("digest ").nth(1)).map(str::to_owned);
        line.unwrap_or_else(|| panic!("no digest from the child at level {level}: {text}"))
    };
    let widest = digest_at("widest");
    for level in ["avx2", "baseline"] {
        assert_eq!(digest_at(level), widest, "{level} differs from the widest level this CPU has");
    }
}
