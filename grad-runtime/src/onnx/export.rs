//! The walk: which nodes the outputs need, each written once in tape order
//! (a topological order), leaves as initializers or graph inputs, fused
//! regions as their replayed unfused ops; then the model's bytes.

use std::collections::{HashMap, HashSet};
use std::panic::Location;

use prost::Message;

use super::Export;
use super::dims::Value;
use super::graph::{Graph, float_type};
use super::ops::{self, Emit, ids_key};
use super::proto::{
    Dimension, DimensionValue, GraphProto, INT64, ModelProto, OperatorSetIdProto, TensorShapeProto, TensorTypeProto,
    TypeProto, ValueInfoProto,
};
use crate::error::{ErrorKind, GradError};
use crate::ops::Op;
use crate::tape::NodeId;
use crate::{Float, Tape};

const NAME: &str = "onnx::Export";

/// ONNX's IR version 8 goes with opset 17, the first with `LayerNormalization`.
const IR_VERSION: i64 = 8;
const OPSET: i64 = 17;

pub(super) fn to_bytes<T: Float>(export: Export<'_, T>) -> Result<Vec<u8>, GradError> {
    let Export { tape, inputs, ids_inputs, outputs, names, batch, location } = export;
    let refuse = |kind: ErrorKind| GradError::new(NAME, kind, Vec::new(), location);
    if let Some(first) = tape.error() {
        return Err(refuse(ErrorKind::TapePoisoned { first: Box::new(first.clone()) }));
    }
    if outputs.is_empty() {
        return Err(refuse(ErrorKind::InvalidArgument {
            name: "outputs",
            value: 0.0,
            expected: "at least one output",
        }));
    }
    let mut seen = HashSet::new();
    for (name, _) in inputs.iter().chain(&ids_inputs).chain(&outputs) {
        if !seen.insert(name.as_str()) {
            return Err(refuse(ErrorKind::DuplicateName { name: name.clone() }));
        }
    }
    let resolve = |pairs: &[(String, crate::Var)]| -> Result<Vec<(String, NodeId)>, GradError> {
        pairs.iter().map(|(name, var)| Ok((name.clone(), tape.check(*var).map_err(refuse)?))).collect()
    };
    let (inputs, ids_inputs, outputs) = (resolve(&inputs)?, resolve(&ids_inputs)?, resolve(&outputs)?);
    let mut param_names = HashMap::new();
    for (name, var) in &names {
        param_names.insert(tape.check(*var).map_err(refuse)?, name.clone());
    }
    for &(_, id) in &ids_inputs {
        if !matches!(tape.op_of(id), Op::Embedding { .. }) {
            let reason = "ids_input names a value that no embedding produced";
            return Err(GradError::new(
                tape.op_of(id).name(),
                ErrorKind::NotExportable { reason },
                Vec::new(),
                location,
            ));
        }
    }
    // One symbol for the first dim of every input: they must agree.
    let first_dims = inputs.iter().map(|&(_, id)| tape.shape(id).first().copied().unwrap_or(1)).chain(
        // The ids' first dim is the embedding's (a 0-D id gives a 1-D row).
        ids_inputs.iter().map(|&(_, id)| match tape.shape(id) {
            [first, _, ..] => *first,
            _ => 1,
        }),
    );
    let traced_batch = match first_dims.collect::<Vec<_>>().as_slice() {
        [] => None,
        [first, rest @ ..] if batch.is_some() && rest.iter().any(|d| d != first) => {
            let reason = "the inputs' first dims differ, so they cannot share one batch symbol";
            return Err(GradError::new(NAME, ErrorKind::NotExportable { reason }, Vec::new(), location));
        }
        [first, ..] => Some(*first),
    };
    let recorded = tape.len();
    let mut walk = Walk { graph: Graph::default(), values: HashMap::new(), param_names, inputs: Vec::new() };
    walk.declare_inputs(tape, &inputs, &ids_inputs, batch.as_deref());
    let result = walk.run(tape, &outputs, recorded);
    // The replayed fused regions, dropped: the tape holds what it held.
    tape.drop_nodes_from(recorded);
    result?;
    let output = outputs
        .iter()
        .map(|(name, id)| {
            let value = &walk.values[id];
            // The value under the caller's name.
            walk.graph.fresh(name);
            walk.graph.nodes.push(super::proto::NodeProto {
                input: vec![value.name.clone()],
                output: vec![name.clone()],
                name: name.clone(),
                op_type: "Identity".into(),
                ..Default::default()
            });
            let symbol = batch
                .as_deref()
                .zip(traced_batch)
                .zip(value.dynamic)
                .map(|((symbol, traced), axis)| scaled_symbol(symbol, tape.shape(*id)[axis], traced));
            value_info(name, float_type::<T>(), tape.shape(*id), value.dynamic, symbol.as_deref())
        })
        .collect();
    let Walk { graph, inputs: input, .. } = walk;
    let graph = GraphProto { node: graph.nodes, name: "grad".into(), initializer: graph.initializers, input, output };
    let model = ModelProto {
        ir_version: IR_VERSION,
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: OPSET }],
        producer_name: "grad".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        doc_string: String::new(),
        graph: Some(graph),
    };
    Ok(model.encode_to_vec())
}

/// The export's state: the graph so far, the value of every written node.
struct Walk {
    graph: Graph,
    values: HashMap<NodeId, Value>,
    param_names: HashMap<NodeId, String>,
    inputs: Vec<ValueInfoProto>,
}

