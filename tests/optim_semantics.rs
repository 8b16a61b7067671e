//! The optimizers' update rules pinned bit for bit against hand
//! computations written out here in the documented order of operations,
//! plus the rules around them: skipping untouched parameters, per-parameter
//! L2, clipping, the step count across `reset_to`, learning-rate changes.

mod common;

use common::Rng;
use grad_runtime::{Adam, AdamW, Float, Optimizer, Sgd, Tape, Var, g_add, g_mul, g_sub, g_sum};
use ndarray::Array1;

fn arr<T: Float>(xs: &[f64]) -> Array1<T> {
    xs.iter().map(|&x| T::from_f64(x)).collect()
}

/// `n` seeded standard-normal numbers: enough elements that a change to
/// the order of operations flips some bit of the result.
fn random(seed: u64, n: usize) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.normal()).collect()
}

fn value<T: Float>(tape: &Tape<T>, v: Var) -> Vec<T> {
    tape.value(v).iter().copied().collect()
}

/// `sum((w - c)²) + sum(b·k)`. Its gradients, formed exactly as backward
/// forms them: `d + d` with `d = w - c` for `w` (each factor of `d·d`
/// contributes `1·d`), and `k` for `b`.
fn quadratic<T: Float>(tape: &mut Tape<T>, w: Var, b: Var, c: &[f64], k: &[f64]) -> Var {
    let sw = squared_distance(tape, w, c);
    let k = tape.constant(arr::<T>(k));
    let bk = g_mul(tape, b, k);
    let sb = g_sum(tape, bk);
    g_add(tape, sw, sb)
}

/// `sum((w - c)²)`, whose gradient is `d + d` with `d = w - c`.
fn squared_distance<T: Float>(tape: &mut Tape<T>, w: Var, c: &[f64]) -> Var {
    let c = tape.constant(arr::<T>(c));
    let d = g_sub(tape, w, c);
    let dd = g_mul(tape, d, d);
    g_sum(tape, dd)
}

fn grad_w_by_hand<T: Float>(w: &[T], c: &[f64]) -> Vec<T> {
    w.iter()
        .zip(c)
        .map(|(&w, &c)| {
            let d = w - T::from_f64(c);
            d + d
        })
        .collect()
}

/// One Adam update of one parameter, as DESIGN.md writes it, with the
/// step's powers `β1ᵗ`, `β2ᵗ` given by the caller.
#[allow(clippy::too_many_arguments)]
fn adam_by_hand<T: Float>(
    w: &mut [T],
    grad: &[T],
    m: &mut [T],
    v: &mut [T],
    alpha: f64,
    lr: f64,
    (beta1_t, beta2_t): (f64, f64),
) {
    let (beta1, beta2, eps) = (0.9f64, 0.999f64, 1e-8f64);
    // Scalars in f64, rounded to T once.
    let lr_t = T::from_f64(lr * (1.0 - beta2_t).sqrt() / (1.0 - beta1_t));
    let (b1, omb1) = (T::from_f64(beta1), T::from_f64(1.0 - beta1));
    let (b2, omb2) = (T::from_f64(beta2), T::from_f64(1.0 - beta2));
    let (alpha, eps) = (T::from_f64(alpha), T::from_f64(eps));
    for i in 0..w.len() {
        let g = grad[i] + alpha * w[i];
        m[i] = b1 * m[i] + omb1 * g;
        v[i] = b2 * v[i] + omb2 * (g * g);
        w[i] -= (lr_t * m[i]) / (v[i].sqrt() + eps);
    }
}

