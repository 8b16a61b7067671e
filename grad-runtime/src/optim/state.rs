//! Optimizer state files: `save_state` / `load_state` on `Sgd`, `Adam` and
//! `AdamW`, so a resumed run continues bit for bit where it stopped.
//!
//! A state file is a safetensors file. Its header metadata holds
//! `grad.format` (`optimizer-state/1`), `optimizer` (`Adam`, `AdamW`,
//! `Sgd`), `lr`, `max_norm` (`none` when clipping is off), `steps`, and the
//! type's hyperparameters (`beta1`, `beta2`, `eps`; `momentum`,
//! `dampening`, `nesterov`), numbers written so they read back exactly.
//! Its tensors are keyed by parameter name (`add_params` paths, `#index`
//! for `add`), PyTorch's state names after a dot:
//!
//! | tensor | optimizer | dtype, shape |
//! |---|---|---|
//! | `NAME.step` | all | `I64` scalar: the updates this parameter received |
//! | `NAME.exp_avg`, `NAME.exp_avg_sq` | `Adam`, `AdamW` | the tape's, the parameter's |
//! | `NAME.momentum_buffer` | `Sgd` with momentum | the tape's, the parameter's |
//!
//! Loading is all or nothing, as for models: the file must be of this
//! optimizer's type and hold exactly the registered parameters' tensors
//! with their shapes and the tape's element type; every check runs before
//! anything is written. The per-parameter coefficients (L2, weight decay)
//! are not stored: they come from `add` / `add_params`, as on the first run.

use std::collections::HashSet;
use std::panic::Location;
use std::path::Path;

use super::moments::AdamMoments;
use super::registry::{Domain, Registry, check_arg, running_power};
use super::{Adam, AdamW, Sgd};
use crate::error::{ErrorKind, GradError};
use crate::io::{Archive, Writer, decode_into, read_file};
use crate::tape::NodeId;
use crate::{Float, Tape};

type Caller = &'static Location<'static>;

const FORMAT: &str = "optimizer-state/1";

/// An `f64` as text that parses back to the same bits (Rust prints the
/// shortest string that round-trips).
fn number(x: f64) -> String {
    format!("{x:?}")
}

/// The node of every registered parameter, refusing a bad handle.
fn resolve<T: Float>(
    op: &'static str,
    registry: &Registry,
    tape: &Tape<T>,
    at: Caller,
) -> Result<Vec<NodeId>, GradError> {
    registry.entries().iter().map(|entry| tape.check_or_error(op, entry.var, at)).collect()
}

/// The metadata and `NAME.step` tensors every optimizer writes.
fn write_common(writer: &mut Writer, optimizer: &str, registry: &Registry) {
    writer.meta("grad.format", FORMAT);
    writer.meta("optimizer", optimizer);
    writer.meta("lr", &number(registry.lr()));
    writer.meta("max_norm", &registry.max_norm().map_or_else(|| "none".to_string(), number));
    writer.meta("steps", &registry.steps().to_string());
    for entry in registry.entries() {
        writer.int64(&format!("{}.step", entry.name), entry.updates as i64);
    }
}

/// What every optimizer reads back besides its own state.
struct Common {
    lr: f64,
    max_norm: Option<f64>,
    steps: u64,
    updates: Vec<u64>,
}

/// A state file being checked: every tensor taken is remembered, so that
/// [`finish`](Reader::finish) can refuse the ones nobody asked for.
struct Reader<'a> {
    op: &'static str,
    at: Caller,
    archive: Archive<'a>,
    taken: HashSet<String>,
}

