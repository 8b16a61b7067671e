//! Shapes at the edge of what can exist: dims of 0, 1 and `isize::MAX`,
//! and products that overflow. Every op either makes the tensor (a shape
//! with a 0 holds no element, however large its other dims) or refuses it
//! with `ErrorKind::TooLarge` or its usual error; none panics, none walks a
//! huge dim for nothing (each case runs under a watchdog), and the tape
//! recovers with `reset_to`.

mod common;

use std::time::Duration;

use common::within;
use grad_runtime::*;
use ndarray::{ArrayD, IxDyn};

/// The largest dim ndarray accepts (with a 0 beside it, the tensor is empty).
const HUGE: usize = isize::MAX as usize;
const LIMIT: Duration = Duration::from_secs(20);

fn zeros(shape: &[usize]) -> ArrayD<f32> {
    ArrayD::zeros(IxDyn(shape))
}

fn too_large(error: &GradError, op: &str, shape: &[usize]) {
    assert_eq!(error.op(), op, "{error}");
    match error.kind() {
        ErrorKind::TooLarge { shape: refused, .. } => assert_eq!(refused, shape, "{error}"),
        other => panic!("{op}: expected TooLarge for {shape:?}, got {other:?}: {error}"),
    }
}

#[test]
fn reshape_to_usize_max_by_zero_is_an_error_and_no_later_use_panics() {
    within(LIMIT, "the usize::MAX reshape", || {
        let mut tape = Tape::<f32>::new();
        let x = tape.param(zeros(&[0]));
        let mark = tape.mark();
        let y = g_reshape(&mut tape, x, &[usize::MAX, 0]);
        assert!(y.is_poisoned(), "the element count is 0, but ndarray refuses the shape");
        let error = tape.error().expect("the tape is poisoned").clone();
        too_large(&error, "g_reshape", &[usize::MAX, 0]);
        let message = error.to_string();
        assert!(message.contains("[18446744073709551615, 0]") && message.contains("isize::MAX"), "{message}");
        assert!(message.contains("tests/extreme_shapes.rs:"), "{message}");

        // What used to reach an `expect` or ask the pool for usize::MAX elements.
        assert_eq!(tape.value(y).len(), 0);
        assert_eq!(tape.grad(y).len(), 0);
        assert!(g_transpose(&mut tape, y).is_poisoned());
        assert!(g_concat(&mut tape, y, y, 0).is_poisoned());
        assert!(g_sum_axis(&mut tape, y, 1, false).is_poisoned());
        assert_eq!(tape.backward(y), Err(error.clone()), "the first error is the one reported");

        tape.reset_to(mark);
        assert!(tape.is_ok());
        let z = g_reshape(&mut tape, x, &[0, 7]);
        assert_eq!(tape.value(z).shape(), &[0, 7]);
    });
}

#[test]
fn reshape_to_isize_max_by_zero_is_accepted_and_every_use_is_quick() {
    within(LIMIT, "uses of a [isize::MAX, 0] tensor", || {
        let mut tape = Tape::<f32>::new();
        let x = tape.param(zeros(&[0]));
        let y = g_reshape(&mut tape, x, &[HUGE, 0]);
        assert!(tape.is_ok(), "{:?}", tape.error());
        assert_eq!(tape.value(y).shape(), &[HUGE, 0]);
        assert_eq!(tape.grad(y).shape(), &[HUGE, 0]);
        let t = g_transpose(&mut tape, y);
        assert_eq!(tape.value(t).shape(), &[0, HUGE]);
        let joined = g_concat(&mut tape, y, y, 1);
        assert_eq!(tape.value(joined).shape(), &[HUGE, 0]);
        let over_rows = g_sum_axis(&mut tape, y, 0, false);
        assert_eq!(tape.value(over_rows).shape(), &[0]);
        for axis in [0, 1] {
            for v in [g_softmax(&mut tape, y, axis), g_log_softmax(&mut tape, y, axis)] {
                assert_eq!(tape.value(v).shape(), &[HUGE, 0]);
            }
        }
        let loss = g_sum(&mut tape, joined);
        tape.backward(loss).expect("backward over empty tensors");
        assert_eq!(tape.grad(x).shape(), &[0]);

        // Results that would need isize::MAX elements, or twice that dim.
        let lanes = g_sum_axis(&mut tape, y, 1, false);
        assert!(lanes.is_poisoned());
        too_large(tape.error().unwrap(), "g_sum_axis", &[HUGE]);
    });
    within(LIMIT, "a doubled isize::MAX dim", || {
        let mut tape = Tape::<f32>::new();
        let y = tape.param(zeros(&[HUGE, 0]));
        assert!(g_concat(&mut tape, y, y, 0).is_poisoned());
        too_large(tape.error().unwrap(), "g_concat", &[2 * HUGE, 0]);
    });
}

