//! `ops/fused/`: chains of elementwise ops of a `grad!` block, recorded as
//! one fused node with the gradient the macro derived. Every operator and
//! elementwise built-in inside a region: finite differences, identities
//! exact to the bit, the node counts that show the fusion, and the
//! PyTorch oracle cases rerun through `grad!` blocks (`replay`).

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn, array};

use crate::common::{Rng, check_finite_differences, grads_with, integers, scalar};
use crate::oracle::Case;

/// The oracle cases whose program `grad!` fuses, written as `grad!`
/// blocks: a single op `f(x)` as the region `f(x) * 1` (multiplying by 1
/// is exact, so the case's values and gradients are unchanged), a
/// reduction `sum(x)` as `sum(x * 1)`, and each composite as it reads.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    let x = |k: usize| case.x(k);
    let number = |name: &str| case.number(name);
    if case.op() == "composite" {
        return composite(case, tp);
    }
    Some(match (case.op(), case.axis()) {
        ("sum", None) => fold(tp, x(0), false),
        ("mean", None) => fold(tp, x(0), true),
        ("add" | "sub" | "mul" | "div", _) => {
            let (a, b) = (x(0), x(1));
            match case.op() {
                "add" => grad!(tp; (a + b) * 1),
                "sub" => grad!(tp; (a - b) * 1),
                "mul" => grad!(tp; a * b * 1),
                _ => grad!(tp; a / b * 1),
            }
        }
        ("add_scalar", _) => {
            let (a, s) = (x(0), number("scalar"));
            grad!(tp; (a + s) * 1)
        }
        ("mul_scalar", _) => {
            let (a, s) = (x(0), number("scalar"));
            grad!(tp; a * s * 1)
        }
        // Its first input is a mask, not a tensor `unary` could read; not elementwise anyway.
        ("where", _) => return None,
        (op, _) => return unary(op, case, tp),
    })
}

fn fold(tp: &mut Tape<f64>, a: Var, mean: bool) -> Var {
    if mean { grad!(tp; mean(a * 1)) } else { grad!(tp; sum(a * 1)) }
}

fn unary(op: &str, case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    let a = case.x(0);
    let number = |name: &str| case.number(name);
    Some(match op {
        "neg" => grad!(tp; -a * 1),
        "relu" => grad!(tp; relu(a) * 1),
        "sigmoid" => grad!(tp; sigmoid(a) * 1),
        "tanh" => grad!(tp; tanh(a) * 1),
        "exp" => grad!(tp; exp(a) * 1),
        "log" => grad!(tp; log(a) * 1),
        "sqrt" => grad!(tp; sqrt(a) * 1),
        "abs" => grad!(tp; abs(a) * 1),
        "gelu" => grad!(tp; gelu(a) * 1),
        "silu" => grad!(tp; silu(a) * 1),
        "softplus" => grad!(tp; softplus(a) * 1),
        "pow" => {
            let p = number("p");
            grad!(tp; pow(a, p) * 1)
        }
        "leaky_relu" => {
            let slope = number("slope");
            grad!(tp; leaky_relu(a, slope) * 1)
        }
        "clamp" => {
            let (lo, hi) = (number("lo"), number("hi"));
            grad!(tp; clamp(a, lo, hi) * 1)
        }
        _ => return None,
    })
}

/// The composite programs of the oracles, as a user writes them.
fn composite(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    let x = |k: usize| case.x(k);
    Some(match case.name() {
        "mul_self" => {
            let a = x(0);
            grad!(tp; a * a * 1)
        }
        "fanout_x2_plus_exp" => {
            let a = x(0);
            grad!(tp; sum(a * a + exp(a)))
        }
        "mlp_mse" => {
            let (input, w1, b1, w2, b2, t) = (x(0), x(1), x(2), x(3), x(4), x(5));
            grad!(tp; let h = relu(input @ w1 + b1); mse(h @ w2 + b2, t))
        }
        "mlp_cross_entropy" => {
            let (input, w1, b1, w2, b2) = (x(0), x(1), x(2), x(3), x(4));
            let targets = case.indices(5);
            grad!(tp; let h = relu(input @ w1 + b1); cross_entropy(h @ w2 + b2, targets))
        }
        "attention_single_head" => {
            let (input, wq, wk, wv, scale) = (x(0), x(1), x(2), x(3), case.number("scale"));
            grad!(tp; let q = input @ wq; let k = input @ wk; let v = input @ wv;
                let o = bmm(softmax(bmm(q, transpose(k)) * scale, -1), v);
                sum(o * o))
        }
        "transformer_mlp_block" => {
            let (input, gamma, beta, w1, b1, w2, eps) = (x(0), x(1), x(2), x(3), x(4), x(5), case.number("eps"));
            grad!(tp; sum(input + gelu(layer_norm(input, gamma, beta, eps) @ w1 + b1) @ w2))
        }
        "center_rows" => {
            let a = x(0);
            grad!(tp; (a - mean(a, 1, true)) * 1)
        }
        _ => return None,
    })
}

