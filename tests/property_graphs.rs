//! Gradients of graphs nobody wrote by hand: random DAGs of the runtime's
//! differentiable ops (fan-out, broadcasting, random shapes), each
//! parameter's gradient checked against central finite differences in f64.
//!
//! `GRAD_PROPTEST_SCALE=100` runs 100 times as many graphs (the guide,
//! `grad-runtime/src/guide/reliability.md`); a failure shrinks to a short
//! graph printed one op per line. The seed is fixed (set
//! `PROPTEST_RNG_SEED` to explore others).

mod common;
mod random_graph;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use grad_runtime::dsl::OP_FUNCTIONS;
use grad_runtime::*;
use ndarray::{ArrayD, Axis, IxDyn};
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use random_graph::{Graph, Step, graphs, op_name, scaled};

/// Graphs checked by default; `GRAD_PROPTEST_SCALE` multiplies it.
const CASES: u32 = 600;
/// Raw ops per graph, at most (each may add a step or two it needs).
const MAX_OPS: usize = 14;
/// Central-difference step and the tolerance on |fd - analytic| / max(1, |analytic|),
/// beyond what rounding in the loss's evaluations explains.
const STEP: f64 = 1e-6;
const TOLERANCE: f64 = 1e-5;
/// How far a kinked op's input must stay from its kink (and a max from the
/// runner-up) for a finite difference of step `STEP` to be meaningful.
const MARGIN: f64 = 1e-3;

pub fn config(cases: u32) -> Config {
    let mut config = Config::with_cases(scaled(cases));
    config.failure_persistence = None;
    config.max_shrink_iters = 4096;
    // About 2% of graphs are rejected (too large a value, too near a
    // kink); proptest's default cap of 1024 would end a 100x run early.
    config.max_global_rejects = (config.cases / 4).max(1024);
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(0x005e_ed0f_61ad);
    }
    config
}

/// Records `graph` with `values` as its parameters and the loss
/// `Σ over sinks of sum(sink ⊙ cotangent)`; returns the loss and the parameters.
///
/// `frozen` holds the value of each `detach` node at the unperturbed
/// parameters: a stop-gradient means the derivative with that value held
/// fixed, so the finite differences hold it fixed too.
fn record_loss(
    tape: &mut Tape<f64>,
    graph: &Graph,
    values: &[ArrayD<f64>],
    frozen: &[Option<ArrayD<f64>>],
) -> (Var, Vec<Var>, Vec<Var>) {
    let params: Vec<Var> = values.iter().map(|v| tape.param(v)).collect();
    let nodes = graph.record(tape, &params, |i, tape, _| frozen.get(i)?.as_ref().map(|v| tape.constant(v)));
    let mut rng = grad_runtime::Rng::new(graph.seed ^ 0xc07a_6e17);
    let mut loss = None;
    for sink in graph.sinks() {
        let c = tape.constant(ArrayD::from_shape_fn(IxDyn(&graph.shapes[sink]), |_| rng.normal()));
        let product = g_mul(tape, nodes[sink], c);
        let term = g_sum(tape, product);
        loss = Some(match loss {
            None => term,
            Some(total) => g_add(tape, total, term),
        });
    }
    (loss.expect("a graph has a sink"), params, nodes)
}

fn loss_value(graph: &Graph, values: &[ArrayD<f64>], frozen: &[Option<ArrayD<f64>>]) -> f64 {
    let mut tape = Tape::<f64>::new();
    let (loss, _, _) = record_loss(&mut tape, graph, values, frozen);
    tape.scalar(loss)
}

/// The smallest distance of a kinked op's input to its kink, or of a
/// lane's maximum (minimum) to its runner-up: below `MARGIN`, a finite
/// difference straddles the kink and measures nothing.
fn kink_margin(graph: &Graph, tape: &Tape<f64>, nodes: &[Var]) -> f64 {
    let mut margin = f64::INFINITY;
    for step in &graph.steps {
        let value = |x: usize| tape.value(nodes[x]);
        let mut near = |distance: f64| margin = margin.min(distance);
        match *step {
            Step::Unary("relu" | "abs", x) | Step::LeakyRelu(x, _) => value(x).iter().for_each(|v| near(v.abs())),
            Step::Clamp(x, lo, hi) => value(x).iter().for_each(|v| near((v - lo).abs().min((v - hi).abs()))),
            Step::ReduceAxis("max" | "min", x, axis, _) => {
                let input = value(x);
                let axis = axis.rem_euclid(input.ndim() as isize) as usize;
                for lane in input.lanes(Axis(axis)) {
                    let mut sorted: Vec<f64> = lane.to_vec();
                    sorted.sort_by(f64::total_cmp);
                    let n = sorted.len();
                    if n >= 2 {
                        near(sorted[n - 1] - sorted[n - 2]);
                        near(sorted[1] - sorted[0]);
                    }
                }
            }
            _ => {}
        }
    }
    margin
}

struct Stats {
    graphs: AtomicUsize,
    rejected: AtomicUsize,
    nodes: AtomicUsize,
    checked: AtomicUsize,
}

