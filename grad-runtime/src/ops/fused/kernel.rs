//! [`Kernel`], the trait of the type `grad!` writes for each fused region,
//! and [`backward`], the rule a fused node keeps as a function pointer
//! (monomorphised for its kernel, so a node pays one indirect call, never
//! one per element).

use std::panic::Location;

use ndarray::{Dimension, IxDyn};

use super::check::Scalars;
use super::loops::{self, Input, Source};
use super::plan::{self, Step, StepOp};
use super::{Fused, SCALAR_LEAF, unfused};
use crate::broadcast::{broadcast_shapes, reduce_into};
use crate::dsl::Operand;
use crate::ops::sink::GradSink;
use crate::tape::NodeId;
use crate::tensor::{Tensor, TensorRef};
use crate::{Float, Tape, Var};

/// A fused region of `grad!`: `N` inputs, `P` run-time scalar parameters
/// (numbers written in the region are constants of its code), the
/// per-element value and the per-element gradient of every input, derived
/// by the macro. Implemented by the zero-sized types the expansion of a
/// `grad!` block declares; not meant to be written by hand.
pub trait Kernel<T: Float, const N: usize, const P: usize>: Sync + 'static {
    /// The region as the tape lists it: `fused tanh(h * 0.9 + 0.1)`.
    const NAME: &'static str;
    /// The region's operations in the order the unfused ops would run;
    /// a folded `sum` or `mean` is the last.
    const STEPS: &'static [Step];
    /// The source location of each step's operator or function name, for
    /// its errors.
    const SITES: &'static [&'static Location<'static>];
    /// Whether `STEPS` is a well-formed plan, decided at compile time.
    const WELL_FORMED: bool = plan::well_formed(Self::STEPS, N, P) && Self::SITES.len() == Self::STEPS.len();
    /// The folded `sum` or `mean` that ends the region, if any.
    const FOLD: Option<StepOp> = plan::fold(Self::STEPS);
    /// Whether the region ends in a fold: its backward recomputes its
    /// value rather than reading it.
    const FOLDED: bool = Self::FOLD.is_some();

    /// Constant `k` (`Src::Const(k)` in the plan): a number the kernel's
    /// code holds; NaN for a `k` it does not have.
    fn constant(k: usize) -> T {
        let _ = k;
        T::nan()
    }

    /// The value of the region's elementwise root at one element.
    fn forward(x: [T; N], p: [T; P]) -> T;

    /// Each input's gradient at one element, `g` times the input's partial
    /// derivative, where `y` is the root's value there and `g` its gradient.
    fn backward(x: [T; N], y: T, g: T, p: [T; P]) -> [T; N];
}

/// The backward rule of kernel `K`, which a fused node keeps as a
/// function pointer: hands the node's gradient `g` to its inputs (`out`
/// is the node's value).
pub(crate) fn backward<T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize>(
    sink: &mut GradSink<'_, T>,
    g: &TensorRef<'_, T>,
    out: &Tensor<T>,
    node: &Fused<T>,
) {
    let mut inputs = [Input { data: &[][..], shape: &[][..] }; N];
    let Some(params) = node_inputs::<T, N, P>(sink, node, &mut inputs) else { return };
    let folded_shape = match K::FOLD {
        None => None,
        Some(_) => match broadcast_all(&inputs) {
            Some(shape) => Some(shape),
            None => return,
        },
    };
    let shape = folded_shape.as_ref().map_or(out.shape(), |s| s.slice());
    let n = shape.iter().product();
    let (y, seed) = match K::FOLD {
        Some(StepOp::Mean) => (None, Source::Splat(g.data[0] / T::from_usize(n))),
        Some(_) => (None, Source::Splat(g.data[0])),
        None => (Some(out.data.as_slice()), Source::Slice(g.data)),
    };
    let ids = node.leaves();
    let wanted: [bool; N] = std::array::from_fn(|k| ids[k] != SCALAR_LEAF && sink.wants(ids[k]));
    let mut partials: [Vec<T>; N] =
        std::array::from_fn(|k| if wanted[k] { sink.scratch_for(ids[k], n) } else { Vec::new() });
    let outs = partials.each_mut().map(|buffer| buffer.as_mut_slice());
    loops::backward::<T, K, N, P>(&inputs, params, shape, y, seed, outs);
    for (k, partial) in partials.into_iter().enumerate() {
        if wanted[k] {
            contribute(sink, ids[k], partial, shape);
        }
    }
}

