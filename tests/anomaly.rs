//! Anomaly mode and the optimizers' non-finite guard.
//!
//! With `tape.set_detect_anomaly(true)`, the first op whose output holds a
//! NaN or an infinity poisons the tape with `ErrorKind::NonFinite`, naming
//! the op, its input shapes and the caller's location (a `grad!` block's
//! sub-expression); `backward` reports the first rule that makes a gradient
//! non-finite. Off (the default), nothing changes. Every optimizer step,
//! in any mode, refuses a non-finite gradient and changes nothing.

use grad_runtime::*;
use ndarray::{Array1, ArrayD, IxDyn, array};

/// The 1-based column of the first `needle` on `line` of this file.
fn column_of(line: u32, needle: &str) -> u32 {
    let text = include_str!("anomaly.rs").lines().nth(line as usize - 1).expect("a line of this file");
    text.find(needle).map(|c| c as u32 + 1).unwrap_or_else(|| panic!("`{needle}` not on line {line}: {text}"))
}

fn anomaly_tape() -> Tape<f32> {
    let mut tape = Tape::<f32>::new();
    tape.set_detect_anomaly(true);
    tape
}

fn assert_non_finite(
    error: &GradError,
    op: &str,
    value: &'static str,
    position: usize,
    shapes: &[Vec<usize>],
    line: u32,
) {
    assert_eq!(error.op(), op, "{error}");
    assert_eq!(error.kind(), &ErrorKind::NonFinite { value, position, input: None }, "{error}");
    assert_eq!(error.shapes(), shapes, "{error}");
    assert_eq!((error.location().file(), error.location().line()), ("tests/anomaly.rs", line), "{error}");
}

#[test]
fn log_of_zero_is_caught_at_the_log() {
    let mut tape = anomaly_tape();
    let x = tape.param(array![1.0f32, 0.0, 2.0]);
    let mark = tape.mark();
    let scaled = g_muls(&mut tape, x, 2.0);
    let line = line!() + 1;
    let y = g_log(&mut tape, scaled);
    assert!(y.is_poisoned());
    let error = tape.error().unwrap().clone();
    assert_non_finite(&error, "g_log", "-inf", 1, &[vec![3]], line);
    let message = error.to_string();
    assert!(message.starts_with("g_log: its output holds -inf at element 1"), "{message}");
    let loss = g_sum(&mut tape, y);
    assert_eq!(tape.backward(loss), Err(error), "backward reports it");
    tape.reset_to(mark);
    assert!(tape.is_ok());
}

#[test]
fn sqrt_of_minus_one_zero_over_zero_and_an_overflowing_exp_are_caught_at_their_op() {
    let mut tape = anomaly_tape();
    let x = tape.param(array![4.0f32, -1.0]);
    let line = line!() + 1;
    let _ = g_sqrt(&mut tape, x);
    assert_non_finite(tape.error().unwrap(), "g_sqrt", "NaN", 1, &[vec![2]], line);

    let mut tape = anomaly_tape();
    let a = tape.param(array![[1.0f32, 0.0]]);
    let b = tape.constant(array![2.0f32, 0.0]);
    let line = line!() + 1;
    let _ = g_div(&mut tape, a, b);
    assert_non_finite(tape.error().unwrap(), "g_div", "NaN", 1, &[vec![1, 2], vec![2]], line);

    let mut tape = anomaly_tape();
    let x = tape.param(array![10.0f32, 100.0]);
    let line = line!() + 1;
    let _ = g_exp(&mut tape, x);
    assert_non_finite(tape.error().unwrap(), "g_exp", "inf", 1, &[vec![2]], line);
}

#[test]
fn in_a_grad_block_the_location_is_the_sub_expression() {
    let mut tape = anomaly_tape();
    let x = tape.param(array![0.5f32, 0.0]);
    let w = tape.param(array![1.0f32, 1.0]);
    let line = line!() + 1;
    let loss = grad!(tape; let h = x * w; let l = log(h); sum(exp(l) + sqrt(h - 1.0)));
    let error = tape.backward(loss).unwrap_err();
    assert_eq!(error.op(), "g_log");
    assert_eq!((error.location().line(), error.location().column()), (line, column_of(line, "log(h)")));

    let mut tape = anomaly_tape();
    let x = tape.param(array![0.5f32, 0.0]);
    let line = line!() + 1;
    let y = grad!(tape; let z = x * 0.0; z / z);
    assert!(y.is_poisoned());
    let error = tape.error().unwrap();
    assert_eq!(error.op(), "g_div");
    assert_eq!(error.location().column(), column_of(line, "/ z"));
}

