//! Faults never cost data. The random graphs of `property_graphs.rs`, each
//! trained for two healthy steps, then run once more with one fault
//! injected at a random step: a bad shape, a bad axis, an out-of-range
//! slice, a stale `Var`, a foreign `Var`, a bad index, a read through a
//! stale handle, a NaN under anomaly mode, or a NaN gradient. Each must
//! poison the tape (or, for the NaN gradient, stop the step) with the right
//! `ErrorKind`, never panic, leave every parameter, every optimizer moment
//! and the step count bit-identical, and `reset_to(mark)` must bring the
//! tape back to health: the next step computes exactly what a fresh tape
//! computes.

mod common;
mod random_graph;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::{Strategy, any};
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use random_graph::{Graph, Step, graphs, operands, scaled};

const CASES: u32 = 2000;

/// The faults, each with the op that must report it and its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    BadShape,
    BadAxis,
    SliceOutOfRange,
    StaleVar,
    ForeignVar,
    BadIndex,
    StaleRead,
    NonFiniteOutput,
    NonFiniteGradient,
}

const FAULTS: [Fault; 9] = [
    Fault::BadShape,
    Fault::BadAxis,
    Fault::SliceOutOfRange,
    Fault::StaleVar,
    Fault::ForeignVar,
    Fault::BadIndex,
    Fault::StaleRead,
    Fault::NonFiniteOutput,
    Fault::NonFiniteGradient,
];

/// One optimizer of each kind, behind one face.
enum Opt {
    Sgd(Sgd<f64>),
    Adam(Adam<f64>),
    AdamW(AdamW<f64>),
}

impl Opt {
    fn new(choice: u8) -> Opt {
        match choice % 3 {
            0 => Opt::Sgd(Sgd::new(0.05).momentum(0.9)),
            1 => Opt::Adam(Adam::new(0.01)),
            _ => Opt::AdamW(AdamW::new(0.01)),
        }
    }

    fn as_dyn(&mut self) -> &mut dyn Optimizer<f64> {
        match self {
            Opt::Sgd(o) => o,
            Opt::Adam(o) => o,
            Opt::AdamW(o) => o,
        }
    }

    /// Every moment (or momentum buffer) of every parameter, as bits, and the step count.
    fn state(&self, params: &[Var]) -> (Vec<u64>, u64) {
        let bits = |xs: &[f64]| xs.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
        let mut out = Vec::new();
        for &p in params {
            match self {
                Opt::Sgd(o) => out.extend(o.momentum_buffer(p).map(bits).unwrap_or_default()),
                Opt::Adam(o) => out.extend(o.moments(p).map(|(m, v)| [bits(m), bits(v)].concat()).unwrap()),
                Opt::AdamW(o) => out.extend(o.moments(p).map(|(m, v)| [bits(m), bits(v)].concat()).unwrap()),
            }
        }
        let steps = match self {
            Opt::Sgd(o) => o.steps(),
            Opt::Adam(o) => o.steps(),
            Opt::AdamW(o) => o.steps(),
        };
        (out, steps)
    }
}

/// The loss of a recorded graph: the sum of every sink's elements.
fn loss_of(tape: &mut Tape<f64>, graph: &Graph, nodes: &[Var]) -> Var {
    let terms: Vec<Var> = graph.sinks().into_iter().map(|s| g_sum(tape, nodes[s])).collect();
    terms.into_iter().reduce(|a, b| g_add(tape, a, b)).expect("a graph has a sink")
}

/// One healthy step: the loss's bits and every parameter's gradient, as
/// bits. A graph whose gradient overflows once its parameters have moved
/// (`(p³)⁶` trained with momentum) has its step refused, rightly: such a
/// case is rejected, not failed.
fn healthy_step(
    tape: &mut Tape<f64>,
    graph: &Graph,
    params: &[Var],
    opt: &mut Opt,
    mark: Mark,
) -> Result<Vec<u64>, TestCaseError> {
    let nodes = graph.record(tape, params, |_, _, _| None);
    let loss = loss_of(tape, graph, &nodes);
    tape.backward(loss).expect("a healthy graph");
    let mut bits = vec![tape.scalar(loss).to_bits()];
    for &p in params {
        bits.extend(tape.grad(p).iter().map(|g| g.to_bits()));
    }
    match opt.as_dyn().step(tape) {
        Ok(()) => {}
        Err(e) if matches!(e.kind(), ErrorKind::NonFiniteGradient { .. }) => {
            return Err(TestCaseError::reject("the healthy graph's gradient overflows"));
        }
        Err(e) => panic!("a healthy step: {e}"),
    }
    tape.reset_to(mark);
    Ok(bits)
}

fn param_bits(tape: &Tape<f64>, params: &[Var]) -> Vec<u64> {
    params.iter().flat_map(|&p| tape.value(p).iter().map(|x| x.to_bits()).collect::<Vec<_>>()).collect()
}

