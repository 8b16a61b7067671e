//! `Tape::grad_graph`: every op's backward recorded as ops and
//! differentiated again. Each family is checked by the second-order
//! gradient check (the recorded gradient's own finite differences in f64),
//! by exact identities, and by PyTorch's double backward
//! (`tests/data/oracle_second_order.json`, Hessian-vector products).

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn, array};

use crate::common::{Program, Rng, check_second_order};

/// `tanh` after an op, so that linear ops' rules meet a curvature.
fn squashed(tp: &mut Tape<f64>, x: Var) -> Var {
    let t = g_tanh(tp, x);
    g_mul(tp, t, x)
}

fn check(name: &str, program: Program<'_>, inputs: &[ArrayD<f64>]) {
    check_second_order(name, program, inputs, 90);
}

#[test]
fn arithmetic_with_broadcasting() {
    let mut rng = Rng::new(91);
    let inputs = [rng.normal_array(&[3, 4]), rng.normal_array(&[4]), rng.uniform_array(&[3, 1], 1.0, 2.0)];
    check(
        "add sub mul div",
        &|tp, v| {
            let ab = g_mul(tp, v[0], v[1]);
            let s = g_add(tp, ab, v[1]);
            let d = g_div(tp, s, v[2]);
            let e = g_sub(tp, d, v[0]);
            squashed(tp, e)
        },
        &inputs,
    );
}

#[test]
fn every_unary_function() {
    let mut rng = Rng::new(92);
    let x = rng.away_from_zero(&[2, 5], 0.2);
    let positive = rng.uniform_array(&[2, 5], 0.5, 2.0);
    type Unary = fn(&mut Tape<f64>, Var) -> Var;
    let smooth: [(&str, Unary); 10] = [
        ("neg", |tp, x| g_neg(tp, x)),
        ("adds", |tp, x| g_adds(tp, x, 0.5)),
        ("muls", |tp, x| g_muls(tp, x, -1.5)),
        ("sigmoid", g_sigmoid),
        ("tanh", g_tanh),
        ("exp", g_exp),
        ("gelu", g_gelu),
        ("silu", g_silu),
        ("softplus", g_softplus),
        ("pow", |tp, x| g_pow(tp, x, 3.0)),
    ];
    for (name, f) in smooth {
        check(
            name,
            &|tp, v| {
                let y = f(tp, v[0]);
                squashed(tp, y)
            },
            std::slice::from_ref(&x),
        );
    }
    let on_positive: [(&str, Unary); 3] = [("log", g_log), ("sqrt", g_sqrt), ("pow 2.5", |tp, x| g_pow(tp, x, 2.5))];
    for (name, f) in on_positive {
        check(
            name,
            &|tp, v| {
                let y = f(tp, v[0]);
                squashed(tp, y)
            },
            std::slice::from_ref(&positive),
        );
    }
    // Piecewise linear: their derivative is a constant mask.
    let kinked: [(&str, Unary); 4] = [
        ("relu", g_relu),
        ("abs", g_abs),
        ("leaky_relu", |tp, x| g_leaky_relu(tp, x, 0.1)),
        ("clamp", |tp, x| g_clamp(tp, x, -0.5, 0.7)),
    ];
    let away = x.mapv(|v| if (v - 0.7).abs() < 0.05 || (v + 0.5).abs() < 0.05 { v + 0.1 } else { v });
    for (name, f) in kinked {
        check(
            name,
            &|tp, v| {
                let y = f(tp, v[0]);
                let yy = g_mul(tp, y, y);
                squashed(tp, yy)
            },
            std::slice::from_ref(&away),
        );
    }
}

#[test]
fn reductions() {
    let mut rng = Rng::new(93);
    let x = rng.normal_array(&[3, 4]);
    type Reduce = fn(&mut Tape<f64>, Var) -> Var;
    let reductions: [(&str, Reduce); 8] = [
        ("sum", g_sum),
        ("mean", g_mean),
        ("sum_axis", |tp, x| g_sum_axis(tp, x, 1, false)),
        ("sum_axis keepdim", |tp, x| g_sum_axis(tp, x, 0, true)),
        ("mean_axis", |tp, x| g_mean_axis(tp, x, -1, true)),
        ("max_axis", |tp, x| g_max_axis(tp, x, 1, false)),
        ("min_axis", |tp, x| g_min_axis(tp, x, 0, true)),
        ("cumsum", |tp, x| g_cumsum(tp, x, 1)),
    ];
    for (name, f) in reductions {
        check(
            name,
            &|tp, v| {
                let s = squashed(tp, v[0]);
                let r = f(tp, s);
                squashed(tp, r)
            },
            std::slice::from_ref(&x),
        );
    }
}

