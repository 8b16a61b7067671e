//! ONNX export (`grad_runtime::onnx`): models exported by grad run in the
//! real onnxruntime and give grad's outputs, and what cannot be exported
//! is an error naming the node.
//!
//! The onnxruntime check makes a throwaway virtualenv and pip-installs
//! `onnx`, `onnxruntime` and `numpy` there (`tests/common/python.rs`);
//! without Python it passes with a loud SKIPPED line. The script is
//! `tests/python/onnx_check.py`: `onnx.checker.check_model` (full check,
//! with shape inference), then each model in onnxruntime at the batch size
//! it was traced at and at another, every output within 1e-5 of grad's.

#[path = "common/custom_ops.rs"]
mod custom_ops;
#[path = "common/models.rs"]
mod models;
#[path = "common/python.rs"]
mod python;

use std::path::Path;
use std::process::Command;

use grad_runtime::nn::{BatchNorm2d, Linear, Mlp};
use grad_runtime::onnx::Export;
use grad_runtime::{
    ErrorKind, GradError, Params, Rng, Tape, Var, g_detach, g_dropout, g_matmul, g_reshape, g_sum, g_tanh, g_transpose,
    grad,
};
use ndarray::{Array1, Array2, ArrayD, IxDyn};
use serde_json::{Value, json};

const TEST: &str = "onnx";

fn random(rng: &mut Rng, shape: &[usize]) -> ArrayD<f32> {
    models::array::<f32>(rng, shape)
}

/// The JSON of a float tensor for the Python side.
fn floats(tape: &Tape<f32>, var: Var) -> Value {
    let value = tape.value(var);
    json!({ "dtype": "float32", "shape": value.shape(), "data": value.iter().collect::<Vec<_>>() })
}

/// The JSON of integer ids of any shape.
fn ids_json(ids: &ArrayD<usize>) -> Value {
    json!({ "dtype": "int64", "shape": ids.shape(), "data": ids.iter().collect::<Vec<_>>() })
}

// ---- the models ----

/// The digits MLP: 64 pixels, two hidden layers, class probabilities.
fn mlp_forward(tape: &mut Tape<f32>, model: &Mlp, pixels: ArrayD<f32>) -> (Var, Var) {
    let x = tape.constant(pixels);
    let logits = model.forward(tape, x);
    (x, grad!(tape; softmax(logits, -1)))
}

/// A small CNN: convolution, batch norm (evaluation), relu, max pooling, a
/// grouped convolution, average pooling, a linear head, log_softmax.
#[derive(Params)]
struct Cnn {
    conv1: Var,
    bias1: Var,
    norm: BatchNorm2d,
    conv2: Var,
    bias2: Var,
    head: Linear,
}

impl Cnn {
    fn new(tape: &mut Tape<f32>, rng: &mut Rng) -> Cnn {
        let norm = BatchNorm2d::new(tape, 4);
        tape.set_value(norm.running_mean, ndarray::arr1(&[0.1f32, -0.2, 0.3, 0.0])).unwrap();
        tape.set_value(norm.running_var, ndarray::arr1(&[0.5f32, 2.0, 1.5, 0.8])).unwrap();
        Cnn {
            conv1: tape.param(random(rng, &[4, 1, 3, 3])),
            bias1: tape.param(random(rng, &[4])),
            norm,
            conv2: tape.param(random(rng, &[8, 2, 3, 3])),
            bias2: tape.param(random(rng, &[8])),
            head: Linear::new(tape, rng, 32, 10),
        }
    }

    fn forward(&self, tape: &mut Tape<f32>, images: ArrayD<f32>) -> (Var, Var) {
        let Cnn { conv1, bias1, conv2, bias2, .. } = *self;
        let x = tape.constant(images);
        let h = grad!(tape; x: [N, 1, 8, 8], conv1: [4, 1, 3, 3];
            conv2d(x, conv1, Some(bias1), [1, 1], [1, 1]));
        let h = self.norm.forward(tape, h, false);
        let h = grad!(tape; h: [N, 4, 8, 8];
            let h = max_pool2d(relu(h), [2, 2], [2, 2], [0, 0]);
            let h = conv2d(h, conv2, Some(bias2), [1, 1], [1, 1], [1, 1], 2);
            flatten(avg_pool2d(tanh(h), [2, 2], [2, 2], [0, 0]), 1));
        let logits = self.head.forward(tape, h);
        (x, grad!(tape; log_softmax(logits, -1)))
    }
}