/// The node's scalar parameters, and its inputs as the loops read them (a
/// Rust scalar as a one-element input of shape `[]`) written to `inputs`:
/// in place, as returning them would copy them back at once from where
/// they were just written, a stall on every node (see `tape/append.rs`).
/// Kernel `K`'s region recorded again as the unfused ops, from a fused
/// node's leaves and scalars: the root of those ops, whose value is the
/// node's (the kernels compute what the unfused ops compute). What
/// `Tape::grad_graph` differentiates for a fused node.
pub(crate) fn replay<T: Float, K: Kernel<T, N, P>, const N: usize, const P: usize>(
    tp: &mut Tape<T>,
    node: &Fused<T>,
) -> Option<Var> {
    if node.leaves().len() != N || node.scalars.len() < P {
        return None;
    }
    let params: [T; P] = std::array::from_fn(|k| node.scalars[k]);
    let mut next_scalar = P;
    let mut leaves = [Operand::Scalar(T::zero()); N];
    for (leaf, &id) in leaves.iter_mut().zip(node.leaves()) {
        *leaf = if id == SCALAR_LEAF {
            let s = *node.scalars.get(next_scalar)?;
            next_scalar += 1;
            Operand::Scalar(s)
        } else {
            Operand::Var(tp.var_at(id))
        };
    }
    let scalars = Scalars { params: &params, constant: K::constant };
    Some(unfused::run(tp, K::STEPS, &leaves, scalars))
}

fn node_inputs<'a, T: Float, const N: usize, const P: usize>(
    sink: &GradSink<'a, T>,
    node: &'a Fused<T>,
    inputs: &mut [Input<'a, T>; N],
) -> Option<[T; P]> {
    if node.leaves().len() != N || node.scalars.len() < P {
        return None;
    }
    let params: [T; P] = std::array::from_fn(|k| node.scalars[k]);
    let mut next_scalar = P;
    for (input, &id) in inputs.iter_mut().zip(node.leaves()) {
        *input = if id == SCALAR_LEAF {
            let data = node.scalars.get(next_scalar..next_scalar + 1)?;
            next_scalar += 1;
            Input { data, shape: &[] }
        } else {
            let value = sink.value(id);
            Input { data: &value.data, shape: value.shape() }
        };
    }
    Some(params)
}

/// The shape every input broadcasts to: the region's elementwise shape.
pub(crate) fn broadcast_all<T>(inputs: &[Input<'_, T>]) -> Option<IxDyn> {
    let largest = inputs.iter().map(|x| x.shape).max_by_key(|s| s.len()).unwrap_or(&[]);
    if inputs.iter().all(|x| x.shape == largest || x.shape.is_empty()) {
        return Some(IxDyn(largest));
    }
    inputs.iter().try_fold(IxDyn(&[]), |shape, input| broadcast_shapes(shape.slice(), input.shape))
}

/// Adds an input's partials (laid out on the region's shape `on`) to its
/// gradient, summed back to its shape if it was broadcast: what
/// `GradSink::contribute_broadcast` does for an unfused op.
fn contribute<T: Float>(sink: &mut GradSink<'_, T>, id: NodeId, partial: Vec<T>, on: &[usize]) {
    let shape = sink.value(id).shape();
    // Axis by axis, not `==`: slice equality is a call to `bcmp`, which
    // costs more than the whole comparison of a few axes.
    if shape.len() == on.len() && shape.iter().zip(on).all(|(a, b)| a == b) {
        sink.add(id, partial);
        return;
    }
    sink.contribute_zeroed(id, |c| reduce_into(&partial, on, shape, c));
    sink.recycle(partial);
}
