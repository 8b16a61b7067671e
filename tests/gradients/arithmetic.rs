//! `ops/arithmetic.rs`: `+ - * /` on every broadcasting pattern, in both
//! operand orders.

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn, array};

use crate::common::{Rng, check_finite_differences, grads_of_sum, integers};
use crate::oracle::Case;

/// Shape pairs covering every broadcasting pattern: equal shapes, a
/// missing leading axis on either side, stretched 1s on both sides, a
/// one-element operand and a scalar.
const BROADCAST_PAIRS: [(&[usize], &[usize]); 8] = [
    (&[3, 4], &[3, 4]),
    (&[4, 3], &[3]),
    (&[3], &[4, 3]),
    (&[2, 1, 3], &[4, 1]),
    (&[3, 1], &[1, 4]),
    (&[2, 3, 4], &[1, 3, 1]),
    (&[5], &[1]),
    (&[2, 3], &[]),
];

/// The oracle cases of this module's ops.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    let op: Binary = match case.op() {
        "add" => g_add,
        "sub" => g_sub,
        "mul" => g_mul,
        "div" => g_div,
        _ => return None,
    };
    Some(op(tp, case.x(0), case.x(1)))
}

type Binary = fn(&mut Tape<f64>, Var, Var) -> Var;

fn check_binary_broadcasting(name: &str, op: Binary, positive_rhs: bool) {
    let mut rng = Rng::new(7);
    for (i, (sa, sb)) in BROADCAST_PAIRS.iter().enumerate() {
        let a = rng.normal_array(sa);
        // Division is checked away from b = 0, where it is not smooth.
        let b = if positive_rhs { rng.uniform_array(sb, 0.5, 2.0) } else { rng.normal_array(sb) };
        let label = format!("{name} {sa:?} with {sb:?}");
        let program = move |tp: &mut Tape<f64>, v: &[Var]| op(tp, v[0], v[1]);
        check_finite_differences(&label, &program, &[a.clone(), b.clone()], i as u64);
        // The swapped order exercises broadcasting of the left operand.
        let swapped = move |tp: &mut Tape<f64>, v: &[Var]| op(tp, v[1], v[0]);
        let (a2, b2) = if positive_rhs { (rng.normal_array(sb), rng.uniform_array(sa, 0.5, 2.0)) } else { (b, a) };
        check_finite_differences(&format!("{label}, swapped"), &swapped, &[b2, a2], 100 + i as u64);
    }
}

#[test]
fn add_broadcasting_finite_differences() {
    check_binary_broadcasting("g_add", g_add, false);
}

#[test]
fn add_gradient_counts_how_often_each_element_was_used() {
    // d/db sum(a + b) for b broadcast over 4 rows is exactly 4.
    let g = grads_of_sum(&[integers(&[4, 3], 1.0), integers(&[3], 1.0)], |tp, v| g_add(tp, v[0], v[1]));
    assert_eq!(g[0], ArrayD::<f64>::ones(IxDyn(&[4, 3])));
    assert_eq!(g[1], ArrayD::from_elem(IxDyn(&[3]), 4.0));
    let g = grads_of_sum(&[integers(&[2, 1, 3], 1.0), integers(&[4, 1], 1.0)], |tp, v| g_add(tp, v[0], v[1]));
    assert_eq!(g[0], ArrayD::from_elem(IxDyn(&[2, 1, 3]), 4.0));
    assert_eq!(g[1], ArrayD::from_elem(IxDyn(&[4, 1]), 6.0));
}

#[test]
fn sub_broadcasting_finite_differences() {
    check_binary_broadcasting("g_sub", g_sub, false);
}

#[test]
fn sub_gradient_is_exactly_minus_the_use_count_for_the_right_operand() {
    let g = grads_of_sum(&[integers(&[3, 1], 1.0), integers(&[1, 4], 1.0)], |tp, v| g_sub(tp, v[0], v[1]));
    assert_eq!(g[0], ArrayD::from_elem(IxDyn(&[3, 1]), 4.0));
    assert_eq!(g[1], ArrayD::from_elem(IxDyn(&[1, 4]), -3.0));
    // x - x is constant: its gradient is exactly zero.
    let g = grads_of_sum(&[integers(&[5], 1.5)], |tp, v| g_sub(tp, v[0], v[0]));
    assert_eq!(g[0], ArrayD::<f64>::zeros(IxDyn(&[5])));
}