/// Injects `fault` in place of step `at`, whose first operand is `x` (`param`
/// is a parameter of the graph); returns
/// the handle that stands for the step and the error the tape (or, for a
/// NaN gradient, the step) must report: its op and a test of its kind.
fn inject(
    fault: Fault,
    tape: &mut Tape<f64>,
    x: Var,
    (stale, foreign, param): (Var, Var, Var),
    step: impl FnOnce(&mut Tape<f64>) -> Var,
) -> (Var, &'static str, fn(&ErrorKind) -> bool) {
    let shape = tape.try_value(x).expect("a live operand").shape().to_vec();
    let rank = shape.len();
    match fault {
        Fault::BadShape => {
            // One more element on the last axis: never broadcasts. With a
            // last dim of 1, a matrix product whose inner dims differ, or
            // one of a vector or scalar (the wrong rank).
            let k = shape.last().copied().unwrap_or(1);
            if k > 1 {
                let mut wrong = shape.clone();
                wrong[rank - 1] += 1;
                let c = tape.constant(ArrayD::<f64>::zeros(IxDyn(&wrong)));
                return (g_add(tape, x, c), "g_add", |k| *k == ErrorKind::Broadcast);
            }
            let c = tape.constant(ArrayD::<f64>::zeros(IxDyn(&[k + 1, 1])));
            let kind: fn(&ErrorKind) -> bool = if rank >= 2 {
                |k| matches!(k, ErrorKind::InnerDim { .. })
            } else {
                |k| matches!(k, ErrorKind::Rank { .. })
            };
            (g_matmul(tape, x, c), "g_matmul", kind)
        }
        Fault::BadAxis => (g_softmax(tape, x, rank as isize + 2), "g_softmax", |k| matches!(k, ErrorKind::Axis { .. })),
        Fault::SliceOutOfRange => {
            let starts = vec![0; rank];
            let mut stops = shape.clone();
            if rank == 0 {
                return (g_slice(tape, x, &[0], &[1]), "g_slice", |k| matches!(k, ErrorKind::SliceArity { .. }));
            }
            stops[rank - 1] += 1;
            (g_slice(tape, x, &starts, &stops), "g_slice", |k| matches!(k, ErrorKind::SliceRange { .. }))
        }
        Fault::StaleVar => (g_mul(tape, x, stale), "g_mul", |k| *k == ErrorKind::StaleVar),
        Fault::ForeignVar => (g_sub(tape, foreign, x), "g_sub", |k| *k == ErrorKind::ForeignVar),
        Fault::BadIndex => {
            let rows = if rank == 2 { shape[0] } else { 1 };
            let matrix = if rank == 2 { x } else { g_reshape(tape, x, &[1, shape.iter().product()]) };
            let classes = tape.try_value(matrix).unwrap().shape()[1];
            let mut targets = vec![0; rows];
            targets[rows - 1] = classes;
            (g_cross_entropy(tape, matrix, &targets), "g_cross_entropy", |k| {
                matches!(k, ErrorKind::IndexOutOfRange { .. })
            })
        }
        Fault::StaleRead => {
            let _ = tape.value(stale); // not silent: it poisons
            (x, "Tape::value", |k| *k == ErrorKind::StaleVar)
        }
        Fault::NonFiniteOutput => {
            tape.set_detect_anomaly(true);
            let zero = tape.constant(0.0);
            let nan = g_div(tape, zero, zero);
            (nan, "g_div", |k| matches!(k, ErrorKind::NonFinite { value: "NaN", input: None, .. }))
        }
        Fault::NonFiniteGradient => {
            // The step as recorded plus NaN times a parameter: the same
            // shape, a NaN loss, and a NaN gradient for that parameter
            // even where the step's own backward passes none (a
            // `masked_fill` whose mask covers every element gives its
            // input an exact zero gradient, whatever comes back).
            let y = step(tape);
            let nan = tape.constant(f64::NAN);
            let scaled = g_mul(tape, param, nan);
            let total = g_sum(tape, scaled);
            (g_add(tape, y, total), "step", |k| matches!(k, ErrorKind::NonFiniteGradient { .. }))
        }
    }
}

#[derive(Debug, Clone)]
struct Case {
    graph: Graph,
    fault: Fault,
    at: usize,
    optimizer: u8,
}

fn cases() -> impl Strategy<Value = Case> {
    (graphs(10), any::<u8>(), any::<u16>(), any::<u8>()).prop_map(|(graph, f, at, optimizer)| {
        let ops: Vec<usize> = (0..graph.steps.len()).filter(|&i| !matches!(graph.steps[i], Step::Param(_))).collect();
        let at = ops[at as usize % ops.len()];
        Case { graph, fault: FAULTS[f as usize % FAULTS.len()], at, optimizer }
    })
}