#[test]
fn products_and_layout() {
    let mut rng = Rng::new(94);
    check(
        "matmul",
        &|tp, v| {
            let p = g_matmul(tp, v[0], v[1]);
            squashed(tp, p)
        },
        &[rng.normal_array(&[3, 4]), rng.normal_array(&[4, 2])],
    );
    check(
        "matmul, broadcast batch",
        &|tp, v| {
            let p = g_matmul(tp, v[0], v[1]);
            squashed(tp, p)
        },
        &[rng.normal_array(&[2, 3, 4]), rng.normal_array(&[4, 2])],
    );
    check(
        "bmm",
        &|tp, v| {
            let p = g_bmm(tp, v[0], v[1]);
            squashed(tp, p)
        },
        &[rng.normal_array(&[2, 3, 4]), rng.normal_array(&[2, 4, 2])],
    );
    let x = rng.normal_array(&[2, 3, 4]);
    type Layout = fn(&mut Tape<f64>, Var) -> Var;
    let layouts: [(&str, Layout); 5] = [
        ("transpose", g_transpose),
        ("permute", |tp, x| g_permute(tp, x, &[2, 0, 1])),
        ("reshape", |tp, x| g_reshape(tp, x, &[6, 4])),
        ("slice", |tp, x| g_slice(tp, x, &[0, 1, 1], &[2, 3, 3])),
        ("concat", |tp, x| {
            let t = g_tanh(tp, x);
            g_concat(tp, x, t, 1)
        }),
    ];
    for (name, f) in layouts {
        check(
            name,
            &|tp, v| {
                let s = squashed(tp, v[0]);
                let y = f(tp, s);
                squashed(tp, y)
            },
            std::slice::from_ref(&x),
        );
    }
}

/// The gradient products of a product, recorded by `grad_graph`, read
/// their operands transposed; recording their own gradients (a third
/// derivative) goes through those transposed reads in every layout:
/// plain, a batch against a matrix (both ways), a broadcast batch, `bmm`.
#[test]
fn products_differentiate_to_third_order() {
    let mut rng = Rng::new(96);
    let cases: [(&str, bool, &[usize], &[usize]); 6] = [
        ("matmul", false, &[3, 4], &[4, 2]),
        // Sizes whose transposed-read products need more packing scratch
        // than the untransposed ones.
        ("matmul, tall", false, &[30, 7], &[7, 2]),
        ("matmul, batch @ matrix", false, &[2, 3, 4], &[4, 2]),
        ("matmul, matrix @ batch", false, &[3, 4], &[2, 4, 2]),
        ("matmul, broadcast batch", false, &[2, 1, 3, 4], &[3, 4, 2]),
        ("bmm", true, &[2, 3, 4], &[2, 4, 2]),
    ];
    for (name, bmm, sa, sb) in cases {
        check(
            &format!("{name}, gradient differentiated twice"),
            &|tp, v| {
                let p = if bmm { g_bmm(tp, v[0], v[1]) } else { g_matmul(tp, v[0], v[1]) };
                let s = squashed(tp, p);
                let y = g_sum(tp, s);
                let g = tp.grad_graph(y, v).expect("a product is differentiable to any order");
                let (ga, gb) = (squashed(tp, g[0]), squashed(tp, g[1]));
                let (ga, gb) = (g_sum(tp, ga), g_sum(tp, gb));
                g_add(tp, ga, gb)
            },
            &[rng.normal_array(sa), rng.normal_array(sb)],
        );
    }
}