/// The seed's test: two Adam steps on a weight (L2 0.01) and a bias (no
/// L2) equal the hand computation to the bit.
fn adam_two_steps_bit_for_bit<T: Float>() {
    // Enough random elements that any change to the order of operations
    // (or to which scalars are formed in f64) flips some bit, in f32 and f64.
    let n = 32;
    let (w0, c) = (random(5, n), random(6, n));
    let (c, k) = (&c[..], [0.5]);
    let mut tape = Tape::<T>::new();
    let w = tape.param(arr::<T>(&w0));
    let b = tape.param(arr::<T>(&[0.25]));
    let mut opt = Adam::new(0.1);
    opt.add(&tape, w, 0.01).unwrap();
    opt.add(&tape, b, 0.0).unwrap();
    let mark = tape.mark();

    let (mut hw, mut hb) = (value(&tape, w), value(&tape, b));
    let (mut mw, mut vw) = (vec![T::zero(); n], vec![T::zero(); n]);
    let (mut mb, mut vb) = (vec![T::zero(); 1], vec![T::zero(); 1]);
    let (beta1, beta2) = (0.9f64, 0.999f64);
    for powers in [(beta1, beta2), (beta1 * beta1, beta2 * beta2)] {
        let loss = quadratic(&mut tape, w, b, c, &k);
        tape.backward(loss).unwrap();
        let grad_w = grad_w_by_hand(&hw, c);
        assert_eq!(tape.grad(w).iter().copied().collect::<Vec<T>>(), grad_w);
        opt.step(&mut tape).unwrap();
        tape.reset_to(mark);

        adam_by_hand(&mut hw, &grad_w, &mut mw, &mut vw, 0.01, 0.1, powers);
        adam_by_hand(&mut hb, &arr::<T>(&k).to_vec(), &mut mb, &mut vb, 0.0, 0.1, powers);
        assert_eq!(value(&tape, w), hw);
        assert_eq!(value(&tape, b), hb);
        assert_eq!(opt.moments(w).unwrap(), (&mw[..], &vw[..]));
        assert_eq!(opt.moments(b).unwrap(), (&mb[..], &vb[..]));
    }
    assert_eq!(opt.steps(), 2);
}

#[test]
fn adam_two_steps_match_the_hand_computation_bit_for_bit_f32() {
    adam_two_steps_bit_for_bit::<f32>();
}

#[test]
fn adam_two_steps_match_the_hand_computation_bit_for_bit_f64() {
    adam_two_steps_bit_for_bit::<f64>();
}

#[test]
fn f32_scalars_are_rounded_from_f64_not_computed_in_f32() {
    // The f32 test above pins a real choice: 1−β1 formed in f32 differs
    // from 1−β1 formed in f64 and rounded, which the optimizer uses.
    assert_ne!(1.0f32 - 0.9f32, (1.0f64 - 0.9) as f32);
}

#[test]
fn an_untouched_parameter_is_skipped_and_later_updated_at_the_global_step() {
    let c = [0.3, -0.7, 1.9];
    let mut tape = Tape::<f64>::new();
    let w = tape.param(arr::<f64>(&[0.5, -1.5, 2.0]));
    let b = tape.param(arr::<f64>(&[0.25]));
    let unused = tape.param(arr::<f64>(&[4.0, -4.0]));
    let mut opt = Adam::new(0.1);
    opt.add(&tape, w, 0.01).unwrap();
    opt.add(&tape, b, 0.0).unwrap();
    opt.add(&tape, unused, 0.5).unwrap(); // a large L2 that must not decay it
    let mark = tape.mark();
    for _ in 0..2 {
        let loss = quadratic(&mut tape, w, b, &c, &[1.0]);
        tape.backward(loss).unwrap();
        opt.step(&mut tape).unwrap();
        tape.reset_to(mark);
    }
    assert_eq!(value(&tape, unused), [4.0, -4.0]);
    assert_eq!(opt.moments(unused).unwrap(), (&[0.0, 0.0][..], &[0.0, 0.0][..]));
    assert_ne!(value(&tape, w), [0.5, -1.5, 2.0]);

    // Step 3 reaches `unused` for the first time: its moments start from
    // zero, but the bias correction uses t = 3 (t advanced every step).
    let k = tape.constant(arr::<f64>(&[1.0, 2.0]));
    let uk = g_mul(&mut tape, unused, k);
    let loss = g_sum(&mut tape, uk);
    tape.backward(loss).unwrap();
    let (w_before, b_before) = (value(&tape, w), value(&tape, b));
    opt.step(&mut tape).unwrap();
    assert_eq!(value(&tape, w), w_before, "w had no gradient in step 3");
    assert_eq!(value(&tape, b), b_before);
    let (mut hu, mut m, mut v) = (vec![4.0, -4.0], vec![0.0; 2], vec![0.0; 2]);
    let (b1, b2) = (0.9f64, 0.999f64);
    adam_by_hand(&mut hu, &[1.0, 2.0], &mut m, &mut v, 0.5, 0.1, (b1 * b1 * b1, b2 * b2 * b2));
    assert_eq!(value(&tape, unused), hu);
    assert_eq!(opt.steps(), 3);
}

