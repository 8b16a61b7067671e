//! One safetensors file: [`Writer`] builds one from named tensors and
//! string metadata and replaces the file atomically; [`Archive`] reads one
//! and checks everything (header, offsets, dtypes, shapes) before any
//! caller copies a byte out of it.

use std::collections::BTreeMap;
use std::panic::Location;
use std::path::Path;

use safetensors::{Dtype, SafeTensors, View};

use super::atomic::write_atomic;
use super::bytes::{dtype_of, encode};
use crate::Float;
use crate::error::{ErrorKind, GradError};

type Caller = &'static Location<'static>;

/// One tensor to write: its element type, shape and little-endian bytes.
pub(crate) struct Blob {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Blob {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        (&self.data[..]).into()
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// The contents of a file to write.
#[derive(Default)]
pub(crate) struct Writer {
    tensors: Vec<(String, Blob)>,
    metadata: Vec<(String, String)>,
}

impl Writer {
    /// Adds a tensor of the tape's element type.
    pub(crate) fn floats<T: Float>(&mut self, name: &str, shape: &[usize], data: &[T]) {
        let mut bytes = Vec::new();
        encode(data, &mut bytes);
        self.tensors.push((name.to_string(), Blob { dtype: dtype_of::<T>(), shape: shape.to_vec(), data: bytes }));
    }

    /// Adds a scalar `I64` tensor (a step count).
    pub(crate) fn int64(&mut self, name: &str, value: i64) {
        let blob = Blob { dtype: Dtype::I64, shape: Vec::new(), data: value.to_le_bytes().to_vec() };
        self.tensors.push((name.to_string(), blob));
    }

    /// Adds a `__metadata__` entry.
    pub(crate) fn meta(&mut self, key: &str, value: &str) {
        self.metadata.push((key.to_string(), value.to_string()));
    }

    /// Serializes and replaces `path` atomically.
    pub(crate) fn write(self, op: &'static str, path: &Path, location: Caller) -> Result<(), GradError> {
        let file = path.display().to_string();
        let metadata = (!self.metadata.is_empty()).then(|| self.metadata.into_iter().collect());
        let bytes = safetensors::serialize(self.tensors.iter().map(|(name, blob)| (name.as_str(), blob)), metadata)
            .map_err(|e| {
                fail(op, ErrorKind::NotSafetensors { file: file.as_str().into(), problem: e.to_string() }, location)
            })?;
        write_atomic(path, &bytes)
            .map_err(|e| fail(op, ErrorKind::Io { file: file.into(), message: e.to_string() }, location))
    }
}

/// Reads a whole file.
pub(crate) fn read_file(op: &'static str, path: &Path, location: Caller) -> Result<Vec<u8>, GradError> {
    std::fs::read(path).map_err(|e| {
        fail(op, ErrorKind::Io { file: path.display().to_string().into(), message: e.to_string() }, location)
    })
}

/// A checked safetensors file in memory.
pub(crate) struct Archive<'a> {
    file: String,
    tensors: SafeTensors<'a>,
    metadata: BTreeMap<String, String>,
}

impl<'a> Archive<'a> {
    /// Checks `bytes` as a safetensors file named `file` in errors.
    pub(crate) fn parse(op: &'static str, file: &str, bytes: &'a [u8], location: Caller) -> Result<Self, GradError> {
        let not_safetensors =
            |problem: String| fail(op, ErrorKind::NotSafetensors { file: file.into(), problem }, location);
        let Some((length, rest)) = bytes.split_first_chunk::<8>() else {
            return Err(not_safetensors(format!(
                "it is {} bytes long, shorter than the 8-byte header length a safetensors file starts with",
                bytes.len()
            )));
        };
        let header_len = u64::from_le_bytes(*length);
        let Some(header) = usize::try_from(header_len).ok().and_then(|n| rest.get(..n)) else {
            return Err(not_safetensors(format!(
                "its first 8 bytes give a header of {header_len} bytes, but only {} bytes follow",
                rest.len()
            )));
        };
        let data_len = (rest.len() - header.len()) as u64;
        check_offsets(op, file, header, data_len, location)?;
        let tensors = SafeTensors::deserialize(bytes).map_err(|e| not_safetensors(e.to_string()))?;
        let metadata = SafeTensors::read_metadata(bytes)
            .map_err(|e| not_safetensors(e.to_string()))?
            .1
            .metadata()
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(Archive { file: file.to_string(), tensors, metadata })
    }

    /// The file's name, as errors give it.
    pub(crate) fn file(&self) -> &str {
        &self.file
    }

    /// The tensor names, sorted.
    pub(crate) fn names(&self) -> Vec<&str> {
        let mut names = self.tensors.names();
        names.sort_unstable();
        names
    }

    /// The `__metadata__` entries.
    pub(crate) fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// The bytes of tensor `name`, which must exist with the tape's element
    /// type and exactly `shape`.
    pub(crate) fn floats<T: Float>(
        &self,
        op: &'static str,
        name: &str,
        shape: &[usize],
        location: Caller,
    ) -> Result<&'a [u8], GradError> {
        self.floats_of::<T>(op, name, shape, &[dtype_of::<T>()], location).map(|(bytes, _)| bytes)
    }

