//! A model's parameters to and from a safetensors file, by name: what
//! [`Params::save`](crate::Params::save) and [`Params::load`](crate::Params::load) do.

use std::collections::HashSet;
use std::panic::Location;
use std::path::Path;

use safetensors::Dtype;

use super::LoadOptions;
use super::archive::{Archive, Writer, read_file};
use super::bytes::{decode_bf16_into, decode_into};
use crate::error::{ErrorKind, GradError};
use crate::tape::NodeId;
use crate::{Float, Tape, Var};

type Caller = &'static Location<'static>;

/// Writes every parameter under its name, then replaces `path` atomically.
pub(crate) fn save<T: Float>(
    tape: &Tape<T>,
    named: &[(String, Var)],
    path: &Path,
    metadata: &[(&str, &str)],
    location: Caller,
) -> Result<(), GradError> {
    const OP: &str = "Params::save";
    let ids = resolve(OP, tape, named, location)?;
    let mut writer = Writer::default();
    for ((name, _), id) in named.iter().zip(ids) {
        let value = tape.value_of(id);
        writer.floats(name, value.shape(), &value.data);
    }
    for (key, value) in metadata {
        writer.meta(key, value);
    }
    writer.write(OP, path, location)
}

/// Reads `path`, checks every parameter's tensor (present, element type,
/// shape) and, unless allowed, that the file holds nothing else; only then
/// copies the values in. Any error leaves every parameter as it was.
pub(crate) fn load<T: Float>(
    tape: &mut Tape<T>,
    named: &[(String, Var)],
    path: &Path,
    options: LoadOptions,
    location: Caller,
) -> Result<(), GradError> {
    const OP: &str = "Params::load";
    let ids = resolve(OP, tape, named, location)?;
    let bytes = read_file(OP, path, location)?;
    let archive = Archive::parse(OP, &path.display().to_string(), &bytes, location)?;
    let mut staged = Vec::with_capacity(named.len());
    for ((name, _), &id) in named.iter().zip(&ids) {
        staged.push((id, archive.param_floats::<T>(OP, name, tape.shape(id), location)?));
    }
    if !options.allow_unexpected {
        let known: HashSet<&str> = named.iter().map(|(name, _)| name.as_str()).collect();
        if let Some(extra) = archive.names().into_iter().find(|name| !known.contains(name)) {
            return Err(archive.unexpected(OP, extra, location));
        }
    }
    // Everything is checked: from here nothing can fail.
    for (id, (data, dtype)) in staged {
        match dtype {
            Dtype::BF16 => decode_bf16_into(data, tape.value_mut(id)),
            _ => decode_into(data, tape.value_mut(id)),
        }
    }
    Ok(())
}

/// The node of every named handle, refusing a bad handle and a name used twice.
pub(crate) fn resolve<T: Float>(
    op: &'static str,
    tape: &Tape<T>,
    named: &[(String, Var)],
    location: Caller,
) -> Result<Vec<NodeId>, GradError> {
    let mut seen = HashSet::with_capacity(named.len());
    let mut ids = Vec::with_capacity(named.len());
    for (name, var) in named {
        if !seen.insert(name.as_str()) {
            return Err(GradError::new(op, ErrorKind::DuplicateName { name: name.clone() }, Vec::new(), location));
        }
        ids.push(tape.check_or_error(op, *var, location)?);
    }
    Ok(ids)
}