#[test]
fn sgd_skips_an_untouched_parameter_and_does_not_decay_it() {
    let mut tape = Tape::<f64>::new();
    let w = tape.param(arr::<f64>(&[1.0, 2.0]));
    let unused = tape.param(arr::<f64>(&[3.0]));
    let mut opt = Sgd::new(0.1).momentum(0.9);
    opt.add(&tape, w, 0.1).unwrap();
    opt.add(&tape, unused, 0.1).unwrap();
    let ww = g_mul(&mut tape, w, w);
    let loss = g_sum(&mut tape, ww);
    tape.backward(loss).unwrap();
    opt.step(&mut tape).unwrap();
    assert_eq!(value(&tape, unused), [3.0]);
    assert_eq!(opt.momentum_buffer(unused).unwrap(), [0.0]);
    assert_ne!(value(&tape, w), [1.0, 2.0]);
}

#[test]
fn per_parameter_alpha_decays_weights_and_not_biases() {
    // A loss whose gradient is present but zero: only the L2 term moves anything.
    let mut tape = Tape::<f64>::new();
    let w = tape.param(arr::<f64>(&[1.5, -2.0]));
    let b = tape.param(arr::<f64>(&[0.75]));
    let mut opt = Sgd::new(0.1);
    opt.add(&tape, w, 0.2).unwrap();
    opt.add(&tape, b, 0.0).unwrap();
    let mark = tape.mark();
    for _ in 0..2 {
        let zero = tape.constant(arr::<f64>(&[0.0]));
        let wz = g_mul(&mut tape, w, zero);
        let bz = g_mul(&mut tape, b, zero);
        let (sw, sb) = (g_sum(&mut tape, wz), g_sum(&mut tape, bz));
        let loss = g_add(&mut tape, sw, sb);
        tape.backward(loss).unwrap();
        opt.step(&mut tape).unwrap();
        tape.reset_to(mark);
    }
    let decay = |w: f64| {
        let once = w - 0.1 * (0.0 + 0.2 * w);
        once - 0.1 * (0.0 + 0.2 * once)
    };
    assert_eq!(value(&tape, w), [decay(1.5), decay(-2.0)]);
    assert_eq!(value(&tape, b), [0.75]);

    // With a real gradient, the same alpha adds alpha·w to the weight's gradient only.
    let (c, k) = ([0.1, 0.2], [3.0]);
    let (w0, b0) = (value(&tape, w), value(&tape, b));
    let loss = quadratic(&mut tape, w, b, &c, &k);
    tape.backward(loss).unwrap();
    opt.step(&mut tape).unwrap();
    let grad_w = grad_w_by_hand(&w0, &c);
    let want_w: Vec<f64> = w0.iter().zip(&grad_w).map(|(&w, &g)| w - 0.1 * (g + 0.2 * w)).collect();
    assert_eq!(value(&tape, w), want_w);
    assert_eq!(value(&tape, b), [b0[0] - 0.1 * (3.0 + 0.0 * b0[0])]);
}

/// Puts the gradients `g1`, `g2` on `p1`, `p2` exactly: `loss = sum(p1·g1) + sum(p2·g2)`.
fn given_gradients<T: Float>(tape: &mut Tape<T>, p1: Var, g1: &[f64], p2: Var, g2: &[f64]) {
    let k1 = tape.constant(arr::<T>(g1));
    let k2 = tape.constant(arr::<T>(g2));
    let (a, b) = (g_mul(tape, p1, k1), g_mul(tape, p2, k2));
    let (a, b) = (g_sum(tape, a), g_sum(tape, b));
    let loss = g_add(tape, a, b);
    tape.backward(loss).unwrap();
}

