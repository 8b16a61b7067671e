//! Every optimizer misuse is an error naming the call, what was wrong and
//! the caller's source line, never a panic or a silent no-op; a refused
//! step changes nothing.

use grad_runtime::{Adam, AdamW, ErrorKind, GradError, Optimizer, Sgd, Tape, g_add, g_matmul, g_mul, g_sum};
use ndarray::{Array2, array};

/// Asserts `err` was raised by `op` at `line` of this file, for `kind`.
#[track_caller]
fn assert_error(err: &GradError, op: &str, kind: &ErrorKind, line: u32) {
    assert_eq!(err.op(), op, "{err}");
    assert_eq!(err.kind(), kind, "{err}");
    assert_eq!((err.location().file(), err.location().line()), (file!(), line), "{err}");
}

fn invalid(name: &'static str, value: f64, expected: &'static str) -> ErrorKind {
    ErrorKind::InvalidArgument { name, value, expected }
}

/// The `add` misuses, through the trait (whose methods track the caller too).
fn add_misuse(opt: &mut impl Optimizer<f64>, op: &str, coefficient_name: &'static str) {
    let mut tape = Tape::<f64>::new();
    let w = tape.param(array![1.0, 2.0]);
    let c = tape.constant(array![1.0, 2.0]);

    let (err, line) = (opt.add(&tape, c, 0.0).unwrap_err(), line!());
    assert_error(&err, op, &ErrorKind::NotAParameter, line);
    assert_eq!(err.shapes(), [vec![2]]);
    assert!(err.to_string().contains("not a parameter"), "{err}");

    let ww = g_mul(&mut tape, w, w);
    let (err, line) = (opt.add(&tape, ww, 0.0).unwrap_err(), line!());
    assert_error(&err, op, &ErrorKind::NotAParameter, line);

    let mark = tape.mark();
    let late = tape.param(array![3.0]);
    tape.reset_to(mark);
    let (err, line) = (opt.add(&tape, late, 0.0).unwrap_err(), line!());
    assert_error(&err, op, &ErrorKind::StaleVar, line);

    let mut other = Tape::<f64>::new();
    let foreign = other.param(array![1.0]);
    let (err, line) = (opt.add(&tape, foreign, 0.0).unwrap_err(), line!());
    assert_error(&err, op, &ErrorKind::ForeignVar, line);

    let bad = g_matmul(&mut other, foreign, foreign); // a 1-D matmul fails: a poisoned handle
    let (err, line) = (opt.add(&other, bad, 0.0).unwrap_err(), line!());
    assert_error(&err, op, &ErrorKind::PoisonedVar, line);

    for value in [-0.1, f64::NAN, f64::INFINITY] {
        let (err, line) = (opt.add(&tape, w, value).unwrap_err(), line!());
        assert_eq!(err.op(), op);
        assert_eq!((err.location().line(), err.shapes()), (line, &[][..]));
        match err.kind() {
            ErrorKind::InvalidArgument { name, value: got, expected } => {
                assert_eq!((*name, *expected), (coefficient_name, "a finite number >= 0"));
                assert!(got.to_bits() == value.to_bits());
            }
            kind => panic!("{kind:?}"),
        }
    }

    opt.add(&tape, w, 0.01).unwrap();
    let (err, line) = (opt.add(&tape, w, 0.01).unwrap_err(), line!());
    assert_error(&err, op, &ErrorKind::DuplicateParameter, line);
    assert!(err.to_string().contains("already added"), "{err}");

    // Parameters of one optimizer come from one tape.
    let (err, line) = (opt.add(&other, foreign, 0.0).unwrap_err(), line!());
    assert_error(&err, op, &ErrorKind::ForeignVar, line);
}

#[test]
fn add_refuses_constants_stale_foreign_poisoned_and_duplicate_vars_and_bad_coefficients() {
    add_misuse(&mut Sgd::new(0.1), "Sgd::add", "alpha");
    add_misuse(&mut Adam::new(0.1), "Adam::add", "alpha");
    add_misuse(&mut AdamW::new(0.1), "AdamW::add", "weight_decay");
}