#[test]
fn softmax_losses_embedding_and_norm() {
    let mut rng = Rng::new(95);
    let x = rng.normal_array(&[3, 4]);
    check(
        "softmax",
        &|tp, v| {
            let s = g_softmax(tp, v[0], -1);
            squashed(tp, s)
        },
        std::slice::from_ref(&x),
    );
    check(
        "log_softmax",
        &|tp, v| {
            let s = g_log_softmax(tp, v[0], 0);
            squashed(tp, s)
        },
        std::slice::from_ref(&x),
    );
    check(
        "mse",
        &|tp, v| {
            let s = squashed(tp, v[0]);
            g_mse(tp, s, v[1])
        },
        &[x.clone(), rng.normal_array(&[3, 4])],
    );
    check(
        "cross_entropy",
        &|tp, v| {
            let s = squashed(tp, v[0]);
            g_cross_entropy(tp, s, &[1, 0, 3])
        },
        std::slice::from_ref(&x),
    );
    check(
        "embedding",
        &|tp, v| {
            let e = g_embedding(tp, v[0], &[2, 0, 2, 1]);
            squashed(tp, e)
        },
        &[rng.normal_array(&[3, 4])],
    );
    check(
        "layer_norm",
        &|tp, v| {
            let n = g_layer_norm(tp, v[0], v[1], v[2], 1e-5);
            squashed(tp, n)
        },
        &[rng.normal_array(&[2, 3, 4]), rng.normal_array(&[4]), rng.normal_array(&[4])],
    );
    let mask = array![[true, false, true, false], [false, false, true, true], [true, true, false, false]];
    check(
        "where",
        &|tp, v| {
            let w = g_where(tp, &mask, v[0], v[1]);
            squashed(tp, w)
        },
        &[x.clone(), rng.normal_array(&[4])],
    );
    check(
        "masked_fill",
        &|tp, v| {
            let w = g_masked_fill(tp, v[0], &mask, -2.0);
            squashed(tp, w)
        },
        std::slice::from_ref(&x),
    );
    check(
        "dropout",
        &|tp, v| {
            let d = g_dropout(tp, v[0], 0.5, &mut grad_runtime::Rng::new(3), true);
            squashed(tp, d)
        },
        &[x],
    );
    // N-D forms: logits [2, 3, 4] with targets [2, 3], ids [2, 2].
    check(
        "cross_entropy (3-D)",
        &|tp, v| {
            let s = squashed(tp, v[0]);
            g_cross_entropy(tp, s, &array![[1, 0, 3], [2, 2, 0]])
        },
        &[rng.normal_array(&[2, 3, 4])],
    );
    check(
        "embedding (2-D ids)",
        &|tp, v| {
            let e = g_embedding(tp, v[0], &array![[2, 0], [2, 1]]);
            squashed(tp, e)
        },
        &[rng.normal_array(&[3, 4])],
    );
}

#[test]
fn indexing_and_pooling() {
    let mut rng = Rng::new(97);
    let x = rng.normal_array(&[3, 4]);
    check(
        "index_select, repeats",
        &|tp, v| {
            let s = squashed(tp, v[0]);
            let y = g_index_select(tp, s, 1, &[3, 0, 3, 2]);
            squashed(tp, y)
        },
        std::slice::from_ref(&x),
    );
    let indices = ndarray::Array2::from_shape_vec((2, 4), vec![2usize, 0, 1, 2, 0, 0, 2, 1]).unwrap();
    check(
        "gather",
        &|tp, v| {
            let s = squashed(tp, v[0]);
            let y = g_gather(tp, s, 0, &indices);
            squashed(tp, y)
        },
        std::slice::from_ref(&x),
    );
    let image = rng.normal_array(&[1, 2, 5, 5]);
    check(
        "max_pool2d",
        &|tp, v| {
            let s = squashed(tp, v[0]);
            let y = g_max_pool2d(tp, s, [2, 2], [2, 2], [1, 1]);
            squashed(tp, y)
        },
        std::slice::from_ref(&image),
    );
    check(
        "conv2d, stride, padding, bias",
        &|tp, v| {
            let y = g_conv2d(tp, v[0], v[1], Some(v[2]), [2, 1], [1, 1], [1, 1], 1);
            squashed(tp, y)
        },
        &[rng.normal_array(&[2, 2, 5, 4]), rng.normal_array(&[3, 2, 3, 2]), rng.normal_array(&[3])],
    );
    check(
        "conv2d, two groups",
        &|tp, v| {
            let y = g_conv2d(tp, v[0], v[1], Some(v[2]), [1, 1], [1, 0], [1, 1], 2);
            squashed(tp, y)
        },
        &[rng.normal_array(&[2, 4, 4, 3]), rng.normal_array(&[6, 2, 2, 2]), rng.normal_array(&[6])],
    );
    check(
        "conv2d, dilation",
        &|tp, v| {
            let s = squashed(tp, v[0]);
            let y = g_conv2d(tp, s, v[1], None, [1, 1], [0, 1], [2, 1], 1);
            squashed(tp, y)
        },
        &[rng.normal_array(&[1, 2, 5, 4]), rng.normal_array(&[2, 2, 2, 2])],
    );
    check(
        "avg_pool2d",
        &|tp, v| {
            let s = squashed(tp, v[0]);
            let y = g_avg_pool2d(tp, s, [3, 3], [2, 2], [1, 1]);
            squashed(tp, y)
        },
        std::slice::from_ref(&image),
    );
}