impl<'a> Reader<'a> {
    fn open(
        op: &'static str,
        path: &Path,
        bytes: &'a [u8],
        optimizer: &'static str,
        at: Caller,
    ) -> Result<Self, GradError> {
        let archive = Archive::parse(op, &path.display().to_string(), bytes, at)?;
        let reader = Reader { op, at, archive, taken: HashSet::new() };
        // A model file (or any other) has no format entry: say what was expected.
        let format = reader.archive.metadata().get("grad.format").map_or("missing", String::as_str);
        if format != FORMAT {
            return Err(reader.mismatch("grad.format", FORMAT, format));
        }
        let found = reader.meta("optimizer")?;
        if found != optimizer {
            return Err(reader.mismatch("optimizer", optimizer, found));
        }
        Ok(reader)
    }

    fn mismatch(&self, what: &'static str, expected: &'static str, found: &str) -> GradError {
        let kind = ErrorKind::StateMismatch { file: self.archive.file().into(), what, expected, found: found.into() };
        GradError::new(self.op, kind, Vec::new(), self.at)
    }

    fn meta(&self, key: &'static str) -> Result<&str, GradError> {
        match self.archive.metadata().get(key) {
            Some(value) => Ok(value),
            None => Err(self.mismatch(key, "a value", "missing")),
        }
    }

    /// A number from the metadata, in `domain` (named `key` in errors).
    fn number(&self, key: &'static str, domain: Domain) -> Result<f64, GradError> {
        let text = self.meta(key)?;
        let value = text.parse::<f64>().map_err(|_| self.mismatch(key, "a number", text))?;
        check_arg(self.op, key, value, domain, self.at)
    }

    fn flag(&self, key: &'static str) -> Result<bool, GradError> {
        match self.meta(key)? {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(self.mismatch(key, "true or false", other)),
        }
    }

    fn common(&mut self, registry: &Registry) -> Result<Common, GradError> {
        let lr = self.number("lr", Domain::NonNegative)?;
        let max_norm = match self.meta("max_norm")? {
            "none" => None,
            _ => Some(self.number("max_norm", Domain::Positive)?),
        };
        let steps_text = self.meta("steps")?;
        let steps = steps_text.parse::<u64>().map_err(|_| self.mismatch("steps", "a count", steps_text))?;
        let mut updates = Vec::with_capacity(registry.entries().len());
        for entry in registry.entries() {
            let name = format!("{}.step", entry.name);
            let count = self.archive.int64(self.op, &name, self.at)?;
            let count = u64::try_from(count)
                .map_err(|_| self.mismatch("a step count", "a count >= 0", &format!("{count} (`{name}`)")))?;
            self.taken.insert(name);
            updates.push(count);
        }
        Ok(Common { lr, max_norm, steps, updates })
    }

    /// The bytes of tensor `name`, of the tape's type and `shape`.
    fn floats<T: Float>(&mut self, name: String, shape: &[usize]) -> Result<&'a [u8], GradError> {
        let data = self.archive.floats::<T>(self.op, &name, shape, self.at)?;
        self.taken.insert(name);
        Ok(data)
    }

    /// Refuses a tensor that belongs to no registered parameter.
    fn finish(&self) -> Result<(), GradError> {
        match self.archive.names().into_iter().find(|name| !self.taken.contains(*name)) {
            Some(extra) => Err(self.archive.unexpected(self.op, extra, self.at)),
            None => Ok(()),
        }
    }
}

/// Commits what every optimizer restores.
fn restore_common(registry: &mut Registry, common: Common) {
    registry.restore(common.lr, common.max_norm, common.steps);
    for (entry, updates) in registry.entries_mut().iter_mut().zip(common.updates) {
        entry.updates = updates;
    }
}

