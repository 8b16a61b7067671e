//! [`GradError`]: what went wrong, in which op, on which shapes, called from where.

use std::fmt;
use std::panic::Location;

/// The first error raised on a tape, kept until [`Tape::reset_to`](crate::Tape::reset_to)
/// drops the episode that raised it.
///
/// It names the op (`g_matmul`, `Adam::add`, ...), the shapes of the inputs
/// it was given, what was wrong with them ([`ErrorKind`]) and the caller's
/// source location (every `g_*` function is `#[track_caller]`).
///
/// ```
/// use grad_runtime::{g_matmul, ErrorKind, Tape};
/// use ndarray::Array2;
///
/// let mut tape = Tape::<f32>::new();
/// let x = tape.constant(Array2::<f32>::zeros((64, 784)));
/// let w = tape.param(Array2::<f32>::zeros((783, 256)));
/// let y = g_matmul(&mut tape, x, w);
/// let err = tape.backward(y).unwrap_err();
/// assert_eq!(err.op(), "g_matmul");
/// assert_eq!(err.kind(), &ErrorKind::InnerDim { left: 784, right: 783 });
/// assert!(err.to_string().contains("[64, 784] and [783, 256]"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct GradError {
    op: &'static str,
    kind: ErrorKind,
    shapes: Vec<Vec<usize>>,
    location: &'static Location<'static>,
}

