//! `embedding`: rows of a table gathered by integer ids.

use std::panic::Location;

use ndarray::{Axis, Dimension};

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::TensorRef;
use crate::{Float, Indices, Tape, Var};

/// Rows of `table: [V, D]` gathered by `ids` (each in `0..V`), shaped as
/// the ids with `D` appended: a flat list `&[usize]` of `N` ids gives
/// `[N, D]`, an `Array2<usize>` `[B, T]` gives `[B, T, D]` (any
/// [`Indices`]: a slice, a `Vec`, an ndarray array or view of any rank). An
/// id out of range is an error naming its (row-major) position and value.
///
/// Gradient: each row of `g` added into the table row it came from (a
/// repeated id accumulates every use).
///
/// ```
/// use grad_runtime::{g_embedding, g_sum, Tape};
/// use ndarray::array;
///
/// let mut tape = Tape::<f32>::new();
/// let table = tape.param(array![[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]);
/// let rows = g_embedding(&mut tape, table, &[2, 0, 2]);
/// assert_eq!(tape.value(rows), array![[4.0, 5.0], [0.0, 1.0], [4.0, 5.0]].into_dyn());
/// let loss = g_sum(&mut tape, rows);
/// tape.backward(loss)?;
/// assert_eq!(tape.grad(table), array![[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]].into_dyn());
///
/// // Ids shaped [batch, time] give [batch, time, dim].
/// let tokens = array![[2, 0, 1], [1, 1, 0]];
/// let x = g_embedding(&mut tape, table, &tokens);
/// assert_eq!(tape.value(x).shape(), &[2, 3, 2]);
/// assert_eq!(tape.value(x)[[0, 1, 1]], 1.0); // row 0 of the table at [0, 1]
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn g_embedding<T: Float, I: Indices + ?Sized>(tp: &mut Tape<T>, table: Var, ids: &I) -> Var {
    const NAME: &str = "g_embedding";
    let location = Location::caller();
    let Some([table]) = tp.resolve(NAME, [table], location) else {
        return tp.poisoned_var();
    };
    let shape = tp.shape(table);
    if shape.len() != 2 {
        let kind = ErrorKind::Rank { expected: "2-D ([vocabulary, dim])", got: shape.len() };
        return tp.fail(NAME, kind, &[table], location);
    }
    let (vocabulary, dim) = (shape[0], shape[1]);
    let ids_shape = ids.index_shape();
    let ids = tp.copy_indices_of(ids);
    if let Some((position, &index)) = ids.iter().enumerate().find(|&(_, &id)| id >= vocabulary) {
        tp.recycle_indices(ids);
        let kind = ErrorKind::IndexOutOfRange { what: "id", position, index, len: vocabulary };
        return tp.fail(NAME, kind, &[table], location);
    }
    // The ids' shape with `dim` appended (inline up to four dims in all).
    let rank = ids_shape.ndim();
    let mut out_shape = ids_shape.insert_axis(Axis(rank));
    out_shape[rank] = dim;
    let Some(mut out) = tp.output(NAME, out_shape, &[table], location) else {
        tp.recycle_indices(ids);
        return tp.poisoned_var();
    };
    let rows = &tp.value_of(table).data;
    for (out_row, &id) in out.data.chunks_exact_mut(dim.max(1)).zip(&ids) {
        out_row.copy_from_slice(&rows[id * dim..(id + 1) * dim]);
    }
    tp.push(Op::Embedding { table, ids }, out)
}

pub(crate) fn embedding_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    table: NodeId,
    ids: &[usize],
) {
    let dim = sink.value(table).shape()[1];
    sink.contribute_zeroed(table, |c| {
        for (g_row, &id) in g.data.chunks_exact(dim.max(1)).zip(ids) {
            for (c, &v) in c[id * dim..(id + 1) * dim].iter_mut().zip(g_row) {
                *c += v;
            }
        }
    });
}
