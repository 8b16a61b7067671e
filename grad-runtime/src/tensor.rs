//! The tape's storage for one value or gradient, and the inputs it copies in.

use ndarray::{ArrayBase, ArrayViewD, ArrayViewMutD, Data, Dimension, IxDyn};

use crate::Float;
use crate::error::ErrorKind;
use crate::pool::BufferPool;
use crate::size::{ALLOCATION, checked_len};

/// Why `view` cannot fail: every tensor is made by `Tape::output` or
/// `tensor_from_input`, which check its shape against ndarray's limits
/// (`size.rs`) and size its buffer to the shape.
const VIEWABLE: &str = "invariant: a tensor's shape was checked when it was made and its buffer holds its elements";

/// A row-major buffer and its shape. Every value and gradient on a tape is
/// one of these, so kernels work on plain slices and views are free.
#[derive(Clone, Debug)]
pub(crate) struct Tensor<T> {
    pub(crate) shape: IxDyn,
    pub(crate) data: Vec<T>,
}

impl<T: Float> Tensor<T> {
    /// Wraps a buffer whose length is the shape's element count.
    pub(crate) fn new(shape: IxDyn, data: Vec<T>) -> Self {
        debug_assert_eq!(shape.size(), data.len());
        Tensor { shape, data }
    }

    pub(crate) fn shape(&self) -> &[usize] {
        self.shape.slice()
    }

    pub(crate) fn len(&self) -> usize {
        self.data.len()
    }

    pub(crate) fn view(&self) -> ArrayViewD<'_, T> {
        ArrayViewD::from_shape(self.shape.clone(), &self.data).expect(VIEWABLE)
    }

    pub(crate) fn view_mut(&mut self) -> ArrayViewMutD<'_, T> {
        ArrayViewMutD::from_shape(self.shape.clone(), &mut self.data).expect(VIEWABLE)
    }
}

/// A tensor borrowed in parts: a node's gradient, read in its slot (which
/// keeps no shape of its own) with the shape of the node's value.
pub(crate) struct TensorRef<'a, T> {
    pub(crate) shape: &'a IxDyn,
    pub(crate) data: &'a [T],
}

impl<T: Float> TensorRef<'_, T> {
    pub(crate) fn shape(&self) -> &[usize] {
        self.shape.slice()
    }

    pub(crate) fn len(&self) -> usize {
        self.data.len()
    }

    pub(crate) fn view(&self) -> ArrayViewD<'_, T> {
        ArrayViewD::from_shape(self.shape.clone(), self.data).expect(VIEWABLE)
    }
}

/// Anything a tape can copy in as a parameter or constant: any ndarray
/// array (owned, a view, or a reference to one) of any dimension, or a
/// scalar (a 0-d tensor).
///
/// ```
/// use grad_runtime::Tape;
/// use ndarray::{array, Array3};
///
/// let mut tape = Tape::<f64>::new();
/// let w = array![[1.0, 2.0], [3.0, 4.0]];
/// let a = tape.param(&w);                    // by reference
/// let b = tape.constant(w.row(0));           // a view
/// let c = tape.constant(Array3::<f64>::zeros((2, 3, 4)));
/// let s = tape.constant(0.5);                // a scalar
/// assert_eq!(tape.value(a).shape(), &[2, 2]);
/// assert_eq!(tape.value(b).shape(), &[2]);
/// assert_eq!(tape.value(c).ndim(), 3);
/// assert_eq!(tape.scalar(s), 0.5);
/// ```
pub trait TensorInput<T> {
    /// The shape of the input.
    fn input_shape(&self) -> IxDyn;
    /// Writes the elements in row-major order into `out`, which has exactly
    /// as many elements as the shape.
    fn copy_into(self, out: &mut [T]);
}

impl<T: Float, S: Data<Elem = T>, D: Dimension> TensorInput<T> for &ArrayBase<S, D> {
    fn input_shape(&self) -> IxDyn {
        IxDyn(self.shape())
    }
    fn copy_into(self, out: &mut [T]) {
        match self.as_slice() {
            Some(contiguous) => out.copy_from_slice(contiguous),
            None => out.iter_mut().zip(self.iter()).for_each(|(o, &x)| *o = x),
        }
    }
}

impl<T: Float, S: Data<Elem = T>, D: Dimension> TensorInput<T> for ArrayBase<S, D> {
    fn input_shape(&self) -> IxDyn {
        IxDyn(self.shape())
    }
    fn copy_into(self, out: &mut [T]) {
        (&self).copy_into(out)
    }
}

macro_rules! scalar_input {
    ($($t:ty),*) => {$(
        impl TensorInput<$t> for $t {
            fn input_shape(&self) -> IxDyn {
                IxDyn(&[])
            }
            fn copy_into(self, out: &mut [$t]) {
                out[0] = self;
            }
        }
    )*};
}
scalar_input!(f32, f64);

/// Copies an input into a pooled buffer. Every ndarray array has a shape
/// a tensor can have, but `TensorInput` is open to other types: a shape no
/// tensor can have is refused (see `size.rs`) before any buffer is sized.
pub(crate) fn tensor_from_input<T: Float>(
    input: impl TensorInput<T>,
    pool: &mut BufferPool<T>,
) -> Result<Tensor<T>, ErrorKind> {
    let shape = input.input_shape();
    let len = checked_len::<T>(shape.slice())?;
    let mut data =
        pool.try_take(len).ok_or_else(|| ErrorKind::TooLarge { shape: shape.slice().to_vec(), reason: ALLOCATION })?;
    input.copy_into(&mut data);
    Ok(Tensor::new(shape, data))
}
