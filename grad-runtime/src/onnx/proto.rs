//! The part of ONNX's protobuf schema an export writes, as `prost`
//! messages. Field numbers and types are those of `onnx/onnx.proto`
//! (ONNX 1.23, IR version 8 and later keep them); fields an export never
//! sets are left out, which protobuf allows (a reader sees them unset).

use prost::Message;

/// `ModelProto`: the file.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ModelProto {
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    #[prost(string, tag = "2")]
    pub producer_name: String,
    #[prost(string, tag = "3")]
    pub producer_version: String,
    #[prost(string, tag = "6")]
    pub doc_string: String,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
}

/// `OperatorSetIdProto`: an opset the model uses (`""` is the default domain).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct OperatorSetIdProto {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(int64, tag = "2")]
    pub version: i64,
}

/// `GraphProto`: nodes in topological order, weights, inputs and outputs.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
}

/// `NodeProto`: one operator call.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub op_type: String,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    #[prost(string, tag = "6")]
    pub doc_string: String,
}

/// `AttributeProto`: a named constant argument of a node; `type` says
/// which value field is set.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct AttributeProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int32, tag = "20")]
    pub r#type: i32,
    #[prost(float, tag = "2")]
    pub f: f32,
    #[prost(int64, tag = "3")]
    pub i: i64,
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
}

/// `AttributeProto.AttributeType` values used here.
pub(crate) const ATTRIBUTE_FLOAT: i32 = 1;
pub(crate) const ATTRIBUTE_INT: i32 = 2;
pub(crate) const ATTRIBUTE_INTS: i32 = 7;

/// `TensorProto`: an initializer, its elements little-endian in `raw_data`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    #[prost(string, tag = "8")]
    pub name: String,
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
}

/// `TensorProto.DataType` values used here.
pub(crate) const FLOAT: i32 = 1;
pub(crate) const INT64: i32 = 7;
pub(crate) const BOOL: i32 = 9;
pub(crate) const DOUBLE: i32 = 11;

/// `ValueInfoProto`: a graph input's or output's name and type.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ValueInfoProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

/// `TypeProto` holding its `tensor_type` (field 1 of its `oneof value`).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TensorTypeProto>,
}

/// `TypeProto.Tensor`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TensorTypeProto {
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

/// `TensorShapeProto`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

/// `TensorShapeProto.Dimension`: a size or a symbol (its `oneof value`).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Dimension {
    #[prost(oneof = "DimensionValue", tags = "1, 2")]
    pub value: Option<DimensionValue>,
}

/// `TensorShapeProto.Dimension.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum DimensionValue {
    #[prost(int64, tag = "1")]
    DimValue(i64),
    #[prost(string, tag = "2")]
    DimParam(String),
}