impl Walk {
    fn declare_inputs<T: Float>(
        &mut self,
        tape: &Tape<T>,
        inputs: &[(String, NodeId)],
        ids_inputs: &[(String, NodeId)],
        batch: Option<&str>,
    ) {
        let dynamic = batch.map(|_| 0);
        for (name, id) in inputs {
            let name = self.graph.fresh(name);
            self.inputs.push(value_info(&name, float_type::<T>(), tape.shape(*id), dynamic, batch));
            self.values.insert(*id, Value { name, dynamic });
        }
        for (name, id) in ids_inputs {
            let Op::Embedding { .. } = tape.op_of(*id) else { continue };
            let name = self.graph.fresh(name);
            // Shaped as the ids: the embedding's shape without its last dim.
            let shape = tape.shape(*id);
            let ids_shape = &shape[..shape.len() - 1];
            let dynamic = dynamic.filter(|_| !ids_shape.is_empty());
            self.inputs.push(value_info(&name, INT64, ids_shape, dynamic, batch));
            self.values.insert(ids_key(*id), Value { name, dynamic });
        }
    }

    /// Writes every node the outputs need, in tape order.
    fn run<T: Float>(
        &mut self,
        tape: &mut Tape<T>,
        outputs: &[(String, NodeId)],
        recorded: usize,
    ) -> Result<(), GradError> {
        let needed = self.needed(tape, outputs.iter().map(|&(_, id)| id), 0);
        for id in (0..recorded).filter(|&id| needed.contains(&id)) {
            self.write(tape, id)?;
        }
        Ok(())
    }

    /// The nodes at or past `start` that `roots` read, stopping at values
    /// already written (graph inputs, earlier nodes).
    fn needed<T: Float>(&self, tape: &Tape<T>, roots: impl Iterator<Item = NodeId>, start: usize) -> HashSet<NodeId> {
        let mut needed = HashSet::new();
        let mut stack: Vec<NodeId> = roots.collect();
        while let Some(id) = stack.pop() {
            if id < start || self.values.contains_key(&id) || !needed.insert(id) {
                continue;
            }
            match tape.op_of(id) {
                // The mask is written as a `bool` constant by the op itself.
                Op::Where { a, b, .. } => stack.extend([*a, *b]),
                op => stack.extend(op.inputs()),
            }
        }
        needed
    }

    /// Writes node `id`, whose inputs are written.
    fn write<T: Float>(&mut self, tape: &mut Tape<T>, id: NodeId) -> Result<(), GradError> {
        let value = match tape.op_of(id) {
            Op::Param | Op::Buffer | Op::Constant => {
                let stem = match (self.param_names.get(&id), tape.op_of(id)) {
                    (Some(name), _) => name.clone(),
                    (None, Op::Param) => format!("param_{id}"),
                    (None, Op::Buffer) => format!("buffer_{id}"),
                    (None, _) => format!("constant_{id}"),
                };
                let value = tape.value_of(id);
                Value { name: self.graph.floats(&stem, value.shape(), &value.data), dynamic: None }
            }
            Op::Fused(fused) => {
                let fused = fused.clone();
                let start = tape.len();
                let root = fused.replay(tape).filter(|_| tape.is_ok()).and_then(|root| tape.check(root).ok());
                let Some(root) = root else {
                    let reason = "its region could not be recorded again as unfused ops";
                    return Err(self.refusal(tape, id, reason));
                };
                if root >= start {
                    let needed = self.needed(tape, std::iter::once(root), start);
                    for new in (start..tape.len()).filter(|new| needed.contains(new)) {
                        self.write(tape, new)?;
                    }
                }
                self.values[&root].clone()
            }
            _ => {
                let mut emit = Emit { tape, values: &self.values, graph: &mut self.graph };
                ops::emit(&mut emit, id).map_err(|reason| self.refusal(tape, id, reason))?
            }
        };
        self.values.insert(id, value);
        Ok(())
    }

    /// Node `id` cannot be exported: its op, its inputs' shapes, where it was recorded.
    fn refusal<T: Float>(&self, tape: &Tape<T>, id: NodeId, reason: &'static str) -> GradError {
        let op = tape.op_of(id);
        let shapes = op.inputs().map(|input| tape.shape(input).to_vec()).collect();
        let location: &'static Location<'static> = tape.location_of(id);
        GradError::new(op.name(), ErrorKind::NotExportable { reason }, shapes, location)
    }
}

/// The symbol of an output dim that grows with the batch: `symbol` when
/// it is as large as the inputs' first dim was (`traced`), else the ratio
/// (`tokens/64`, `batch*8`): exact, as the dim is a fixed multiple of the
/// batch (what `dims.rs` checks).
fn scaled_symbol(symbol: &str, size: usize, traced: usize) -> String {
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a.max(1)
    };
    let g = gcd(size, traced);
    match (size / g, traced / g) {
        (1, 1) => symbol.to_string(),
        (n, 1) => format!("{symbol}*{n}"),
        (1, m) => format!("{symbol}/{m}"),
        (n, m) => format!("{symbol}*{n}/{m}"),
    }
}

/// A graph input's or output's name, element type and shape (the batch
/// axis as `symbol`).
fn value_info(
    name: &str,
    elem_type: i32,
    shape: &[usize],
    dynamic: Option<usize>,
    symbol: Option<&str>,
) -> ValueInfoProto {
    let dim = shape
        .iter()
        .enumerate()
        .map(|(axis, &size)| {
            let value = match (dynamic, symbol) {
                (Some(d), Some(symbol)) if d == axis => DimensionValue::DimParam(symbol.to_string()),
                _ => DimensionValue::DimValue(size as i64),
            };
            Dimension { value: Some(value) }
        })
        .collect();
    let tensor_type = TensorTypeProto { elem_type, shape: Some(TensorShapeProto { dim }) };
    ValueInfoProto { name: name.to_string(), r#type: Some(TypeProto { tensor_type: Some(tensor_type) }) }
}