#[test]
fn every_kind_of_op_is_located_at_its_caller() {
    // A NaN in an input flows into each op's output; the error must name
    // the op and a line of this file (not of the runtime's helpers).
    let nan = f32::NAN;
    type Case = (&'static str, fn(&mut Tape<f32>, Var) -> Var);
    let first = line!();
    let cases: [Case; 17] = [
        ("g_add", |tp, x| g_add(tp, x, x)),
        ("g_tanh", |tp, x| g_tanh(tp, x)),
        ("g_sum", |tp, x| g_sum(tp, x)),
        ("g_mean_axis", |tp, x| g_mean_axis(tp, x, 0, false)),
        ("g_max_axis", |tp, x| g_max_axis(tp, x, -1, true)),
        ("g_matmul", |tp, x| g_matmul(tp, x, x)),
        ("g_bmm", |tp, _| {
            let stack = tp.constant(ArrayD::from_elem(IxDyn(&[1, 2, 2]), f32::NAN));
            g_bmm(tp, stack, stack)
        }),
        ("g_transpose", |tp, x| g_transpose(tp, x)),
        ("g_slice", |tp, x| g_slice(tp, x, &[0, 0], &[1, 2])),
        ("g_concat", |tp, x| g_concat(tp, x, x, 1)),
        ("g_softmax", |tp, x| g_softmax(tp, x, -1)),
        ("g_log_softmax", |tp, x| g_log_softmax(tp, x, 0)),
        ("g_mse", |tp, x| g_mse(tp, x, x)),
        ("g_cross_entropy", |tp, x| g_cross_entropy(tp, x, &[0, 1])),
        ("g_embedding", |tp, x| g_embedding(tp, x, &[1, 0])),
        ("g_layer_norm", |tp, x| {
            let (gamma, beta) = (tp.param(array![1.0f32, 1.0]), tp.param(array![0.0f32, 0.0]));
            g_layer_norm(tp, x, gamma, beta, 1e-5)
        }),
        ("g_mul", |tp, x| g_dropout(tp, x, 0.5, &mut Rng::new(3), true)), // a composite: its g_mul reports
    ];
    let last = line!();
    for (op, call) in cases {
        let mut tape = anomaly_tape();
        let x = tape.param(array![[nan, 1.0], [2.0, 3.0]]);
        let y = call(&mut tape, x);
        assert!(y.is_poisoned(), "{op}");
        let error = tape.error().unwrap();
        assert_eq!(error.op(), op, "{error}");
        assert!(matches!(error.kind(), ErrorKind::NonFinite { value: "NaN", input: None, .. }), "{error}");
        let location = error.location();
        assert_eq!(location.file(), "tests/anomaly.rs", "{error}");
        assert!((first..last).contains(&location.line()), "{op}: located at line {}: {error}", location.line());
    }
}

#[test]
fn backward_reports_the_first_rule_that_makes_a_gradient_non_finite() {
    // sqrt is finite at 0 but its derivative 1 / (2 sqrt(x)) is not.
    let mut tape = anomaly_tape();
    let x = tape.param(array![4.0f32, 0.0]);
    let mark = tape.mark();
    let line = line!() + 1;
    let r = g_sqrt(&mut tape, x);
    let scaled = g_muls(&mut tape, r, 3.0);
    let loss = g_sum(&mut tape, scaled);
    assert!(tape.is_ok(), "the forward pass is finite");
    let error = tape.backward(loss).unwrap_err();
    assert_eq!(error.op(), "g_sqrt");
    assert_eq!(error.kind(), &ErrorKind::NonFinite { value: "inf", position: 1, input: Some(0) });
    assert_eq!((error.location().file(), error.location().line()), ("tests/anomaly.rs", line));
    assert!(
        error.to_string().contains("its backward rule gave input 0 a gradient holding inf at element 1"),
        "{error}"
    );
    assert_eq!(tape.error(), Some(&error), "the tape is poisoned: no step uses these gradients");
    tape.reset_to(mark);
    assert!(tape.is_ok());

    let error = tape.backward_with(x, &array![f32::NAN, 1.0]).unwrap_err();
    assert_eq!(
        (error.op(), error.kind()),
        ("Tape::backward", &ErrorKind::NonFinite { value: "NaN", position: 0, input: None })
    );
}

/// The same program, run on a tape with the mode as given.
fn nan_program(mode: Option<bool>) -> (bool, Vec<u64>, Vec<u64>, Result<(), GradError>) {
    let mut tape = Tape::<f64>::new();
    if let Some(on) = mode {
        tape.set_detect_anomaly(on);
    }
    let x = tape.param(array![1.0, 0.0, -1.0, 2.0]);
    let w = tape.param(array![0.5, 0.25, 2.0, 1.0]);
    let y = grad!(tape; let l = log(x * w); (l, sum(sqrt(l) * w + exp(x * 1000.0))));
    let (values, loss) = y;
    let result = tape.backward(loss);
    let bits = |v: ndarray::ArrayViewD<'_, f64>| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
    let mut value_bits = bits(tape.value(values));
    value_bits.push(tape.scalar(loss).to_bits());
    let grads = [x, w].iter().flat_map(|&v| bits(tape.grad(v))).collect();
    (tape.is_ok(), value_bits, grads, result)
}

#[test]
fn anomaly_mode_off_changes_nothing() {
    let default = nan_program(None);
    let off = nan_program(Some(false));
    assert!(default.0 && default.3.is_ok(), "off, NaN flows through as IEEE says: no error");
    assert_eq!(default.1, off.1, "values bit for bit");
    assert_eq!(default.2, off.2, "gradients bit for bit");
    assert!(default.1.iter().any(|&b| f64::from_bits(b).is_nan()), "the program does make NaN");
    let on = nan_program(Some(true));
    assert!(!on.0 && on.3.is_err(), "on, the same program is refused");
    assert!(!Tape::<f32>::new().detect_anomaly(), "off by default");
}

#[test]
fn anomaly_mode_on_a_finite_program_changes_nothing() {
    let run = |on: bool| {
        let mut tape = Tape::<f64>::new();
        tape.set_detect_anomaly(on);
        let x = tape.param(array![[0.5, -1.0], [2.0, 0.25]]);
        let t = tape.constant(array![[1.0, 0.0], [0.0, 1.0]]);
        let loss = grad!(tape; let h = tanh(x @ x) + x; mse(softmax(h, -1), t) + sum(log(exp(h))));
        tape.backward(loss).unwrap();
        (tape.scalar(loss).to_bits(), tape.grad(x).iter().map(|g| g.to_bits()).collect::<Vec<_>>())
    };
    assert_eq!(run(false), run(true));
}

/// Parameters, moments (or momentum buffers) and step count of one optimizer, as bits.
type Snapshot = (Vec<u32>, Vec<u32>, u64);

fn non_finite_gradient_refused<O: Optimizer<f32>>(
    mut opt: O,
    state: impl Fn(&O, &[Var]) -> Vec<u32>,
    name: &str,
    clip: bool,
) {
    let mut tape = Tape::<f32>::new();
    let params = [tape.param(array![1.0f32, -2.0]), tape.param(array![0.5f32, 3.0, 0.0]), tape.param(array![2.0f32])];
    for &p in &params {
        opt.add(&tape, p, 0.01).unwrap();
    }
    if clip {
        opt.set_clip(1.0).unwrap();
    }
    let mark = tape.mark();
    let healthy_step = |tape: &mut Tape<f32>, opt: &mut O| {
        let (a, b) = (g_sum(tape, params[0]), g_sum(tape, params[1]));
        let ab = g_mul(tape, a, b);
        let loss = g_add(tape, ab, params[2]);
        tape.backward(loss).unwrap();
        opt.step(tape).unwrap();
        tape.reset_to(mark);
    };
    healthy_step(&mut tape, &mut opt);
    healthy_step(&mut tape, &mut opt);
    let snapshot = |tape: &Tape<f32>, opt: &O| -> Snapshot {
        let values =
            params.iter().flat_map(|&p| tape.value(p).iter().map(|v| v.to_bits()).collect::<Vec<_>>()).collect();
        (values, state(opt, &params), opt.steps())
    };
    let before = snapshot(&tape, &opt);

    // A finite gradient for parameter 0, a NaN at element 2 of parameter 1's.
    let s = g_sum(&mut tape, params[0]);
    tape.backward(s).unwrap();
    let y = g_muls(&mut tape, params[1], 2.0);
    tape.backward_with(y, &array![1.0f32, 1.0, f32::NAN]).unwrap();
    let line = line!() + 1;
    let error = opt.step(&mut tape).unwrap_err();
    assert!(error.op().ends_with("::step"), "{name}: {error}");
    assert_eq!(
        error.kind(),
        &ErrorKind::NonFiniteGradient { parameter: "#1".into(), value: "NaN", position: 2 },
        "{name}"
    );
    assert_eq!(error.shapes(), &[vec![3]], "{name}");
    assert_eq!(error.location().line(), line, "{name}");
    assert!(error.to_string().contains("parameter `#1` holds NaN at element 2"), "{name}: {error}");
    assert_eq!(snapshot(&tape, &opt), before, "{name}: parameters, moments and step count untouched");

    // Skip the batch, as a loss scaler would, and go on.
    tape.reset_to(mark);
    healthy_step(&mut tape, &mut opt);
    assert_eq!(opt.steps(), before.2 + 1, "{name}");
}

#[test]
fn every_optimizer_refuses_a_non_finite_gradient_and_changes_nothing() {
    let bits = |xs: &[f32]| xs.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    for clip in [false, true] {
        let moments = |opt: &Adam<f32>, ps: &[Var]| {
            ps.iter().flat_map(|&p| opt.moments(p).map(|(m, v)| [bits(m), bits(v)].concat()).unwrap()).collect()
        };
        non_finite_gradient_refused(Adam::new(0.1), moments, "Adam", clip);
        let moments = |opt: &AdamW<f32>, ps: &[Var]| {
            ps.iter().flat_map(|&p| opt.moments(p).map(|(m, v)| [bits(m), bits(v)].concat()).unwrap()).collect()
        };
        non_finite_gradient_refused(AdamW::new(0.1), moments, "AdamW", clip);
        let buffers =
            |opt: &Sgd<f32>, ps: &[Var]| ps.iter().flat_map(|&p| bits(opt.momentum_buffer(p).unwrap())).collect();
        non_finite_gradient_refused(Sgd::new(0.1).momentum(0.9), buffers, "Sgd", clip);
    }
}

#[test]
fn a_nan_gradient_is_refused_without_anomaly_mode_too() {
    let mut tape = Tape::<f64>::new();
    let w = tape.param(Array1::from(vec![1.0, 2.0]));
    let mut opt = Sgd::new(0.1);
    opt.add(&tape, w, 0.0).unwrap();
    tape.backward_with(w, &array![f64::NAN, 0.0]).unwrap();
    assert!(tape.is_ok() && !tape.detect_anomaly());
    let error = opt.step(&mut tape).unwrap_err();
    assert_eq!(error.kind(), &ErrorKind::NonFiniteGradient { parameter: "#0".into(), value: "NaN", position: 0 });
    assert_eq!(tape.value(w), array![1.0, 2.0].into_dyn());
}

#[test]
fn a_refused_gradient_names_the_parameter_by_its_model_path() {
    #[derive(Params)]
    struct Layer {
        w: Var,
        b: Var,
    }
    #[derive(Params)]
    struct Net {
        layers: Vec<Layer>,
    }
    let mut tape = Tape::<f32>::new();
    let mut layer =
        || Layer { w: tape.param(Array1::from(vec![1.0f32, 2.0])), b: tape.param(Array1::from(vec![0.5f32])) };
    let net = Net { layers: vec![layer(), layer()] };
    let mut opt = Adam::new(1e-3);
    opt.add_params(&tape, &net, |_| 0.0).unwrap();
    let before: Vec<_> = net.named_params().iter().map(|(_, v)| tape.value(*v).to_owned()).collect();
    tape.backward_with(net.layers[1].w, &array![0.0f32, f32::INFINITY]).unwrap();
    let error = opt.step(&mut tape).unwrap_err();
    assert_eq!(
        error.kind(),
        &ErrorKind::NonFiniteGradient { parameter: "layers.1.w".into(), value: "inf", position: 1 }
    );
    assert!(error.to_string().contains("the gradient of parameter `layers.1.w` holds inf at element 1"), "{error}");
    let after: Vec<_> = net.named_params().iter().map(|(_, v)| tape.value(*v).to_owned()).collect();
    assert_eq!(before, after);
}