/// Writes an Adam or AdamW state: the common part, β1, β2, ε, and `m`,
/// `v` of every entry as `NAME.exp_avg` / `NAME.exp_avg_sq`.
fn save_adam<T: Float>(
    (op, optimizer): (&'static str, &'static str),
    registry: &Registry,
    moments: &AdamMoments<T>,
    tape: &Tape<T>,
    path: &Path,
    at: &'static Location<'static>,
) -> Result<(), GradError> {
    let ids = resolve(op, registry, tape, at)?;
    let mut writer = Writer::default();
    write_common(&mut writer, optimizer, registry);
    writer.meta("beta1", &number(moments.beta1));
    writer.meta("beta2", &number(moments.beta2));
    writer.meta("eps", &number(moments.eps));
    for (entry, &id) in registry.entries().iter().zip(&ids) {
        let (m, v) = moments.of(entry);
        writer.floats(&format!("{}.exp_avg", entry.name), tape.shape(id), m);
        writer.floats(&format!("{}.exp_avg_sq", entry.name), tape.shape(id), v);
    }
    writer.write(op, path, at)
}

/// Reads an Adam or AdamW state written by [`save_adam`], checking all of
/// it before restoring anything: the common part, β1, β2, ε and moments.
fn load_adam<T: Float>(
    (op, optimizer): (&'static str, &'static str),
    registry: &mut Registry,
    moments: &mut AdamMoments<T>,
    tape: &Tape<T>,
    path: &Path,
    at: &'static Location<'static>,
) -> Result<(), GradError> {
    registry.config_error()?;
    let ids = resolve(op, registry, tape, at)?;
    let bytes = read_file(op, path, at)?;
    let mut reader = Reader::open(op, path, &bytes, optimizer, at)?;
    let common = reader.common(registry)?;
    let beta1 = reader.number("beta1", Domain::Beta)?;
    let beta2 = reader.number("beta2", Domain::Beta)?;
    let eps = reader.number("eps", Domain::NonNegative)?;
    let mut staged = Vec::with_capacity(ids.len());
    for (entry, &id) in registry.entries().iter().zip(&ids) {
        let m = reader.floats::<T>(format!("{}.exp_avg", entry.name), tape.shape(id))?;
        let v = reader.floats::<T>(format!("{}.exp_avg_sq", entry.name), tape.shape(id))?;
        staged.push((m, v));
    }
    reader.finish()?;
    // Everything is checked: from here nothing can fail.
    (moments.beta1, moments.beta2, moments.eps) = (beta1, beta2, eps);
    restore_common(registry, common);
    for (entry, (m_bytes, v_bytes)) in registry.entries().iter().zip(staged) {
        let (m, v) = moments.of_mut(entry);
        decode_into(m_bytes, m);
        decode_into(v_bytes, v);
    }
    Ok(())
}

impl<T: Float> Adam<T> {
    /// Writes the optimizer's state (step count, learning rate, clipping,
    /// betas, ε, and each parameter's moments, by name) to a safetensors
    /// file at `path`, replaced atomically; see the layout in
    /// [`load_state`](Adam::load_state). Errors: a registered parameter is
    /// no longer a live node of `tape`, or an I/O failure.
    #[track_caller]
    pub fn save_state(&self, tape: &Tape<T>, path: impl AsRef<Path>) -> Result<(), GradError> {
        save_adam(("Adam::save_state", "Adam"), &self.registry, &self.moments, tape, path.as_ref(), Location::caller())
    }

