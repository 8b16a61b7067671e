//! Custom ops (`g_custom`): the straight-through estimator, a stable
//! softplus and a three-input op from `tests/common/custom_ops.rs`, checked
//! by the public gradient check and against the built-ins they equal;
//! inside `grad!` blocks; their errors and anomaly mode.

use grad_runtime::check::{GradCheck, GradCheckError};
use grad_runtime::*;
use ndarray::{ArrayD, IxDyn, array};

use crate::common::Rng;
use crate::common::custom_ops::{CheckedLog, MulAdd, StableSoftplus, mul_add, stable_softplus, straight_through};

/// Tight tolerances: the checks in f64 of every backward rule.
fn strict() -> GradCheck {
    GradCheck::new().atol(1e-7).rtol(1e-6)
}

#[test]
fn stable_softplus_passes_the_gradient_check_at_zero_and_far_from_it() {
    let x = array![[0.0, 1e-3, -1e-3], [3.0, -4.0, 30.0]].into_dyn();
    let report = strict()
        .run(
            |tape, v| {
                let y = stable_softplus(tape, v[0]);
                g_sum(tape, y)
            },
            &[x],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.checked, 6);
    // At 0 the derivative is sigmoid(0) = 1/2, exactly.
    let mut tape = Tape::<f64>::new();
    let x = tape.param(array![0.0, -800.0, 800.0]);
    let y = stable_softplus(&mut tape, x);
    tape.backward(y).unwrap();
    assert_eq!(tape.grad(x), array![0.5, 0.0, 1.0].into_dyn());
    assert_eq!(tape.value(y), array![std::f64::consts::LN_2, 0.0, 800.0].into_dyn());
}

#[test]
fn stable_softplus_equals_the_built_in_softplus() {
    let mut rng = Rng::new(40);
    let x = rng.normal_array(&[4, 5]);
    let cot = rng.normal_array(&[4, 5]);
    let run = |f: fn(&mut Tape<f64>, Var) -> Var| {
        let mut tape = Tape::<f64>::new();
        let v = tape.param(&x);
        let y = f(&mut tape, v);
        tape.backward_with(y, &cot).unwrap();
        (tape.value(y).to_owned(), tape.grad(v).to_owned())
    };
    let (custom, builtin) = (run(stable_softplus), run(g_softplus));
    crate::common::assert_close("value", &custom.0, &builtin.0, 1e-15, 1e-15);
    crate::common::assert_close("gradient", &custom.1, &builtin.1, 1e-15, 1e-15);
}

#[test]
fn straight_through_is_round_forward_and_identity_backward() {
    let x = array![0.4, 1.6, -2.5, 3.5, -0.2].into_dyn();
    let cot = array![1.0, -2.0, 0.5, 3.0, 4.0].into_dyn();
    // The identity it must equal: x + detach(round(x) - x).
    let by_detach = |tape: &mut Tape<f64>, x: Var| {
        let rounded = tape.constant(tape.value(x).mapv(f64::round));
        let offset = g_sub(tape, rounded, x);
        let fixed = g_detach(tape, offset);
        g_add(tape, x, fixed)
    };
    let run = |f: &dyn Fn(&mut Tape<f64>, Var) -> Var| {
        let mut tape = Tape::<f64>::new();
        let v = tape.param(&x);
        let y = f(&mut tape, v);
        tape.backward_with(y, &cot).unwrap();
        (tape.value(y).to_owned(), tape.grad(v).to_owned())
    };
    let (custom, reference) = (run(&straight_through), run(&by_detach));
    assert_eq!(custom.0, array![0.0, 2.0, -3.0, 4.0, -0.0].into_dyn()); // halves away from zero
    assert_eq!(custom, reference);
    assert_eq!(custom.1, cot);
}

#[test]
fn the_gradient_check_reports_that_straight_through_is_not_rounds_derivative() {
    // Finite differences see round's derivative (0 between the steps); the
    // estimator's backward is 1 by design, and the check says so.
    let err = GradCheck::new()
        .run(
            |tape, v| {
                let y = straight_through(tape, v[0]);
                g_sum(tape, y)
            },
            &[array![0.3, 1.2].into_dyn()],
        )
        .unwrap_err();
    let GradCheckError::Mismatch(element) = err else { panic!("{err}") };
    assert_eq!((element.input, element.index, element.analytic, element.numeric), (0, vec![0], 1.0, 0.0));
}