/// What was wrong. The variants carry the numbers the message quotes.
// Each variant's rustdoc says what its fields are; a line per field would
// repeat the field names (`left`, `right`, `axis`, `ndim`).
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Elementwise operands whose shapes do not broadcast (aligned from the
    /// right, each dim pair must be equal or contain a 1).
    Broadcast,
    /// Two shapes that must be equal are not (`g_mse`, a backward seed).
    ShapeMismatch,
    /// A matrix product whose inner dimensions differ.
    InnerDim { left: usize, right: usize },
    /// A batched product whose batch dimensions differ.
    BatchDim { left: usize, right: usize },
    /// An input with the wrong number of dimensions.
    Rank { expected: &'static str, got: usize },
    /// A value with more (or fewer) than one element where a scalar is needed.
    NotScalar { elements: usize },
    /// A maximum (or arg-max) over an axis of length 0.
    EmptyReduction { axis: usize },
    /// An axis outside `-ndim..ndim`.
    Axis { axis: isize, ndim: usize },
    /// Operands that must have the same number of dims do not.
    RankMismatch { left: usize, right: usize },
    /// `g_concat` operands that differ on an axis other than the joined one.
    ConcatDim { axis: usize, left: usize, right: usize },
    /// A slice whose `starts`/`stops` do not have one entry per axis.
    SliceArity { starts: usize, stops: usize, ndim: usize },
    /// A slice bound out of range on one axis (`start <= stop <= len` is required).
    SliceRange { axis: usize, start: usize, stop: usize, len: usize },
    /// A reshape that changes the element count.
    ElementCount { from: usize, to: usize },
    /// An integer index (class target, embedding id) outside `0..len`.
    IndexOutOfRange { what: &'static str, position: usize, index: usize, len: usize },
    /// `g_gather` indices longer than the input on a dim other than the
    /// gathered axis (each such dim of the indices must be at most the input's).
    IndexShape { dim: usize, index: usize, len: usize },
    /// A list of indices whose length does not match the batch it indexes.
    IndexCount { what: &'static str, got: usize, expected: usize },
    /// A size of a `grad!` dims list (`C / H`, `T - 1`) that is not a
    /// size at run time: `left op right` with `op` `/` (inexact, or by
    /// zero) or `-` (below zero).
    SizeArithmetic { size: &'static str, left: usize, op: char, right: usize },
    /// Indices of another shape than the one the op needs (`g_cross_entropy`'s
    /// N-D targets must have the logits' shape without the class axis).
    IndicesShape { what: &'static str, expected: Vec<usize>, got: Vec<usize> },
    /// A scalar argument outside its domain (a negative learning rate, a
    /// dropout probability of 1.5, ...).
    InvalidArgument { name: &'static str, value: f64, expected: &'static str },
    /// A handle made by a different tape.
    ForeignVar,
    /// A handle whose node was dropped by `reset_to`.
    StaleVar,
    /// The handle returned by a failed op, used after the failure was cleared.
    PoisonedVar,
    /// A mark taken on a different tape.
    ForeignMark,
    /// A mark whose nodes were already dropped by an earlier `reset_to`.
    StaleMark,
    /// A constant given where a parameter is required (an optimizer's `add`).
    NotAParameter,
    /// A parameter added to an optimizer twice.
    DuplicateParameter,
    /// An operation refused because the tape holds an earlier error.
    TapePoisoned { first: Box<GradError> },
    /// A result (or a parameter or constant copied in) too large to exist:
    /// the product of its non-zero dims exceeds `isize::MAX` (ndarray's
    /// limit), its elements would take more than `isize::MAX` bytes, or the
    /// allocator could not provide them. `reason` says which.
    TooLarge { shape: Vec<usize>, reason: &'static str },
    /// Anomaly mode ([`Tape::set_detect_anomaly`](crate::Tape::set_detect_anomaly)):
    /// an op's output (`input: None`), or the gradient its backward rule
    /// passed to its input number `input`, holds a NaN or an infinity;
    /// `value` is the first one (`"NaN"`, `"inf"` or `"-inf"`), at element
    /// `position` in row-major order.
    NonFinite { value: &'static str, position: usize, input: Option<usize> },
    /// An optimizer step refused because a parameter's gradient holds a NaN
    /// or an infinity: `parameter` is its name (its `add_params` path, or
    /// `#i` for the tape node `i` of one registered with `add`). Nothing was
    /// updated: a loss scaler's skipped step.
    NonFiniteGradient { parameter: Box<str>, value: &'static str, position: usize },
    /// An input whose real shape contradicts the shape declared in `grad!`:
    /// `declared` is the declaration with the sizes its symbols were bound
    /// to (`[B, 784] with B = 64`), `problem` what disagrees (`dim 1 is 783`).
    DeclaredShape { input: String, declared: String, problem: String },
    /// A convolution whose input has `channels` channels, where its weight
    /// `[O, per_group, kh, kw]` expects `per_group * groups`.
    ConvChannels { channels: usize, per_group: usize, groups: usize },
    /// A convolution's `groups` that does not divide its input channels or
    /// its output channels.
    ConvGroups { groups: usize, in_channels: usize, out_channels: usize },
    /// A convolution's bias that is not `[out_channels]`.
    ConvBias { out_channels: usize },
    /// A convolution or pooling window (its kernel spread by the dilation)
    /// that spans `window` positions, more than the padded input's `padded`.
    WindowTooLarge { window: usize, padded: usize },
    /// Reading or writing `file` failed; `message` is the system's reason.
    /// (Names are `Box<str>` in these variants, and dtypes and metadata
    /// keys `&'static str`, to keep `GradError` small: every `Result` of
    /// the crate carries one.)
    Io { file: Box<str>, message: String },
    /// `file` is not a safetensors file, or its header is damaged: `problem` says how.
    NotSafetensors { file: Box<str>, problem: String },
    /// `file` ends before the data of `tensor` does: its bytes end at
    /// offset `end` of the data section, which holds only `available` bytes.
    Truncated { file: Box<str>, tensor: Box<str>, end: u64, available: u64 },
    /// A tensor the model (or optimizer) needs that `file` does not hold.
    MissingTensor { file: Box<str>, tensor: Box<str> },
    /// A tensor in `file` that the model (or optimizer) does not have.
    UnexpectedTensor { file: Box<str>, tensor: Box<str> },
    /// A tensor of `file` whose shape differs from its parameter's.
    TensorShape { file: Box<str>, tensor: Box<str>, expected: Box<[usize]>, found: Box<[usize]> },
    /// A tensor of `file` whose element type differs from the tape's
    /// (safetensors' names: `F32`, `F64`, `BF16`, ...).
    TensorDtype { file: Box<str>, tensor: Box<str>, expected: &'static str, found: &'static str },
    /// An optimizer state file that does not fit this optimizer: `what`
    /// (the optimizer type, a metadata entry, ...) is `found` in the file
    /// where this optimizer needs `expected`.
    StateMismatch { file: Box<str>, what: &'static str, expected: &'static str, found: Box<str> },
    /// Two parameters with the same name (`layers.0.w`): files and
    /// optimizer states are keyed by name, so names must be unique.
    DuplicateName { name: String },
    /// A custom op ([`CustomOp`](crate::CustomOp)) refused its inputs:
    /// `message` is what its `output_shape` or `forward` said.
    Custom { message: String },
    /// [`Tape::set_value`](crate::Tape::set_value) was given an op's
    /// result: only leaves (parameters, buffers, constants) can be written.
    NotALeaf,
    /// Batch norm's running statistics must be buffers or constants: the
    /// op writes them in training, so they may carry no gradient.
    NotABuffer,
    /// [`Tape::grad_graph`](crate::Tape::grad_graph) met an op whose
    /// backward is not written as tape ops, so it cannot be differentiated
    /// again: `op` names it.
    NoGraphBackward { op: &'static str },
    /// An ONNX export (`grad_runtime::onnx`, feature `onnx`) met a node it
    /// cannot write as the same computation: the error's op and location
    /// are that node's, `reason` says why.
    NotExportable { reason: &'static str },
    /// [`Tape::backward`](crate::Tape::backward) or
    /// [`Tape::grad_graph`](crate::Tape::grad_graph) called inside
    /// [`Tape::inference`](crate::Tape::inference), which keeps no state
    /// for backward rules.
    InInference,
    /// [`Tape::grad`](crate::Tape::grad) of an intermediate value on a tape
    /// whose backward does not keep those
    /// ([`set_keep_intermediate_grads`](crate::Tape::set_keep_intermediate_grads)).
    GradNotKept,
    /// A [`Tape::checkpoint`](crate::Tape::checkpoint) segment returned a
    /// handle it did not compute (another tape's, a stale one), or, when
    /// recomputed in backward, a value of another shape than its first
    /// run's (the error's two shapes): a segment must compute the same
    /// thing every time it runs.
    Segment { reason: &'static str },
    /// A parameter received a gradient but is registered with no optimizer
    /// (nor frozen with [`Tape::freeze`](crate::Tape::freeze)): `name` is
    /// its tape position, `#index`.
    UnregisteredParameter { name: String },
    /// A data-parallel step (`grad_runtime::dist`, feature `mpi`) refused on every rank
    /// because these ranks failed before the gradient exchange (a poisoned
    /// tape, a refused step); the failing ranks return their own error.
    RankFailed { ranks: Vec<usize> },
    /// The parameters of these ranks are no longer bit-identical to rank 0's
    /// (a data-parallel checksum).
    ParamsDiverged { ranks: Vec<usize> },
    /// The ranks registered different parameters: `rank` has `found`
    /// parameter elements where rank 0 has `expected`.
    ParamsLayout { rank: usize, expected: u64, found: u64 },
    /// A precision this tape's element type does not compute in (bf16
    /// products on an `f64` tape).
    PrecisionUnsupported { precision: &'static str, dtype: &'static str },
}

impl GradError {
    pub(crate) fn new(
        op: &'static str,
        kind: ErrorKind,
        shapes: Vec<Vec<usize>>,
        location: &'static Location<'static>,
    ) -> GradError {
        GradError { op, kind, shapes, location }
    }

    /// The operation that failed, as the user called it (`g_matmul`, `Tape::backward`, `Adam::add`).
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// What was wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The shapes of the operation's tensor inputs, in argument order
    /// (empty when an input was itself a bad handle).
    pub fn shapes(&self) -> &[Vec<usize>] {
        &self.shapes
    }

    /// Where the failing operation was called from.
    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }
}

/// Writes a shape as `[64, 784]`; a scalar is `[]`.
pub(crate) struct ShapeDisplay<'a>(pub &'a [usize]);

impl fmt::Display for ShapeDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Broadcast => write!(
                f,
                "shapes cannot be broadcast together (aligned from the right, each pair of dims must be equal or one of them 1)"
            ),
            ErrorKind::ShapeMismatch => write!(f, "shapes must be equal"),
            ErrorKind::InnerDim { left, right } => {
                write!(f, "inner dimensions differ ({left} vs {right})")
            }
            ErrorKind::BatchDim { left, right } => {
                write!(f, "batch dimensions differ ({left} vs {right})")
            }
            ErrorKind::Rank { expected, got } => {
                write!(f, "expected a {expected} input, got a {got}-D one")
            }
            ErrorKind::NotScalar { elements } => {
                write!(f, "expected a one-element value, got {elements} elements")
            }
            ErrorKind::EmptyReduction { axis } => {
                write!(f, "cannot reduce axis {axis}: it has length 0")
            }
            ErrorKind::Axis { axis, ndim } => write!(
                f,
                "axis {axis} is out of range for a {ndim}-D input (valid: {} to {})",
                -(*ndim as isize),
                *ndim as isize - 1
            ),
            ErrorKind::RankMismatch { left, right } => {
                write!(f, "inputs must have the same number of dims, got {left}-D and {right}-D")
            }
            ErrorKind::ConcatDim { axis, left, right } => {
                write!(f, "dims other than the joined one must be equal, axis {axis} differs ({left} vs {right})")
            }
            ErrorKind::SliceArity { starts, stops, ndim } => write!(
                f,
                "needs one start and one stop per axis: got {starts} starts and {stops} stops for a {ndim}-D input"
            ),
            ErrorKind::SliceRange { axis, start, stop, len } => write!(
                f,
                "slice {start}..{stop} is out of range on axis {axis} of length {len} (need start <= stop <= {len})"
            ),
            ErrorKind::ElementCount { from, to } => {
                write!(f, "cannot reshape {from} elements into a shape of {to} elements")
            }
            ErrorKind::IndexOutOfRange { what, position, index, len } => write!(
                f,
                "{what} {index} at position {position} is out of range (valid: 0 to {})",
                len.saturating_sub(1)
            ),
            ErrorKind::IndexShape { dim, index, len } => write!(
                f,
                "the indices have {index} entries on dim {dim}, but the input has only {len} \
                 (off the gathered axis, each dim of the indices must be at most the input's)"
            ),
            ErrorKind::IndexCount { what, got, expected } => {
                write!(f, "got {got} {what}s, expected {expected}")
            }
            ErrorKind::SizeArithmetic { size, left, op: '/', right: 0 } => {
                write!(f, "the size `{size}` divides by zero ({left} / 0)")
            }
            ErrorKind::SizeArithmetic { size, left, op: '/', right } => {
                write!(
                    f,
                    "the size `{size}` is {left} / {right}, not a whole number ({left} = {} * {right} + {})",
                    left / right,
                    left % right
                )
            }
            ErrorKind::SizeArithmetic { size, left, op, right } => {
                write!(f, "the size `{size}` is {left} {op} {right}, below zero")
            }
            ErrorKind::IndicesShape { what, expected, got } => {
                let count = expected.iter().fold(1usize, |n, &d| n.saturating_mul(d));
                write!(f, "the {what} are shaped {got:?}, expected {expected:?} (or a flat list of {count})")
            }
            ErrorKind::InvalidArgument { name, value, expected } => {
                write!(f, "{name} = {value} is invalid: expected {expected}")
            }
            ErrorKind::ForeignVar => write!(f, "the Var handle belongs to a different tape"),
            ErrorKind::StaleVar => write!(
                f,
                "the Var handle is stale: its node was dropped by reset_to \
                 (make Vars after the mark again each step; make parameters before it)"
            ),
            ErrorKind::PoisonedVar => write!(f, "the Var handle was returned by an op that failed; it names no node"),
            ErrorKind::ForeignMark => write!(f, "the Mark belongs to a different tape"),
            ErrorKind::StaleMark => {
                write!(f, "the Mark is stale: an earlier reset_to already dropped the nodes it points after")
            }
            ErrorKind::NotAParameter => write!(
                f,
                "the Var is not a parameter (register trainable tensors with tape.param, not tape.constant or an op result)"
            ),
            ErrorKind::DuplicateParameter => {
                write!(f, "the parameter was already added to this optimizer")
            }
            ErrorKind::TapePoisoned { first } => {
                write!(f, "the tape holds an earlier error: {first}")
            }
            ErrorKind::TooLarge { shape, reason } => {
                write!(f, "a tensor of shape {} cannot be made: {reason}", ShapeDisplay(shape))
            }
            ErrorKind::NonFinite { value, position, input: None } => write!(
                f,
                "its output holds {value} at element {position} (anomaly detection found the first non-finite value)"
            ),
            ErrorKind::NonFinite { value, position, input: Some(input) } => write!(
                f,
                "its backward rule gave input {input} a gradient holding {value} at element {position} \
                 (anomaly detection found the first non-finite gradient)"
            ),
            ErrorKind::NonFiniteGradient { parameter, value, position } => write!(
                f,
                "the gradient of parameter `{parameter}` holds {value} at element {position}; \
                 the step was refused and no parameter or optimizer state changed"
            ),
            ErrorKind::DeclaredShape { input, declared, problem } => {
                write!(f, "input `{input}` was declared {declared}, but {problem}")
            }
            ErrorKind::ConvChannels { channels, per_group, groups } => write!(
                f,
                "the input has {channels} channels, but the weight takes {per_group} per group \
                 (its dim 1) times {groups} group(s) = {}",
                per_group.saturating_mul(*groups)
            ),
            ErrorKind::ConvGroups { groups, in_channels, out_channels } => write!(
                f,
                "groups = {groups} must divide both the input channels ({in_channels}) and the output \
                 channels ({out_channels})"
            ),
            ErrorKind::ConvBias { out_channels } => {
                write!(f, "the bias must be [{out_channels}], one entry per output channel (dim 0 of the weight)")
            }
            ErrorKind::WindowTooLarge { window, padded } => write!(
                f,
                "the window spans {window} positions (kernel with dilation), more than the padded input's \
                 {padded} (input plus padding on both sides)"
            ),
            ErrorKind::Io { file, message } => write!(f, "{file}: {message}"),
            ErrorKind::NotSafetensors { file, problem } => {
                write!(f, "{file} is not a valid safetensors file: {problem}")
            }
            ErrorKind::Truncated { file, tensor, end, available } => write!(
                f,
                "{file} is truncated: tensor `{tensor}` ends at byte {end} of the data section, \
                 which holds only {available} bytes"
            ),
            ErrorKind::MissingTensor { file, tensor } => write!(f, "tensor `{tensor}` is missing from {file}"),
            ErrorKind::UnexpectedTensor { file, tensor } => write!(
                f,
                "{file} holds tensor `{tensor}`, which is not a parameter here \
                 (allow it with `LoadOptions::allow_unexpected`)"
            ),
            ErrorKind::TensorShape { file, tensor, expected, found } => write!(
                f,
                "tensor `{tensor}` of {file} is {}, but the parameter is {}",
                ShapeDisplay(found),
                ShapeDisplay(expected)
            ),
            ErrorKind::TensorDtype { file, tensor, expected, found } => {
                write!(f, "tensor `{tensor}` of {file} holds {found} elements, but the tape holds {expected}")
            }
            ErrorKind::StateMismatch { file, what, expected, found } => {
                write!(f, "{file} does not fit this optimizer: its {what} is {found}, expected {expected}")
            }
            ErrorKind::Custom { message } => write!(f, "{message}"),
            ErrorKind::NotALeaf => write!(
                f,
                "the Var is an op's result; only parameters, buffers and constants can be written \
                 (their values are inputs of the graph, an op's is computed from them)"
            ),
            ErrorKind::NotABuffer => write!(
                f,
                "the running statistics must be buffers (tape.buffer) or constants: they are written in training, \
                 so they cannot be parameters or an op's result"
            ),
            ErrorKind::NotExportable { reason } => write!(f, "cannot be exported to ONNX: {reason}"),
            ErrorKind::InInference => write!(
                f,
                "called inside tape.inference, which records no state for backward rules: compute the loss \
                 outside the inference scope to differentiate it"
            ),
            ErrorKind::GradNotKept => write!(
                f,
                "the gradient of an intermediate value is not kept on this tape (set_keep_intermediate_grads(false) \
                 hands each back to the pool once backward has used it): read parameters' gradients, or keep them"
            ),
            ErrorKind::Segment { reason } => write!(f, "the checkpointed segment {reason}"),
            ErrorKind::NoGraphBackward { op } => write!(
                f,
                "the gradient passes through {op}, whose backward is not written as tape ops (a custom op's \
                 backward_graph), so it cannot be recorded for differentiating again (tape.backward still \
                 differentiates it once)"
            ),
            ErrorKind::DuplicateName { name } => {
                write!(f, "two parameters (or two inputs or outputs of an export) are named `{name}`")
            }
            ErrorKind::UnregisteredParameter { name } => write!(
                f,
                "parameter {name} received a gradient but no optimizer has it: register it (`opt.add` or \
                 `opt.add_params`), or keep it fixed on purpose with `tape.freeze(var)`"
            ),
            ErrorKind::RankFailed { ranks } => {
                write!(f, "rank(s) {ranks:?} failed before the gradient exchange; no rank updated its parameters")
            }
            ErrorKind::ParamsDiverged { ranks } => {
                write!(f, "the parameters of rank(s) {ranks:?} differ from rank 0's (checksum of their bits)")
            }
            ErrorKind::ParamsLayout { rank, expected, found } => write!(
                f,
                "rank {rank} registered {found} parameter elements where rank 0 has {expected}: every rank must \
                 build the same model and register it the same way"
            ),
            ErrorKind::PrecisionUnsupported { precision, dtype } => write!(
                f,
                "{precision} matrix products need an f32 tape, this one holds {dtype} (f64 tapes compute in f64)"
            ),
        }
    }
}

impl fmt::Display for GradError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.kind)?;
        if !self.shapes.is_empty() {
            let label = if self.shapes.len() == 1 { "input" } else { "inputs" };
            write!(f, "; {label} ")?;
            for (i, shape) in self.shapes.iter().enumerate() {
                if i > 0 {
                    write!(f, " and ")?;
                }
                write!(f, "{}", ShapeDisplay(shape))?;
            }
        }
        let loc = self.location;
        write!(f, " (at {}:{}:{})", loc.file(), loc.line(), loc.column())
    }
}

impl std::error::Error for GradError {}
