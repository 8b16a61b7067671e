//! The ONNX graph an export builds: nodes in order, initializers, and
//! unique value names; plus the attribute constructors the ops use.

use std::collections::HashSet;

use super::proto::{
    ATTRIBUTE_FLOAT, ATTRIBUTE_INT, ATTRIBUTE_INTS, AttributeProto, BOOL, DOUBLE, FLOAT, INT64, NodeProto, TensorProto,
};
use crate::Float;
use crate::io::bytes::{encode, width_of};

/// A graph under construction.
#[derive(Default)]
pub(crate) struct Graph {
    pub(crate) nodes: Vec<NodeProto>,
    pub(crate) initializers: Vec<TensorProto>,
    names: HashSet<String>,
}

impl Graph {
    /// `stem`, or `stem_2`, `stem_3`, ... if taken: every value has its own name.
    pub(crate) fn fresh(&mut self, stem: &str) -> String {
        let mut name = stem.to_string();
        let mut k = 1;
        while self.names.contains(&name) {
            k += 1;
            name = format!("{stem}_{k}");
        }
        self.names.insert(name.clone());
        name
    }

    /// Appends a node of `op_type` with one output, named from `stem`.
    pub(crate) fn node(
        &mut self,
        op_type: &str,
        stem: &str,
        inputs: &[&str],
        attribute: Vec<AttributeProto>,
    ) -> String {
        let output = self.fresh(stem);
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.clone()],
            name: output.clone(),
            op_type: op_type.to_string(),
            attribute,
            doc_string: String::new(),
        });
        output
    }

    /// An initializer of the tape's element type.
    pub(crate) fn floats<T: Float>(&mut self, stem: &str, shape: &[usize], data: &[T]) -> String {
        let name = self.fresh(stem);
        let mut raw_data = Vec::with_capacity(data.len() * width_of::<T>());
        encode(data, &mut raw_data);
        self.initializers.push(TensorProto {
            dims: dims(shape),
            data_type: float_type::<T>(),
            name: name.clone(),
            raw_data,
        });
        name
    }

    /// A 0-D initializer of the tape's element type.
    pub(crate) fn scalar<T: Float>(&mut self, stem: &str, value: T) -> String {
        self.floats(stem, &[], &[value])
    }

    /// An `int64` initializer.
    pub(crate) fn ints(&mut self, stem: &str, shape: &[usize], data: &[i64]) -> String {
        let name = self.fresh(stem);
        let raw_data = data.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.initializers.push(TensorProto { dims: dims(shape), data_type: INT64, name: name.clone(), raw_data });
        name
    }

    /// A 1-D `int64` initializer (shapes, axes, starts).
    pub(crate) fn list(&mut self, stem: &str, data: &[i64]) -> String {
        self.ints(stem, &[data.len()], data)
    }

    /// A `bool` initializer: `true` where `data` is non-zero.
    pub(crate) fn mask<T: Float>(&mut self, stem: &str, shape: &[usize], data: &[T]) -> String {
        let name = self.fresh(stem);
        let raw_data = data.iter().map(|&x| u8::from(x != T::zero())).collect();
        self.initializers.push(TensorProto { dims: dims(shape), data_type: BOOL, name: name.clone(), raw_data });
        name
    }
}

/// ONNX's element type of `T`: `FLOAT` or `DOUBLE`.
pub(crate) fn float_type<T: Float>() -> i32 {
    if width_of::<T>() == 4 { FLOAT } else { DOUBLE }
}

fn dims(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

/// An `int` attribute.
pub(crate) fn int(name: &str, i: i64) -> AttributeProto {
    AttributeProto { name: name.to_string(), r#type: ATTRIBUTE_INT, i, ..AttributeProto::default() }
}

/// An `ints` attribute.
pub(crate) fn ints(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: ATTRIBUTE_INTS,
        ints: values.to_vec(),
        ..AttributeProto::default()
    }
}

/// A `float` attribute.
pub(crate) fn float(name: &str, f: f64) -> AttributeProto {
    AttributeProto { name: name.to_string(), r#type: ATTRIBUTE_FLOAT, f: f as f32, ..AttributeProto::default() }
}