/// The `step` misuses: a poisoned tape, another tape, a dropped parameter.
fn step_misuse(opt: &mut impl Optimizer<f64>, op: &str) {
    let mut tape = Tape::<f64>::new();
    let w = tape.param(array![1.0, -2.0]);
    opt.add(&tape, w, 0.1).unwrap();
    let mark = tape.mark();

    // A poisoned tape: nothing is updated, the step count does not advance.
    let ww = g_mul(&mut tape, w, w);
    let loss = g_sum(&mut tape, ww);
    tape.backward(loss).unwrap();
    let x = tape.constant(Array2::<f64>::zeros((3, 4)));
    let y = tape.constant(Array2::<f64>::zeros((5, 6)));
    let _ = g_matmul(&mut tape, x, y);
    let first = tape.error().unwrap().clone();
    let (err, line) = (opt.step(&mut tape).unwrap_err(), line!());
    assert_error(&err, op, &ErrorKind::TapePoisoned { first: Box::new(first) }, line);
    assert!(err.to_string().contains("g_matmul"), "{err}");
    assert_eq!(tape.value(w), array![1.0, -2.0].into_dyn());
    assert_eq!(opt.steps(), 0);

    // The same step after the poisoned episode is dropped works.
    tape.reset_to(mark);
    let ww = g_mul(&mut tape, w, w);
    let loss = g_sum(&mut tape, ww);
    tape.backward(loss).unwrap();
    opt.step(&mut tape).unwrap();
    assert_ne!(tape.value(w), array![1.0, -2.0].into_dyn());
    assert_eq!(opt.steps(), 1);

    // Another tape than the parameters': refused, that tape untouched.
    let mut other = Tape::<f64>::new();
    let v = other.param(array![1.0, -2.0]);
    let vv = g_mul(&mut other, v, v);
    let loss = g_sum(&mut other, vv);
    other.backward(loss).unwrap();
    let (err, line) = (opt.step(&mut other).unwrap_err(), line!());
    assert_error(&err, op, &ErrorKind::ForeignVar, line);
    assert_eq!(other.value(v), array![1.0, -2.0].into_dyn());
    assert_eq!(opt.steps(), 1);
}

#[test]
fn step_refuses_a_poisoned_tape_and_another_tape_and_changes_nothing() {
    step_misuse(&mut Sgd::new(0.1), "Sgd::step");
    step_misuse(&mut Sgd::new(0.1).momentum(0.9), "Sgd::step");
    step_misuse(&mut Adam::new(0.1), "Adam::step");
    step_misuse(&mut AdamW::new(0.1), "AdamW::step");
}

#[test]
fn step_refuses_a_parameter_dropped_by_reset_to() {
    let mut tape = Tape::<f64>::new();
    let kept = tape.param(array![1.0]);
    let mark = tape.mark();
    let dropped = tape.param(array![2.0]); // made after the mark: reset_to drops it
    let mut opt = Adam::new(0.1);
    opt.add(&tape, kept, 0.0).unwrap();
    opt.add(&tape, dropped, 0.0).unwrap();
    tape.reset_to(mark);
    let k = tape.constant(array![1.0]);
    let loss = g_mul(&mut tape, kept, k);
    tape.backward(loss).unwrap();
    let (err, line) = (opt.step(&mut tape).unwrap_err(), line!());
    assert_error(&err, "Adam::step", &ErrorKind::StaleVar, line);
    assert!(err.to_string().contains("make parameters before it"), "{err}");
    assert_eq!(tape.value(kept)[0], 1.0, "nothing is updated when any parameter is bad");
    assert_eq!(opt.steps(), 0);
}

#[test]
fn an_invalid_learning_rate_is_an_error_naming_the_constructor() {
    for lr in [-0.1, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut tape = Tape::<f64>::new();
        let w = tape.param(array![1.0]);
        let (mut opt, line) = (Adam::new(lr), line!());
        assert_eq!(opt.add(&tape, w, 0.0).unwrap_err().op(), "Adam::new");
        let err = opt.step(&mut tape).unwrap_err();
        assert_eq!(err.location().line(), line);
        assert!(matches!(err.kind(), ErrorKind::InvalidArgument { name: "lr", .. }), "{err}");
        assert_eq!(tape.value(w)[0], 1.0);
    }
    let mut tape = Tape::<f32>::new();
    let (mut sgd, line) = (Sgd::<f32>::new(-1.0), line!());
    let err = sgd.step(&mut tape).unwrap_err();
    assert_error(&err, "Sgd::new", &invalid("lr", -1.0, "a finite number >= 0"), line);
    let message = err.to_string();
    assert!(message.starts_with("Sgd::new: lr = -1 is invalid: expected a finite number >= 0 (at "), "{message}");
    let at = format!("(at {}:{line}:{})", file!(), err.location().column());
    assert!(message.ends_with(&at), "{message}");
    let (mut adamw, line) = (AdamW::<f32>::new(f64::NAN), line!());
    assert_eq!(adamw.step(&mut tape).unwrap_err().location().line(), line);
    // A learning rate of zero is valid (warm-up schedules start there).
    assert!(Sgd::<f32>::new(0.0).step(&mut tape).is_ok());
}

#[test]
fn set_lr_refuses_a_bad_rate_and_keeps_the_old_one() {
    let mut opt = Sgd::<f64>::new(0.1);
    for bad in [-1e-3, f64::NAN, f64::INFINITY] {
        let (err, line) = (opt.set_lr(bad).unwrap_err(), line!());
        assert_eq!((err.op(), err.location().line()), ("Sgd::set_lr", line));
        assert_eq!(opt.lr(), 0.1);
    }
    opt.set_lr(0.0).unwrap();
    assert_eq!(opt.lr(), 0.0);
    let mut adam = Adam::<f64>::new(0.1);
    let (err, line) = (adam.set_lr(-2.0).unwrap_err(), line!());
    assert_error(&err, "Adam::set_lr", &invalid("lr", -2.0, "a finite number >= 0"), line);
    let mut adamw = AdamW::<f64>::new(0.1);
    assert_eq!(adamw.set_lr(f64::NAN).unwrap_err().op(), "AdamW::set_lr");
}

