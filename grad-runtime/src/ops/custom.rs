//! `custom`: an op defined outside the library, with its own forward and
//! backward ([`CustomOp`]), recorded as one node like a built-in.

use std::fmt;
use std::panic::Location;
use std::sync::Arc;

use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn};

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::sink::GradSink;
use crate::tape::{Node, NodeId};
use crate::tensor::TensorRef;
use crate::{Float, Tape, Var};

/// An op of your own: its output shape, its forward and its backward.
/// [`g_custom`] records it on a tape as one node, like a built-in: its
/// errors poison the tape naming it, anomaly mode checks its output and
/// its gradients, and a step allocates nothing the op itself does not.
///
/// The methods are called once per node (one indirect call, never per
/// element). `inputs` gives each input's value and shape in the order the
/// caller passed them.
///
/// A straight-through estimator, forward `round(x)`, backward the identity:
///
/// ```
/// use grad_runtime::{g_custom, g_sum, CustomOp, Float, InputGrads, Inputs, Tape};
/// use grad_runtime::ndarray::{array, ArrayViewD, ArrayViewMutD, IxDyn};
///
/// struct StraightThrough;
///
/// impl<T: Float> CustomOp<T> for StraightThrough {
///     fn name(&self) -> &'static str {
///         "straight_through"
///     }
///     fn output_shape(&self, inputs: &Inputs<'_, T>) -> Result<IxDyn, String> {
///         match inputs.len() {
///             1 => Ok(IxDyn(inputs.shape(0))),
///             n => Err(format!("takes one input, got {n}")),
///         }
///     }
///     fn forward(&self, inputs: &Inputs<'_, T>, mut out: ArrayViewMutD<'_, T>) -> Result<(), String> {
///         out.zip_mut_with(&inputs.value(0), |o, &x| *o = x.round());
///         Ok(())
///     }
///     fn backward(&self, _: &Inputs<'_, T>, _: ArrayViewD<'_, T>, g: ArrayViewD<'_, T>, grads: &mut InputGrads<'_, '_, T>) {
///         grads.add(0, |mut dx| dx.assign(&g));
///     }
/// }
///
/// let mut tape = Tape::<f64>::new();
/// let x = tape.param(array![0.4, 1.6, -2.5]);
/// let y = g_custom(&mut tape, &StraightThrough, &[x]);
/// assert_eq!(tape.value(y), array![0.0, 2.0, -3.0].into_dyn());
/// let loss = g_sum(&mut tape, y);
/// tape.backward(loss)?;
/// assert_eq!(tape.grad(x), array![1.0, 1.0, 1.0].into_dyn());
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
///
/// A unit struct like the one above is passed as a plain reference (a
/// constant, so it lives for the whole program). An op that holds
/// settings chosen at run time is kept in an `Arc` (by the model, say)
/// and passed as a clone of it: `g_custom(tape, op.clone(), &[x])`
/// allocates nothing.
pub trait CustomOp<T: Float>: Send + Sync + 'static {
    /// The op's name, as errors, anomaly mode and the tape's listing give it.
    fn name(&self) -> &'static str;

    /// The output's shape for these inputs, or why they do not fit (the
    /// error poisons the tape, naming the op, the inputs' shapes and the
    /// caller's location). Called before the output is made.
    fn output_shape(&self, inputs: &Inputs<'_, T>) -> Result<IxDyn, String>;

    /// Writes the output (of the shape [`output_shape`](CustomOp::output_shape)
    /// gave; it starts as zeros), or says why these values cannot be
    /// computed (as a shape error does; no node is recorded).
    fn forward(&self, inputs: &Inputs<'_, T>, out: ArrayViewMutD<'_, T>) -> Result<(), String>;

    /// Hands each input its share of the gradient: `out` is the op's
    /// value, `grad` the gradient of the loss in it, and
    /// [`grads.add(i, ..)`](InputGrads::add) adds a contribution to input
    /// `i`'s gradient. Inputs that carry no gradient (constants) are
    /// skipped by `add`; [`wants`](InputGrads::wants) says which they are.
    fn backward(
        &self,
        inputs: &Inputs<'_, T>,
        out: ArrayViewD<'_, T>,
        grad: ArrayViewD<'_, T>,
        grads: &mut InputGrads<'_, '_, T>,
    );

    /// The backward written with tape ops (`g_*` calls on `tape`), so that
    /// it is differentiable again: what [`Tape::grad_graph`] records for
    /// the op. `inputs` are the op's inputs, `out` its value and `grad`
    /// the gradient in it; the result has one entry per input, `None` for
    /// an input that gets no gradient. The default, `None`, says the op
    /// has no such form: `grad_graph` through it is then an error naming
    /// the op (`backward` is unaffected).
    fn backward_graph(&self, tape: &mut Tape<T>, inputs: &[Var], out: Var, grad: Var) -> Option<Vec<Option<Var>>> {
        let _ = (tape, inputs, out, grad);
        None
    }
}

