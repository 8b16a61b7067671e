//! ONNX export (feature `onnx`): the forward graph a tape recorded, between
//! inputs and outputs you name, as an [ONNX](https://onnx.ai) model file
//! that onnxruntime, TensorRT, OpenVINO or tract can run.
//!
//! Record one forward pass as usual (a `grad!` block, `g_*` calls, `nn`
//! layers), then name its inputs and outputs. Parameters and buffers become
//! initializers under their [`named_params`](crate::Params::named_params)
//! names (the ones `save` writes); any other constant the graph reads (a
//! mask, position ids) is an initializer too.
//!
//! ```
//! use grad_runtime::{Tape, grad, nn::Mlp, onnx::Export, Rng};
//! use grad_runtime::ndarray::Array2;
//!
//! let mut tape = Tape::<f32>::new();
//! let model = Mlp::new(&mut tape, &mut Rng::new(0), &[4, 8, 3]);
//! let x = tape.constant(Array2::<f32>::zeros((2, 4)));
//! let logits = model.forward(&mut tape, x);
//! let probs = grad!(tape; softmax(logits, -1));
//! let bytes = Export::new(&mut tape)
//!     .params(&model)
//!     .input("x", x)
//!     .output("probs", probs)
//!     .batch("batch")
//!     .to_bytes()?;
//! assert!(bytes.len() > 4 * (4 * 8 + 8 * 3));
//! # Ok::<(), grad_runtime::GradError>(())
//! ```
//!
//! # What is exported
//!
//! Every forward op, as the ONNX operators of opset 17 that compute the
//! same thing: elementwise ops and activations (GELU's tanh form written
//! as its formula), matmul and bmm (`MatMul`), reductions, transpose,
//! permute, reshape, slice, concat, softmax and log_softmax, layer norm
//! (`LayerNormalization`), batch norm in evaluation mode (its running
//! statistics as constants), group norm, conv2d, max and average pooling,
//! embedding (`Gather`), gather (`GatherElements`), index_select, where and
//! masked_fill (`Where`), cumsum, mse and cross_entropy. A fused region of
//! a `grad!` block is written as its elementwise ops, one by one.
//!
//! What is not the same computation elsewhere is an error naming the node
//! and where it was recorded ([`ErrorKind::NotExportable`]),
//! never a different graph: dropout in training mode (its mask is random),
//! batch norm in training mode (the batch's statistics), a detached value
//! (the graph would hold its traced value), a custom op, an op of a
//! recorded gradient.
//!
//! # Batch size
//!
//! With [`batch`](Export::batch), the first dim of every input is a symbol,
//! so the model runs at any batch size: shapes the graph holds (a
//! reshape's target, a slice's end) are written relative to it. What
//! cannot follow the batch is refused: a reshape that splits it among other
//! dims, a constant traced at the batch's size combined with it, a loss
//! whose targets were traced. Without it, every dim is fixed.
//!
//! # Embedding ids
//!
//! `g_embedding` takes its ids as Rust data (a slice, or an ndarray array
//! of any rank), so the tape holds them as traced values;
//! [`ids_input`](Export::ids_input) makes the ids of one embedding a graph
//! input (`int64`, shaped as the ids were: `[tokens]`, `[batch, T]`)
//! instead, as a language model's token ids are. Position ids stay constants.

mod dims;
mod export;
mod graph;
mod ops;
mod proto;

use std::panic::Location;
use std::path::Path;

use crate::error::{ErrorKind, GradError};
use crate::{Float, Params, Tape, Var};

/// An export in the making: the tape, the named inputs and outputs, the
/// names of the parameters. Built with chained calls, then written with
/// [`to_bytes`](Export::to_bytes) or [`write`](Export::write).
///
/// The tape is borrowed mutably because a fused region is written as its
/// unfused ops, which the export records on the tape and drops again: the
/// tape's nodes, values and gradients are as they were afterwards.
pub struct Export<'t, T: Float> {
    tape: &'t mut Tape<T>,
    inputs: Vec<(String, Var)>,
    ids_inputs: Vec<(String, Var)>,
    outputs: Vec<(String, Var)>,
    names: Vec<(String, Var)>,
    batch: Option<String>,
    location: &'static Location<'static>,
}

/// What [`Export::to_bytes`] runs, compiled here for `f32` and `f64`
/// (`float.rs`).
pub(crate) fn bytes<T: Float>(export: Export<'_, T>) -> Result<Vec<u8>, GradError> {
    export::to_bytes(export)
}

impl<'t, T: Float> Export<'t, T> {
    /// An export of what `tape` recorded; nothing is named yet.
    #[track_caller]
    pub fn new(tape: &'t mut Tape<T>) -> Self {
        Export {
            tape,
            inputs: Vec::new(),
            ids_inputs: Vec::new(),
            outputs: Vec::new(),
            names: Vec::new(),
            batch: None,
            location: Location::caller(),
        }
    }

    /// Names the initializers of `model`'s parameters and buffers by their
    /// dotted paths (call it once per model the graph uses). A parameter
    /// of no named model is written as `param_<index>`.
    #[must_use]
    pub fn params(mut self, model: &impl Params) -> Self {
        self.names.extend(model.named_params());
        self.names.extend(model.named_buffers());
        self
    }

    /// Makes `var` a graph input called `name`: the graph computes from
    /// its value, not from what made it.
    #[must_use]
    pub fn input(mut self, name: &str, var: Var) -> Self {
        self.inputs.push((name.to_string(), var));
        self
    }

    /// Makes the ids of the embedding that produced `embedding` (the
    /// output of `g_embedding`, or of `nn::Embedding::forward`) a graph
    /// input called `name`, of type `int64`, shaped as the ids were (with
    /// [`batch`](Export::batch), its first dim is the symbol).
    #[must_use]
    pub fn ids_input(mut self, name: &str, embedding: Var) -> Self {
        self.ids_inputs.push((name.to_string(), embedding));
        self
    }

    /// Makes `var` a graph output called `name`.
    #[must_use]
    pub fn output(mut self, name: &str, var: Var) -> Self {
        self.outputs.push((name.to_string(), var));
        self
    }

    /// Writes the first dim of every input as the symbol `symbol`, so the
    /// model runs at other batch sizes (see the [module docs](self)).
    #[must_use]
    pub fn batch(mut self, symbol: &str) -> Self {
        self.batch = Some(symbol.to_string());
        self
    }

    /// The model as ONNX protobuf bytes.
    ///
    /// Errors: a poisoned tape; a stale or foreign handle; no output; a
    /// name used twice; an embedding handle that is not an embedding; a
    /// node that cannot be exported (named, with where it was recorded).
    pub fn to_bytes(self) -> Result<Vec<u8>, GradError> {
        T::onnx_bytes(self)
    }

    /// Writes the model to `path`, atomically (a crash leaves the old file
    /// or the new one, never a mix).
    pub fn write(self, path: impl AsRef<Path>) -> Result<(), GradError> {
        let location = self.location;
        let bytes = self.to_bytes()?;
        let path = path.as_ref();
        crate::io::atomic::write_atomic(path, &bytes).map_err(|e| {
            let kind = ErrorKind::Io { file: path.display().to_string().into(), message: e.to_string() };
            GradError::new("onnx::Export::write", kind, Vec::new(), location)
        })
    }
}
