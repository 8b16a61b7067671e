//! The indexing and masking built-ins (issue 13) compute what their runtime
//! functions compute: same values, same gradients, bit for bit.

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::*;
use ndarray::{Array2, array};
use support::{assert_same, data};

fn main() {
    let m = [data::<f64>(&[4, 6], 1)];
    let index = Array2::from_shape_fn((3, 6), |(i, j)| (i + 2 * j) % 4);
    assert_same("gather", &m, |tp, v| { let x = v[0]; grad!(tp; gather(x, 0, &index)) }, |tp, v| g_gather(tp, v[0], 0, &index));
    assert_same("x.gather", &m, |tp, v| { let x = v[0]; grad!(tp; x.gather(-2, &index)) }, |tp, v| g_gather(tp, v[0], -2, &index));
    let ids = [5usize, 0, 5];
    assert_same(
        "index_select",
        &m,
        |tp, v| { let x = v[0]; grad!(tp; x: [4, 6]; let y = index_select(x, -1, &ids); y * 2) },
        |tp, v| { let y = g_index_select(tp, v[0], -1, &ids); g_muls(tp, y, 2.0) },
    );
    assert_same("cumsum", &m, |tp, v| { let x = v[0]; grad!(tp; cumsum(x, 1)) }, |tp, v| g_cumsum(tp, v[0], 1));
    assert_same("x.cumsum", &m, |tp, v| { let x = v[0]; grad!(tp; x.cumsum(-2)) }, |tp, v| g_cumsum(tp, v[0], -2));
    let t = [data::<f64>(&[2, 3, 4], 2), data::<f64>(&[12, 5], 6)];
    assert_same(
        "flatten",
        &t,
        |tp, v| { let (x, w) = (v[0], v[1]); grad!(tp; x: [B, 3, 4], w: [12, 5]; flatten(x, 1) @ w) },
        |tp, v| { let f = g_flatten(tp, v[0], 1); g_matmul(tp, f, v[1]) },
    );

    let ab = [data::<f64>(&[4, 6], 3), data::<f64>(&[6], 4)];
    let mask = Array2::from_shape_fn((4, 6), |(i, j)| (i * j) % 3 == 0);
    assert_same("where", &ab, |tp, v| { let (a, b) = (v[0], v[1]); grad!(tp; where(&mask, a, b)) }, |tp, v| g_where(tp, &mask, v[0], v[1]));
    let future = array![[false, true, true], [false, false, true], [false, false, false]];
    let s = [data::<f64>(&[2, 3, 3], 5)];
    assert_same(
        "masked_fill then softmax",
        &s,
        |tp, v| { let x = v[0]; grad!(tp; softmax(x.masked_fill(&future, f64::NEG_INFINITY), -1)) },
        |tp, v| { let y = g_masked_fill(tp, v[0], &future, f64::NEG_INFINITY); g_softmax(tp, y, -1) },
    );
}