/// The inputs of a custom op, in the order they were passed: each one's
/// value, shape and row-major elements, borrowed from the tape.
pub struct Inputs<'a, T: Float> {
    nodes: &'a [Node<T>],
    ids: &'a [NodeId],
}

impl<'a, T: Float> Inputs<'a, T> {
    /// How many inputs there are.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when the op was given no input.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The shape of input `i`. Panics when `i >= len()`, as a slice index does.
    pub fn shape(&self, i: usize) -> &'a [usize] {
        self.nodes[self.ids[i]].value.shape()
    }

    /// The value of input `i`. Panics when `i >= len()`.
    pub fn value(&self, i: usize) -> ArrayViewD<'a, T> {
        self.nodes[self.ids[i]].value.view()
    }

    /// The elements of input `i` in row-major order. Panics when `i >= len()`.
    pub fn data(&self, i: usize) -> &'a [T] {
        &self.nodes[self.ids[i]].value.data
    }
}

/// Where a custom op's backward puts the gradients of its inputs.
pub struct InputGrads<'s, 'a, T: Float> {
    sink: &'s mut GradSink<'a, T>,
    ids: &'s [NodeId],
}

impl<T: Float> InputGrads<'_, '_, T> {
    /// Whether input `i` carries a gradient (a parameter, or computed from
    /// one); `add` does nothing for one that does not. Panics when `i` is
    /// not an input's position.
    pub fn wants(&self, i: usize) -> bool {
        self.sink.wants(self.ids[i])
    }

    /// Adds a contribution to input `i`'s gradient: `write` gets a buffer
    /// of zeros in the input's shape and writes (or adds) the contribution
    /// into it; it is then summed into the gradient. Not called when the
    /// input carries no gradient. Panics when `i` is not an input's position.
    pub fn add(&mut self, i: usize, write: impl FnOnce(ArrayViewMutD<'_, T>)) {
        let id = self.ids[i];
        let shape = self.sink.value(id).shape.clone();
        self.sink.contribute_zeroed(id, |c| {
            write(ArrayViewMutD::from_shape(shape, c).expect("invariant: the buffer has the input's elements"))
        });
    }
}

/// A custom op as a node holds it: a `'static` reference or a shared one.
#[derive(Clone)]
pub enum CustomRef<T: Float> {
    /// A reference that lives for the whole program (a unit struct, a `static`).
    Static(&'static dyn CustomOp<T>),
    /// A shared op (settings chosen at run time).
    Shared(Arc<dyn CustomOp<T>>),
}

impl<T: Float> CustomRef<T> {
    fn get(&self) -> &dyn CustomOp<T> {
        match self {
            CustomRef::Static(op) => *op,
            CustomRef::Shared(op) => op.as_ref(),
        }
    }
}

impl<T: Float, O: CustomOp<T>> From<&'static O> for CustomRef<T> {
    fn from(op: &'static O) -> Self {
        CustomRef::Static(op)
    }
}

impl<T: Float, O: CustomOp<T>> From<Arc<O>> for CustomRef<T> {
    fn from(op: Arc<O>) -> Self {
        CustomRef::Shared(op)
    }
}

/// A custom op's node: the op and its inputs (a pooled buffer).
#[derive(Clone)]
pub(crate) struct Custom<T: Float> {
    op: CustomRef<T>,
    pub(crate) inputs: Vec<NodeId>,
}

impl<T: Float> Custom<T> {
    pub(crate) fn name(&self) -> &'static str {
        self.op.get().name()
    }

