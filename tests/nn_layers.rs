//! The `nn` layers: parameter names, shapes, and each forward equal bit
//! for bit to the same computation written with `g_*` calls; the causal
//! mask hides the future.

use grad_runtime::nn::{BatchNorm2d, Embedding, GroupNorm, LayerNorm, Linear, Mlp, MultiHeadAttention};
use grad_runtime::*;
use ndarray::{Array3, ArrayD, IxDyn, s};

fn names(model: &impl Params) -> Vec<String> {
    model.named_params().into_iter().map(|(name, _)| name).collect()
}

fn data(rng: &mut Rng, shape: &[usize]) -> ArrayD<f64> {
    ArrayD::from_shape_fn(IxDyn(shape), |_| rng.normal())
}

#[test]
fn layers_name_their_parameters_as_pytorch() {
    let mut tape = Tape::<f32>::new();
    let mut rng = Rng::new(0);
    assert_eq!(names(&Linear::new(&mut tape, &mut rng, 2, 3)), ["weight", "bias"]);
    assert_eq!(names(&Embedding::new(&mut tape, &mut rng, 5, 3)), ["weight"]);
    assert_eq!(names(&LayerNorm::new(&mut tape, 3)), ["weight", "bias"]);
    assert_eq!(
        names(&Mlp::new(&mut tape, &mut rng, &[2, 4, 1])),
        ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"]
    );
    let attention = MultiHeadAttention::new(&mut tape, &mut rng, 4, 2);
    assert_eq!(names(&attention)[..2], ["query.weight", "query.bias"]);
    assert_eq!(names(&attention)[6..], ["out.weight", "out.bias"]);
}

#[test]
fn linear_is_x_at_weight_plus_bias_and_initialised_as_torch() {
    let mut tape = Tape::<f64>::new();
    let mut rng = Rng::new(1);
    let layer = Linear::new(&mut tape, &mut rng, 16, 3);
    assert!(tape.value(layer.weight).iter().all(|w| w.abs() <= 0.25));
    let x = tape.constant(data(&mut rng, &[2, 5, 16]));
    let y = layer.forward(&mut tape, x);
    let xw = g_matmul(&mut tape, x, layer.weight);
    let by_hand = g_add(&mut tape, xw, layer.bias);
    assert_eq!(tape.value(y), tape.value(by_hand));
}

#[test]
fn attention_matches_the_hand_written_ops() {
    let (b, t, d, heads) = (2, 4, 6, 3);
    let mut tape = Tape::<f64>::new();
    let mut rng = Rng::new(2);
    let attention = MultiHeadAttention::new(&mut tape, &mut rng, d, heads).causal(true);
    let x = tape.constant(data(&mut rng, &[b, t, d]));
    let y = attention.forward(&mut tape, x);
    assert!(tape.is_ok(), "{:?}", tape.error());

    // By hand: per head, softmax(q kᵀ · scale + mask) v, heads concatenated.
    let lin = |tape: &mut Tape<f64>, layer: Linear, x: Var| {
        let xw = g_matmul(tape, x, layer.weight);
        g_add(tape, xw, layer.bias)
    };
    let (q, k, v) =
        (lin(&mut tape, attention.query, x), lin(&mut tape, attention.key, x), lin(&mut tape, attention.value, x));
    let mask = tape.constant(ndarray::Array2::from_shape_fn((t, t), |(i, j)| if j > i { -1e30 } else { 0.0 }));
    let width = d / heads;
    let mut joined = None;
    for h in 0..heads {
        let cut = |tape: &mut Tape<f64>, z: Var| g_slice(tape, z, &[0, 0, h * width], &[b, t, (h + 1) * width]);
        let (qh, kh, vh) = (cut(&mut tape, q), cut(&mut tape, k), cut(&mut tape, v));
        let kt = g_transpose(&mut tape, kh);
        let raw = g_bmm(&mut tape, qh, kt);
        let scaled = g_muls(&mut tape, raw, 1.0 / (width as f64).sqrt());
        let masked = g_add(&mut tape, scaled, mask);
        let weights = g_softmax(&mut tape, masked, -1);
        let out = g_bmm(&mut tape, weights, vh);
        joined = Some(match joined {
            None => out,
            Some(before) => g_concat(&mut tape, before, out, 2),
        });
    }
    let by_hand = lin(&mut tape, attention.out, joined.unwrap());
    // The layer runs one attention op over every head: the same sums in
    // another order, so equal to rounding.
    let worst = (&tape.value(y) - &tape.value(by_hand)).iter().fold(0.0f64, |m, d| m.max(d.abs()));
    assert!(worst < 1e-14, "largest difference {worst}");
}

