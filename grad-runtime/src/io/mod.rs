//! Saving and loading models (and optimizer states) as
//! [safetensors](https://github.com/huggingface/safetensors) files.
//!
//! # The file
//!
//! A model file holds one tensor per parameter, named by its dotted path
//! ([`Params::named_params`](crate::Params::named_params): `layers.0.w`,
//! `head.b`), with the tape's element type (`F32` on a `Tape<f32>`, `F64`
//! on a `Tape<f64>`) and the parameter's shape, its elements row-major and
//! little-endian. The header may carry string metadata
//! ([`Params::save_with_metadata`](crate::Params::save_with_metadata),
//! read back by [`read_metadata`]). That is all: any safetensors reader
//! opens it, and PyTorch loads it as a `state_dict`-shaped dict:
//!
//! ```python
//! from safetensors.torch import load_file
//! state = load_file("model.safetensors")   # {"layers.0.w": tensor(...), ...}
//! print({name: tuple(t.shape) for name, t in state.items()})
//! ```
//!
//! (A grad weight used as `x @ w` is `[in, out]`; `torch.nn.Linear.weight`
//! is `[out, in]`: transpose it when moving weights between the two.)
//!
//! # Guarantees
//!
//! - **Saves are atomic**: the file is written beside the target under a
//!   temporary name, flushed to disk, and renamed over it, so a crash
//!   leaves the old file whole (or the new one), never a mix.
//! - **Loads are all or nothing**: every tensor is checked (present, element
//!   type, shape, no tensor the model lacks unless allowed, header and
//!   offsets sound, file not cut short) before the first value is written;
//!   any problem is a [`GradError`] naming the tensor and
//!   the difference, and leaves every parameter bit-identical.
//! - Values are copied bit for bit, in both directions.
//!
//! Safetensors has no checksum: a flipped bit inside a tensor's data is
//! not detected (one in the header or the offsets is).

mod archive;
pub(crate) mod atomic;
pub(crate) mod bytes;
pub(crate) mod model;

use std::collections::BTreeMap;
use std::panic::Location;
use std::path::Path;

pub(crate) use archive::{Archive, Writer, read_file};
pub(crate) use bytes::decode_into;

use crate::error::GradError;

/// How [`Params::load_with`](crate::Params::load_with) treats a file that
/// does not match the model exactly. The default (what
/// [`load`](crate::Params::load) uses) is strict.
///
/// ```
/// use grad_runtime::io::LoadOptions;
///
/// let lenient = LoadOptions::new().allow_unexpected(true);
/// assert_ne!(lenient, LoadOptions::default());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    pub(crate) allow_unexpected: bool,
}

impl LoadOptions {
    /// Strict: the file must hold exactly the model's parameters.
    pub fn new() -> Self {
        LoadOptions::default()
    }

    /// Whether tensors the model does not have are ignored (`true`: load a
    /// backbone from a file that also holds a head) or an error (`false`,
    /// the default). A parameter missing from the file is always an error.
    #[must_use]
    pub fn allow_unexpected(mut self, allow: bool) -> Self {
        self.allow_unexpected = allow;
        self
    }
}

/// The string metadata in the header of a safetensors file (empty if it
/// has none), after checking the whole file as a load would.
///
/// ```
/// use grad_runtime::{io, Params, Tape, Var};
///
/// #[derive(Params)]
/// struct Model { w: Var }
///
/// let mut tape = Tape::<f32>::new();
/// let model = Model { w: tape.param(ndarray::arr1(&[1.0f32])) };
/// let path = std::env::temp_dir().join(format!("grad-doc-metadata-{}.safetensors", std::process::id()));
/// model.save_with_metadata(&tape, &path, &[("epoch", "3")])?;
/// assert_eq!(io::read_metadata(&path)?["epoch"], "3");
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), grad_runtime::GradError>(())
/// ```
#[track_caller]
pub fn read_metadata(path: impl AsRef<Path>) -> Result<BTreeMap<String, String>, GradError> {
    const OP: &str = "io::read_metadata";
    let (path, location) = (path.as_ref(), Location::caller());
    let bytes = read_file(OP, path, location)?;
    let archive = Archive::parse(OP, &path.display().to_string(), &bytes, location)?;
    Ok(archive.metadata().clone())
}
