//! Replays every optimizer case (kind "optim") of the oracle
//! (`tests/data/oracle_cases.json`, float64, format in
//! `tests/data/ORACLE_FORMAT.md`): the Adam (scikit-learn form, with L2),
//! SGD and global-norm clipping trajectories, in f64, to 1e-12 relative.

use grad_runtime::{Adam, Sgd, Tape, Var, g_add, g_mul, g_sub, g_sum};
use ndarray::{ArrayD, IxDyn};
use serde_json::Value;

const RTOL: f64 = 1e-12;

fn optim_cases() -> Vec<Value> {
    let text = include_str!("data/oracle_cases.json");
    let file: Value = serde_json::from_str(text).expect("oracle file is JSON");
    assert_eq!(file["format"], "autodiff-oracle/1");
    let cases = file["cases"].as_array().expect("cases array");
    cases.iter().filter(|case| case["kind"] == "optim").cloned().collect()
}

fn array(value: &Value) -> ArrayD<f64> {
    let shape: Vec<usize> = value["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data: Vec<f64> = value["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    ArrayD::from_shape_vec(IxDyn(&shape), data).expect("data length matches shape")
}

fn number(value: &Value) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("expected a number, got {value}"))
}

/// The input called `name`, checked to be differentiable or not as expected.
fn input(case: &Value, name: &str, requires_grad: bool) -> ArrayD<f64> {
    let inputs = case["inputs"].as_array().unwrap();
    let found = inputs.iter().find(|i| i["name"] == name).unwrap_or_else(|| panic!("no input {name}"));
    assert_eq!(found["requires_grad"], requires_grad, "input {name}");
    array(found)
}

/// `|got - want| <= RTOL·|want|` elementwise, with the same shape.
fn assert_rel(what: &str, got: &[f64], got_shape: &[usize], want: &ArrayD<f64>) {
    assert_eq!(got_shape, want.shape(), "{what}: shape");
    for (i, (&g, &w)) in got.iter().zip(want.iter()).enumerate() {
        assert!(
            (g - w).abs() <= RTOL * w.abs(),
            "{what}: element {i}: got {g:e}, want {w:e} (diff {:e})",
            (g - w).abs()
        );
    }
}

fn assert_var(what: &str, tape: &Tape<f64>, v: Var, want: &Value) {
    let got = tape.value(v);
    assert_rel(what, got.as_slice().unwrap(), got.shape(), &array(want));
}

fn assert_scalar(what: &str, got: f64, want: &Value) {
    let want = number(want);
    assert!((got - want).abs() <= RTOL * want.abs(), "{what}: got {got:e}, want {want:e}");
}

/// `sum((w - c)²)`, the loss of the Adam and SGD trajectories.
fn squared_distance(tape: &mut Tape<f64>, w: Var, c: &ArrayD<f64>) -> Var {
    let c = tape.constant(c);
    let d = g_sub(tape, w, c);
    let dd = g_mul(tape, d, d);
    g_sum(tape, dd)
}

/// Runs a trajectory case: per step, checks the loss before the step and
/// its gradient, then `step_and_check` steps and checks the state against
/// the trajectory entry, then the tape is reset for the next step.
fn replay_trajectory(
    case: &Value,
    tape: &mut Tape<f64>,
    w: Var,
    step_and_check: &mut dyn FnMut(&mut Tape<f64>, &Value, &str),
) -> usize {
    let name = case["name"].as_str().unwrap();
    let c = input(case, "c", false);
    let trajectory = case["trajectory"].as_array().unwrap();
    assert_eq!(trajectory.len() as u64, case["args"]["steps"].as_u64().unwrap(), "{name}: steps");
    let mark = tape.mark();
    for (t, entry) in trajectory.iter().enumerate() {
        assert_eq!(entry["step"].as_u64(), Some(t as u64 + 1));
        let at = format!("{name} step {}", t + 1);
        let loss = squared_distance(tape, w, &c);
        assert_scalar(&format!("{at}: loss"), tape.scalar(loss), &entry["loss"]);
        tape.backward(loss).unwrap();
        let grad = tape.grad(w).to_owned();
        assert_rel(&format!("{at}: grad"), grad.as_slice().unwrap(), grad.shape(), &array(&entry["grad"]));
        step_and_check(tape, entry, &at);
        tape.reset_to(mark);
    }
    trajectory.len()
}