#[test]
fn the_causal_mask_hides_later_positions() {
    let (b, t, d) = (1, 5, 4);
    let mut tape = Tape::<f64>::new();
    let mut rng = Rng::new(3);
    let attention = MultiHeadAttention::new(&mut tape, &mut rng, d, 2).causal(true);
    let x0 = data(&mut rng, &[b, t, d]).into_dimensionality::<ndarray::Ix3>().unwrap();
    let mut x1 = x0.clone();
    x1.slice_mut(s![.., 3.., ..]).mapv_inplace(|v| v + 10.0); // change positions 3 and 4
    let run = |tape: &mut Tape<f64>, x: &Array3<f64>| {
        let x = tape.constant(x);
        let y = attention.forward(tape, x);
        tape.value(y).to_owned()
    };
    let (y0, y1) = (run(&mut tape, &x0), run(&mut tape, &x1));
    assert_eq!(y0.slice(s![.., ..3, ..]), y1.slice(s![.., ..3, ..]), "positions 0..3 do not see 3 and 4");
    assert_ne!(y0.slice(s![.., 3.., ..]), y1.slice(s![.., 3.., ..]));

    let open = attention.causal(false);
    let x = tape.constant(&x1);
    let y = open.forward(&mut tape, x);
    assert_ne!(tape.value(y).slice(s![.., ..3, ..]), y0.view().into_dyn().slice(s![.., ..3, ..]));
}

#[test]
fn misuse_poisons_the_tape_with_a_message() {
    let mut tape = Tape::<f32>::new();
    let _ = MultiHeadAttention::new(&mut tape, &mut Rng::new(0), 6, 4);
    let err = tape.error().unwrap();
    assert!(err.to_string().contains("heads = 4 is invalid: expected a divisor of dim"), "{err}");

    let mut tape = Tape::<f32>::new();
    let attention = MultiHeadAttention::new(&mut tape, &mut Rng::new(0), 4, 2);
    let flat = tape.constant(ndarray::Array2::<f32>::zeros((3, 4)));
    let y = attention.forward(&mut tape, flat);
    let err = tape.backward(y).unwrap_err();
    assert!(err.to_string().contains("input `q` was declared [B, T, D]"), "{err}");
}

#[test]
fn an_mlp_trains_on_two_moons_with_add_params_and_minibatches() {
    // The second user story, end to end with this module's helpers.
    let mut rng = Rng::new(4);
    let n = 200;
    let (mut xs, mut labels) = (Vec::new(), Vec::new());
    for i in 0..n {
        let angle = std::f64::consts::PI * rng.uniform();
        let (cx, cy, class) =
            if i % 2 == 0 { (angle.cos(), angle.sin(), 0) } else { (1.0 - angle.cos(), 0.5 - angle.sin(), 1) };
        xs.extend([(cx + 0.1 * rng.normal()) as f32, (cy + 0.1 * rng.normal()) as f32]);
        labels.push(class);
    }
    let x_all = ndarray::Array2::from_shape_vec((n, 2), xs).unwrap();
    let mut tape = Tape::<f32>::new();
    let mlp = Mlp::new(&mut tape, &mut rng, &[2, 16, 16, 2]);
    let mut opt = Adam::new(0.0);
    opt.add_params(&tape, &mlp, |name| if name.ends_with("weight") { 1e-4 } else { 0.0 }).unwrap();
    let mark = tape.mark();
    let mut batches = Minibatches::new(n, 20);
    let epochs = 60;
    for epoch in 0..epochs {
        let batch_list: Vec<Vec<usize>> = batches.shuffled(&mut rng).map(<[usize]>::to_vec).collect();
        for (i, batch) in batch_list.iter().enumerate() {
            let step = (epoch * batch_list.len() + i) as u64;
            opt.set_lr(schedule::warmup_cosine(0.02, step, 20, (epochs * batch_list.len()) as u64)).unwrap();
            let x = tape.constant(x_all.select(ndarray::Axis(0), batch));
            let targets: Vec<usize> = batch.iter().map(|&i| labels[i]).collect();
            let logits = mlp.forward(&mut tape, x);
            let loss = grad!(tape; cross_entropy(logits, &targets));
            tape.backward(loss).unwrap();
            opt.step(&mut tape).unwrap();
            tape.reset_to(mark);
        }
    }
    let x = tape.constant(&x_all);
    let logits = mlp.forward(&mut tape, x);
    let predicted = argmax(&tape, logits, -1).unwrap();
    let correct = predicted.iter().zip(&labels).filter(|(p, l)| p == l).count();
    assert!(correct >= 190, "two moons: {correct}/200");
}