#[test]
fn batch_and_group_norm() {
    let mut rng = Rng::new(98);
    let inputs = [rng.normal_array(&[3, 2, 2, 2]), rng.normal_array(&[2]), rng.normal_array(&[2])];
    for train in [true, false] {
        check(
            if train { "batch_norm, training" } else { "batch_norm, evaluation" },
            &|tp, v| {
                let (mean, var) = (tp.buffer(array![0.1, -0.2]), tp.buffer(array![1.5, 0.5]));
                let y = g_batch_norm(tp, v[0], mean, var, v[1], v[2], train, 0.1, 1e-5);
                squashed(tp, y)
            },
            &inputs,
        );
    }
    let inputs = [rng.normal_array(&[2, 4, 3]), rng.normal_array(&[4]), rng.normal_array(&[4])];
    for groups in [1, 2, 4] {
        check(
            "group_norm",
            &|tp, v| {
                let y = g_group_norm(tp, v[0], groups, v[1], v[2], 1e-5);
                squashed(tp, y)
            },
            &inputs,
        );
    }
}

#[test]
fn fused_regions_are_differentiated_through_their_unfused_ops() {
    let mut rng = Rng::new(96);
    let inputs = [rng.normal_array(&[3, 4]), rng.normal_array(&[4])];
    check(
        "fused",
        &|tp, v| {
            let (x, b) = (v[0], v[1]);
            grad!(tp; x: [N, 4], b: [4]; let h = tanh(x * 0.9 + b); sum(sigmoid(h) * h - relu(x) / 2.0))
        },
        &inputs,
    );
    // The same values as the unfused program, to the bit.
    let run = |fused: bool| {
        let mut tp = Tape::<f64>::new();
        let (x, b) = (tp.param(&inputs[0]), tp.param(&inputs[1]));
        let y = if fused {
            grad!(tp; x: [N, 4], b: [4]; sum(tanh(x * 0.9 + b) * x))
        } else {
            let xs = g_muls(&mut tp, x, 0.9);
            let z = g_add(&mut tp, xs, b);
            let t = g_tanh(&mut tp, z);
            let tx = g_mul(&mut tp, t, x);
            g_sum(&mut tp, tx)
        };
        let g = tp.grad_graph(y, &[x, b]).unwrap();
        (tp.value(g[0]).to_owned(), tp.value(g[1]).to_owned())
    };
    assert_eq!(run(true), run(false));
}