    /// Restores a state [`save_state`](Adam::save_state) wrote into this
    /// optimizer, whose parameters must already be registered (by the same
    /// names: the same `add_params` calls, or `add` calls in the same tape
    /// order). Afterwards the optimizer continues exactly as the saved one
    /// would have: step count, learning rate, clipping, betas, ε and
    /// moments are the file's.
    ///
    /// All or nothing: a file of another optimizer type
    /// ([`StateMismatch`](crate::ErrorKind::StateMismatch)), a registered
    /// parameter it lacks ([`MissingTensor`](crate::ErrorKind::MissingTensor)),
    /// state for a parameter not registered ([`UnexpectedTensor`](crate::ErrorKind::UnexpectedTensor)),
    /// a wrong shape or element type, a damaged or truncated file: each is
    /// an error naming the tensor, and leaves the optimizer untouched.
    ///
    /// The file layout: metadata `grad.format` = `optimizer-state/1`,
    /// `optimizer` = `Adam`, `lr`, `max_norm` (or `none`), `steps`, `beta1`,
    /// `beta2`, `eps`; per parameter `NAME.step` (`I64`), `NAME.exp_avg` and
    /// `NAME.exp_avg_sq` (the tape's element type and the parameter's shape).
    ///
    /// ```
    /// use grad_runtime::{g_mul, g_sum, Adam, Params, Tape, Var};
    /// use ndarray::array;
    ///
    /// #[derive(Params)]
    /// struct Model { w: Var }
    ///
    /// fn train(tape: &mut Tape<f64>, model: &Model, opt: &mut Adam<f64>, steps: usize) {
    ///     let mark = tape.mark();
    ///     for _ in 0..steps {
    ///         let ww = g_mul(tape, model.w, model.w);
    ///         let loss = g_sum(tape, ww);
    ///         tape.backward(loss).unwrap();
    ///         opt.step(tape).unwrap();
    ///         tape.reset_to(mark);
    ///     }
    /// }
    /// let dir = std::env::temp_dir();
    /// let (model_path, state_path) = (dir.join("grad-doc-resume-model.safetensors"), dir.join("grad-doc-resume-adam.safetensors"));
    ///
    /// let mut tape = Tape::<f64>::new();
    /// let model = Model { w: tape.param(array![1.0, -2.0]) };
    /// let mut opt = Adam::new(0.1);
    /// opt.add_params(&tape, &model, |_| 0.0)?;
    /// train(&mut tape, &model, &mut opt, 5);
    /// model.save(&tape, &model_path)?;
    /// opt.save_state(&tape, &state_path)?;
    /// train(&mut tape, &model, &mut opt, 5);
    ///
    /// // Resume from the files on a fresh tape and optimizer.
    /// let mut tape2 = Tape::<f64>::new();
    /// let model2 = Model { w: tape2.param(array![0.0, 0.0]) };
    /// let mut opt2 = Adam::new(0.1);
    /// opt2.add_params(&tape2, &model2, |_| 0.0)?;
    /// model2.load(&mut tape2, &model_path)?;
    /// opt2.load_state(&tape2, &state_path)?;
    /// train(&mut tape2, &model2, &mut opt2, 5);
    /// assert_eq!(tape2.value(model2.w), tape.value(model.w)); // bit for bit
    /// # std::fs::remove_file(model_path).unwrap();
    /// # std::fs::remove_file(state_path).unwrap();
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    pub fn load_state(&mut self, tape: &Tape<T>, path: impl AsRef<Path>) -> Result<(), GradError> {
        let ops = ("Adam::load_state", "Adam");
        load_adam(ops, &mut self.registry, &mut self.moments, tape, path.as_ref(), Location::caller())?;
        // The same running products `step` forms, so the next step's bias correction is bit-identical.
        let (beta1, beta2, steps) = (self.moments.beta1, self.moments.beta2, self.registry.steps());
        self.beta1_power = running_power(beta1, steps);
        self.beta2_power = running_power(beta2, steps);
        Ok(())
    }
}

impl<T: Float> AdamW<T> {
    /// Writes the optimizer's state to a safetensors file; as
    /// [`Adam::save_state`](crate::Adam::save_state), with `optimizer` = `AdamW`.
    #[track_caller]
    pub fn save_state(&self, tape: &Tape<T>, path: impl AsRef<Path>) -> Result<(), GradError> {
        save_adam(
            ("AdamW::save_state", "AdamW"),
            &self.registry,
            &self.moments,
            tape,
            path.as_ref(),
            Location::caller(),
        )
    }