type Program = fn(&mut Tape<f64>, &[Var]) -> Var;

/// Each elementwise built-in in a region with every operator: `x` read
/// twice, `y` ([4]) broadcast against `x` ([3, 4]), a scalar divisor.
#[test]
fn every_builtin_inside_a_region_finite_differences() {
    let mut rng = Rng::new(61);
    let x = rng.away_from_zero(&[3, 4], 0.1).mapv(|v| if (v.abs() - 0.5).abs() < 0.05 { v * 1.3 } else { v });
    let positive = rng.uniform_array(&[3, 4], 0.5, 2.0);
    let y = rng.normal_array(&[4]);
    let cases: [(&str, Program, &ArrayD<f64>); 13] = [
        (
            "relu",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; relu(x) * y - x / 3.0)
            },
            &x,
        ),
        (
            "sigmoid",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; sigmoid(x * 2.0) * y - x)
            },
            &x,
        ),
        (
            "tanh",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; tanh(x + y) * x)
            },
            &x,
        ),
        (
            "exp",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; exp(x) / (y * y + 1) + x)
            },
            &x,
        ),
        (
            "log",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; log(x) * y + x * x)
            },
            &positive,
        ),
        (
            "sqrt",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; sqrt(x) * y - 1.0 / x)
            },
            &positive,
        ),
        (
            "abs",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; abs(x) * y + -x)
            },
            &x,
        ),
        (
            "gelu",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; gelu(x) * y - x)
            },
            &x,
        ),
        (
            "silu",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; silu(x) - y * x)
            },
            &x,
        ),
        (
            "softplus",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; softplus(x * 3.0) * y)
            },
            &x,
        ),
        (
            "pow",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; pow(x, 2.5) * y + pow(x, -1.5))
            },
            &positive,
        ),
        (
            "leaky_relu",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; leaky_relu(x, 0.1) * y)
            },
            &x,
        ),
        (
            "clamp",
            |tp, v| {
                let (x, y) = (v[0], v[1]);
                grad!(tp; clamp(x, -0.5, 0.5) * y + x)
            },
            &x,
        ),
    ];
    for (i, (name, program, input)) in cases.into_iter().enumerate() {
        check_finite_differences(name, &program, &[input.clone(), y.clone()], 70 + i as u64);
        let folded = move |tp: &mut Tape<f64>, v: &[Var]| {
            let (h, y) = (program(tp, v), v[1]);
            grad!(tp; sum(h * y))
        };
        check_finite_differences(&format!("sum({name} ...)"), &folded, &[input.clone(), y.clone()], 90 + i as u64);
    }
}

#[test]
fn operators_broadcasting_and_folds_finite_differences() {
    let mut rng = Rng::new(62);
    let (x, y, z) = (rng.normal_array(&[3, 4]), rng.uniform_array(&[4], 0.5, 2.0), rng.normal_array(&[3, 1]));
    let programs: [(&str, Program); 5] = [
        ("+ - * / and -", |tp, v| {
            let (x, y, z) = (v[0], v[1], v[2]);
            grad!(tp; (x + y) * (x - z) / (y * y) - -z)
        }),
        ("scalars on both sides", |tp, v| {
            let (x, y) = (v[0], v[1]);
            grad!(tp; 2.0 / y - (1.0 - x) * 0.5 + x / 4)
        }),
        ("a Rust scalar", |tp, v| {
            let (x, s) = (v[0], 0.75);
            grad!(tp; s * x - x / s + s)
        }),
        ("sum", |tp, v| {
            let (x, y, z) = (v[0], v[1], v[2]);
            grad!(tp; sum(tanh(x * y) + z))
        }),
        ("mean", |tp, v| {
            let (x, y, z) = (v[0], v[1], v[2]);
            grad!(tp; mean(sigmoid(x) * y - z * z))
        }),
    ];
    for (i, (name, program)) in programs.into_iter().enumerate() {
        check_finite_differences(name, &program, &[x.clone(), y.clone(), z.clone()], 80 + i as u64);
    }
}