const T: usize = 8;
const C: usize = 16;
const HEADS: usize = 2;
const VOCAB: usize = 11;

/// One GPT block between token and position embeddings and a tied head,
/// as nanoGPT writes it: pre-norm causal self-attention with a fused qkv
/// projection and heads moved by permute, a GELU MLP, residuals. The same
/// attention through `attention_packed` joins the residual too, so that
/// both forms are exported at several batch sizes.
#[derive(Params)]
struct Gpt {
    wte: Var,
    wpe: Var,
    ln1_g: Var,
    ln1_b: Var,
    attn_w: Var,
    attn_b: Var,
    proj_w: Var,
    proj_b: Var,
    ln2_g: Var,
    ln2_b: Var,
    fc_w: Var,
    fc_b: Var,
    out_w: Var,
    out_b: Var,
    lnf_g: Var,
    lnf_b: Var,
}

impl Gpt {
    fn new(tape: &mut Tape<f32>, rng: &mut Rng) -> Gpt {
        let mut p = |shape: &[usize]| tape.param(random(rng, shape).mapv(|v| v * 0.5));
        Gpt {
            wte: p(&[VOCAB, C]),
            wpe: p(&[T, C]),
            ln1_g: p(&[C]),
            ln1_b: p(&[C]),
            attn_w: p(&[C, 3 * C]),
            attn_b: p(&[3 * C]),
            proj_w: p(&[C, C]),
            proj_b: p(&[C]),
            ln2_g: p(&[C]),
            ln2_b: p(&[C]),
            fc_w: p(&[C, 4 * C]),
            fc_b: p(&[4 * C]),
            out_w: p(&[4 * C, C]),
            out_b: p(&[C]),
            lnf_g: p(&[C]),
            lnf_b: p(&[C]),
        }
    }

    /// The logits `[batch, T, VOCAB]` of `ids` `[batch, T]`, and the token
    /// embedding `[batch, T, C]` (whose ids the export makes an input).
    fn forward(&self, tape: &mut Tape<f32>, ids: &Array2<usize>) -> (Var, Var) {
        let Gpt { wte, wpe, ln1_g, ln1_b, attn_w, attn_b, proj_w, proj_b, .. } = *self;
        let Gpt { ln2_g, ln2_b, fc_w, fc_b, out_w, out_b, lnf_g, lnf_b, .. } = *self;
        let h = HEADS;
        let positions: Vec<usize> = (0..T).collect();
        let causal = Array2::from_shape_fn((T, T), |(i, j)| j > i);
        let scale = 1.0 / ((C / HEADS) as f32).sqrt();
        let tokens = grad!(tape; wte: [V, C], ids: [B, T]; embedding(wte, ids));
        let logits = grad!(tape;
            tokens: [B, T, C], wpe: [T, C], ln1_g: [C], ln1_b: [C], attn_w: [C, Q], attn_b: [Q], proj_w: [C, C],
            proj_b: [C], ln2_g: [C], ln2_b: [C], fc_w: [C, F], fc_b: [F], out_w: [F, C], out_b: [C],
            lnf_g: [C], lnf_b: [C], wte: [V, C];
            let x = tokens + embedding(wpe, &positions);
            let qkv = layer_norm(x, ln1_g, ln1_b, 1e-5) @ attn_w + attn_b;
            let q = permute(reshape(slice(qkv, [0, 0, 0], [B, T, C]), [B, T, h, C / h]), [0, 2, 1, 3]);
            let k = permute(reshape(slice(qkv, [0, 0, C], [B, T, 2 * C]), [B, T, h, C / h]), [0, 2, 1, 3]);
            let v = permute(reshape(slice(qkv, [0, 0, 2 * C], [B, T, 3 * C]), [B, T, h, C / h]), [0, 2, 1, 3]);
            let weights = softmax(masked_fill(q @ transpose(k) * scale, &causal, -1e9), -1);
            let y = reshape(permute(weights @ v, [0, 2, 1, 3]), [B, T, C]);
            let x = x + y @ proj_w + attention_packed(qkv, h, true) @ proj_w + proj_b;
            let x = x + gelu(layer_norm(x, ln2_g, ln2_b, 1e-5) @ fc_w + fc_b) @ out_w + out_b;
            layer_norm(x, lnf_g, lnf_b, 1e-5) @ transpose(wte));
        (tokens, logits)
    }
}

