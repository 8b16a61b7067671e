//! `ops/embedding.rs`: rows of a table gathered by integer ids.

use grad_runtime::*;
use ndarray::{Array2, Array3, ArrayD, IxDyn, array};

use crate::common::{Rng, check_finite_differences, grads_with, integers};
use crate::oracle::Case;

/// The oracle cases of this module's op.
pub fn replay(case: &Case, tp: &mut Tape<f64>) -> Option<Var> {
    (case.op() == "embedding").then(|| g_embedding(tp, case.x(0), case.indices(1)))
}

#[test]
fn embedding_finite_differences_and_accumulation_of_repeated_ids() {
    let table = Rng::new(45).normal_array(&[5, 3]);
    let program = |tp: &mut Tape<f64>, v: &[Var]| g_embedding(tp, v[0], &[4, 0, 4, 2, 4]);
    check_finite_differences("g_embedding", &program, &[table], 6);
    let cot = integers(&[4, 2], 1.0);
    let g = grads_with(&[ArrayD::<f64>::zeros(IxDyn(&[3, 2]))], &cot, |tp, v| g_embedding(tp, v[0], &[2, 2, 0, 2]));
    assert_eq!(g[0], array![[5.0, 6.0], [0.0, 0.0], [1.0 + 3.0 + 7.0, 2.0 + 4.0 + 8.0]].into_dyn());
}

#[test]
fn embedding_of_n_d_ids_is_the_flat_result_reshaped() {
    let table = Rng::new(46).normal_array(&[5, 3]);
    let ids: Array2<usize> = array![[4, 0, 4], [2, 1, 4]];
    let program = |tp: &mut Tape<f64>, v: &[Var]| g_embedding(tp, v[0], &ids);
    check_finite_differences("g_embedding (2-D ids)", &program, std::slice::from_ref(&table), 8);
    let flat: Vec<usize> = ids.iter().copied().collect();
    let mut tape = Tape::<f64>::new();
    let t = tape.param(&table);
    let batched = g_embedding(&mut tape, t, &ids);
    let rows = g_embedding(&mut tape, t, &flat);
    assert_eq!(tape.value(batched).shape(), &[2, 3, 3]);
    assert_eq!(tape.value(batched).as_slice().unwrap(), tape.value(rows).as_slice().unwrap());
    // The gradient of every layout of the same ids is the same, bit for bit.
    let cot = integers(&[2, 3, 3], 1.0);
    let flat_cot = cot.clone().into_shape_with_order(IxDyn(&[6, 3])).unwrap();
    let want = grads_with(std::slice::from_ref(&table), &flat_cot, |tp, v| g_embedding(tp, v[0], &flat));
    let got = grads_with(std::slice::from_ref(&table), &cot, |tp, v| g_embedding(tp, v[0], &ids));
    assert_eq!(got, want);
    let fortran = ids.t().to_owned().reversed_axes(); // same ids, column-major storage
    let got = grads_with(std::slice::from_ref(&table), &cot, |tp, v| g_embedding(tp, v[0], &fortran.view()));
    assert_eq!(got, want);
    // Ids of rank 3 give rank 4; a single id (rank 0) gives one row [D].
    let mut tape = Tape::<f64>::new();
    let t = tape.param(&table);
    let deep = g_embedding(&mut tape, t, &Array3::<usize>::zeros((2, 1, 2)));
    assert_eq!(tape.value(deep).shape(), &[2, 1, 2, 3]);
    let one = g_embedding(&mut tape, t, &ndarray::arr0(3usize));
    assert_eq!(tape.value(one), table.index_axis(ndarray::Axis(0), 3));
}

#[test]
fn embedding_ids_out_of_range_are_errors_naming_the_id() {
    let mut tape = Tape::<f32>::new();
    let table = tape.param(ArrayD::<f32>::zeros(IxDyn(&[10, 4])));
    let rows = g_embedding(&mut tape, table, &[3, 9, 10, 2]);
    assert!(rows.is_poisoned());
    let error = tape.error().unwrap();
    assert_eq!(error.kind(), &ErrorKind::IndexOutOfRange { what: "id", position: 2, index: 10, len: 10 });
    assert_eq!(
        error.to_string().split(" (at").next().unwrap(),
        "g_embedding: id 10 at position 2 is out of range (valid: 0 to 9); input [10, 4]"
    );
    // In N-D ids, the position is row-major.
    let mut tape = Tape::<f32>::new();
    let table = tape.param(ArrayD::<f32>::zeros(IxDyn(&[10, 4])));
    g_embedding(&mut tape, table, &array![[3, 9], [10, 2]]);
    let kind = ErrorKind::IndexOutOfRange { what: "id", position: 2, index: 10, len: 10 };
    assert_eq!(tape.error().unwrap().kind(), &kind);
}
