//! Replays every gradient case of the PyTorch oracles (float64, format in
//! `tests/data/ORACLE_FORMAT.md`): forward values and vector-Jacobian
//! products must agree to 1e-10 relative. Each case is built by the
//! `replay` of the module that tests its op (a composite case, a small
//! program across modules, is built here).
//!
//! - `oracle_cases.json`: the project's shared oracle, every seed op. Its
//!   optimizer cases (kind "optim") are replayed by `tests/optim_oracle.rs`.
//! - `oracle_extra.json`: the ops the shared file does not cover (max, min,
//!   activations, embedding, batched matmul, layer_norm, batch and group
//!   norm, detach, a transformer MLP block), written by
//!   `tests/data/make_oracle_extra.py` with PyTorch.

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn};
use serde_json::Value;

const RTOL: f64 = 1e-10;
const ATOL: f64 = 1e-12;

/// A tested module's `replay`: builds the case if the op is one of its own.
type Replay = fn(&Case, &mut Tape<f64>) -> Option<Var>;

/// Every tested module's `replay`.
const REPLAYS: [Replay; 20] = [
    super::arithmetic::replay,
    super::unary::replay,
    super::reduce::replay,
    super::matmul::replay,
    super::layout::replay,
    super::permute::replay,
    super::attention::replay,
    super::attention_packed::replay,
    super::softmax::replay,
    super::mse::replay,
    super::cross_entropy::replay,
    super::embedding::replay,
    super::layer_norm::replay,
    super::batch_norm::replay,
    super::group_norm::replay,
    super::conv::replay,
    // Indexing and masking (issue 13).
    super::index::replay,
    super::select::replay,
    super::cumsum::replay,
    super::detach::replay,
];

/// One oracle case with its inputs on a tape, as a module's `replay` reads it.
pub struct Case<'a> {
    value: &'a Value,
    inputs: Vec<Input>,
}

/// An oracle input on the tape: a differentiable parameter, a float
/// constant, or integer class indices.
enum Input {
    Var(Var),
    Indices(ArrayD<usize>),
}

impl Case<'_> {
    /// The op name, in PyTorch's words (`add`, `softmax`, `add_scalar`).
    pub fn op(&self) -> &str {
        self.value["op"].as_str().expect("every case names its op")
    }

    /// Float input `k`.
    pub fn x(&self, k: usize) -> Var {
        match &self.inputs[k] {
            Input::Var(v) => *v,
            Input::Indices(_) => panic!("{}: input {k} is integer indices, expected a float input", self.name()),
        }
    }

    /// Integer input `k` (class targets, embedding ids), shaped as the case
    /// gives it (a list is 1-D): pass it as it is, or flat with `.as_slice()`.
    pub fn indices(&self, k: usize) -> &ArrayD<usize> {
        match &self.inputs[k] {
            Input::Indices(ids) => ids,
            Input::Var(_) => panic!("{}: input {k} is a float input, expected integer indices", self.name()),
        }
    }

    /// The float argument `name`.
    pub fn number(&self, name: &str) -> f64 {
        self.args()[name].as_f64().unwrap_or_else(|| panic!("{}: argument `{name}` is not a number", self.name()))
    }

    /// The `axis` argument, if the case has one (negative counts from the end).
    pub fn axis(&self) -> Option<isize> {
        self.args()["axis"].as_i64().map(|a| a as isize)
    }

    /// The non-negative integer argument `name`.
    pub fn index(&self, name: &str) -> usize {
        self.args()[name].as_u64().unwrap_or_else(|| panic!("{}: argument `{name}` is not an index", self.name()))
            as usize
    }

    /// The boolean argument `name`.
    pub fn flag(&self, name: &str) -> bool {
        self.args()[name].as_bool().unwrap_or_else(|| panic!("{}: argument `{name}` is not a bool", self.name()))
    }

    /// The list-of-sizes argument `name`.
    pub fn usizes(&self, name: &str) -> Vec<usize> {
        let list =
            self.args()[name].as_array().unwrap_or_else(|| panic!("{}: argument `{name}` is not a list", self.name()));
        list.iter().map(|d| d.as_u64().unwrap() as usize).collect()
    }

    /// The list-of-numbers argument `name`.
    pub fn floats(&self, name: &str) -> Vec<f64> {
        let list =
            self.args()[name].as_array().unwrap_or_else(|| panic!("{}: argument `{name}` is not a list", self.name()));
        list.iter().map(|d| d.as_f64().unwrap()).collect()
    }

    fn args(&self) -> &Value {
        &self.value["args"]
    }

    /// The case's name (`add_2x1x3_4x1`, or a composite's `mlp_mse`).
    pub fn name(&self) -> &str {
        self.value["name"].as_str().unwrap()
    }
}