fn replay_adam(case: &Value) {
    let args = &case["args"];
    let mut tape = Tape::<f64>::new();
    let w = tape.param(input(case, "w", true));
    let mut opt =
        Adam::new(number(&args["lr"])).betas(number(&args["beta1"]), number(&args["beta2"])).eps(number(&args["eps"]));
    opt.add(&tape, w, number(&args["l2"])).unwrap();
    let ran = replay_trajectory(case, &mut tape, w, &mut |tape, entry, at| {
        opt.step(tape).unwrap();
        assert_var(&format!("{at}: w"), tape, w, &entry["w"]);
        let (m, v) = opt.moments(w).unwrap();
        assert_rel(&format!("{at}: m"), m, &[m.len()], &array(&entry["m"]));
        assert_rel(&format!("{at}: v"), v, &[v.len()], &array(&entry["v"]));
    });
    assert_eq!(opt.steps(), ran as u64);
}

fn replay_sgd(case: &Value) {
    let mut tape = Tape::<f64>::new();
    let w = tape.param(input(case, "w", true));
    let mut opt = Sgd::new(number(&case["args"]["lr"]));
    opt.add(&tape, w, 0.0).unwrap();
    let ran = replay_trajectory(case, &mut tape, w, &mut |tape, entry, at| {
        opt.step(tape).unwrap();
        assert_var(&format!("{at}: w"), tape, w, &entry["w"]);
    });
    assert_eq!(opt.steps(), ran as u64);
}

/// Two parameters whose gradients are given: `loss = sum(p1·g1) + sum(p2·g2)`
/// puts exactly `g1` and `g2` on them. One SGD step with clipping.
fn replay_clip(case: &Value) {
    let name = case["name"].as_str().unwrap();
    let (args, results) = (&case["args"], &case["results"]);
    let mut tape = Tape::<f64>::new();
    let p1 = tape.param(input(case, "p1", true));
    let p2 = tape.param(input(case, "p2", true));
    let (g1, g2) = (input(case, "g1", false), input(case, "g2", false));
    let mut opt = Sgd::new(number(&args["lr"]));
    opt.add(&tape, p1, 0.0).unwrap();
    opt.add(&tape, p2, 0.0).unwrap();
    opt.set_clip(number(&args["max_norm"])).unwrap();

    let (k1, k2) = (tape.constant(&g1), tape.constant(&g2));
    let (a, b) = (g_mul(&mut tape, p1, k1), g_mul(&mut tape, p2, k2));
    let (a, b) = (g_sum(&mut tape, a), g_sum(&mut tape, b));
    let loss = g_add(&mut tape, a, b);
    tape.backward(loss).unwrap();
    assert_eq!(tape.grad(p1), g1);
    assert_eq!(tape.grad(p2), g2);
    opt.step(&mut tape).unwrap();

    let after = results["params_after"].as_array().unwrap();
    assert_eq!((after[0]["name"].as_str(), after[1]["name"].as_str()), (Some("p1"), Some("p2")));
    assert_var(&format!("{name}: p1 after"), &tape, p1, &after[0]);
    assert_var(&format!("{name}: p2 after"), &tape, p2, &after[1]);
    // The case's own arithmetic, to make sure it exercises the branch its name says.
    let clipped = name.ends_with("_clipped");
    assert_eq!(number(&results["scale"]) < 1.0, clipped, "{name}");
    assert_eq!(number(&results["total_norm"]) > number(&args["max_norm"]), clipped, "{name}");
}

#[test]
fn every_optimizer_case_of_the_oracle_is_reproduced_in_f64() {
    let cases = optim_cases();
    let names: Vec<&str> = cases.iter().map(|case| case["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["adam_sklearn_l2_3steps", "sgd_3steps", "clip_global_norm_clipped", "clip_global_norm_unclipped"],
        "the optimizer cases of the oracle file"
    );
    let mut ran = 0;
    for case in &cases {
        match case["op"].as_str().unwrap() {
            "adam" => replay_adam(case),
            "sgd" => replay_sgd(case),
            "clip_grad_norm_sgd" => replay_clip(case),
            other => panic!("optimizer case {} has an op this test does not know: {other}", case["name"]),
        }
        ran += 1;
    }
    assert_eq!(ran, 4, "every optimizer case ran, none skipped");
}