/// SGD with clipping at `max_norm` on gradients `[3]` and `[4]` (global
/// norm exactly 5) and L2 `alpha` on `p1`; returns the parameters after one step.
fn clipped_sgd_step<T: Float>(max_norm: f64, alpha: f64) -> (T, T) {
    let mut tape = Tape::<T>::new();
    let p1 = tape.param(arr::<T>(&[1.0]));
    let p2 = tape.param(arr::<T>(&[-2.0]));
    let mut opt = Sgd::new(0.5);
    opt.add(&tape, p1, alpha).unwrap();
    opt.add(&tape, p2, 0.0).unwrap();
    opt.set_clip(max_norm).unwrap();
    assert_eq!(opt.clip(), Some(max_norm));
    given_gradients(&mut tape, p1, &[3.0], p2, &[4.0]);
    opt.step(&mut tape).unwrap();
    (tape.value(p1)[0], tape.value(p2)[0])
}

#[test]
fn clipping_scales_exactly_when_the_norm_exceeds_max_norm() {
    let lr = 0.5;
    // Norm 5 <= max_norm: the raw gradients, untouched.
    for max_norm in [5.0, 5.000001, 100.0] {
        assert_eq!(clipped_sgd_step::<f64>(max_norm, 0.0), (1.0 - lr * 3.0, -2.0 - lr * 4.0), "max_norm {max_norm}");
    }
    // Norm 5 > max_norm: both scaled by max_norm / 5 (no epsilon).
    for max_norm in [4.999999, 1.0, 0.01] {
        let s = max_norm / 5.0;
        assert_eq!(clipped_sgd_step::<f64>(max_norm, 0.0), (1.0 - lr * (3.0 * s), -2.0 - lr * (4.0 * s)));
    }
    // The L2 term is added after clipping, unclipped: g = grad·s + alpha·w.
    let s = 1.0 / 5.0;
    assert_eq!(clipped_sgd_step::<f64>(1.0, 2.0), (1.0 - lr * (3.0 * s + 2.0 * 1.0), -2.0 - lr * (4.0 * s)));
    // In f32 the norm and scale are formed in f64 and the scale rounded once.
    let s32 = (1.0f64 / 5.0) as f32;
    assert_eq!(clipped_sgd_step::<f32>(1.0, 0.0), (1.0 - 0.5 * (3.0 * s32), -2.0 - 0.5 * (4.0 * s32)));
    assert_eq!(clipped_sgd_step::<f32>(5.0, 0.0), (1.0 - 0.5 * 3.0, -2.0 - 0.5 * 4.0));
}

#[test]
fn clipping_counts_only_parameters_that_have_a_gradient() {
    let mut tape = Tape::<f64>::new();
    let p1 = tape.param(arr::<f64>(&[1.0]));
    let p2 = tape.param(arr::<f64>(&[-2.0]));
    let idle = tape.param(arr::<f64>(&[100.0]));
    let mut opt = Sgd::new(1.0);
    for p in [p1, p2, idle] {
        opt.add(&tape, p, 0.0).unwrap();
    }
    opt.set_clip(10.0).unwrap();
    given_gradients(&mut tape, p1, &[6.0], p2, &[8.0]); // norm 10: not clipped
    opt.step(&mut tape).unwrap();
    assert_eq!((value(&tape, p1), value(&tape, p2), value(&tape, idle)), (vec![-5.0], vec![-10.0], vec![100.0]));
}

