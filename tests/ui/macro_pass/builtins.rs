//! Every built-in, in call and method form, computes what its runtime
//! function computes: same values, same gradients, bit for bit.

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::*;
use support::{assert_same, data};

fn positive(shape: &[usize], seed: u64) -> ndarray::ArrayD<f64> {
    data::<f64>(shape, seed).mapv(|v| v.abs() + 0.5)
}

fn main() {
    let m = [data::<f64>(&[4, 6], 1)];
    macro_rules! unary {
        ($($name:ident => $f:ident),* $(,)?) => {$(
            assert_same(stringify!($name), &m, |tp, v| { let x = v[0]; grad!(tp; $name(x)) }, |tp, v| $f(tp, v[0]));
            assert_same(concat!("x.", stringify!($name), "()"), &m, |tp, v| { let x = v[0]; grad!(tp; x.$name()) }, |tp, v| $f(tp, v[0]));
        )*};
    }
    unary!(relu => g_relu, sigmoid => g_sigmoid, tanh => g_tanh, exp => g_exp, abs => g_abs, gelu => g_gelu,
           silu => g_silu, softplus => g_softplus, sum => g_sum, mean => g_mean, transpose => g_transpose);
    let p = [positive(&[4, 6], 2)];
    assert_same("log", &p, |tp, v| { let x = v[0]; grad!(tp; log(x)) }, |tp, v| g_log(tp, v[0]));
    assert_same("sqrt", &p, |tp, v| { let x = v[0]; grad!(tp; x.sqrt()) }, |tp, v| g_sqrt(tp, v[0]));
    assert_same("pow", &p, |tp, v| { let x = v[0]; grad!(tp; pow(x, 3)) }, |tp, v| g_pow(tp, v[0], 3.0));
    assert_same("leaky_relu", &m, |tp, v| { let x = v[0]; grad!(tp; leaky_relu(x, 0.1)) }, |tp, v| g_leaky_relu(tp, v[0], 0.1));
    assert_same("clamp", &m, |tp, v| { let x = v[0]; grad!(tp; x.clamp(-0.5, 0.5)) }, |tp, v| g_clamp(tp, v[0], -0.5, 0.5));

    assert_same("sum over an axis", &m, |tp, v| { let x = v[0]; grad!(tp; sum(x, 1)) }, |tp, v| g_sum_axis(tp, v[0], 1, false));
    assert_same("sum keepdim", &m, |tp, v| { let x = v[0]; grad!(tp; x.sum(-1, true)) }, |tp, v| g_sum_axis(tp, v[0], -1, true));
    assert_same("mean over an axis", &m, |tp, v| { let x = v[0]; grad!(tp; mean(x, 0)) }, |tp, v| g_mean_axis(tp, v[0], 0, false));
    assert_same("max over an axis", &m, |tp, v| { let x = v[0]; grad!(tp; max(x, 1, true)) }, |tp, v| g_max_axis(tp, v[0], 1, true));
    assert_same("softmax", &m, |tp, v| { let x = v[0]; grad!(tp; softmax(x, -1)) }, |tp, v| g_softmax(tp, v[0], -1));
    assert_same("log_softmax", &m, |tp, v| { let x = v[0]; grad!(tp; x.log_softmax(0)) }, |tp, v| g_log_softmax(tp, v[0], 0));
    assert_same("reshape", &m, |tp, v| { let x = v[0]; grad!(tp; reshape(x, [2, 12])) }, |tp, v| g_reshape(tp, v[0], &[2, 12]));
    let (rows, cols) = (3usize, 8usize);
    assert_same("reshape to Rust sizes", &m, |tp, v| { let x = v[0]; grad!(tp; reshape(x, [rows, cols])) }, |tp, v| g_reshape(tp, v[0], &[3, 8]));
    assert_same("slice", &m, |tp, v| { let x = v[0]; grad!(tp; slice(x, [1, 0], [3, 4])) }, |tp, v| g_slice(tp, v[0], &[1, 0], &[3, 4]));

    let two = [data::<f64>(&[4, 6], 3), data::<f64>(&[4, 6], 4)];
    assert_same("mse", &two, |tp, v| { let (y, t) = (v[0], v[1]); grad!(tp; mse(y, t)) }, |tp, v| g_mse(tp, v[0], v[1]));
    assert_same("concat", &two, |tp, v| { let (a, b) = (v[0], v[1]); grad!(tp; concat(a, b, 1)) }, |tp, v| g_concat(tp, v[0], v[1], 1));
    let mm = [data::<f64>(&[2, 4, 3], 5), data::<f64>(&[3, 5], 6)];
    assert_same("matmul", &mm, |tp, v| { let (a, b) = (v[0], v[1]); grad!(tp; matmul(a, b)) }, |tp, v| g_matmul(tp, v[0], v[1]));
    let bm = [data::<f64>(&[2, 4, 3], 7), data::<f64>(&[2, 3, 5], 8)];
    assert_same("bmm", &bm, |tp, v| { let (a, b) = (v[0], v[1]); grad!(tp; bmm(a, b)) }, |tp, v| g_bmm(tp, v[0], v[1]));

    let targets = vec![0usize, 5, 2, 1];
    assert_same(
        "cross_entropy",
        &m,
        |tp, v| { let logits = v[0]; grad!(tp; cross_entropy(logits, &targets)) },
        |tp, v| g_cross_entropy(tp, v[0], &[0, 5, 2, 1]),
    );
    let ids = [3usize, 0, 3];
    assert_same("embedding", &m, |tp, v| { let table = v[0]; grad!(tp; embedding(table, &ids)) }, |tp, v| g_embedding(tp, v[0], &ids));
    let ln = [data::<f64>(&[4, 6], 9), data::<f64>(&[6], 10), data::<f64>(&[6], 11)];
    assert_same(
        "layer_norm",
        &ln,
        |tp, v| { let (x, g, b) = (v[0], v[1], v[2]); grad!(tp; layer_norm(x, g, b, 1e-5)) },
        |tp, v| g_layer_norm(tp, v[0], v[1], v[2], 1e-5),
    );
    for train in [false, true] {
        assert_same(
            "dropout",
            &m,
            |tp, v| { let x = v[0]; let mut rng = Rng::new(42); grad!(tp; dropout(x, 0.25, &mut rng, train)) },
            |tp, v| g_dropout(tp, v[0], 0.25, &mut Rng::new(42), train),
        );
    }
}