/// What one case expects of its op.
enum Expect {
    /// A node of this shape.
    Shape(&'static [usize]),
    /// A `TooLarge` error naming this result shape.
    TooLarge(&'static [usize]),
    /// Another error of this kind (checked by `matches!` in the case).
    Error(fn(&ErrorKind) -> bool),
}

type Case = (&'static str, &'static [&'static [usize]], fn(&mut Tape<f32>, &[Var]) -> Var, Expect);

/// Each op at the extremes: its inputs' shapes, the call, what it must do.
fn cases() -> Vec<Case> {
    use Expect::*;
    vec![
        ("g_add", &[&[HUGE, 0], &[1]], |tp, v| g_add(tp, v[0], v[1]), Shape(&[HUGE, 0])),
        ("g_mul", &[&[1, HUGE, 0], &[HUGE, 1, 0]], |tp, v| g_mul(tp, v[0], v[1]), TooLarge(&[HUGE, HUGE, 0])),
        ("g_sub", &[&[HUGE, 0], &[0, 1]], |tp, v| g_sub(tp, v[0], v[1]), Error(|k| *k == ErrorKind::Broadcast)),
        ("g_div", &[&[0, HUGE], &[1]], |tp, v| g_div(tp, v[0], v[1]), Shape(&[0, HUGE])),
        ("g_matmul", &[&[HUGE, 0], &[0, HUGE]], |tp, v| g_matmul(tp, v[0], v[1]), TooLarge(&[HUGE, HUGE])),
        ("g_matmul", &[&[1 << 31, 0], &[0, 1 << 31]], |tp, v| g_matmul(tp, v[0], v[1]), TooLarge(&[1 << 31, 1 << 31])),
        ("g_matmul", &[&[0, HUGE], &[HUGE, 0]], |tp, v| g_matmul(tp, v[0], v[1]), Shape(&[0, 0])),
        ("g_matmul", &[&[HUGE, 1, 0], &[0, 5]], |tp, v| g_matmul(tp, v[0], v[1]), TooLarge(&[HUGE, 1, 5])),
        ("g_matmul", &[&[1 << 40, 0, 2], &[1, 2, 0]], |tp, v| g_matmul(tp, v[0], v[1]), Shape(&[1 << 40, 0, 0])),
        ("g_bmm", &[&[1, HUGE, 0], &[1, 0, HUGE]], |tp, v| g_bmm(tp, v[0], v[1]), TooLarge(&[1, HUGE, HUGE])),
        ("g_bmm", &[&[1 << 40, 0, 3], &[1 << 40, 3, 0]], |tp, v| g_bmm(tp, v[0], v[1]), Shape(&[1 << 40, 0, 0])),
        ("g_sum_axis", &[&[HUGE, 0]], |tp, v| g_sum_axis(tp, v[0], 1, true), TooLarge(&[HUGE, 1])),
        ("g_sum_axis", &[&[1 << 30, 1 << 30, 0]], |tp, v| g_sum_axis(tp, v[0], 1, false), Shape(&[1 << 30, 0])),
        ("g_mean_axis", &[&[HUGE, 0]], |tp, v| g_mean_axis(tp, v[0], 0, false), Shape(&[0])),
        ("g_max_axis", &[&[HUGE, 0]], |tp, v| g_max_axis(tp, v[0], 0, true), Shape(&[1, 0])),
        (
            "g_min_axis",
            &[&[HUGE, 0]],
            |tp, v| g_min_axis(tp, v[0], 1, false),
            Error(|k| matches!(k, ErrorKind::EmptyReduction { axis: 1 })),
        ),
        ("g_sum", &[&[HUGE, 0]], |tp, v| g_sum(tp, v[0]), Shape(&[])),
        ("g_mean", &[&[0, HUGE]], |tp, v| g_mean(tp, v[0]), Shape(&[])),
        ("g_softmax", &[&[HUGE, 0]], |tp, v| g_softmax(tp, v[0], -1), Shape(&[HUGE, 0])),
        (
            "g_softmax",
            &[&[0, 1 << 40]],
            |tp, v| g_softmax(tp, v[0], isize::MIN),
            Error(|k| matches!(k, ErrorKind::Axis { .. })),
        ),
        ("g_log_softmax", &[&[1 << 40, 0, 1 << 20]], |tp, v| g_log_softmax(tp, v[0], 1), Shape(&[1 << 40, 0, 1 << 20])),
        ("g_transpose", &[&[3, 1 << 40, 0]], |tp, v| g_transpose(tp, v[0]), Shape(&[3, 0, 1 << 40])),
        ("g_reshape", &[&[HUGE, 0]], |tp, v| g_reshape(tp, v[0], &[0, HUGE, 1]), Shape(&[0, HUGE, 1])),
        ("g_reshape", &[&[HUGE, 0]], |tp, v| g_reshape(tp, v[0], &[HUGE, HUGE, 0]), TooLarge(&[HUGE, HUGE, 0])),
        ("g_reshape", &[&[HUGE, 0]], |tp, v| g_reshape(tp, v[0], &[usize::MAX, 0]), TooLarge(&[usize::MAX, 0])),
        (
            "g_reshape",
            &[&[2, 3]],
            |tp, v| g_reshape(tp, v[0], &[usize::MAX, usize::MAX]),
            Error(|k| matches!(k, ErrorKind::ElementCount { from: 6, to: usize::MAX })),
        ),
        ("g_slice", &[&[HUGE, 0]], |tp, v| g_slice(tp, v[0], &[HUGE - 5, 0], &[HUGE, 0]), Shape(&[5, 0])),
        (
            "g_slice",
            &[&[HUGE, 0]],
            |tp, v| g_slice(tp, v[0], &[0, 0], &[usize::MAX, 0]),
            Error(|k| matches!(k, ErrorKind::SliceRange { axis: 0, .. })),
        ),
        ("g_concat", &[&[HUGE, 0], &[HUGE, 0]], |tp, v| g_concat(tp, v[0], v[1], 0), TooLarge(&[2 * HUGE, 0])),
        ("g_concat", &[&[0, HUGE], &[0, 1]], |tp, v| g_concat(tp, v[0], v[1], 1), TooLarge(&[0, HUGE + 1])),
        ("g_concat", &[&[HUGE, 0], &[HUGE, 0]], |tp, v| g_concat(tp, v[0], v[1], usize::MAX), Error(|_| true)),
        ("g_mse", &[&[HUGE, 0], &[HUGE, 0]], |tp, v| g_mse(tp, v[0], v[1]), Shape(&[])),
        ("g_cross_entropy", &[&[0, HUGE]], |tp, v| g_cross_entropy(tp, v[0], &[]), Shape(&[])),
        (
            "g_cross_entropy",
            &[&[HUGE, 0]],
            |tp, v| g_cross_entropy(tp, v[0], &[0, 1]),
            Error(|k| matches!(k, ErrorKind::IndexCount { .. })),
        ),
        ("g_embedding", &[&[HUGE, 0]], |tp, v| g_embedding(tp, v[0], &[HUGE - 1, 0]), Shape(&[2, 0])),
        (
            "g_embedding",
            &[&[0, HUGE]],
            |tp, v| g_embedding(tp, v[0], &[usize::MAX]),
            Error(|k| matches!(k, ErrorKind::IndexOutOfRange { .. })),
        ),
        ("g_embedding", &[&[0, HUGE]], |tp, v| g_embedding(tp, v[0], &[]), Shape(&[0, HUGE])),
        (
            "g_layer_norm",
            &[&[HUGE, 0], &[0], &[0]],
            |tp, v| g_layer_norm(tp, v[0], v[1], v[2], 1e-5),
            Shape(&[HUGE, 0]),
        ),
        (
            "g_layer_norm",
            &[&[0, 1 << 20], &[1 << 20], &[1 << 20]],
            |tp, v| g_layer_norm(tp, v[0], v[1], v[2], 0.0),
            Shape(&[0, 1 << 20]),
        ),
        ("g_dropout", &[&[HUGE, 0]], |tp, v| g_dropout(tp, v[0], 0.5, &mut Rng::new(1), true), Shape(&[HUGE, 0])),
        ("g_relu", &[&[0, HUGE, 1]], |tp, v| g_relu(tp, v[0]), Shape(&[0, HUGE, 1])),
        ("g_exp", &[&[HUGE, 0]], |tp, v| g_exp(tp, v[0]), Shape(&[HUGE, 0])),
        ("g_clamp", &[&[HUGE, 0]], |tp, v| g_clamp(tp, v[0], f32::NEG_INFINITY, f32::INFINITY), Shape(&[HUGE, 0])),
    ]
}

#[test]
fn every_op_at_the_extremes_makes_its_result_or_refuses_it() {
    within(Duration::from_secs(60), "the extreme-shape cases", || {
        for (op, shapes, call, expect) in cases() {
            let label = format!("{op} on {shapes:?}");
            let mut tape = Tape::<f32>::new();
            let vars: Vec<Var> = shapes.iter().map(|s| tape.param(zeros(s))).collect();
            let mark = tape.mark();
            let y = call(&mut tape, &vars);
            match expect {
                Expect::Shape(shape) => {
                    assert!(tape.is_ok(), "{label}: {:?}", tape.error());
                    assert_eq!(tape.value(y).shape(), shape, "{label}");
                    let loss = g_sum(&mut tape, y);
                    tape.backward(loss).unwrap_or_else(|e| panic!("{label}: backward: {e}"));
                    for (&v, s) in vars.iter().zip(shapes) {
                        assert_eq!(tape.grad(v).shape(), *s, "{label}");
                    }
                }
                Expect::TooLarge(shape) => {
                    assert!(y.is_poisoned(), "{label}");
                    too_large(tape.error().unwrap(), op, shape);
                }
                Expect::Error(kind) => {
                    assert!(y.is_poisoned(), "{label}");
                    let error = tape.error().unwrap();
                    assert_eq!(error.op(), op, "{label}");
                    assert!(kind(error.kind()), "{label}: {error}");
                }
            }
            tape.reset_to(mark);
            assert!(tape.is_ok(), "{label}: reset_to recovers");
        }
    });
}

#[test]
fn argmax_at_the_extremes() {
    within(LIMIT, "argmax", || {
        let mut tape = Tape::<f32>::new();
        let x = tape.constant(zeros(&[HUGE, 0]));
        assert_eq!(argmax(&tape, x, 0).unwrap().shape(), &[0]);
        let error = argmax(&tape, x, 1).unwrap_err();
        assert!(matches!(error.kind(), ErrorKind::EmptyReduction { axis: 1 }), "{error}");
        assert!(argmax(&tape, x, isize::MAX).is_err());
    });
}

/// `TensorInput` is open to any type, so a shape no array can have can reach
/// `param`: it is refused there, before any buffer is sized.
#[test]
fn a_tensor_input_with_an_impossible_shape_is_refused() {
    struct Bogus;
    impl TensorInput<f32> for Bogus {
        fn input_shape(&self) -> IxDyn {
            IxDyn(&[usize::MAX, 2])
        }
        fn copy_into(self, _: &mut [f32]) {}
    }
    let mut tape = Tape::<f32>::new();
    let v = tape.param(Bogus);
    assert!(v.is_poisoned());
    too_large(tape.error().unwrap(), "Tape::param", &[usize::MAX, 2]);
}

/// A padding of 2^31 on each side of a 2 × 2 image with a stride of 2^31:
/// three windows a dim, the middle one on the image. The padded planes
/// (2^64 elements) are never made; the forward unfolds the nine columns
/// instead, and the values and gradients are exact.
#[test]
fn a_conv_with_a_huge_padding_and_stride_reads_its_few_windows() {
    within(LIMIT, "the huge padding", || {
        let (pad, stride) = (1 << 31, 1 << 31);
        let mut tape = Tape::<f32>::new();
        let x = tape.param(ArrayD::from_shape_vec(IxDyn(&[1, 1, 2, 2]), vec![1.0, 2.0, 3.0, 4.0]).unwrap());
        let w = tape.param(ArrayD::from_elem(IxDyn(&[1, 1, 1, 1]), 5.0));
        let y = g_conv2d(&mut tape, x, w, None, [stride, stride], [pad, pad], [1, 1], 1);
        assert!(tape.is_ok(), "{:?}", tape.error());
        let expected = [0.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 0.0];
        assert_eq!(tape.value(y).shape(), &[1, 1, 3, 3]);
        assert_eq!(tape.value(y).as_slice().unwrap(), &expected);
        let loss = g_sum(&mut tape, y);
        tape.backward(loss).expect("the convolution has gradients");
        assert_eq!(tape.grad(x).as_slice().unwrap(), &[5.0, 0.0, 0.0, 0.0]);
        assert_eq!(tape.grad(w).as_slice().unwrap(), &[1.0]);
    });
}

/// An empty batch of huge images: the output holds no element, so neither
/// the forward nor the backward sizes the columns its empty dims imply
/// (2^60 here, more bytes than a buffer can hold).
#[test]
fn a_conv_of_an_empty_batch_of_huge_images_sizes_no_columns() {
    within(LIMIT, "the empty conv", || {
        let mut tape = Tape::<f32>::new();
        let x = tape.param(zeros(&[0, 1, 1 << 30, 1 << 30]));
        let w = tape.param(ArrayD::ones(IxDyn(&[2, 1, 1, 1])));
        let b = tape.param(ArrayD::ones(IxDyn(&[2])));
        let y = g_conv2d(&mut tape, x, w, Some(b), [1, 1], [0, 0], [1, 1], 1);
        assert_eq!(tape.value(y).shape(), &[0, 2, 1 << 30, 1 << 30]);
        let loss = g_sum(&mut tape, y);
        tape.backward(loss).expect("an empty conv has gradients");
        assert!(tape.grad(w).iter().all(|&g| g == 0.0));
        assert!(tape.grad(b).iter().all(|&g| g == 0.0));
        assert!(tape.is_ok(), "{:?}", tape.error());
    });
}