#[test]
fn the_step_count_survives_reset_to_in_a_minibatch_loop() {
    let batches = [[0.1, 0.2, 0.3], [-1.0, 0.5, 0.0], [2.0, -2.0, 1.0], [0.7, 0.7, -0.7], [0.0, 1.0, 3.0]];
    let mut tape = Tape::<f64>::new();
    let w = tape.param(arr::<f64>(&[0.5, -1.5, 2.0]));
    let b = tape.param(arr::<f64>(&[0.25]));
    let mut opt = Adam::new(0.05);
    opt.add(&tape, w, 0.001).unwrap();
    opt.add(&tape, b, 0.0).unwrap();
    let mark = tape.mark();

    let (mut hw, mut m, mut v) = (value(&tape, w), vec![0.0; 3], vec![0.0; 3]);
    let (mut beta1_t, mut beta2_t) = (1.0, 1.0);
    for (step, c) in batches.iter().enumerate() {
        let loss = quadratic(&mut tape, w, b, c, &[1.0]);
        tape.backward(loss).unwrap();
        opt.step(&mut tape).unwrap();
        tape.reset_to(mark);
        assert_eq!(tape.len(), 2, "the step's nodes are gone");
        assert_eq!(opt.steps(), step as u64 + 1, "t is not reset with the tape");

        (beta1_t, beta2_t) = (beta1_t * 0.9, beta2_t * 0.999);
        let grad = grad_w_by_hand(&hw, c);
        adam_by_hand(&mut hw, &grad, &mut m, &mut v, 0.001, 0.05, (beta1_t, beta2_t));
        assert_eq!(value(&tape, w), hw, "step {}", step + 1);
    }
}

/// Three SGD-with-momentum steps on `sum((w - c)²)` with `lr` changed before
/// step 3, against PyTorch's documented algorithm written out.
fn momentum_three_steps(nesterov: bool, dampening: f64) {
    let (c, alpha, mu) = (random(7, 16), 0.05, 0.9);
    let lrs = [0.1, 0.1, 0.02];
    let mut tape = Tape::<f64>::new();
    let w = tape.param(arr::<f64>(&random(8, 16)));
    let b = tape.param(arr::<f64>(&[-1.0]));
    let mut opt = Sgd::new(lrs[0]).momentum(mu).dampening(dampening).nesterov(nesterov);
    opt.add(&tape, w, alpha).unwrap();
    opt.add(&tape, b, 0.0).unwrap();
    let mark = tape.mark();

    let (mut hw, mut hb) = (value(&tape, w), value(&tape, b));
    let (mut buf_w, mut buf_b) = (vec![0.0; 16], vec![0.0; 1]);
    for (t, &lr) in lrs.iter().enumerate() {
        opt.set_lr(lr).unwrap();
        assert_eq!(opt.lr(), lr);
        let loss = quadratic(&mut tape, w, b, &c, &[2.0]);
        tape.backward(loss).unwrap();
        opt.step(&mut tape).unwrap();
        tape.reset_to(mark);

        let grad_w = grad_w_by_hand(&hw, &c);
        for (params, grads, bufs, alpha) in
            [(&mut hw, grad_w, &mut buf_w, alpha), (&mut hb, vec![2.0], &mut buf_b, 0.0)]
        {
            for i in 0..params.len() {
                let mut g = grads[i] + alpha * params[i];
                bufs[i] = if t == 0 { g } else { mu * bufs[i] + (1.0 - dampening) * g };
                g = if nesterov { g + mu * bufs[i] } else { bufs[i] };
                params[i] -= lr * g;
            }
        }
        assert_eq!(value(&tape, w), hw, "step {}", t + 1);
        assert_eq!(value(&tape, b), hb, "step {}", t + 1);
        assert_eq!(opt.momentum_buffer(w).unwrap(), buf_w);
    }
}

#[test]
fn momentum_with_dampening_matches_the_hand_computation_over_three_steps() {
    momentum_three_steps(false, 0.1);
    momentum_three_steps(false, 0.0);
}

#[test]
fn nesterov_matches_the_hand_computation_over_three_steps() {
    momentum_three_steps(true, 0.0);
}