#[test]
fn set_clip_needs_a_finite_positive_max_norm() {
    let mut opt = Adam::<f64>::new(0.1);
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let (err, line) = (opt.set_clip(bad).unwrap_err(), line!());
        assert_eq!((err.op(), err.location().line()), ("Adam::set_clip", line));
        assert!(matches!(err.kind(), ErrorKind::InvalidArgument { name: "max_norm", .. }), "{err}");
        assert_eq!(opt.clip(), None);
    }
    let (err, line) = (Sgd::<f64>::new(0.1).set_clip(-1.0).unwrap_err(), line!());
    assert_error(&err, "Sgd::set_clip", &invalid("max_norm", -1.0, "a finite number > 0"), line);
    assert_eq!(AdamW::<f64>::new(0.1).set_clip(0.0).unwrap_err().op(), "AdamW::set_clip");
}

/// The error a misconfigured optimizer returns from `step`, with the tape untouched.
fn config_error(opt: &mut impl Optimizer<f64>) -> GradError {
    let mut tape = Tape::<f64>::new();
    let w = tape.param(array![1.0]);
    let k = tape.constant(array![1.0]);
    let loss = g_mul(&mut tape, w, k);
    tape.backward(loss).unwrap();
    let err = opt.step(&mut tape).unwrap_err();
    assert_eq!(tape.value(w)[0], 1.0);
    err
}

#[test]
fn builder_arguments_out_of_domain_are_reported_with_the_builder_call() {
    let beta = "a number in [0, 1)";
    let (mut opt, line) = (Adam::new(0.1).betas(1.0, 0.999), line!());
    assert_error(&config_error(&mut opt), "Adam::betas", &invalid("beta1", 1.0, beta), line);
    let (mut opt, line) = (Adam::new(0.1).betas(0.9, -0.5), line!());
    assert_error(&config_error(&mut opt), "Adam::betas", &invalid("beta2", -0.5, beta), line);
    let (mut opt, line) = (AdamW::new(0.1).betas(0.9, 1.5), line!());
    assert_error(&config_error(&mut opt), "AdamW::betas", &invalid("beta2", 1.5, beta), line);
    let (mut opt, line) = (Adam::new(0.1).eps(-1e-8), line!());
    assert_error(&config_error(&mut opt), "Adam::eps", &invalid("eps", -1e-8, "a finite number >= 0"), line);
    let (mut opt, line) = (AdamW::new(0.1).eps(f64::INFINITY), line!());
    assert_eq!(config_error(&mut opt).location().line(), line);
    let (mut opt, line) = (Sgd::new(0.1).momentum(-0.9), line!());
    assert_error(&config_error(&mut opt), "Sgd::momentum", &invalid("momentum", -0.9, "a finite number >= 0"), line);
    let (mut opt, line) = (Sgd::new(0.1).momentum(0.9).dampening(1.5), line!());
    assert_error(&config_error(&mut opt), "Sgd::dampening", &invalid("dampening", 1.5, "a number in [0, 1]"), line);

    // The first invalid argument is the one reported.
    let (mut opt, line) = (Adam::new(-1.0).betas(2.0, 2.0), line!());
    let err = config_error(&mut opt);
    assert_eq!((err.op(), err.location().line()), ("Adam::new", line));
}

#[test]
fn nesterov_needs_momentum_and_no_dampening() {
    let (mut opt, line) = (Sgd::new(0.1).nesterov(true), line!());
    let want = invalid("momentum", 0.0, "a momentum > 0 with Nesterov");
    assert_error(&config_error(&mut opt), "Sgd::nesterov", &want, line);
    let (mut opt, line) = (Sgd::new(0.1).momentum(0.9).dampening(0.1).nesterov(true), line!());
    let want = invalid("dampening", 0.1, "zero dampening with Nesterov");
    assert_error(&config_error(&mut opt), "Sgd::nesterov", &want, line);
    // An invalid momentum is reported as itself, not as Nesterov's lack of momentum.
    let (mut opt, line) = (Sgd::new(0.1).momentum(-0.5).nesterov(true), line!());
    assert_error(&config_error(&mut opt), "Sgd::momentum", &invalid("momentum", -0.5, "a finite number >= 0"), line);
    // `add` refuses it too, and the order of the builder calls does not matter.
    let mut tape = Tape::<f64>::new();
    let w = tape.param(array![1.0]);
    assert_eq!(Sgd::new(0.1).nesterov(true).add(&tape, w, 0.0).unwrap_err().op(), "Sgd::nesterov");
    let mut fine = Sgd::new(0.1).nesterov(true).momentum(0.9);
    fine.add(&tape, w, 0.0).unwrap();
    let loss = g_add(&mut tape, w, w);
    tape.backward(loss).unwrap();
    fine.step(&mut tape).unwrap();
}
