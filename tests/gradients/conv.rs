//! `ops/conv.rs` and `ops/pool.rs`: `conv2d`, `max_pool2d`, `avg_pool2d`.

use grad_runtime::*;
use ndarray::{ArrayD, Axis, IxDyn};

use crate::common::{Rng, check_finite_differences, forward, grads_of_sum, integers};
use crate::oracle::Case;

fn pair(v: Vec<usize>) -> [usize; 2] {
    [v[0], v[1]]
}

/// The oracle cases of this module's ops.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    Some(match case.op() {
        "conv2d" => g_conv2d(
            tp,
            case.x(0),
            case.x(1),
            Some(case.x(2)),
            pair(case.usizes("stride")),
            pair(case.usizes("padding")),
            pair(case.usizes("dilation")),
            case.index("groups"),
        ),
        "max_pool2d" | "avg_pool2d" => {
            let (k, s, p) = (pair(case.usizes("kernel")), pair(case.usizes("stride")), pair(case.usizes("padding")));
            let pool = if case.op() == "max_pool2d" { g_max_pool2d::<f64> } else { g_avg_pool2d::<f64> };
            pool(tp, case.x(0), k, s, p)
        }
        _ => return None,
    })
}

/// x's shape, w's shape, stride, padding, dilation, groups.
type ConvCase = (&'static [usize], &'static [usize], [usize; 2], [usize; 2], [usize; 2], usize);

#[test]
fn conv2d_finite_differences_with_stride_padding_dilation_and_groups() {
    let mut rng = Rng::new(61);
    let cases: [ConvCase; 6] = [
        (&[2, 3, 5, 5], &[4, 3, 3, 3], [1, 1], [1, 1], [1, 1], 1),
        (&[1, 2, 7, 6], &[2, 2, 3, 2], [1, 1], [2, 1], [2, 3], 1),
        (&[1, 2, 4, 5], &[3, 2, 1, 2], [1, 1], [1, 1], [1, 1], 1),
        (&[1, 2, 6, 7], &[3, 2, 2, 3], [2, 1], [0, 2], [1, 1], 1),
        (&[1, 2, 7, 6], &[2, 2, 3, 2], [1, 2], [1, 1], [2, 2], 1),
        (&[2, 4, 4, 5], &[6, 2, 3, 3], [1, 1], [1, 0], [1, 1], 2),
    ];
    for (i, &(xs, ws, stride, padding, dilation, groups)) in cases.iter().enumerate() {
        let inputs = [rng.normal_array(xs), rng.normal_array(ws), rng.normal_array(&ws[..1])];
        let with_bias = move |tp: &mut Tape<f64>, v: &[Var]| {
            g_conv2d(tp, v[0], v[1], Some(v[2]), stride, padding, dilation, groups)
        };
        check_finite_differences(&format!("g_conv2d case {i}"), &with_bias, &inputs, 70 + i as u64);
        let without =
            move |tp: &mut Tape<f64>, v: &[Var]| g_conv2d(tp, v[0], v[1], None, stride, padding, dilation, groups);
        check_finite_differences(&format!("g_conv2d case {i} no bias"), &without, &inputs[..2], 80 + i as u64);
    }
}