#[test]
fn a_three_input_custom_op_passes_the_gradient_check_and_equals_the_built_ins() {
    let mut rng = Rng::new(41);
    let inputs = [rng.normal_array(&[3, 4]), rng.normal_array(&[3, 4]), rng.normal_array(&[3, 4])];
    strict().seed(7).run(|tape, v| mul_add(tape, v[0], v[1], v[2]), &inputs).unwrap_or_else(|e| panic!("{e}"));

    let cot = rng.normal_array(&[3, 4]);
    let builtin = crate::common::run_with_grads(
        &|tape: &mut Tape<f64>, v: &[Var]| {
            let xy = g_mul(tape, v[0], v[1]);
            g_add(tape, xy, v[2])
        },
        &inputs,
        &cot,
    );
    let custom = crate::common::run_with_grads(
        &|tape: &mut Tape<f64>, v: &[Var]| mul_add(tape, v[0], v[1], v[2]),
        &inputs,
        &cot,
    );
    assert_eq!(custom, builtin, "same rounding as g_mul then g_add");
}

#[test]
fn a_constant_input_of_a_custom_op_gets_no_gradient() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(array![1.0, 2.0]);
    let y = tape.constant(array![3.0, 4.0]);
    let z = tape.param(array![0.5, 0.5]);
    let out = mul_add(&mut tape, x, y, z);
    let loss = g_sum(&mut tape, out);
    tape.backward(loss).unwrap();
    let [gx, gy, gz] = tape.grads([x, y, z]);
    assert_eq!(
        (gx.to_owned(), gy.to_owned(), gz.to_owned()),
        (array![3.0, 4.0].into_dyn(), array![0.0, 0.0].into_dyn(), array![1.0, 1.0].into_dyn())
    );
    assert!(format!("{tape:?}").contains("#3 mul_add [2]"));
}

#[test]
fn a_custom_op_is_a_call_in_a_grad_block() {
    let mut rng = Rng::new(42);
    let (x, w) = (rng.normal_array(&[4, 3]), rng.normal_array(&[3, 2]));
    let run = |custom: bool| {
        let mut tape = Tape::<f64>::new();
        let (x, w) = (tape.constant(&x), tape.param(&w));
        let loss = if custom {
            grad!(tape; x: [B, D], w: [D, H]; let h = x @ w * 2.0; mean(stable_softplus(h) * h))
        } else {
            grad!(tape; x: [B, D], w: [D, H]; let h = x @ w * 2.0; mean(softplus(h) * h))
        };
        tape.backward(loss).unwrap();
        (tape.scalar(loss), tape.grad(w).to_owned())
    };
    let ((custom_loss, custom_grad), (loss, grad)) = (run(true), run(false));
    assert!((custom_loss - loss).abs() <= 1e-15 * loss.abs());
    crate::common::assert_close("gradient", &custom_grad, &grad, 1e-14, 1e-15);
}

#[test]
fn a_custom_ops_shape_error_poisons_the_tape_naming_it() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(ArrayD::<f64>::zeros(IxDyn(&[2, 3])));
    let y = tape.param(ArrayD::<f64>::zeros(IxDyn(&[3, 2])));
    let before = tape.len();
    let line = line!() + 1;
    let out = mul_add(&mut tape, x, y, x);
    assert_eq!(tape.len(), before, "no node recorded");
    let err = tape.error().expect("poisoned").clone();
    assert_eq!(err.op(), "mul_add");
    assert_eq!(err.kind(), &ErrorKind::Custom { message: "x, y and z must have one shape".into() });
    assert_eq!(err.shapes(), &[vec![2, 3], vec![3, 2], vec![2, 3]]);
    assert_eq!((err.location().file(), err.location().line()), (file!(), line));
    assert_eq!(
        err.to_string(),
        format!(
            "mul_add: x, y and z must have one shape; inputs [2, 3] and [3, 2] and [2, 3] (at {}:{line}:15)",
            file!()
        )
    );
    // Every later op is a no-op and backward reports the first error.
    let more = g_sum(&mut tape, out);
    assert_eq!(tape.backward(more).unwrap_err(), err);
}

#[test]
fn a_custom_ops_forward_error_records_no_node() {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(array![1.0, -1.0]);
    let y = g_custom(&mut tape, &CheckedLog, &[x]);
    assert_eq!(tape.len(), 1);
    let err = tape.backward(y).unwrap_err();
    assert_eq!(
        (err.op(), err.kind()),
        ("checked_log", &ErrorKind::Custom { message: "element 1 is not positive".into() })
    );
}