#[test]
fn identities_of_second_derivatives() {
    // d²/dx² Σ x³ = 6x, exactly.
    let mut tp = Tape::<f64>::new();
    let x = tp.param(array![1.0, -2.0, 0.5]);
    let cube = grad!(tp; sum(x * x * x));
    let dx = tp.grad_graph(cube, &[x]).unwrap()[0];
    let total = g_sum(&mut tp, dx);
    let ddx = tp.grad_graph(total, &[x]).unwrap()[0];
    assert_eq!(tp.value(ddx), array![6.0, -12.0, 3.0].into_dyn());

    // softmax's Hessian at equal logits: the HVP of Σ softmax(x) · c is
    // (diag(p) − p pᵀ) applied through c; with p = 1/n, H v · c for c = v
    // is (Σv² − (Σv)²/n)/n ... checked here in its simplest form: the
    // gradient of Σ softmax(x) · c at equal logits is (c − mean(c)) / n.
    let mut tp = Tape::<f64>::new();
    let x = tp.param(array![0.5, 0.5, 0.5, 0.5]);
    let c = tp.constant(array![1.0, 2.0, 3.0, 6.0]);
    let s = g_softmax(&mut tp, x, 0);
    let sc = g_mul(&mut tp, s, c);
    let y = g_sum(&mut tp, sc);
    let g = tp.grad_graph(y, &[x]).unwrap()[0];
    assert_eq!(tp.value(g), array![-0.5, -0.25, 0.0, 0.75].into_dyn());

    // tanh'' = −2 tanh (1 − tanh²).
    let mut tp = Tape::<f64>::new();
    let x0 = array![0.3, -1.2, 2.0];
    let x = tp.param(&x0);
    let t = g_tanh(&mut tp, x);
    let y = g_sum(&mut tp, t);
    let d = tp.grad_graph(y, &[x]).unwrap()[0];
    let ds = g_sum(&mut tp, d);
    let dd = tp.grad_graph(ds, &[x]).unwrap()[0];
    let want = x0.mapv(|v: f64| -2.0 * v.tanh() * (1.0 - v.tanh() * v.tanh())).into_dyn();
    crate::common::assert_close("tanh''", &tp.value(dd).to_owned(), &want, 1e-15, 1e-15);
}

/// `f(w) = Σ (x w)²` on a tape, with `w` used twice: its Hessian is
/// `2 xᵀx` exactly, and [`hv`](Quadratic::hv) is its product with the
/// direction `v`.
pub struct Quadratic {
    pub w: Var,
    pub v: Var,
    pub loss: Var,
    x: ndarray::Array2<f64>,
    direction: ndarray::Array2<f64>,
}

impl Quadratic {
    pub fn new(tp: &mut Tape<f64>) -> Quadratic {
        let (x, direction) = (array![[1.0, 2.0], [3.0, -1.0], [0.5, 0.0]], array![[1.0], [2.0]]);
        let xn = tp.constant(&x);
        let w = tp.param(array![[0.3], [-0.7]]);
        let v = tp.constant(&direction);
        let loss = grad!(tp; xn: [3, 2], w: [2, 1]; sum((xn @ w) * (xn @ w)));
        Quadratic { w, v, loss, x, direction }
    }

    /// `H v = 2 xᵀ x v`.
    pub fn hv(&self) -> ArrayD<f64> {
        (self.x.t().dot(&self.x).dot(&self.direction) * 2.0).into_dyn()
    }
}

#[test]
fn a_hessian_vector_product_is_backward_of_the_recorded_gradient() {
    let mut tp = Tape::<f64>::new();
    let q = Quadratic::new(&mut tp);
    let (w, v, loss) = (q.w, q.v, q.loss);
    tp.backward(loss).unwrap();
    let first = tp.grad(w).to_owned();
    let g = tp.grad_graph(loss, &[w]).unwrap()[0];
    assert_eq!(tp.grad(w), first, "grad_graph leaves the gradient slots alone");
    assert_eq!(tp.value(g), first, "the recorded gradient is backward's");
    let gv = grad!(tp; sum(g * v));
    let before = tp.grad(w).to_owned();
    tp.backward(gv).unwrap();
    let hv = &tp.grad(w).to_owned() - &before; // backward adds into a parameter's slot
    crate::common::assert_close("H v", &hv, &q.hv(), 1e-14, 1e-14);
}

#[test]
fn unreached_inputs_get_zeros_and_constants_are_differentiable() {
    let mut tp = Tape::<f64>::new();
    let x = tp.constant(array![1.0, 2.0]);
    let unused = tp.param(array![[5.0, 5.0, 5.0]]);
    let y = grad!(tp; sum(x * x));
    let [gx, gu] = tp.grad_graph(y, &[x, unused]).unwrap()[..] else { panic!() };
    assert_eq!(tp.value(gx), array![2.0, 4.0].into_dyn());
    assert_eq!(tp.value(gu), array![[0.0, 0.0, 0.0]].into_dyn());
    // detach stops grad_graph too.
    let d = g_detach(&mut tp, x);
    let z = grad!(tp; sum(d * x));
    let gz = tp.grad_graph(z, &[x]).unwrap()[0];
    assert_eq!(tp.value(gz), array![1.0, 2.0].into_dyn());
}