/// Graph inputs or outputs and their names.
type Named = Vec<(&'static str, Var)>;

/// Every other exported op, on fixed shapes (no batch symbol), each its
/// own output: the named outputs and what they hold.
fn every_op(tape: &mut Tape<f32>, rng: &mut Rng) -> (Named, Named) {
    let a = tape.constant(random(rng, &[3, 4]));
    let b = tape.param(random(rng, &[3, 4]));
    let images = tape.constant(random(rng, &[2, 4, 3, 3]));
    let gamma = tape.param(random(rng, &[4]));
    let beta = tape.param(random(rng, &[4]));
    let picks = ndarray::arr2(&[[3usize, 0], [1, 1], [2, 0]]);
    let mask = ndarray::arr2(&[[true, false, false, true], [false, true, false, false], [true, true, false, true]]);
    let targets = [1usize, 3, 0];
    let ids = ndarray::arr2(&[[2usize, 0], [1, 2]]);
    let targets_2d = ndarray::arr2(&[[1usize, 0], [0, 1], [1, 1]]);
    let outputs = grad!(tape; a: [3, 4], b: [3, 4], images: [2, 4, 3, 3], gamma: [4], beta: [4];
        let activations = sigmoid(a) + tanh(b) * exp(a) - log(abs(b) + 1.0) / sqrt(abs(a) + 1.0)
            + pow(abs(a) + 0.5, 1.5) + leaky_relu(a, 0.1) + silu(b) + softplus(a * 30.0)
            + clamp(b, -0.5, 0.5) - relu(-a) + gelu(b);
        let reductions = concat(
            concat(sum(a, 0, true), mean(b, 0, true), 0),
            concat(max(a, 0, true), min(b, 0, true), 0), 0);
        let layout = transpose(cumsum(slice(concat(a, b, 1), [1, 2], [3, 7]), 1));
        let indexing = concat(gather(a, 1, &picks), index_select(b, 1, &[2, 0]), 1);
        let masking = where(&mask, a, b) + masked_fill(a, &mask, -2.0);
        let embedded = embedding(b, &ids);
        let losses = concat(
            reshape(mse(a, b) + cross_entropy(a, &targets) + cross_entropy(reshape(b, [3, 2, 2]), &targets_2d), [1]),
            reshape(sum(a) * mean(b), [1]), 0);
        (activations, reductions, layout, indexing, masking, embedded, losses,
         group_norm(images, 2, gamma, beta, 1e-5), log_softmax(a, 0), sum(b, 1, false),
         bmm(reshape(a, [1, 3, 4]), reshape(transpose(b), [1, 4, 3])),
         attention(reshape(a, [1, 3, 4]), reshape(b, [1, 3, 4]), reshape(a * b, [1, 3, 4]), true),
         attention_packed(reshape(concat(concat(a, b, 1), a * b, 1), [1, 3, 12]), 2, true)));
    let (
        activations,
        reductions,
        layout,
        indexing,
        masking,
        embedded,
        losses,
        group,
        log_softmax,
        row_sums,
        products,
        attended,
        attended_packed,
    ) = outputs;
    // A recorded gradient: its products read an operand transposed.
    let w = g_transpose(tape, b);
    let p = g_matmul(tape, a, w);
    let t = g_tanh(tape, p);
    let y = g_sum(tape, t);
    let gradients = tape.grad_graph(y, &[a, b]).expect("a product is differentiable");
    let inputs = vec![("a", a), ("images", images)];
    let outputs = vec![
        ("input_gradient", gradients[0]),
        ("weight_gradient", gradients[1]),
        ("activations", activations),
        ("reductions", reductions),
        ("layout", layout),
        ("indexing", indexing),
        ("masking", masking),
        ("embedded", embedded),
        ("losses", losses),
        ("group_norm", group),
        ("log_softmax", log_softmax),
        ("row_sums", row_sums),
        ("products", products),
        ("attention", attended),
        ("attention_packed", attended_packed),
    ];
    (inputs, outputs)
}

// ---- the cases for onnxruntime ----

/// Exports each model at one batch size, runs its forward again at
/// another, and writes the manifest `onnx_check.py` reads.
fn write_cases(dir: &Path) -> Value {
    let mut rng = Rng::new(7);
    let mut cases = Vec::new();

    // The MLP, traced at 8 images, also run at 3.
    let mut tape = Tape::<f32>::new();
    let model = Mlp::new(&mut tape, &mut rng, &[64, 32, 16, 10]);
    let mark = tape.mark();
    let mut runs = Vec::new();
    let path = dir.join("mlp.onnx");
    for batch in [8, 3] {
        let (x, probs) = mlp_forward(&mut tape, &model, random(&mut rng, &[batch, 64]));
        if batch == 8 {
            Export::new(&mut tape)
                .params(&model)
                .input("pixels", x)
                .output("probs", probs)
                .batch("batch")
                .write(&path)
                .unwrap();
        }
        runs.push(json!({ "inputs": { "pixels": floats(&tape, x) }, "outputs": { "probs": floats(&tape, probs) } }));
        tape.reset_to(mark);
    }
    cases.push(json!({ "name": "mlp", "model": path, "runs": runs, "output_dims": { "probs": ["batch", 10] } }));

    // The CNN, traced at 5 images, also run at 2.
    let mut tape = Tape::<f32>::new();
    let model = Cnn::new(&mut tape, &mut rng);
    let mark = tape.mark();
    let mut runs = Vec::new();
    let path = dir.join("cnn.onnx");
    for batch in [5, 2] {
        let (x, scores) = model.forward(&mut tape, random(&mut rng, &[batch, 1, 8, 8]));
        if batch == 5 {
            Export::new(&mut tape)
                .params(&model)
                .input("images", x)
                .output("log_probs", scores)
                .batch("N")
                .write(&path)
                .unwrap();
        }
        runs.push(
            json!({ "inputs": { "images": floats(&tape, x) }, "outputs": { "log_probs": floats(&tape, scores) } }),
        );
        tape.reset_to(mark);
    }
    cases.push(json!({ "name": "cnn", "model": path, "runs": runs, "output_dims": { "log_probs": ["N", 10] } }));

    // The GPT block, traced at 2 sequences, also run at 3.
    let mut tape = Tape::<f32>::new();
    let model = Gpt::new(&mut tape, &mut rng);
    let mark = tape.mark();
    let mut runs = Vec::new();
    let path = dir.join("gpt.onnx");
    for batch in [2, 3] {
        let ids = Array2::from_shape_fn((batch, T), |_| (rng.next_u64() % VOCAB as u64) as usize);
        let (tokens, logits) = model.forward(&mut tape, &ids);
        if batch == 2 {
            Export::new(&mut tape)
                .params(&model)
                .ids_input("ids", tokens)
                .output("logits", logits)
                .batch("batch")
                .write(&path)
                .unwrap();
        }
        let ids = ids_json(&ids.into_dyn());
        runs.push(json!({ "inputs": { "ids": ids }, "outputs": { "logits": floats(&tape, logits) } }));
        tape.reset_to(mark);
    }
    // The ids are [batch, T], and so are the logits' first two dims.
    let dims = json!({ "logits": ["batch", T, VOCAB] });
    cases.push(json!({ "name": "gpt_block", "model": path, "runs": runs, "output_dims": dims }));

    // Flat ids [tokens], their rows regrouped into sequences: traced at 2
    // sequences of T, also run at 3.
    let mut tape = Tape::<f32>::new();
    let wte = tape.param(random(&mut rng, &[VOCAB, C]));
    let mark = tape.mark();
    let mut runs = Vec::new();
    let path = dir.join("flat_ids.onnx");
    for batch in [2, 3] {
        let ids = ArrayD::from_shape_fn(IxDyn(&[batch * T]), |_| (rng.next_u64() % VOCAB as u64) as usize);
        let tokens = grad!(tape; wte: [V, C]; embedding(wte, &ids));
        let sequences = grad!(tape; tokens: [N, C]; reshape(tokens, [batch, {T}, C]));
        if batch == 2 {
            let export = Export::new(&mut tape).ids_input("ids", tokens).output("sequences", sequences);
            export.batch("tokens").write(&path).unwrap();
        }
        runs.push(json!({ "inputs": { "ids": ids_json(&ids) }, "outputs": { "sequences": floats(&tape, sequences) } }));
        tape.reset_to(mark);
    }
    // The ids are [tokens]; the sequences' first dim is their number.
    let dims = json!({ "sequences": [format!("tokens/{T}"), T, C] });
    cases.push(json!({ "name": "flat_ids", "model": path, "runs": runs, "output_dims": dims }));

    // Every other op, fixed shapes.
    let mut tape = Tape::<f32>::new();
    let (inputs, outputs) = every_op(&mut tape, &mut rng);
    let path = dir.join("every_op.onnx");
    let mut export = Export::new(&mut tape);
    for &(name, var) in &inputs {
        export = export.input(name, var);
    }
    for &(name, var) in &outputs {
        export = export.output(name, var);
    }
    export.write(&path).unwrap();
    let feeds: serde_json::Map<String, Value> =
        inputs.iter().map(|&(n, v)| (n.to_string(), floats(&tape, v))).collect();
    let results: serde_json::Map<String, Value> =
        outputs.iter().map(|&(n, v)| (n.to_string(), floats(&tape, v))).collect();
    cases.push(json!({ "name": "every_op", "model": path, "runs": [{ "inputs": feeds, "outputs": results }] }));

    json!({ "cases": cases })
}

#[test]
fn exported_models_run_in_onnxruntime_and_match_grad() {
    let dir = models::scratch("onnx");
    let manifest = write_cases(&dir);
    let Some(venv_python) = python::venv(TEST, &dir, &["onnx", "onnxruntime", "numpy"]) else { return };
    let manifest_path = dir.join("manifest.json");
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/onnx_check.py");
    let checked = python::run(Command::new(&venv_python).arg(script).arg(&manifest_path));
    for line in String::from_utf8_lossy(&checked.stdout).lines() {
        python::say(TEST, line);
    }
    assert!(
        checked.status.success(),
        "onnxruntime disagreed with grad:\n{}\n{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- what cannot be exported, and what an export leaves alone ----

fn refusal(result: Result<Vec<u8>, GradError>) -> GradError {
    result.expect_err("the export must be refused")
}

#[test]
fn dropout_in_training_is_refused_naming_it_and_its_line() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::ones((4, 3)));
    let w = tape.param(Array2::<f32>::ones((3, 2)));
    let h = grad!(tape; x @ w);
    let line = line!() + 1;
    let dropped = g_dropout(&mut tape, h, 0.5, &mut Rng::new(0), true);
    let error = refusal(Export::new(&mut tape).input("x", x).output("y", dropped).to_bytes());
    assert_eq!(
        error.to_string(),
        format!(
            "g_dropout: cannot be exported to ONNX: dropout in training mode draws a random mask; export the \
             model in evaluation mode (train = false) (at tests/onnx.rs:{line}:19)"
        )
    );
    // In evaluation mode dropout is the identity, and exports.
    let kept = g_dropout(&mut tape, h, 0.5, &mut Rng::new(0), false);
    assert!(Export::new(&mut tape).input("x", x).output("y", kept).to_bytes().is_ok());
}

#[test]
fn batch_norm_in_training_a_detached_value_and_a_custom_op_are_refused() {
    let mut tape = Tape::<f32>::new();
    let norm = BatchNorm2d::new(&mut tape, 2);
    let x = tape.constant(ArrayD::<f32>::from_shape_fn(IxDyn(&[3, 2, 2, 2]), |i| (i[0] + 2 * i[1] + i[3]) as f32));
    let trained = norm.forward(&mut tape, x, true);
    let error = refusal(Export::new(&mut tape).params(&norm).input("x", x).output("y", trained).to_bytes());
    assert_eq!(error.op(), "g_batch_norm");
    assert!(error.to_string().contains("batch norm in training mode"), "{error}");

    let w = tape.param(Array1::<f32>::ones(4));
    let detached = g_detach(&mut tape, w);
    let error = refusal(Export::new(&mut tape).output("y", detached).to_bytes());
    assert_eq!(error.op(), "g_detach");
    assert!(matches!(error.kind(), ErrorKind::NotExportable { .. }));

    let softplus = custom_ops::stable_softplus(&mut tape, w);
    let error = refusal(Export::new(&mut tape).output("y", softplus).to_bytes());
    assert_eq!(error.op(), "stable_softplus");
    assert!(error.to_string().contains("a custom op has no ONNX form"), "{error}");
}

#[test]
fn a_reshape_that_splits_the_batch_is_refused_only_with_a_batch_symbol() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::ones((4, 6)));
    // [4, 6] -> [6, 4]: the batch of 4 would have to become the inner dim.
    let y = g_reshape(&mut tape, x, &[6, 4]);
    let error = refusal(Export::new(&mut tape).input("x", x).output("y", y).batch("batch").to_bytes());
    assert_eq!(error.op(), "g_reshape");
    assert!(error.to_string().contains("splits the batch"), "{error}");
    assert!(Export::new(&mut tape).input("x", x).output("y", y).to_bytes().is_ok());
}