fn run(case: &Case) -> Result<(), TestCaseError> {
    let Case { graph, fault, at, optimizer } = case;
    let fail = |what: String| Err(TestCaseError::fail(what));
    let mut other = Tape::<f64>::new();
    let foreign = other.param(ArrayD::<f64>::ones(IxDyn(&[2])));
    let mut tape = Tape::<f64>::new();
    let params: Vec<Var> = graph.param_values().iter().map(|v| tape.param(v)).collect();
    let mut opt = Opt::new(*optimizer);
    for &p in &params {
        opt.as_dyn().add(&tape, p, 1e-3).expect("a parameter");
    }
    let mark = tape.mark();
    healthy_step(&mut tape, graph, &params, &mut opt, mark)?;
    let stale = tape.constant(1.0);
    tape.reset_to(mark);
    healthy_step(&mut tape, graph, &params, &mut opt, mark)?;
    let before = (param_bits(&tape, &params), opt.state(&params));

    // The faulty episode.
    let mut expected = None;
    let nodes = graph.record(&mut tape, &params, |i, tape, nodes| {
        (i == *at).then(|| {
            let x = nodes[operands(&graph.steps[i])[0]];
            let step = |tape: &mut Tape<f64>| graph.record_step(i, tape, nodes, &params);
            let (v, op, kind) = inject(*fault, tape, x, (stale, foreign, params[0]), step);
            expected = Some((op, kind));
            v
        })
    });
    let (op, kind) = expected.expect("the fault was injected");
    let mut loss = loss_of(&mut tape, graph, &nodes);
    if *fault == Fault::NonFiniteGradient {
        // The faulty node itself joins the loss: downstream it may reach
        // the loss only through a gradient of it (a `grad` step), which
        // carries neither its NaN value nor a gradient back to the NaN.
        let faulty = g_sum(&mut tape, nodes[*at]);
        loss = g_add(&mut tape, loss, faulty);
    }
    let backward = tape.backward(loss);
    let step = opt.as_dyn().step(&mut tape);
    let error = match (*fault, &backward, &step) {
        (Fault::NonFiniteGradient, Ok(()), Err(error)) => error.clone(),
        (Fault::NonFiniteGradient, ..) => return fail(format!("a NaN gradient: backward {backward:?}, step {step:?}")),
        (_, Err(error), Err(refused)) => {
            if !matches!(refused.kind(), ErrorKind::TapePoisoned { first } if **first == *error) {
                return fail(format!("the step was refused for another reason: {refused}"));
            }
            error.clone()
        }
        _ => return fail(format!("{fault:?} not reported: backward {backward:?}, step {step:?}")),
    };
    if !(error.op() == op || (op == "step" && error.op().ends_with("::step"))) || !kind(error.kind()) {
        return fail(format!("{fault:?} at step {at}: reported as {error}"));
    }
    if (param_bits(&tape, &params), opt.state(&params)) != before {
        return fail(format!("{fault:?} at step {at} changed a parameter, a moment or the step count"));
    }

    // Back to health: the next step is exactly a fresh tape's.
    tape.reset_to(mark);
    tape.set_detect_anomaly(false);
    if !tape.is_ok() {
        return fail(format!("reset_to left the tape poisoned: {:?}", tape.error()));
    }
    let values: Vec<ArrayD<f64>> = params.iter().map(|&p| tape.value(p).to_owned()).collect();
    let recovered = healthy_step(&mut tape, graph, &params, &mut opt, mark)?;
    let mut fresh = Tape::<f64>::new();
    let fresh_params: Vec<Var> = values.iter().map(|v| fresh.param(v)).collect();
    let fresh_mark = fresh.mark();
    let mut scratch = Opt::Sgd(Sgd::new(0.0));
    for &p in &fresh_params {
        scratch.as_dyn().add(&fresh, p, 0.0).unwrap();
    }
    if recovered != healthy_step(&mut fresh, graph, &fresh_params, &mut scratch, fresh_mark)? {
        return fail("after reset_to, the loss or a gradient differs from a fresh tape's".into());
    }
    Ok(())
}

#[test]
fn an_injected_fault_poisons_with_its_kind_and_costs_no_data() {
    let mut config = Config::with_cases(scaled(CASES));
    config.failure_persistence = None;
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(0xfa_0175);
    }
    let counts = std::sync::Mutex::new(BTreeMap::new());
    let result = TestRunner::new(config).run(&cases(), |case| {
        let outcome = catch_unwind(AssertUnwindSafe(|| run(&case)));
        let Ok(outcome) = outcome else { return Err(TestCaseError::fail("a panic")) };
        if outcome.is_ok() {
            *counts.lock().unwrap().entry(case.fault).or_insert(0usize) += 1;
        }
        outcome
    });
    let counts = counts.into_inner().unwrap();
    let total: usize = counts.values().sum();
    println!("{total} faults injected into random graphs and recovered from: {counts:?}");
    if let Err(error) = result {
        panic!("{error}");
    }
    assert_eq!(counts.len(), FAULTS.len(), "every kind of fault injected");
}
