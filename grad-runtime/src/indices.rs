//! [`Indices`]: integer indices of any shape, as `g_embedding` takes its
//! ids and `g_cross_entropy` its class targets.

use ndarray::{ArrayBase, Data, Dimension, IxDyn};

/// Integer indices of any shape: a flat list (`&[usize]`, `&Vec<usize>`,
/// `&[usize; N]`, shaped `[len]`) or an ndarray array of `usize` of any
/// rank (`&Array2<usize>`, a view), read in row-major order.
///
/// [`g_embedding`](crate::g_embedding) gives one row per index, shaped as
/// the indices: ids `[B, T]` give `[B, T, D]`.
///
/// ```
/// use grad_runtime::{g_embedding, ndarray::array, Tape};
///
/// let mut tape = Tape::<f32>::new();
/// let table = tape.param(array![[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]);
/// let flat = g_embedding(&mut tape, table, &[2, 0]);
/// let batched = g_embedding(&mut tape, table, &array![[2, 0], [1, 1]]);
/// assert_eq!(tape.value(flat).shape(), &[2, 2]);
/// assert_eq!(tape.value(batched).shape(), &[2, 2, 2]);
/// ```
pub trait Indices {
    /// The shape of the indices: `[len]` for a list. (Inline up to four
    /// dims, so reading it allocates nothing.)
    fn index_shape(&self) -> IxDyn;
    /// Writes the indices in row-major order into `out`, which has exactly
    /// as many entries as the shape.
    fn copy_indices_into(&self, out: &mut [usize]);
}

impl Indices for [usize] {
    fn index_shape(&self) -> IxDyn {
        IxDyn(&[self.len()])
    }
    fn copy_indices_into(&self, out: &mut [usize]) {
        out.copy_from_slice(self);
    }
}

impl<const N: usize> Indices for [usize; N] {
    fn index_shape(&self) -> IxDyn {
        IxDyn(&[N])
    }
    fn copy_indices_into(&self, out: &mut [usize]) {
        out.copy_from_slice(self);
    }
}

impl Indices for Vec<usize> {
    fn index_shape(&self) -> IxDyn {
        self.as_slice().index_shape()
    }
    fn copy_indices_into(&self, out: &mut [usize]) {
        out.copy_from_slice(self);
    }
}

impl<S: Data<Elem = usize>, D: Dimension> Indices for ArrayBase<S, D> {
    fn index_shape(&self) -> IxDyn {
        IxDyn(self.shape())
    }
    fn copy_indices_into(&self, out: &mut [usize]) {
        match self.as_slice() {
            Some(contiguous) => out.copy_from_slice(contiguous),
            None => out.iter_mut().zip(self.iter()).for_each(|(o, &i)| *o = i),
        }
    }
}

/// A reference reads as what it refers to (`&&[usize]`, `&&Array2<usize>`).
impl<I: Indices + ?Sized> Indices for &I {
    fn index_shape(&self) -> IxDyn {
        (**self).index_shape()
    }
    fn copy_indices_into(&self, out: &mut [usize]) {
        (**self).copy_indices_into(out)
    }
}