#[test]
fn an_export_leaves_the_tape_as_it_was_and_is_deterministic() {
    let mut rng = Rng::new(3);
    let mut tape = Tape::<f32>::new();
    let model = Gpt::new(&mut tape, &mut rng);
    let ids = Array2::from_shape_fn((2, T), |(b, t)| (b * T + t) % VOCAB);
    let (tokens, logits) = model.forward(&mut tape, &ids);
    let loss = grad!(tape; mean(logits * logits));
    let before: Vec<f32> = tape.value(logits).iter().copied().collect();
    let len = tape.len();
    let export = |tape: &mut Tape<f32>| {
        Export::new(tape)
            .params(&model)
            .ids_input("ids", tokens)
            .output("logits", logits)
            .batch("n")
            .to_bytes()
            .unwrap()
    };
    let first = export(&mut tape);
    assert_eq!(export(&mut tape), first, "the same tape gives the same bytes");
    assert_eq!(tape.len(), len, "the replayed fused regions are dropped");
    assert_eq!(tape.value(logits).iter().copied().collect::<Vec<_>>(), before);
    // The parameters are the initializers, under their names.
    for (name, _) in model.named_params() {
        assert!(first.windows(name.len()).any(|w| w == name.as_bytes()), "{name} is in the file");
    }
    // Handles stay good: the tape differentiates as before.
    tape.backward(loss).unwrap();
    assert!(tape.grad(model.wte).iter().any(|&g| g != 0.0));
}