fn cases(text: &str) -> Vec<Value> {
    let file: Value = serde_json::from_str(text).expect("oracle file is JSON");
    assert_eq!(file["format"], "autodiff-oracle/1");
    file["cases"].as_array().expect("cases array").clone()
}

fn array(value: &Value) -> ArrayD<f64> {
    let shape: Vec<usize> = value["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data: Vec<f64> = value["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    ArrayD::from_shape_vec(IxDyn(&shape), data).expect("data length matches shape")
}

fn indices(value: &Value) -> ArrayD<usize> {
    assert_eq!(value["dtype"], "i64");
    let shape: Vec<usize> = value["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data: Vec<usize> = value["data"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
    ArrayD::from_shape_vec(IxDyn(&shape), data).expect("data length matches shape")
}

/// Builds the case's program on the tape, in the library's op names.
fn build(case: &Case, tp: &mut Tape<f64>) -> Var {
    if case.op() == "composite" {
        return build_composite(case, tp);
    }
    REPLAYS
        .iter()
        .find_map(|replay| replay(case, tp))
        .unwrap_or_else(|| panic!("{}: op `{}` has no replay: every oracle case must run", case.name(), case.op()))
}

fn build_composite(case: &Case, tp: &mut Tape<f64>) -> Var {
    let x = |k: usize| case.x(k);
    match case.name() {
        "mul_self" => g_mul(tp, x(0), x(0)),
        "mlp_mse" | "mlp_cross_entropy" => {
            let (input, w1, b1, w2, b2) = (x(0), x(1), x(2), x(3), x(4));
            let xw = g_matmul(tp, input, w1);
            let z = g_add(tp, xw, b1);
            let h = g_relu(tp, z);
            let hw = g_matmul(tp, h, w2);
            let y = g_add(tp, hw, b2);
            if case.name() == "mlp_mse" { g_mse(tp, y, x(5)) } else { g_cross_entropy(tp, y, case.indices(5)) }
        }
        "attention_single_head" => {
            let scale = case.number("scale");
            let (input, wq, wk, wv) = (x(0), x(1), x(2), x(3));
            // numpy's broadcasting matmul: [B, T, D] @ [D, D].
            let q = g_matmul(tp, input, wq);
            let k = g_matmul(tp, input, wk);
            let v = g_matmul(tp, input, wv);
            let kt = g_transpose(tp, k);
            let scores = g_bmm(tp, q, kt);
            let scaled = g_muls(tp, scores, scale);
            let p = g_softmax(tp, scaled, -1);
            let o = g_bmm(tp, p, v);
            let oo = g_mul(tp, o, o);
            g_sum(tp, oo)
        }
        "fanout_x2_plus_exp" => {
            let square = g_mul(tp, x(0), x(0));
            let exp = g_exp(tp, x(0));
            let both = g_add(tp, square, exp);
            g_sum(tp, both)
        }
        "transformer_mlp_block" => {
            let eps = case.number("eps");
            let (input, gamma, beta, w1, b1, w2) = (x(0), x(1), x(2), x(3), x(4), x(5));
            let normed = g_layer_norm(tp, input, gamma, beta, eps);
            let hidden = g_matmul(tp, normed, w1);
            let hidden = g_add(tp, hidden, b1);
            let hidden = g_gelu(tp, hidden);
            let projected = g_matmul(tp, hidden, w2);
            let residual = g_add(tp, input, projected);
            g_sum(tp, residual)
        }
        "center_rows" => {
            let mean = g_mean_axis(tp, x(0), 1, true);
            g_sub(tp, x(0), mean)
        }
        other => panic!("composite `{other}` has no replay: every oracle case must run"),
    }
}

fn assert_close(what: &str, got: &ArrayD<f64>, want: &ArrayD<f64>) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    for (i, (&g, &w)) in got.iter().zip(want.iter()).enumerate() {
        let error = (g - w).abs();
        assert!(error <= ATOL + RTOL * w.abs(), "{what}: element {i}: got {g:e}, PyTorch {w:e} (diff {error:e})");
    }
}

fn replay(case: &Value) {
    replay_with(case, &|case, tp| Some(build(case, tp)));
}

/// Replays `case` with the program `build` makes of it; false when `build`
/// has none.
fn replay_with(case: &Value, build: &dyn Fn(&Case, &mut Tape<f64>) -> Option<Var>) -> bool {
    let name = case["name"].as_str().unwrap();
    let mut tape = Tape::<f64>::new();
    let mut differentiable = Vec::new();
    let inputs: Vec<Input> = case["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|input| {
            if input["dtype"] == "i64" {
                return Input::Indices(indices(input));
            }
            let value = array(input);
            if input["requires_grad"].as_bool().unwrap() {
                let v = tape.param(&value);
                differentiable.push((input["name"].as_str().unwrap().to_owned(), v));
                Input::Var(v)
            } else {
                Input::Var(tape.constant(&value))
            }
        })
        .collect();
    let case = Case { value: case, inputs };
    let Some(out) = build(&case, &mut tape) else { return false };
    let case = case.value;
    assert!(tape.is_ok(), "{name}: {}", tape.error().unwrap());
    assert_close(&format!("{name} output"), &tape.value(out).to_owned(), &array(&case["output"]));

    tape.backward_with(out, &array(&case["cotangent"])).unwrap();
    let want = case["grads"].as_array().unwrap();
    assert_eq!(want.len(), differentiable.len(), "{name}: one gradient per differentiable input");
    for ((input_name, v), want) in differentiable.iter().zip(want) {
        assert_eq!(want["name"].as_str().unwrap(), input_name, "{name}: gradient order");
        assert_close(&format!("{name} d/d{input_name}"), &tape.grad(*v).to_owned(), &array(want));
    }
    true
}