/// The identities of the unfused ops hold to the bit through regions.
#[test]
fn fused_derivatives_hit_exact_known_values() {
    let x = integers(&[2, 3], -2.0);
    let sum_of_squares = grads_with(std::slice::from_ref(&x), &scalar(1.0), |tp, v| {
        let x = v[0];
        grad!(tp; sum(x * x))
    });
    assert_eq!(sum_of_squares[0], x.mapv(|v| 2.0 * v), "d/dx Σx² = 2x");
    let mean_twice = grads_with(&[integers(&[2, 4], 1.0)], &scalar(1.0), |tp, v| {
        let x = v[0];
        grad!(tp; mean(x * 2.0))
    });
    assert_eq!(mean_twice[0], ArrayD::from_elem(IxDyn(&[2, 4]), 0.25), "d/dx mean(2x) = 2/n");
    let at = array![-1.5, 0.0, 0.7, 2.0].into_dyn();
    let exp = grads_with(std::slice::from_ref(&at), &scalar(1.0), |tp, v| {
        let x = v[0];
        grad!(tp; sum(exp(x) * 1))
    });
    assert_eq!(exp[0], at.mapv(f64::exp), "d/dx exp(x) = exp(x)");
    let kinks = array![-1.0, 0.0, 1.0].into_dyn();
    let relu = grads_with(std::slice::from_ref(&kinks), &scalar(1.0), |tp, v| {
        let x = v[0];
        grad!(tp; sum(relu(x) * 2.0 + abs(x)))
    });
    assert_eq!(relu[0], array![-1.0, 0.0, 3.0].into_dyn(), "0 at both kinks, as PyTorch");
    let zero = array![0.0].into_dyn();
    let sigmoid = grads_with(&[zero], &scalar(1.0), |tp, v| {
        let x = v[0];
        grad!(tp; sum(sigmoid(x) + tanh(x)))
    });
    assert_eq!(sigmoid[0], array![1.25].into_dyn(), "σ'(0) + tanh'(0) = 1/4 + 1");
}

/// One node per region, where the unfused ops make one per operation.
#[test]
fn a_region_is_one_node() {
    let mut tape = Tape::<f32>::new();
    let x = tape.param(array![[0.5f32, -1.0], [2.0, 0.25]]);
    let w = tape.param(array![[1.0f32, 0.0], [0.5, -0.5]]);
    let b = tape.param(array![0.1f32, -0.1]);
    type Block = fn(&mut Tape<f32>, Var, Var, Var) -> Var;
    let programs: [Block; 6] = [
        |tp: &mut Tape<f32>, x, _, _| grad!(tp; tanh(x * 0.9 + 0.1)),
        |tp: &mut Tape<f32>, x, w, b| grad!(tp; relu(x @ w + b)),
        |tp: &mut Tape<f32>, x, _, _| grad!(tp; sum(sigmoid(x) * x)),
        |tp: &mut Tape<f32>, x, _, _| grad!(#[nofuse] tp; tanh(x * 0.9 + 0.1)),
        |tp: &mut Tape<f32>, x, w, b| grad!(#[nofuse] tp; relu(x @ w + b)),
        |tp: &mut Tape<f32>, x, _, _| grad!(#[nofuse] tp; sum(sigmoid(x) * x)),
    ];
    let counts: Vec<usize> = programs
        .iter()
        .map(|program| {
            let before = tape.len();
            program(&mut tape, x, w, b);
            tape.len() - before
        })
        .collect();
    assert_eq!(counts, [1, 2, 1, 3, 3, 3]);
    assert!(format!("{tape:?}").contains("fused sum(sigmoid(x) * x) []"), "{tape:?}");
}