/// Each gradient of a convolution is the same bits whether or not the
/// other operands want theirs: the image and the weights computed together
/// per image, or either alone (a constant image, as data is; frozen
/// weights), and an image that also gets a gradient from elsewhere.
#[test]
fn conv2d_gradients_are_the_same_bits_whichever_operands_want_them() {
    let mut rng = Rng::new(67);
    let cases: [ConvCase; 3] = [
        (&[6, 3, 9, 8], &[4, 3, 3, 3], [1, 1], [1, 1], [1, 1], 1),
        (&[3, 4, 7, 9], &[6, 2, 3, 2], [2, 1], [1, 2], [1, 2], 2),
        (&[2, 2, 6, 6], &[3, 2, 2, 2], [2, 2], [0, 0], [1, 1], 1),
    ];
    for (i, &(xs, ws, stride, padding, dilation, groups)) in cases.iter().enumerate() {
        let (x, w, b) = (rng.normal_array(xs), rng.normal_array(ws), rng.normal_array(&ws[..1]));
        let t = rng.normal_array(&[1]);
        // `[x, w, b]`'s gradients (empty when not wanted), for `sum(conv * t)`
        // plus, with `twice`, `sum(x)` added to the image's gradient first.
        let grads = |x_param: bool, w_param: bool, twice: bool| {
            let mut tape = Tape::<f64>::new();
            let node = |tape: &mut Tape<f64>, v: &ArrayD<f64>, param: bool| {
                if param { tape.param(v.clone()) } else { tape.constant(v.clone()) }
            };
            let (vx, vw, vb) = (node(&mut tape, &x, x_param), node(&mut tape, &w, w_param), tape.param(b.clone()));
            let y = g_conv2d(&mut tape, vx, vw, Some(vb), stride, padding, dilation, groups);
            let scale = tape.constant(t.clone());
            let scaled = g_mul(&mut tape, y, scale);
            let mut loss = g_sum(&mut tape, scaled);
            if twice {
                let also = g_sum(&mut tape, vx);
                loss = g_add(&mut tape, also, loss);
            }
            tape.backward(loss).expect("a scalar loss");
            let mut bits = |v: Var, wanted: bool| -> Vec<u64> {
                if wanted { tape.grad(v).iter().map(|g| g.to_bits()).collect() } else { Vec::new() }
            };
            [bits(vx, x_param), bits(vw, w_param), bits(vb, true)]
        };
        let [gx, gw, gb] = grads(true, true, false);
        assert_eq!(grads(false, true, false), [Vec::new(), gw.clone(), gb.clone()], "case {i}, constant image");
        assert_eq!(grads(true, false, false), [gx.clone(), Vec::new(), gb.clone()], "case {i}, frozen weights");
        let [gx2, gw2, gb2] = grads(true, true, true);
        assert_eq!((gw2, gb2), (gw, gb), "case {i}, image used twice");
        assert_eq!(gx2.len(), gx.len());
        let expected: Vec<u64> = gx.iter().map(|&g| (1.0 + f64::from_bits(g)).to_bits()).collect();
        assert_eq!(gx2, expected, "case {i}: the image's gradient adds to what it held");
    }
    // No input channels: the output is the bias alone; the image and the
    // weights have no element to take a gradient.
    let mut tape = Tape::<f64>::new();
    let x = tape.param(ArrayD::zeros(IxDyn(&[2, 0, 4, 4])));
    let w = tape.param(ArrayD::zeros(IxDyn(&[3, 0, 3, 3])));
    let b = tape.param(ndarray::arr1(&[1.0, 2.0, 3.0]).into_dyn());
    let y = g_conv2d(&mut tape, x, w, Some(b), [1, 1], [1, 1], [1, 1], 1);
    let loss = g_sum(&mut tape, y);
    tape.backward(loss).expect("a scalar loss");
    assert_eq!((tape.grad(x).len(), tape.grad(w).len()), (0, 0));
    assert_eq!(tape.grad(b).as_slice().unwrap(), &[32.0, 32.0, 32.0]);
}

#[test]
fn pools_finite_differences() {
    let mut rng = Rng::new(62);
    // Distinct, well-separated values: each window's maximum is unique.
    let mut order: Vec<f64> = (0..2 * 3 * 6 * 5).map(f64::from).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, (rng.uniform() * (i + 1) as f64) as usize % (i + 1));
    }
    let x = ArrayD::from_shape_vec(IxDyn(&[2, 3, 6, 5]), order.iter().map(|v| v * 0.1).collect()).unwrap();
    for (kernel, stride, padding) in [([2, 2], [2, 2], [0, 0]), ([3, 3], [2, 1], [1, 1]), ([2, 3], [1, 2], [1, 0])] {
        let max = move |tp: &mut Tape<f64>, v: &[Var]| g_max_pool2d(tp, v[0], kernel, stride, padding);
        check_finite_differences("g_max_pool2d", &max, std::slice::from_ref(&x), 90);
        let avg = move |tp: &mut Tape<f64>, v: &[Var]| g_avg_pool2d(tp, v[0], kernel, stride, padding);
        check_finite_differences("g_avg_pool2d", &avg, &[rng.normal_array(&[2, 3, 6, 5])], 91);
    }
}