#[test]
fn bad_requests_are_errors() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::ones((2, 2)));
    let y = grad!(tape; relu(x));
    let error = refusal(Export::new(&mut tape).input("x", x).to_bytes());
    assert!(matches!(error.kind(), ErrorKind::InvalidArgument { name: "outputs", .. }), "{error}");
    let error = refusal(Export::new(&mut tape).input("x", x).output("x", y).to_bytes());
    assert!(matches!(error.kind(), ErrorKind::DuplicateName { .. }), "{error}");
    let error = refusal(Export::new(&mut tape).ids_input("ids", y).output("y", y).to_bytes());
    assert!(error.to_string().contains("no embedding produced"), "{error}");
    let mut other = Tape::<f32>::new();
    let foreign = other.constant(Array1::<f32>::ones(2));
    let error = refusal(Export::new(&mut tape).output("y", foreign).to_bytes());
    assert_eq!(error.kind(), &ErrorKind::ForeignVar);
    // One batch symbol for inputs of different first dims.
    let z = tape.constant(Array2::<f32>::ones((3, 2)));
    let error = refusal(Export::new(&mut tape).input("x", x).input("z", z).output("y", y).batch("b").to_bytes());
    assert!(error.to_string().contains("first dims differ"), "{error}");
    // A poisoned tape says so.
    let bad = g_reshape(&mut tape, x, &[3]);
    let error = refusal(Export::new(&mut tape).output("y", bad).to_bytes());
    assert!(matches!(error.kind(), ErrorKind::TapePoisoned { .. }), "{error}");
    // A file that cannot be written is an I/O error naming it.
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::ones((2, 2)));
    let missing = Path::new("/nonexistent-dir/model.onnx");
    let error = Export::new(&mut tape).input("x", x).output("x_out", x).write(missing).unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::Io { .. }), "{error}");
}