#[test]
fn an_op_without_a_graph_backward_is_an_error_naming_it_and_records_nothing() {
    // A custom op without backward_graph: refused when reached, nothing
    // left behind, the tape not poisoned.
    let mut tp = Tape::<f64>::new();
    let t = tp.param(array![0.5, 1.5]);
    let s = crate::common::custom_ops::straight_through(&mut tp, t);
    let y = grad!(tp; sum(tanh(s) * t));
    let len = tp.len();
    let err = tp.grad_graph(y, &[t]).unwrap_err();
    assert_eq!((err.op(), err.kind()), ("Tape::grad_graph", &ErrorKind::NoGraphBackward { op: "straight_through" }));
    assert!(err.to_string().contains("straight_through"), "{err}");
    assert_eq!(tp.len(), len, "nothing recorded");
    assert!(tp.is_ok(), "the refusal does not poison the tape");

    // Not a scalar; a stale handle.
    let err = tp.grad_graph(t, &[t]).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::NotScalar { elements: 2 });
    let mark = tp.mark();
    let late = tp.param(array![1.0]);
    tp.reset_to(mark);
    assert_eq!(tp.grad_graph(y, &[late]).unwrap_err().kind(), &ErrorKind::StaleVar);
}

/// The program of an oracle case, by name, in the library's ops (the
/// generator writes each in PyTorch's).
pub(crate) fn oracle_program(name: &str, tp: &mut Tape<f64>, v: &[Var]) -> Var {
    let s = squashed;
    let unary = |tp: &mut Tape<f64>, f: fn(&mut Tape<f64>, Var) -> Var| {
        let y = f(tp, v[0]);
        s(tp, y)
    };
    let kinked = |tp: &mut Tape<f64>, f: fn(&mut Tape<f64>, Var) -> Var| {
        let y = f(tp, v[0]);
        let yy = g_mul(tp, y, y);
        s(tp, yy)
    };
    let out = match name {
        "arithmetic" => {
            let ab = g_mul(tp, v[0], v[1]);
            let e = g_add(tp, ab, v[1]);
            let e = g_div(tp, e, v[2]);
            let e = g_sub(tp, e, v[0]);
            s(tp, e)
        }
        "unary_sigmoid" => unary(tp, g_sigmoid),
        "unary_tanh" => unary(tp, g_tanh),
        "unary_exp" => unary(tp, g_exp),
        "unary_gelu" => unary(tp, g_gelu),
        "unary_silu" => unary(tp, g_silu),
        "unary_softplus" => unary(tp, g_softplus),
        "unary_pow3" => unary(tp, |tp, x| g_pow(tp, x, 3.0)),
        "unary_log" => unary(tp, g_log),
        "unary_sqrt" => unary(tp, g_sqrt),
        "unary_pow2p5" => unary(tp, |tp, x| g_pow(tp, x, 2.5)),
        "unary_relu" => kinked(tp, g_relu),
        "unary_abs" => kinked(tp, g_abs),
        "unary_leaky_relu" => kinked(tp, |tp, x| g_leaky_relu(tp, x, 0.1)),
        "unary_clamp" => kinked(tp, |tp, x| g_clamp(tp, x, -0.5, 0.7)),
        "sum_axis" | "mean_axis" | "max_axis" | "cumsum" => {
            let sx = s(tp, v[0]);
            let r = match name {
                "sum_axis" => g_sum_axis(tp, sx, 1, false),
                "mean_axis" => g_mean_axis(tp, sx, -1, true),
                "max_axis" => g_max_axis(tp, sx, 1, false),
                _ => g_cumsum(tp, sx, 1),
            };
            s(tp, r)
        }
        "matmul" | "matmul_broadcast" => {
            let p = g_matmul(tp, v[0], v[1]);
            s(tp, p)
        }
        "bmm" => {
            let p = g_bmm(tp, v[0], v[1]);
            s(tp, p)
        }
        "attention" => {
            let y = g_attention(tp, v[0], v[1], v[2], true);
            s(tp, y)
        }
        "attention_packed" => {
            let y = g_attention_packed(tp, v[0], 2, true);
            s(tp, y)
        }
        "transpose" | "reshape" | "slice" | "concat" | "permute" => {
            let sx = s(tp, v[0]);
            let y = match name {
                "transpose" => g_transpose(tp, sx),
                "permute" => g_permute(tp, sx, &[2, 0, 1]),
                "reshape" => g_reshape(tp, sx, &[6, 4]),
                "slice" => g_slice(tp, sx, &[0, 1, 1], &[2, 3, 3]),
                _ => {
                    let t = g_tanh(tp, sx);
                    g_concat(tp, sx, t, 1)
                }
            };
            s(tp, y)
        }
        "softmax" => {
            let p = g_softmax(tp, v[0], -1);
            s(tp, p)
        }
        "log_softmax" => {
            let p = g_log_softmax(tp, v[0], 0);
            s(tp, p)
        }
        "mse" => {
            let sx = s(tp, v[0]);
            return g_mse(tp, sx, v[1]);
        }
        "cross_entropy" => {
            let sx = s(tp, v[0]);
            return g_cross_entropy(tp, sx, &[1, 0, 3]);
        }
        "embedding" => {
            let e = g_embedding(tp, v[0], &[2, 0, 2, 1]);
            s(tp, e)
        }
        "layer_norm" => {
            let n = g_layer_norm(tp, v[0], v[1], v[2], 1e-5);
            s(tp, n)
        }
        "index_select" => {
            let sx = s(tp, v[0]);
            let y = g_index_select(tp, sx, 1, &[3, 0, 3, 2]);
            s(tp, y)
        }
        "gather" => {
            let indices = ndarray::Array2::from_shape_vec((2, 4), vec![2usize, 0, 1, 2, 0, 0, 2, 1]).unwrap();
            let sx = s(tp, v[0]);
            let y = g_gather(tp, sx, 0, &indices);
            s(tp, y)
        }
        "max_pool2d" => {
            let sx = s(tp, v[0]);
            let y = g_max_pool2d(tp, sx, [2, 2], [2, 2], [1, 1]);
            s(tp, y)
        }
        "avg_pool2d" => {
            let sx = s(tp, v[0]);
            let y = g_avg_pool2d(tp, sx, [3, 3], [2, 2], [1, 1]);
            s(tp, y)
        }
        "batch_norm" => {
            let (mean, var) = (tp.buffer(array![0.1, -0.2, 0.3]), tp.buffer(array![1.5, 0.5, 1.0]));
            let y = g_batch_norm(tp, v[0], mean, var, v[1], v[2], true, 0.1, 1e-5);
            s(tp, y)
        }
        "batch_norm_eval" => {
            let (mean, var) = (tp.buffer(array![0.1, -0.2, 0.3]), tp.buffer(array![1.5, 0.5, 1.0]));
            let y = g_batch_norm(tp, v[0], mean, var, v[1], v[2], false, 0.1, 1e-5);
            s(tp, y)
        }
        "group_norm" => {
            let y = g_group_norm(tp, v[0], 2, v[1], v[2], 1e-5);
            s(tp, y)
        }
        "conv2d" => {
            let y = g_conv2d(tp, v[0], v[1], Some(v[2]), [2, 1], [1, 1], [1, 1], 1);
            s(tp, y)
        }
        "conv2d_groups" => {
            let y = g_conv2d(tp, v[0], v[1], Some(v[2]), [1, 1], [1, 0], [1, 1], 2);
            s(tp, y)
        }
        "cross_entropy_3d" => {
            let sx = s(tp, v[0]);
            return g_cross_entropy(tp, sx, &array![[1, 0, 3], [2, 2, 0]]);
        }
        "embedding_2d_ids" => {
            let e = g_embedding(tp, v[0], &array![[2, 0], [2, 1]]);
            s(tp, e)
        }
        "conv2d_dilated" => {
            let sx = s(tp, v[0]);
            let y = g_conv2d(tp, sx, v[1], None, [1, 1], [0, 1], [2, 1], 1);
            s(tp, y)
        }
        "where" => {
            let mask = array![[true, false, true, false], [false, false, true, true], [true, true, false, false]];
            let w = g_where(tp, &mask, v[0], v[1]);
            s(tp, w)
        }
        other => panic!("oracle case `{other}` has no program: every case must run"),
    };
    g_sum(tp, out)
}