fn check(graph: &Graph, stats: &Stats) -> Result<(), TestCaseError> {
    let values = graph.param_values();
    let mut tape = Tape::<f64>::new();
    let (loss, params, nodes) = record_loss(&mut tape, graph, &values, &[]);
    let frozen: Vec<Option<ArrayD<f64>>> = (0..graph.steps.len())
        .map(|i| matches!(graph.steps[i], Step::Detach(_)).then(|| tape.value(nodes[i]).to_owned()))
        .collect();
    if let Some(error) = tape.error() {
        return Err(TestCaseError::fail(format!("a valid graph failed: {error}")));
    }
    let finite = nodes.iter().all(|&v| tape.value(v).iter().all(|x| x.is_finite() && x.abs() < 1e6));
    if !finite || kink_margin(graph, &tape, &nodes) < MARGIN {
        stats.rejected.fetch_add(1, Ordering::Relaxed);
        return Err(TestCaseError::reject("too large a value, or too near a kink, for finite differences"));
    }
    // What rounding alone moves a central difference by: each evaluation
    // of the loss is off by a few ulps of the values it adds up, divided
    // by the step. Negligible for most graphs; near 1e-4 for one whose
    // values reach 1e5 (`mse(p1, p2)^9`).
    let magnitude: f64 = nodes.iter().map(|&v| tape.value(v).iter().map(|x| x.abs()).sum::<f64>()).sum();
    let rounding = 4.0 * f64::EPSILON * magnitude / STEP;
    tape.backward(loss).map_err(|e| TestCaseError::fail(format!("backward: {e}")))?;
    let analytic: Vec<ArrayD<f64>> = params.iter().map(|&p| tape.grad(p).to_owned()).collect();
    for (k, value) in values.iter().enumerate() {
        for i in 0..value.len() {
            let mut shifted = values.to_vec();
            let original = value.as_slice().unwrap()[i];
            shifted[k].as_slice_mut().unwrap()[i] = original + STEP;
            let plus = loss_value(graph, &shifted, &frozen);
            shifted[k].as_slice_mut().unwrap()[i] = original - STEP;
            let minus = loss_value(graph, &shifted, &frozen);
            let numeric = (plus - minus) / (2.0 * STEP);
            let exact = analytic[k].as_slice().unwrap()[i];
            let error = (numeric - exact).abs() / exact.abs().max(1.0);
            if error.is_nan() || (numeric - exact).abs() > TOLERANCE * exact.abs().max(1.0) + rounding {
                return Err(TestCaseError::fail(format!(
                    "parameter {k} (node p{}) element {i}: finite difference {numeric}, backward {exact} (relative error {error:e})",
                    graph.params()[k]
                )));
            }
            stats.checked.fetch_add(1, Ordering::Relaxed);
        }
    }
    check_hvp(graph, &values)?;
    stats.graphs.fetch_add(1, Ordering::Relaxed);
    stats.nodes.fetch_add(graph.steps.len(), Ordering::Relaxed);
    Ok(())
}

/// `Tape::hvp` in random directions gives the bits of `backward` of
/// `Σ sum(g · v)`, `g` the gradient `grad_graph` records (whose own
/// second derivatives the graphs' `grad` steps put under the finite
/// differences above).
fn check_hvp(graph: &Graph, values: &[ArrayD<f64>]) -> Result<(), TestCaseError> {
    let mut rng = grad_runtime::Rng::new(graph.seed ^ 0x4e55);
    let directions: Vec<ArrayD<f64>> =
        values.iter().map(|v| ArrayD::from_shape_fn(v.raw_dim(), |_| rng.normal())).collect();
    let run = |by_hand: bool| -> Result<Vec<ArrayD<f64>>, String> {
        let mut tape = Tape::<f64>::new();
        let (loss, params, _) = record_loss(&mut tape, graph, values, &[]);
        let vs: Vec<Var> = directions.iter().map(|d| tape.constant(d)).collect();
        if by_hand {
            let grads = tape.grad_graph(loss, &params).map_err(|e| e.to_string())?;
            let mut inner = tape.constant(0.0);
            for (&g, &v) in grads.iter().zip(&vs) {
                let gv = g_mul(&mut tape, g, v);
                let term = g_sum(&mut tape, gv);
                inner = g_add(&mut tape, inner, term);
            }
            tape.backward(inner).map_err(|e| e.to_string())?;
        } else {
            tape.hvp(loss, &params, &vs).map_err(|e| e.to_string())?;
        }
        Ok(params.iter().map(|&p| tape.grad(p).to_owned()).collect())
    };
    let (want, got) = (run(true), run(false));
    if got != want {
        return Err(TestCaseError::fail(format!("Tape::hvp gave {got:?}, backward through grad_graph {want:?}")));
    }
    Ok(())
}

#[test]
fn random_graphs_have_the_gradients_finite_differences_give() {
    let stats = Stats {
        graphs: AtomicUsize::new(0),
        rejected: AtomicUsize::new(0),
        nodes: AtomicUsize::new(0),
        checked: AtomicUsize::new(0),
    };
    let mut runner = TestRunner::new(config(CASES));
    let result = runner.run(&graphs(MAX_OPS), |graph| check(&graph, &stats));
    println!(
        "{} random graphs checked ({} nodes, {} parameter elements against finite differences), {} rejected",
        stats.graphs.load(Ordering::Relaxed),
        stats.nodes.load(Ordering::Relaxed),
        stats.checked.load(Ordering::Relaxed),
        stats.rejected.load(Ordering::Relaxed),
    );
    if let Err(error) = result {
        panic!("{error}");
    }
}

/// The generator reaches every differentiable op the runtime exports.
#[test]
fn the_generator_covers_every_differentiable_op() {
    let mut runner = TestRunner::new(config(400));
    let mut seen = BTreeSet::new();
    let strategy = graphs(MAX_OPS);
    for _ in 0..400 {
        let graph = proptest::strategy::ValueTree::current(
            &proptest::strategy::Strategy::new_tree(&strategy, &mut runner).expect("a graph"),
        );
        seen.extend(graph.steps.iter().filter_map(op_name));
    }
    let missing: Vec<&str> =
        OP_FUNCTIONS.iter().copied().filter(|name| *name != "argmax" && !seen.contains(*name)).collect();
    assert!(missing.is_empty(), "the generator never makes {missing:?}");
}