#[test]
fn plain_sgd_matches_the_hand_computation_in_f32() {
    let c = [0.3, -0.7, 1.9];
    let mut tape = Tape::<f32>::new();
    let w = tape.param(arr::<f32>(&[0.5, -1.5, 2.0]));
    let b = tape.param(arr::<f32>(&[0.25]));
    let mut opt = Sgd::new(0.1);
    opt.add(&tape, w, 0.01).unwrap();
    opt.add(&tape, b, 0.0).unwrap();
    let mark = tape.mark();
    let mut hw = value(&tape, w);
    let (lr, alpha) = (0.1f64 as f32, 0.01f64 as f32);
    for _ in 0..3 {
        let loss = quadratic(&mut tape, w, b, &c, &[1.0]);
        tape.backward(loss).unwrap();
        opt.step(&mut tape).unwrap();
        tape.reset_to(mark);
        let grad = grad_w_by_hand(&hw, &c);
        for i in 0..3 {
            hw[i] -= lr * (grad[i] + alpha * hw[i]);
        }
        assert_eq!(value(&tape, w), hw);
    }
}

/// Three AdamW steps, with the parameter `idle` skipped in step 2, against
/// PyTorch's documented AdamW written out (per-parameter step counts).
fn adamw_three_steps<T: Float>() {
    let (n, decay, lr) = (16, 0.1, 0.05);
    let c = random(9, n);
    let (beta1, beta2, eps) = (0.8, 0.99, 1e-6);
    let mut tape = Tape::<T>::new();
    let w = tape.param(arr::<T>(&random(10, n)));
    let idle = tape.param(arr::<T>(&[1.0]));
    let mut opt = AdamW::new(lr).betas(beta1, beta2).eps(eps);
    opt.add(&tape, w, decay).unwrap();
    opt.add(&tape, idle, decay).unwrap();
    let mark = tape.mark();

    let by_hand = |w: &mut [T], grad: &[T], m: &mut [T], v: &mut [T], (b1_t, b2_t): (f64, f64)| {
        let decay = T::from_f64(lr * decay);
        let (b1, omb1) = (T::from_f64(beta1), T::from_f64(1.0 - beta1));
        let (b2, omb2) = (T::from_f64(beta2), T::from_f64(1.0 - beta2));
        let (c1, c2) = (T::from_f64(1.0 - b1_t), T::from_f64(1.0 - b2_t));
        let (lr, eps) = (T::from_f64(lr), T::from_f64(eps));
        for i in 0..w.len() {
            w[i] -= decay * w[i];
            m[i] = b1 * m[i] + omb1 * grad[i];
            v[i] = b2 * v[i] + omb2 * (grad[i] * grad[i]);
            let m_hat = m[i] / c1;
            let v_hat = v[i] / c2;
            w[i] -= (lr * m_hat) / (v_hat.sqrt() + eps);
        }
    };
    let (mut hw, mut mw, mut vw) = (value(&tape, w), vec![T::zero(); n], vec![T::zero(); n]);
    let (mut hi, mut mi, mut vi) = (value(&tape, idle), vec![T::zero(); 1], vec![T::zero(); 1]);
    let idle_grad = [T::from_f64(0.5)];
    let w_powers = [(beta1, beta2), (beta1 * beta1, beta2 * beta2), (beta1 * beta1 * beta1, beta2 * beta2 * beta2)];
    for (step, powers) in w_powers.into_iter().enumerate() {
        // Step 2's loss does not involve `idle`: backward never reaches it.
        let uses_idle = step != 1;
        let loss =
            if uses_idle { quadratic(&mut tape, w, idle, &c, &[0.5]) } else { squared_distance(&mut tape, w, &c) };
        tape.backward(loss).unwrap();
        opt.step(&mut tape).unwrap();
        tape.reset_to(mark);

        let grad = grad_w_by_hand(&hw, &c);
        by_hand(&mut hw, &grad, &mut mw, &mut vw, powers);
        if uses_idle {
            // `idle` counts its own steps: 1 at step 1, 2 at step 3.
            let own = if step == 0 { (beta1, beta2) } else { (beta1 * beta1, beta2 * beta2) };
            by_hand(&mut hi, &idle_grad, &mut mi, &mut vi, own);
        }
        assert_eq!(value(&tape, w), hw, "step {}", step + 1);
        assert_eq!(value(&tape, idle), hi, "step {}", step + 1);
        assert_eq!(opt.moments(w).unwrap(), (&mw[..], &vw[..]));
    }
    assert_eq!(opt.steps(), 3);
}