    /// Restores a state [`save_state`](AdamW::save_state) wrote; as
    /// [`Adam::load_state`](crate::Adam::load_state). Each parameter's own
    /// step count (`NAME.step`) drives its bias correction.
    #[track_caller]
    pub fn load_state(&mut self, tape: &Tape<T>, path: impl AsRef<Path>) -> Result<(), GradError> {
        let ops = ("AdamW::load_state", "AdamW");
        load_adam(ops, &mut self.registry, &mut self.moments, tape, path.as_ref(), Location::caller())?;
        let (beta1, beta2) = (self.moments.beta1, self.moments.beta2);
        let powers =
            self.registry.entries().iter().map(|e| (running_power(beta1, e.updates), running_power(beta2, e.updates)));
        self.powers = powers.collect();
        Ok(())
    }
}

impl<T: Float> Sgd<T> {
    /// Writes the optimizer's state (step count, learning rate, clipping,
    /// momentum, dampening, Nesterov, and each parameter's momentum buffer
    /// when momentum is on) to a safetensors file at `path`, replaced
    /// atomically: metadata `optimizer` = `Sgd`, `momentum`, `dampening`,
    /// `nesterov`; tensors `NAME.step` and `NAME.momentum_buffer`. Errors as
    /// [`Adam::save_state`](crate::Adam::save_state).
    #[track_caller]
    pub fn save_state(&self, tape: &Tape<T>, path: impl AsRef<Path>) -> Result<(), GradError> {
        const OP: &str = "Sgd::save_state";
        let at = Location::caller();
        let ids = resolve(OP, &self.registry, tape, at)?;
        let mut writer = Writer::default();
        write_common(&mut writer, "Sgd", &self.registry);
        writer.meta("momentum", &number(self.momentum));
        writer.meta("dampening", &number(self.dampening));
        writer.meta("nesterov", if self.nesterov.is_some() { "true" } else { "false" });
        if self.momentum > 0.0 {
            for (entry, &id) in self.registry.entries().iter().zip(&ids) {
                let buffer = &self.buffers[entry.offset..entry.offset + entry.len];
                writer.floats(&format!("{}.momentum_buffer", entry.name), tape.shape(id), buffer);
            }
        }
        writer.write(OP, path.as_ref(), at)
    }

    /// Restores a state [`save_state`](Sgd::save_state) wrote; all or
    /// nothing, as [`Adam::load_state`](crate::Adam::load_state). Momentum,
    /// dampening and Nesterov become the file's.
    #[track_caller]
    pub fn load_state(&mut self, tape: &Tape<T>, path: impl AsRef<Path>) -> Result<(), GradError> {
        const OP: &str = "Sgd::load_state";
        let (path, at) = (path.as_ref(), Location::caller());
        self.check_config()?;
        let ids = resolve(OP, &self.registry, tape, at)?;
        let bytes = read_file(OP, path, at)?;
        let mut reader = Reader::open(OP, path, &bytes, "Sgd", at)?;
        let common = reader.common(&self.registry)?;
        let momentum = reader.number("momentum", Domain::NonNegative)?;
        let dampening = reader.number("dampening", Domain::Fraction)?;
        let nesterov = reader.flag("nesterov")?;
        if nesterov && (momentum <= 0.0 || dampening != 0.0) {
            return Err(reader.mismatch("nesterov", "false (it needs momentum > 0 and no dampening)", "true"));
        }
        let mut staged = Vec::new();
        if momentum > 0.0 {
            for (entry, &id) in self.registry.entries().iter().zip(&ids) {
                staged.push(reader.floats::<T>(format!("{}.momentum_buffer", entry.name), tape.shape(id))?);
            }
        }
        reader.finish()?;
        (self.momentum, self.dampening) = (momentum, dampening);
        self.nesterov = nesterov.then_some(at);
        self.buffers = vec![T::zero(); if momentum > 0.0 { self.registry.elements() } else { 0 }];
        restore_common(&mut self.registry, common);
        for (entry, bytes) in self.registry.entries().iter().zip(staged) {
            decode_into(bytes, &mut self.buffers[entry.offset..entry.offset + entry.len]);
        }
        Ok(())
    }
}