#[test]
fn a_1x1_conv_is_a_matmul_over_channels() {
    // x: [N, C, H, W], w: [O, C, 1, 1]; conv = w @ x per pixel, exactly
    // (integers: every sum is exact).
    let x = integers(&[2, 3, 4, 5], -20.0);
    let w = integers(&[4, 3, 1, 1], -5.0);
    let y = forward(&[x.clone(), w.clone()], |tp, v| g_conv2d(tp, v[0], v[1], None, [1, 1], [0, 0], [1, 1], 1));
    let w2 = w.clone().into_shape_with_order((4, 3)).unwrap();
    for n in 0..2 {
        let xn = x.index_axis(Axis(0), n).to_owned().into_shape_with_order((3, 20)).unwrap();
        let want = w2.dot(&xn).into_shape_with_order((4, 4, 5)).unwrap().into_dyn();
        assert_eq!(y.index_axis(Axis(0), n), want);
    }
    // Its gradient to w is x summed over pixels, to x is w summed over outputs.
    let g = grads_of_sum(&[x.clone(), w.clone()], |tp, v| g_conv2d(tp, v[0], v[1], None, [1, 1], [0, 0], [1, 1], 1));
    let x_sums = x.sum_axis(Axis(3)).sum_axis(Axis(2)).sum_axis(Axis(0));
    for o in 0..4 {
        assert_eq!(
            g[1].index_axis(Axis(0), o).iter().copied().collect::<Vec<_>>(),
            x_sums.iter().copied().collect::<Vec<_>>()
        );
    }
    let w_sums = w2.sum_axis(Axis(0));
    for c in 0..3 {
        assert!(g[0].index_axis(Axis(1), c).iter().all(|&v| v == w_sums[c]));
    }
}

#[test]
fn avg_pool_of_a_constant_and_max_pool_of_a_ramp() {
    let x = ArrayD::from_elem(IxDyn(&[2, 3, 6, 6]), 2.5);
    let y = forward(std::slice::from_ref(&x), |tp, v| g_avg_pool2d(tp, v[0], [2, 2], [2, 2], [0, 0]));
    assert_eq!(y, ArrayD::from_elem(IxDyn(&[2, 3, 3, 3]), 2.5));
    // count_include_pad: a corner window of a 3x3 kernel with padding 1 sees 4 of 9.
    let y = forward(std::slice::from_ref(&x), |tp, v| g_avg_pool2d(tp, v[0], [3, 3], [3, 3], [1, 1]));
    assert_eq!(y[[0, 0, 0, 0]], 2.5 * 4.0 / 9.0);
    // Each window's gradient goes to its maximum, the bottom-right of a ramp.
    let ramp = integers(&[1, 1, 4, 4], 0.0);
    let g = grads_of_sum(std::slice::from_ref(&ramp), |tp, v| g_max_pool2d(tp, v[0], [2, 2], [2, 2], [0, 0]));
    let want: Vec<f64> = (0..16).map(|i| f64::from(u8::from(i % 2 == 1 && (i / 4) % 2 == 1))).collect();
    assert_eq!(g[0].iter().copied().collect::<Vec<_>>(), want);
    // Ties: the first maximum of the window gets it all.
    let flat = ArrayD::from_elem(IxDyn(&[1, 1, 2, 2]), 1.0);
    let g = grads_of_sum(&[flat], |tp, v| g_max_pool2d(tp, v[0], [2, 2], [1, 1], [0, 0]));
    assert_eq!(g[0].iter().copied().collect::<Vec<_>>(), [1.0, 0.0, 0.0, 0.0]);
}