#[test]
fn adamw_matches_the_hand_computation_over_three_steps_f64() {
    adamw_three_steps::<f64>();
}

#[test]
fn adamw_matches_the_hand_computation_over_three_steps_f32() {
    adamw_three_steps::<f32>();
}

#[test]
fn adam_eps_placement_differs_from_torch_by_eps_scaling_only() {
    // One step from zero moments: ours divides by √v + ε, torch by √v̂ + ε
    // with √v̂ = √v / √(1−β2). With a tiny gradient the difference is visible.
    let mut tape = Tape::<f64>::new();
    let w = tape.param(arr::<f64>(&[0.0]));
    let mut opt = Adam::new(1.0);
    opt.add(&tape, w, 0.0).unwrap();
    let k = tape.constant(arr::<f64>(&[1e-9]));
    let wk = g_mul(&mut tape, w, k);
    let loss = g_sum(&mut tape, wk);
    tape.backward(loss).unwrap();
    opt.step(&mut tape).unwrap();
    let g = 1e-9f64;
    let (m, v) = (0.1 * g, 0.001 * (g * g));
    let ours = -(1.0 * (1.0f64 - 0.999).sqrt() / (1.0 - 0.9) * m) / (v.sqrt() + 1e-8);
    let torch = -(1.0 / (1.0 - 0.9)) * m / (v.sqrt() / (1.0f64 - 0.999).sqrt() + 1e-8);
    assert!((tape.value(w)[0] - ours).abs() <= 1e-14 * ours.abs());
    assert!((ours - torch).abs() > 0.1 * torch.abs(), "ours {ours}, torch {torch}");
}

#[test]
fn adam_and_adamw_update_from_the_clipped_gradient() {
    // Gradients [3] and [4]: global norm 5, clipped to 1, so s = 1/5; the
    // L2 term (Adam) is added after clipping, unscaled.
    let s = 1.0f64 / 5.0;
    let run = |adamw: bool| {
        let mut tape = Tape::<f64>::new();
        let p1 = tape.param(arr::<f64>(&[1.0]));
        let p2 = tape.param(arr::<f64>(&[-2.0]));
        let mut adam = Adam::new(0.1);
        let mut adamw_opt = AdamW::new(0.1);
        let opt: &mut dyn Optimizer<f64> = if adamw { &mut adamw_opt } else { &mut adam };
        opt.add(&tape, p1, 0.5).unwrap();
        opt.add(&tape, p2, 0.0).unwrap();
        opt.set_clip(1.0).unwrap();
        given_gradients(&mut tape, p1, &[3.0], p2, &[4.0]);
        opt.step(&mut tape).unwrap();
        (value(&tape, p1), value(&tape, p2))
    };

    let (mut w1, mut m1, mut v1) = (vec![1.0], vec![0.0], vec![0.0]);
    let (mut w2, mut m2, mut v2) = (vec![-2.0], vec![0.0], vec![0.0]);
    adam_by_hand(&mut w1, &[3.0 * s], &mut m1, &mut v1, 0.5, 0.1, (0.9, 0.999));
    adam_by_hand(&mut w2, &[4.0 * s], &mut m2, &mut v2, 0.0, 0.1, (0.9, 0.999));
    assert_eq!(run(false), (w1, w2));

    // AdamW: no L2; the decay λ = 0.5 shrinks p1 directly.
    let adamw_by_hand = |w: f64, g: f64, decay: f64| {
        let w = w - (0.1 * decay) * w;
        let (m, v) = ((1.0 - 0.9) * g, (1.0 - 0.999) * (g * g));
        let (m_hat, v_hat) = (m / (1.0 - 0.9), v / (1.0 - 0.999));
        w - (0.1 * m_hat) / (v_hat.sqrt() + 1e-8)
    };
    assert_eq!(run(true), (vec![adamw_by_hand(1.0, 3.0 * s, 0.5)], vec![adamw_by_hand(-2.0, 4.0 * s, 0.0)]));
}