#[test]
fn a_stale_or_foreign_handle_to_a_custom_op_is_an_error_naming_it() {
    let mut tape = Tape::<f64>::new();
    let mark = tape.mark();
    let x = tape.param(array![1.0]);
    tape.reset_to(mark);
    g_custom(&mut tape, &StableSoftplus, &[x]);
    let err = tape.error().unwrap();
    assert_eq!((err.op(), err.kind()), ("stable_softplus", &ErrorKind::StaleVar));

    let mut other = Tape::<f64>::new();
    let foreign = other.param(array![1.0]);
    let mut tape = Tape::<f64>::new();
    let own = tape.param(array![1.0]);
    g_custom(&mut tape, &MulAdd, &[own, foreign, own]);
    let err = tape.error().unwrap();
    assert_eq!((err.op(), err.kind(), err.shapes()), ("mul_add", &ErrorKind::ForeignVar, &[vec![1]][..]));
}

#[test]
fn anomaly_mode_names_a_custom_op_whose_output_or_gradient_is_not_finite() {
    let mut tape = Tape::<f64>::new();
    tape.set_detect_anomaly(true);
    let x = tape.param(array![1e308, 1.0]);
    let ten = tape.constant(array![10.0, 1.0]);
    mul_add(&mut tape, x, ten, x);
    let err = tape.error().unwrap();
    assert_eq!(err.op(), "mul_add");
    assert!(matches!(err.kind(), ErrorKind::NonFinite { position: 0, input: None, .. }), "{err}");

    let mut tape = Tape::<f64>::new();
    tape.set_detect_anomaly(true);
    let x = tape.param(array![1e-320]);
    let y = g_custom(&mut tape, &CheckedLog, &[x]);
    let err = tape.backward(y).unwrap_err();
    assert_eq!(err.op(), "checked_log");
    assert!(matches!(err.kind(), ErrorKind::NonFinite { position: 0, input: Some(0), .. }), "{err}");
}

#[test]
fn an_op_with_settings_is_shared_through_an_arc() {
    use std::sync::Arc;

    /// `x · scale`, the scale chosen at run time.
    struct Scale(f64);
    impl CustomOp<f64> for Scale {
        fn name(&self) -> &'static str {
            "scale"
        }
        fn output_shape(&self, inputs: &Inputs<'_, f64>) -> Result<IxDyn, String> {
            Ok(IxDyn(inputs.shape(0)))
        }
        fn forward(&self, inputs: &Inputs<'_, f64>, mut out: ndarray::ArrayViewMutD<'_, f64>) -> Result<(), String> {
            out.assign(&(&inputs.value(0) * self.0));
            Ok(())
        }
        fn backward(
            &self,
            _: &Inputs<'_, f64>,
            _: ndarray::ArrayViewD<'_, f64>,
            g: ndarray::ArrayViewD<'_, f64>,
            grads: &mut InputGrads<'_, '_, f64>,
        ) {
            grads.add(0, |mut dx| dx.assign(&(&g * self.0)));
        }
    }
    let op = Arc::new(Scale(3.0));
    let mut tape = Tape::<f64>::new();
    let x = tape.param(array![1.0, 2.0]);
    let y = g_custom(&mut tape, op.clone(), &[x]);
    let z = g_custom(&mut tape, op.clone(), &[y]);
    tape.backward(z).unwrap();
    assert_eq!(tape.value(z), array![9.0, 18.0].into_dyn());
    assert_eq!(tape.grad(x), array![9.0, 9.0].into_dyn());
    assert_eq!(Arc::strong_count(&op), 3, "one per node, no copy of the op");
}

#[test]
fn a_custom_op_with_a_graph_backward_is_differentiated_twice() {
    // softplus'' = sigmoid (1 − sigmoid), through the op's backward_graph.
    let x0 = array![0.0, 1.5, -2.0].into_dyn();
    crate::common::check_second_order(
        "stable_softplus",
        &|tape, v| {
            let y = stable_softplus(tape, v[0]);
            let t = g_tanh(tape, y);
            g_mul(tape, t, y)
        },
        std::slice::from_ref(&x0),
        8,
    );
    let mut tape = Tape::<f64>::new();
    let x = tape.param(&x0);
    let y = stable_softplus(&mut tape, x);
    let y = g_sum(&mut tape, y);
    let d = tape.grad_graph(y, &[x]).unwrap()[0];
    let d = g_sum(&mut tape, d);
    let dd = tape.grad_graph(d, &[x]).unwrap()[0];
    let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
    let want = x0.mapv(|v| sigmoid(v) * (1.0 - sigmoid(v)));
    crate::common::assert_close("softplus''", &tape.value(dd).to_owned(), &want, 1e-15, 1e-16);
}