    /// [`floats`](Archive::floats) for a parameter, which may also be
    /// stored as `BF16` (PyTorch's `model.to(torch.bfloat16)`): the bytes
    /// and their element type.
    pub(crate) fn param_floats<T: Float>(
        &self,
        op: &'static str,
        name: &str,
        shape: &[usize],
        location: Caller,
    ) -> Result<(&'a [u8], Dtype), GradError> {
        self.floats_of::<T>(op, name, shape, &[dtype_of::<T>(), Dtype::BF16], location)
    }

    fn floats_of<T: Float>(
        &self,
        op: &'static str,
        name: &str,
        shape: &[usize],
        accepted: &[Dtype],
        location: Caller,
    ) -> Result<(&'a [u8], Dtype), GradError> {
        let view = self.tensors.tensor(name).map_err(|_| self.missing(op, name, location))?;
        let (file, tensor) = (self.file.as_str().into(), name.into());
        if !accepted.contains(&view.dtype()) {
            let kind = ErrorKind::TensorDtype {
                file,
                tensor,
                expected: dtype_name(dtype_of::<T>()),
                found: dtype_name(view.dtype()),
            };
            return Err(fail(op, kind, location));
        }
        if view.shape() != shape {
            let kind = ErrorKind::TensorShape { file, tensor, expected: shape.into(), found: view.shape().into() };
            let shapes = vec![shape.to_vec(), view.shape().to_vec()];
            return Err(GradError::new(op, kind, shapes, location));
        }
        Ok((view.data(), view.dtype()))
    }

    /// The value of the scalar `I64` tensor `name`.
    pub(crate) fn int64(&self, op: &'static str, name: &str, location: Caller) -> Result<i64, GradError> {
        let view = self.tensors.tensor(name).map_err(|_| self.missing(op, name, location))?;
        let (file, tensor) = (self.file.as_str().into(), name.into());
        if view.dtype() != Dtype::I64 {
            let kind = ErrorKind::TensorDtype { file, tensor, expected: "I64", found: dtype_name(view.dtype()) };
            return Err(fail(op, kind, location));
        }
        match view.data().try_into() {
            Ok(bytes) if view.shape().is_empty() => Ok(i64::from_le_bytes(bytes)),
            _ => {
                let kind = ErrorKind::TensorShape { file, tensor, expected: Box::new([]), found: view.shape().into() };
                Err(fail(op, kind, location))
            }
        }
    }

    pub(crate) fn missing(&self, op: &'static str, name: &str, location: Caller) -> GradError {
        fail(op, ErrorKind::MissingTensor { file: self.file.as_str().into(), tensor: name.into() }, location)
    }

    pub(crate) fn unexpected(&self, op: &'static str, name: &str, location: Caller) -> GradError {
        fail(op, ErrorKind::UnexpectedTensor { file: self.file.as_str().into(), tensor: name.into() }, location)
    }
}

/// Reads the header's data offsets before the safetensors crate does: a
/// tensor that ends past the data section is reported by name (the file
/// was cut short), and no offset can be large enough to overflow the
/// crate's own bounds arithmetic. Anything else malformed is left to it.
fn check_offsets(
    op: &'static str,
    file: &str,
    header: &[u8],
    data_len: u64,
    location: Caller,
) -> Result<(), GradError> {
    let Ok(serde_json::Value::Object(entries)) = serde_json::from_slice::<serde_json::Value>(header) else {
        let problem = "its header is not a JSON object of tensors (the file is not safetensors, or it is damaged)";
        return Err(fail(op, ErrorKind::NotSafetensors { file: file.into(), problem: problem.into() }, location));
    };
    let cut = entries
        .iter()
        .filter(|(name, _)| *name != "__metadata__")
        .filter_map(|(name, info)| {
            let offsets = info.get("data_offsets")?.as_array()?;
            let (start, end) = (offsets.first()?.as_u64()?, offsets.get(1)?.as_u64()?);
            (end > data_len).then_some((start, end, name))
        })
        .min();
    match cut {
        Some((_, end, tensor)) => {
            let kind =
                ErrorKind::Truncated { file: file.into(), tensor: tensor.as_str().into(), end, available: data_len };
            Err(fail(op, kind, location))
        }
        None => Ok(()),
    }
}

/// The name safetensors gives `dtype`, as a `&'static str` (the error
/// kinds stay small: every `Result` of the crate carries one).
fn dtype_name(dtype: Dtype) -> &'static str {
    const NAMES: [&str; 22] = [
        "BOOL",
        "F4",
        "F6_E2M3",
        "F6_E3M2",
        "U8",
        "I8",
        "F8_E5M2",
        "F8_E4M3",
        "F8_E8M0",
        "F8_E4M3FNUZ",
        "F8_E5M2FNUZ",
        "I16",
        "U16",
        "F16",
        "BF16",
        "I32",
        "U32",
        "F32",
        "C64",
        "F64",
        "I64",
        "U64",
    ];
    let name = dtype.to_string();
    NAMES.into_iter().find(|known| *known == name).unwrap_or("a newer dtype")
}

fn fail(op: &'static str, kind: ErrorKind, location: Caller) -> GradError {
    GradError::new(op, kind, Vec::new(), location)
}