pub(crate) fn json_array(value: &serde_json::Value) -> ArrayD<f64> {
    let shape: Vec<usize> = value["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data: Vec<f64> = value["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    ArrayD::from_shape_vec(IxDyn(&shape), data).expect("data length matches shape")
}

#[test]
fn pytorch_double_backward_oracle() {
    let file: serde_json::Value =
        serde_json::from_str(include_str!("../data/oracle_second_order.json")).expect("the oracle is JSON");
    assert_eq!(file["format"], "grad-second-order/1");
    let cases = file["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 48);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let list = |key: &str| case[key].as_array().unwrap().iter().map(json_array).collect::<Vec<_>>();
        let (inputs, grads, directions, hvps) = (list("inputs"), list("grads"), list("v"), list("hvp"));
        let mut tp = Tape::<f64>::new();
        let vars: Vec<Var> = inputs.iter().map(|x| tp.param(x)).collect();
        let y = oracle_program(name, &mut tp, &vars);
        let value = case["value"].as_f64().unwrap();
        assert!((tp.scalar(y) - value).abs() <= 1e-12 + 1e-9 * value.abs(), "{name}: value");
        let recorded = tp.grad_graph(y, &vars).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut inner: Option<Var> = None;
        for (k, (&g, v)) in recorded.iter().zip(&directions).enumerate() {
            crate::common::assert_close(
                &format!("{name}: gradient {k}"),
                &tp.value(g).to_owned(),
                &grads[k],
                1e-9,
                1e-12,
            );
            let v = tp.constant(v);
            let gv = g_mul(&mut tp, g, v);
            let term = g_sum(&mut tp, gv);
            inner = Some(match inner {
                Some(sum) => g_add(&mut tp, sum, term),
                None => term,
            });
        }
        tp.backward(inner.unwrap()).unwrap();
        for (k, (&x, want)) in vars.iter().zip(&hvps).enumerate() {
            crate::common::assert_close(&format!("{name}: H v, input {k}"), &tp.grad(x).to_owned(), want, 1e-9, 1e-12);
        }
    }
}

#[test]
fn a_third_order_physics_informed_loss_matches_pytorch() {
    // loss = mean((u'' + f)²) with u = tanh(x w1 + b1) w2 + b2, u'' from two
    // nested grad_graph calls in the constant x, differentiated in w1..b2.
    let file: serde_json::Value =
        serde_json::from_str(include_str!("../data/oracle_second_order.json")).expect("the oracle is JSON");
    let case = &file["pinn_third_order"];
    let params: Vec<ArrayD<f64>> = case["params"].as_array().unwrap().iter().map(json_array).collect();
    let want: Vec<ArrayD<f64>> = case["grads"].as_array().unwrap().iter().map(json_array).collect();
    let mut tp = Tape::<f64>::new();
    let p: Vec<Var> = params.iter().map(|a| tp.param(a)).collect();
    let x = tp.constant(json_array(&case["x"]));
    let f = tp.constant(json_array(&case["f"]));
    let (w1, b1, w2, b2) = (p[0], p[1], p[2], p[3]);
    let loss = grad!(tp; x: [5, 1], w1: [1, 4], b1: [4], w2: [4, 1], b2: [1], f: [5, 1];
        let u = tanh(x @ w1 + b1) @ w2 + b2;
        let du = grad(sum(u), x);
        let ddu = grad(sum(du), x);
        mean(pow(ddu + f, 2.0)));
    let value = case["loss"].as_f64().unwrap();
    assert!((tp.scalar(loss) - value).abs() <= 1e-9 * value.abs(), "loss {} against {value}", tp.scalar(loss));
    tp.backward(loss).unwrap();
    for (k, (&v, want)) in p.iter().zip(&want).enumerate() {
        crate::common::assert_close(&format!("parameter {k}"), &tp.grad(v).to_owned(), want, 1e-9, 1e-12);
    }
}
