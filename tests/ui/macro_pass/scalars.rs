//! Numbers and Rust scalar variables on either side of `+ - * /`, on f32
//! and f64 tapes, for a free `Var` (the expansion dispatches on the type)
//! and a declared one (the expansion calls the op directly). Each matches
//! its hand-written equivalent bit for bit:
//! `x + s` and `s + x` are `g_adds`, `x - s` is `g_adds(x, -s)`, `s - x` is
//! `g_adds(g_neg(x), s)`, `*` is `g_muls`, and division by or of a scalar
//! is `g_div` with a scalar constant (exactly the IEEE quotient, unlike
//! `g_muls(x, 1 / s)`).

#[path = "../macro_support.rs"]
mod support;

use grad_runtime::{g_adds, g_div, g_muls, g_neg, grad, Float, Tape, Var};
use ndarray::arr0;
use support::{assert_bits, assert_same, data};

type Program<T> = Box<dyn Fn(&mut Tape<T>, &[Var]) -> Var>;

fn constant<T: Float>(tape: &mut Tape<T>, s: f64) -> Var {
    tape.constant(arr0(T::from_f64(s)))
}

fn cases<T: Float>() -> Vec<(&'static str, Program<T>, Program<T>)> {
    let s = T::from_f64(0.75);
    let f = |v: f64| T::from_f64(v);
    vec![
        ("2.0 * x", Box::new(|tp, v| { let x = v[0]; grad!(tp; 2.0 * x) }), Box::new(move |tp, v| g_muls(tp, v[0], f(2.0)))),
        ("x * 2", Box::new(|tp, v| { let x = v[0]; grad!(tp; x * 2) }), Box::new(move |tp, v| g_muls(tp, v[0], f(2.0)))),
        ("x * -2.0", Box::new(|tp, v| { let x = v[0]; grad!(tp; x * -2.0) }), Box::new(move |tp, v| g_muls(tp, v[0], f(-2.0)))),
        ("x + 1", Box::new(|tp, v| { let x = v[0]; grad!(tp; x + 1) }), Box::new(move |tp, v| g_adds(tp, v[0], f(1.0)))),
        ("1 + x", Box::new(|tp, v| { let x = v[0]; grad!(tp; 1 + x) }), Box::new(move |tp, v| g_adds(tp, v[0], f(1.0)))),
        ("x - 0.5", Box::new(|tp, v| { let x = v[0]; grad!(tp; x - 0.5) }), Box::new(move |tp, v| g_adds(tp, v[0], f(-0.5)))),
        ("1.0 - x", Box::new(|tp, v| { let x = v[0]; grad!(tp; 1.0 - x) }), Box::new(move |tp, v| { let n = g_neg(tp, v[0]); g_adds(tp, n, f(1.0)) })),
        ("2.0 / x", Box::new(|tp, v| { let x = v[0]; grad!(tp; 2.0 / x) }), Box::new(|tp, v| { let c = constant(tp, 2.0); g_div(tp, c, v[0]) })),
        ("x / 3.0", Box::new(|tp, v| { let x = v[0]; grad!(tp; x / 3.0) }), Box::new(|tp, v| { let c = constant(tp, 3.0); g_div(tp, v[0], c) })),
        ("0.1 * x", Box::new(|tp, v| { let x = v[0]; grad!(tp; 0.1 * x) }), Box::new(move |tp, v| g_muls(tp, v[0], f(0.1)))),
        ("-x", Box::new(|tp, v| { let x = v[0]; grad!(tp; -x) }), Box::new(|tp, v| g_neg(tp, v[0]))),
        ("s * x", Box::new(move |tp, v| { let x = v[0]; grad!(tp; s * x) }), Box::new(move |tp, v| g_muls(tp, v[0], s))),
        ("x * s", Box::new(move |tp, v| { let x = v[0]; grad!(tp; x * s) }), Box::new(move |tp, v| g_muls(tp, v[0], s))),
        ("x + s", Box::new(move |tp, v| { let x = v[0]; grad!(tp; x + s) }), Box::new(move |tp, v| g_adds(tp, v[0], s))),
        ("s + x", Box::new(move |tp, v| { let x = v[0]; grad!(tp; s + x) }), Box::new(move |tp, v| g_adds(tp, v[0], s))),
        ("x - s", Box::new(move |tp, v| { let x = v[0]; grad!(tp; x - s) }), Box::new(move |tp, v| g_adds(tp, v[0], -s))),
        ("s - x", Box::new(move |tp, v| { let x = v[0]; grad!(tp; s - x) }), Box::new(move |tp, v| { let n = g_neg(tp, v[0]); g_adds(tp, n, s) })),
        ("x / s", Box::new(move |tp, v| { let x = v[0]; grad!(tp; x / s) }), Box::new(move |tp, v| { let c = tp.constant(arr0(s)); g_div(tp, v[0], c) })),
        ("s / x", Box::new(move |tp, v| { let x = v[0]; grad!(tp; s / x) }), Box::new(move |tp, v| { let c = tp.constant(arr0(s)); g_div(tp, c, v[0]) })),
        ("{ s * 2.0 } * x", Box::new(move |tp, v| { let x = v[0]; grad!(tp; { s * f(2.0) } * x) }), Box::new(move |tp, v| g_muls(tp, v[0], s * f(2.0)))),
        ("let k = 0.5 * 3.0", Box::new(|tp, v| { let x = v[0]; grad!(tp; let k = 0.5 * 3.0; k * x) }), Box::new(move |tp, v| g_muls(tp, v[0], f(1.5)))),
        // Declared: the kinds are known, the expansion calls g_adds & co. directly.
        ("declared 2.0 * x", Box::new(|tp, v| { let x = v[0]; grad!(tp; x: [_, _]; 2.0 * x) }), Box::new(move |tp, v| g_muls(tp, v[0], f(2.0)))),
        ("declared 1.0 - x", Box::new(|tp, v| { let x = v[0]; grad!(tp; x: [_, _]; 1.0 - x) }), Box::new(move |tp, v| { let n = g_neg(tp, v[0]); g_adds(tp, n, f(1.0)) })),
        ("declared x / s", Box::new(move |tp, v| { let x = v[0]; grad!(tp; x: [_, _]; x / s) }), Box::new(move |tp, v| { let c = tp.constant(arr0(s)); g_div(tp, v[0], c) })),
        ("declared x - s", Box::new(move |tp, v| { let x = v[0]; grad!(tp; x: [_, _]; x - s) }), Box::new(move |tp, v| g_adds(tp, v[0], -s))),
    ]
}

fn check<T: Float>() {
    let inputs = [data::<T>(&[4, 3], 1)];
    for (name, dsl, by_hand) in cases::<T>() {
        assert_same(name, &inputs, dsl, by_hand);
    }
    // x / 3 is the IEEE quotient of every element.
    let (value, _) = support::run(&inputs, |tp, v| { let x = v[0]; grad!(tp; x / 3) });
    assert_bits("x / 3", &value, &inputs[0].mapv(|v| v / T::from_f64(3.0)));
}

fn main() {
    check::<f32>();
    check::<f64>();
}