    /// The op's backward as tape ops, if it has that form.
    pub(crate) fn backward_graph(
        &self,
        tp: &mut Tape<T>,
        inputs: &[Var],
        out: Var,
        g: Var,
    ) -> Option<Vec<Option<Var>>> {
        self.op.get().backward_graph(tp, inputs, out, g)
    }
}

impl<T: Float> fmt::Debug for Custom<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Custom").field("name", &self.name()).field("inputs", &self.inputs).finish()
    }
}

/// Records a custom op on `inputs`: checks the handles, asks the op for
/// its output's shape, runs its forward into a zeroed output and appends
/// one node, whose backward is the op's. Any number of inputs, in the
/// order the op's methods see them. See [`CustomOp`] for an example.
///
/// A handle that names no node, or an error from the op's `output_shape`
/// or `forward`, poisons the tape: the error names the op
/// ([`CustomOp::name`]), the inputs' shapes and the caller's location
/// (mark a wrapper function `#[track_caller]` to report its caller's).
#[track_caller]
pub fn g_custom<T: Float>(tp: &mut Tape<T>, op: impl Into<CustomRef<T>>, inputs: &[Var]) -> Var {
    let location = Location::caller();
    let op = op.into();
    let name = op.get().name();
    if !tp.is_ok() {
        return tp.poisoned_var();
    }
    let mut ids = tp.index_scratch(inputs.len());
    for (slot, &var) in ids.iter_mut().zip(inputs) {
        match tp.check(var) {
            Ok(id) => *slot = id,
            Err(kind) => {
                // The shapes the error names are those of the good handles before it.
                let good = inputs.iter().take_while(|&&v| tp.check(v).is_ok()).count();
                let var = tp.fail(name, kind, &ids[..good], location);
                tp.recycle_indices(ids);
                return var;
            }
        }
    }
    let shape = op.get().output_shape(&Inputs { nodes: tp.nodes(), ids: &ids });
    let shape = match shape {
        Ok(shape) => shape,
        Err(message) => return fail(tp, name, message, ids, location),
    };
    let Some(mut out) = tp.output(name, shape, &ids, location) else {
        tp.recycle_indices(ids);
        return tp.poisoned_var();
    };
    out.data.fill(T::zero());
    if let Err(message) = op.get().forward(&Inputs { nodes: tp.nodes(), ids: &ids }, out.view_mut()) {
        tp.recycle(out.data);
        return fail(tp, name, message, ids, location);
    }
    tp.push(Op::Custom(Custom { op, inputs: ids }), out)
}

/// Records the op's own error and returns the poisoned handle.
fn fail<T: Float>(
    tp: &mut Tape<T>,
    name: &'static str,
    message: String,
    ids: Vec<NodeId>,
    location: &'static Location<'static>,
) -> Var {
    let var = tp.fail(name, ErrorKind::Custom { message }, &ids, location);
    tp.recycle_indices(ids);
    var
}

pub(crate) fn custom_backward<T: Float>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    out: &crate::tensor::Tensor<T>,
    node: &Custom<T>,
) {
    let nodes = sink.nodes();
    let inputs = Inputs { nodes, ids: &node.inputs };
    let mut grads = InputGrads { sink, ids: &node.inputs };
    node.op.get().backward(&inputs, out.view(), g.view(), &mut grads);
}