#[test]
fn every_gradient_case_of_the_pytorch_oracle_matches() {
    let cases = cases(include_str!("../data/oracle_cases.json"));
    let grad_cases: Vec<&Value> = cases.iter().filter(|c| c["kind"] == "grad").collect();
    let optim_cases = cases.iter().filter(|c| c["kind"] == "optim").count();
    assert_eq!(grad_cases.len() + optim_cases, cases.len(), "every case is kind grad or optim");
    for case in &grad_cases {
        replay(case);
    }
    println!("replayed {} gradient cases of the PyTorch oracle", grad_cases.len());
    assert_eq!(grad_cases.len(), 98, "the oracle file changed: review the new cases");
}

#[test]
fn every_case_of_the_extra_pytorch_oracle_matches() {
    let cases = cases(include_str!("../data/oracle_extra.json"));
    for case in &cases {
        assert_eq!(case["kind"], "grad");
        replay(case);
    }
    println!("replayed {} extra gradient cases of PyTorch", cases.len());
    // The generator appends cases as ops are added; it never drops one.
    assert!(cases.len() >= 58, "the extra oracle lost cases: regenerate it with tests/data/make_oracle_extra.py");
}

/// Every case whose program has a chain of elementwise ops, rerun through
/// a `grad!` block that fuses it (`fused::replay`): the fused node's
/// values and gradients match PyTorch as the unfused ops do.
#[test]
fn every_elementwise_case_matches_through_a_fused_grad_block() {
    let mut replayed = 0;
    for file in [include_str!("../data/oracle_cases.json"), include_str!("../data/oracle_extra.json")] {
        for case in cases(file).iter().filter(|c| c["kind"] == "grad") {
            replayed += usize::from(replay_with(case, &super::fused::replay));
        }
    }
    println!("replayed {replayed} oracle cases through fused grad! blocks");
    assert_eq!(replayed, EXPECTED_FUSED, "an elementwise case lost its fused replay");
}

/// The oracle cases with a fused replay: every `+ - * /`, scalar,
/// activation, `sum`/`mean` over everything, and composite case.
const EXPECTED_FUSED: usize = 59;