#[test]
fn mul_broadcasting_finite_differences() {
    check_binary_broadcasting("g_mul", g_mul, false);
}

#[test]
fn mul_of_a_tensor_with_itself_has_gradient_exactly_two_x() {
    let x = Rng::new(3).normal_array(&[3, 4]);
    let g = grads_of_sum(std::slice::from_ref(&x), |tp, v| g_mul(tp, v[0], v[0]));
    assert_eq!(g[0], &x * 2.0, "d/dx sum(x*x) must be 2x bit for bit");
}

#[test]
fn mul_broadcast_gradient_is_the_sum_of_the_other_operand() {
    // d/db sum(a * b) with b: [3] broadcast over a: [4, 3] = column sums of a (exact on integers).
    let a = integers(&[4, 3], 1.0);
    let g = grads_of_sum(&[a.clone(), array![2.0, 3.0, 5.0].into_dyn()], |tp, v| g_mul(tp, v[0], v[1]));
    assert_eq!(g[1], a.sum_axis(ndarray::Axis(0)));
    assert_eq!(g[0], array![[2.0, 3.0, 5.0]].broadcast((4, 3)).unwrap().into_dyn().to_owned());
}

#[test]
fn div_broadcasting_finite_differences() {
    check_binary_broadcasting("g_div", g_div, true);
}

#[test]
fn div_gradients_are_exact_reciprocals() {
    // d/da sum(a / b) = 1 / b; d/db = -a / b², exact on powers of two.
    let a = array![3.0, -5.0, 7.0].into_dyn();
    let b = array![2.0, 4.0, 0.5].into_dyn();
    let g = grads_of_sum(&[a, b], |tp, v| g_div(tp, v[0], v[1]));
    assert_eq!(g[0], array![0.5, 0.25, 2.0].into_dyn());
    assert_eq!(g[1], array![-0.75, 0.3125, -28.0].into_dyn());
    // x / x is constant: the two contributions cancel exactly.
    let g = grads_of_sum(&[integers(&[4], 1.0)], |tp, v| g_div(tp, v[0], v[0]));
    assert_eq!(g[0], ArrayD::<f64>::zeros(IxDyn(&[4])));
}

/// An operand of `+` or `-` whose gradient a later op already wrote: the
/// sum's rule adds `g` (or subtracts it) in place, and the result is the
/// f32 sum of the gradients each op gives alone, bit for bit. Sizes: one
/// thread, two halves, the pool.
#[test]
fn an_operand_of_add_or_sub_read_again_later_gets_the_sum_of_the_gradients() {
    fn gradient(x: &ArrayD<f32>, program: &dyn Fn(&mut Tape<f32>, Var, Var) -> Var) -> ArrayD<f32> {
        let mut tp = Tape::<f32>::new();
        let v = tp.param(x.clone());
        let c = tp.constant(x.mapv(|x| x * 0.5 + 1.0));
        let y = program(&mut tp, v, c);
        let loss = g_sum(&mut tp, y);
        tp.backward(loss).unwrap();
        tp.grad(v).to_owned()
    }
    let add = |tp: &mut Tape<f32>, v, c| g_add(tp, v, c);
    let sub = |tp: &mut Tape<f32>, v, c| g_sub(tp, c, v);
    let tanh = |tp: &mut Tape<f32>, v, _| g_tanh(tp, v);
    for len in [7, 1 << 16, 1 << 18] {
        let mut rng = Rng::new(len as u64);
        let x = ArrayD::from_shape_fn(IxDyn(&[len]), |_| rng.normal() as f32);
        for (name, first) in [("add", &add as &dyn Fn(&mut Tape<f32>, Var, Var) -> Var), ("sub", &sub)] {
            // `first` is recorded before `tanh`, so its backward runs after it.
            let both = |tp: &mut Tape<f32>, v, c| {
                let (f, t) = (first(tp, v, c), tanh(tp, v, c));
                let (f, t) = (g_sum(tp, f), g_sum(tp, t));
                g_add(tp, f, t)
            };
            let expected = gradient(&x, first) + gradient(&x, &tanh);
            let same = gradient(&x, &both).iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{name}, {len} elements");
        }
    }
}
