// What a newcomer writes: ndarray through grad_runtime, two gradients held
// at once, concat along a negative axis (as a `g_*` call and in grad!).
use grad_runtime::ndarray::{Array2, array};
use grad_runtime::{Tape, g_concat, g_mul, g_sum, grad};

fn main() {
    let mut tape = Tape::<f64>::new();
    let a = tape.param(array![[1.0, 2.0]]);
    let b = tape.param(array![[3.0, 4.0]]);
    let ab = g_mul(&mut tape, a, b);
    let loss = g_sum(&mut tape, ab);
    tape.backward(loss).unwrap();
    let [ga, gb] = tape.grads([a, b]);
    assert_eq!(ga, array![[3.0, 4.0]].into_dyn());
    assert_eq!(gb, array![[1.0, 2.0]].into_dyn());

    let axis: usize = 1;
    let by_usize = g_concat(&mut tape, a, b, axis);
    let by_last = g_concat(&mut tape, a, b, -1);
    let in_block = grad!(tape; a: [1, 2], b: [1, 2]; concat(a, b, -1));
    let rows = grad!(tape; concat(a, b, -2));
    let want: Array2<f64> = array![[1.0, 2.0, 3.0, 4.0]];
    for joined in [by_usize, by_last, in_block] {
        assert_eq!(tape.value(joined), want.view().into_dyn());
    }
    assert_eq!(tape.value(rows).shape(), &[2, 2]);
    assert!(tape.is_ok());
}
