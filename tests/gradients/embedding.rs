//! `ops/embedding.rs`: rows of a table gathered by integer ids.

use grad_runtime::*;
use ndarray::{ArrayD, IxDyn, array};

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
}