/// A convolution, batch norm and a linear head: a model with buffers.
#[derive(Params)]
struct ConvBnNet {
    conv: Var,
    bn: BatchNorm2d,
    head: Linear,
}

impl ConvBnNet {
    fn new(tape: &mut Tape<f64>, seed: u64) -> ConvBnNet {
        let mut rng = Rng::new(seed);
        let conv = tape.param(init::he_normal(&mut rng, &[4, 1, 3, 3]));
        ConvBnNet { conv, bn: BatchNorm2d::new(tape, 4), head: Linear::new(tape, &mut rng, 4 * 4 * 4, 3) }
    }

    fn forward(&self, tape: &mut Tape<f64>, x: Var, train: bool) -> Var {
        let conv = self.conv;
        let h = grad!(tape; x: [N, 1, 6, 6], conv: [4, 1, 3, 3]; conv2d(x, conv, None));
        let h = self.bn.forward(tape, h, train);
        let h = grad!(tape; flatten(relu(h), 1));
        self.head.forward(tape, h)
    }
}

#[test]
fn a_batch_norm_model_evaluates_the_same_bits_after_save_and_load() {
    let mut rng = Rng::new(80);
    let mut tape = Tape::<f64>::new();
    let model = ConvBnNet::new(&mut tape, 1);
    let mut opt = Adam::new(1e-2);
    opt.add_params(&tape, &model, |_| 0.0).unwrap();
    let mark = tape.mark();
    let labels = [0usize, 2, 1, 1, 0, 2, 1, 0];
    for _ in 0..5 {
        let x = tape.constant(data(&mut rng, &[8, 1, 6, 6]));
        let logits = model.forward(&mut tape, x, true);
        let loss = grad!(tape; cross_entropy(logits, &labels));
        tape.backward(loss).unwrap();
        opt.step(&mut tape).unwrap();
        tape.reset_to(mark);
    }
    assert_eq!(tape.value(model.bn.num_batches_tracked)[[]], 5.0);
    assert!(tape.value(model.bn.running_var).iter().all(|&v| v != 1.0), "training moved the running variance");
    let test = data(&mut rng, &[3, 1, 6, 6]);
    let evaluate = |tape: &mut Tape<f64>, model: &ConvBnNet| {
        let mark = tape.mark();
        let x = tape.constant(&test);
        let out = model.forward(tape, x, false);
        let out = tape.value(out).to_owned();
        tape.reset_to(mark);
        out
    };
    let before = evaluate(&mut tape, &model);
    let running = tape.value(model.bn.running_mean).to_owned();
    assert_eq!(evaluate(&mut tape, &model), before, "evaluation changes no statistic");
    assert_eq!(tape.value(model.bn.running_mean), running);

    let path = std::env::temp_dir().join(format!("grad-bn-{}.safetensors", std::process::id()));
    model.save(&tape, &path).unwrap();
    let mut fresh_tape = Tape::<f64>::new();
    let fresh = ConvBnNet::new(&mut fresh_tape, 2);
    assert_ne!(evaluate(&mut fresh_tape, &fresh), before);
    fresh.load(&mut fresh_tape, &path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let after = evaluate(&mut fresh_tape, &fresh);
    let bits = |a: &ArrayD<f64>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&after), bits(&before));
    assert_eq!(fresh_tape.value(fresh.bn.num_batches_tracked)[[]], 5.0);
}

#[test]
fn group_norm_layer_matches_the_op_and_names_its_parameters() {
    let mut tape = Tape::<f64>::new();
    let norm = GroupNorm::new(&mut tape, 2, 6);
    assert_eq!(names(&norm), ["weight", "bias"]);
    assert!(norm.named_buffers().is_empty());
    let x = tape.constant(data(&mut Rng::new(81), &[2, 6, 3]));
    let y = norm.forward(&mut tape, x);
    let z = g_group_norm(&mut tape, x, 2, norm.weight, norm.bias, 1e-5);
    assert_eq!(tape.value(y), tape.value(z));
    let bad = GroupNorm::new(&mut tape, 4, 6);
    bad.forward(&mut tape, x);
    assert!(matches!(tape.error().unwrap().kind(), ErrorKind::InvalidArgument { name: "groups", .. }));
}
