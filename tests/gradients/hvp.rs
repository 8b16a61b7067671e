//! `Tape::hvp`: the same gradients, bit for bit, as `backward` of the
//! recorded gradient's inner product with the vectors; against central
//! finite differences of the gradient in f64, an exact Hessian, and
//! PyTorch's double backward (the second-order oracle's H·v).

use grad_runtime::*;
use ndarray::{ArrayD, array};

use crate::common::{Rng, assert_close};
use crate::second_order::{Quadratic, json_array, oracle_program};

/// A W9-like model in f64: `mse(tanh(x @ w1 + b1) @ w2 + b2, t)`, the
/// parameters first on the tape.
fn mlp(tp: &mut Tape<f64>, params: &[ArrayD<f64>], x: &ArrayD<f64>, t: &ArrayD<f64>) -> (Vec<Var>, Var) {
    let ps: Vec<Var> = params.iter().map(|p| tp.param(p)).collect();
    let (x, t) = (tp.constant(x), tp.constant(t));
    let (w1, b1, w2, b2) = (ps[0], ps[1], ps[2], ps[3]);
    let loss = grad!(tp; x: [6, 5], w1: [5, 4], w2: [4, 3], t: [6, 3];
        mse(tanh(x @ w1 + b1) @ w2 + b2, t));
    (ps, loss)
}

fn mlp_inputs(rng: &mut Rng) -> (Vec<ArrayD<f64>>, ArrayD<f64>, ArrayD<f64>) {
    let shapes: [&[usize]; 4] = [&[5, 4], &[4], &[4, 3], &[3]];
    let params = shapes.iter().map(|s| rng.normal_array(s)).collect();
    (params, rng.normal_array(&[6, 5]), rng.normal_array(&[6, 3]))
}

/// H·v the long way: `grad_graph`, then `backward` of `Σ sum(gᵢ * vᵢ)`.
fn hvp_through_grad_graph(tp: &mut Tape<f64>, y: Var, xs: &[Var], vs: &[Var]) {
    let gs = tp.grad_graph(y, xs).unwrap();
    let mut inner: Option<Var> = None;
    for (&g, &v) in gs.iter().zip(vs) {
        let term = grad!(tp; sum(g * v));
        inner = Some(match inner {
            Some(sum) => g_add(tp, sum, term),
            None => term,
        });
    }
    tp.backward(inner.unwrap()).unwrap();
}

#[test]
fn hvp_gives_the_bits_of_backward_through_grad_graph() {
    let mut rng = Rng::new(71);
    let (params, x, t) = mlp_inputs(&mut rng);
    let directions: Vec<ArrayD<f64>> = params.iter().map(|p| rng.normal_array(p.shape())).collect();
    let run = |through_grad_graph: bool, anomaly: bool| {
        let mut tp = Tape::<f64>::new();
        tp.set_detect_anomaly(anomaly);
        let (ps, loss) = mlp(&mut tp, &params, &x, &t);
        let vs: Vec<Var> = directions.iter().map(|d| tp.constant(d)).collect();
        let len = tp.len();
        if through_grad_graph {
            hvp_through_grad_graph(&mut tp, loss, &ps, &vs);
        } else {
            tp.hvp(loss, &ps, &vs).unwrap();
            assert_eq!(tp.len(), len, "hvp drops the nodes it recorded");
        }
        ps.iter().map(|&p| tp.grad(p).to_owned()).collect::<Vec<_>>()
    };
    let want = run(true, false);
    assert_eq!(run(false, false), want, "deferred products");
    assert_eq!(run(false, true), want, "anomaly mode computes every product");
}

#[test]
fn hvp_matches_finite_differences_of_the_gradient() {
    let mut rng = Rng::new(72);
    let (params, x, t) = mlp_inputs(&mut rng);
    let directions: Vec<ArrayD<f64>> = params.iter().map(|p| rng.normal_array(p.shape())).collect();
    let gradient_at = |shift: f64| {
        let moved: Vec<ArrayD<f64>> = params.iter().zip(&directions).map(|(p, d)| p + &(d * shift)).collect();
        let mut tp = Tape::<f64>::new();
        let (ps, loss) = mlp(&mut tp, &moved, &x, &t);
        tp.backward(loss).unwrap();
        ps.iter().map(|&p| tp.grad(p).to_owned()).collect::<Vec<_>>()
    };
    let eps = 1e-5;
    let (plus, minus) = (gradient_at(eps), gradient_at(-eps));
    let mut tp = Tape::<f64>::new();
    let (ps, loss) = mlp(&mut tp, &params, &x, &t);
    let vs: Vec<Var> = directions.iter().map(|d| tp.constant(d)).collect();
    tp.hvp(loss, &ps, &vs).unwrap();
    for (k, &p) in ps.iter().enumerate() {
        let fd = (&plus[k] - &minus[k]) / (2.0 * eps);
        assert_close(&format!("H v, parameter {k}"), &tp.grad(p).to_owned(), &fd, 1e-7, 1e-9);
    }
}