#[test]
fn bad_arguments_are_errors_naming_the_op_and_shapes() {
    let mut tape = Tape::<f64>::new();
    let x = tape.constant(ArrayD::<f64>::zeros(IxDyn(&[1, 4, 5, 5])));
    let w = tape.param(ArrayD::<f64>::zeros(IxDyn(&[6, 2, 3, 3])));
    let b = tape.param(ArrayD::<f64>::zeros(IxDyn(&[5])));
    let flat = tape.constant(ArrayD::<f64>::zeros(IxDyn(&[4, 5])));
    let mark = tape.mark();
    let mut fails = |f: &dyn Fn(&mut Tape<f64>) -> Var, kind: ErrorKind| {
        f(&mut tape);
        let err = tape.error().expect("an error").clone();
        assert_eq!(err.kind(), &kind, "{err}");
        assert!(err.location().file().ends_with("conv.rs"), "{err}");
        tape.reset_to(mark);
        err.to_string()
    };
    let conv = |s: [usize; 2], p: [usize; 2], d: [usize; 2], g: usize| {
        move |tp: &mut Tape<f64>| g_conv2d(tp, x, w, None, s, p, d, g)
    };
    let msg = fails(&conv([1, 1], [1, 1], [1, 1], 1), ErrorKind::ConvChannels { channels: 4, per_group: 2, groups: 1 });
    assert!(msg.starts_with("g_conv2d: the input has 4 channels"), "{msg}");
    assert!(msg.contains("[1, 4, 5, 5] and [6, 2, 3, 3]"), "{msg}");
    fails(
        &conv([0, 1], [0, 0], [1, 1], 2),
        ErrorKind::InvalidArgument { name: "stride", value: 0.0, expected: "from 1 to 2^32 - 1" },
    );
    fails(
        &conv([1, 1], [0, 0], [1, 1], 0),
        ErrorKind::InvalidArgument { name: "groups", value: 0.0, expected: "at least 1" },
    );
    fails(&conv([1, 1], [0, 0], [1, 1], 4), ErrorKind::ConvGroups { groups: 4, in_channels: 4, out_channels: 6 });
    let msg = fails(&conv([1, 1], [0, 0], [3, 3], 2), ErrorKind::WindowTooLarge { window: 7, padded: 5 });
    assert!(msg.contains("spans 7 positions"), "{msg}");
    fails(&|tp| g_conv2d(tp, x, w, Some(b), [1, 1], [0, 0], [1, 1], 2), ErrorKind::ConvBias { out_channels: 6 });
    fails(
        &|tp| g_conv2d(tp, flat, w, None, [1, 1], [0, 0], [1, 1], 2),
        ErrorKind::Rank { expected: "4-D [N, C, H, W] image", got: 2 },
    );
    fails(
        &|tp| g_max_pool2d(tp, flat, [2, 2], [2, 2], [0, 0]),
        ErrorKind::Rank { expected: "4-D [N, C, H, W] image", got: 2 },
    );
    fails(&|tp| g_avg_pool2d(tp, x, [6, 2], [1, 1], [0, 0]), ErrorKind::WindowTooLarge { window: 6, padded: 5 });
    fails(
        &|tp| g_avg_pool2d(tp, x, [2, 2], [1, 1], [2, 0]),
        ErrorKind::InvalidArgument { name: "padding", value: 2.0, expected: "at most half the kernel size" },
    );
    fails(
        &|tp| g_max_pool2d(tp, x, [0, 2], [1, 1], [0, 0]),
        ErrorKind::InvalidArgument { name: "kernel", value: 0.0, expected: "from 1 to 2^32 - 1" },
    );
}
