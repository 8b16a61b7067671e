//! Operators bind as in NumPy: unary `-` tightest, then `* / @` (equal,
//! left-associative), then `+ -` (left-associative); parentheses group.

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::{g_add, g_div, g_matmul, g_mul, g_neg, g_sub, grad};
use support::{assert_same, data};

fn main() {
    let inputs = [data::<f64>(&[3, 3], 1), data(&[3, 3], 2), data(&[3, 3], 3)];
    assert_same(
        "a + b * c is a + (b * c)",
        &inputs,
        |tp, v| { let (a, b, c) = (v[0], v[1], v[2]); grad!(tp; a + b * c) },
        |tp, v| { let bc = g_mul(tp, v[1], v[2]); g_add(tp, v[0], bc) },
    );
    assert_same(
        "a - b - c is (a - b) - c",
        &inputs,
        |tp, v| { let (a, b, c) = (v[0], v[1], v[2]); grad!(tp; a - b - c) },
        |tp, v| { let ab = g_sub(tp, v[0], v[1]); g_sub(tp, ab, v[2]) },
    );
    assert_same(
        "a / b / c is (a / b) / c",
        &inputs,
        |tp, v| { let (a, b, c) = (v[0], v[1], v[2]); grad!(tp; a / b / c) },
        |tp, v| { let ab = g_div(tp, v[0], v[1]); g_div(tp, ab, v[2]) },
    );
    assert_same(
        "a @ b * c is (a @ b) * c",
        &inputs,
        |tp, v| { let (a, b, c) = (v[0], v[1], v[2]); grad!(tp; a @ b * c) },
        |tp, v| { let ab = g_matmul(tp, v[0], v[1]); g_mul(tp, ab, v[2]) },
    );
    assert_same(
        "a * b @ c is (a * b) @ c",
        &inputs,
        |tp, v| { let (a, b, c) = (v[0], v[1], v[2]); grad!(tp; a * b @ c) },
        |tp, v| { let ab = g_mul(tp, v[0], v[1]); g_matmul(tp, ab, v[2]) },
    );
    assert_same(
        "-a @ b is (-a) @ b",
        &inputs,
        |tp, v| { let (a, b) = (v[0], v[1]); grad!(tp; -a @ b) },
        |tp, v| { let na = g_neg(tp, v[0]); g_matmul(tp, na, v[1]) },
    );
    assert_same(
        "a - -b",
        &inputs,
        |tp, v| { let (a, b) = (v[0], v[1]); grad!(tp; a - -b) },
        |tp, v| { let nb = g_neg(tp, v[1]); g_sub(tp, v[0], nb) },
    );
    assert_same(
        "(a + b) @ c",
        &inputs,
        |tp, v| { let (a, b, c) = (v[0], v[1], v[2]); grad!(tp; (a + b) @ c) },
        |tp, v| { let ab = g_add(tp, v[0], v[1]); g_matmul(tp, ab, v[2]) },
    );
    assert_same(
        "a + b @ c - a / b is (a + (b @ c)) - (a / b)",
        &inputs,
        |tp, v| { let (a, b, c) = (v[0], v[1], v[2]); grad!(tp; a + b @ c - a / b) },
        |tp, v| {
            let bc = g_matmul(tp, v[1], v[2]);
            let sum = g_add(tp, v[0], bc);
            let ab = g_div(tp, v[0], v[1]);
            g_sub(tp, sum, ab)
        },
    );
}