#[test]
fn hvp_of_a_quadratic_is_its_matrix() {
    // f(w) = Σ (x w)² has H = 2 xᵀx exactly, with w used twice: the
    // gradient's two products are summed, so the walk reads both.
    let mut tp = Tape::<f64>::new();
    let q = Quadratic::new(&mut tp);
    tp.hvp(q.loss, &[q.w], &[q.v]).unwrap();
    assert_eq!(tp.grad(q.w), q.hv());
    // Σ x³: diag(6x), and a parameter's slot accumulates as in backward.
    let z = tp.param(array![1.0, -2.0, 0.5]);
    let cube = grad!(tp; sum(z * z * z));
    let u = tp.constant(array![1.0, 1.0, 2.0]);
    tp.hvp(cube, &[z], &[u]).unwrap();
    tp.hvp(cube, &[z], &[u]).unwrap();
    assert_eq!(tp.grad(z), array![12.0, -24.0, 12.0].into_dyn());
}

#[test]
fn hvp_matches_pytorch_double_backward() {
    let file: serde_json::Value =
        serde_json::from_str(include_str!("../data/oracle_second_order.json")).expect("the oracle is JSON");
    for case in file["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let list = |key: &str| case[key].as_array().unwrap().iter().map(json_array).collect::<Vec<_>>();
        let (inputs, directions, hvps) = (list("inputs"), list("v"), list("hvp"));
        let mut tp = Tape::<f64>::new();
        let vars: Vec<Var> = inputs.iter().map(|x| tp.param(x)).collect();
        let y = oracle_program(name, &mut tp, &vars);
        let vs: Vec<Var> = directions.iter().map(|v| tp.constant(v)).collect();
        tp.hvp(y, &vars, &vs).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (k, (&x, want)) in vars.iter().zip(&hvps).enumerate() {
            assert_close(&format!("{name}: H v, input {k}"), &tp.grad(x).to_owned(), want, 1e-9, 1e-12);
        }
    }
}

#[test]
fn bad_arguments_are_errors_that_touch_no_slot() {
    let mut tp = Tape::<f64>::new();
    let w = tp.param(array![[0.5, -1.0], [2.0, 0.25]]);
    let x = tp.constant(array![[1.0, 2.0]]);
    let loss = grad!(tp; x: [1, 2], w: [2, 2]; sum(tanh(x @ w)));
    tp.backward(loss).unwrap();
    let before = tp.grad(w).to_owned();
    let v = tp.constant(array![[1.0, 0.0], [0.0, 1.0]]);
    let short = tp.constant(array![1.0, 0.0]);
    let vector = tp.constant(array![1.0, 2.0]);
    let len = tp.len();
    let error = tp.hvp(loss, &[w], &[]).unwrap_err();
    assert!(matches!(error.kind(), &ErrorKind::IndexCount { got: 0, expected: 1, .. }), "{error}");
    assert_eq!(error.op(), "Tape::hvp");
    let error = tp.hvp(loss, &[w], &[short]).unwrap_err();
    assert!(matches!(error.kind(), &ErrorKind::ShapeMismatch), "{error}");
    assert_eq!(error.shapes(), [vec![2, 2], vec![2]]);
    let y = g_tanh(&mut tp, vector);
    let not_scalar = tp.hvp(y, &[w], &[v]).unwrap_err();
    assert!(matches!(not_scalar.kind(), &ErrorKind::NotScalar { elements: 2 }), "{not_scalar}");
    let mut other = Tape::<f64>::new();
    let foreign = other.constant(array![[1.0, 0.0], [0.0, 1.0]]);
    let error = tp.hvp(loss, &[w], &[foreign]).unwrap_err();
    assert!(matches!(error.kind(), &ErrorKind::ForeignVar), "{error}");
    assert_eq!(tp.len(), len + 1, "only the tanh was recorded");
    assert_eq!(tp.grad(w), before, "no slot touched");
    assert!(tp.is_ok(), "an argument error does not poison the tape");
    let mark = tp.mark();
    let dropped = tp.constant(array![[1.0, 0.0], [0.0, 1.0]]);
    tp.reset_to(mark);
    let error = tp.hvp(loss, &[w], &[dropped]).unwrap_err();
    assert!(matches!(error.kind(), &ErrorKind::StaleVar), "{error}");
}

#[test]
fn nodes_recorded_after_hvp_start_with_clean_slots() {
    let mut tp = Tape::<f64>::new();
    let w = tp.param(array![1.0, 2.0]);
    let loss = grad!(tp; sum(exp(w) * w));
    let v = tp.constant(array![1.0, -1.0]);
    tp.hvp(loss, &[w], &[v]).unwrap();
    // A node at an index hvp used and dropped: its slot reads zeros until
    // a backward reaches it.
    let later = g_exp(&mut tp, w);
    assert_eq!(tp.grad(later), array![0.0, 0.0].into_dyn());
}
