//! Models as structs: the [`Params`] trait (derived with `#[derive(Params)]`)
//! lists a model's parameters by dotted path, and [`Tape::params`] lists a
//! tape's.

use std::fmt::Write;
use std::panic::Location;
use std::path::Path;

use crate::io::LoadOptions;
use crate::{Float, GradError, Tape, Var};

/// A model, or a part of one, whose parameters can be listed by name.
///
/// Derive it on a struct whose fields are [`Var`]s, other `Params` structs,
/// or `Vec`s, arrays, `Option`s or `Box`es of them (nested as deep as you
/// like). Each parameter is named by its path, PyTorch's `state_dict`
/// naming: fields by name, elements of a `Vec` or array by index, an
/// `Option` adds nothing to the path (and `None` holds no parameter).
///
/// ```
/// use grad_runtime::{Params, Tape, Var};
/// use ndarray::Array2;
///
/// #[derive(Params)]
/// struct Dense {
///     w: Var,
///     b: Var,
/// }
///
/// #[derive(Params)]
/// struct Net {
///     layers: Vec<Dense>,
///     head: Dense,
///     #[params(skip)] // not a parameter: left out
///     name: String,
/// }
///
/// let mut tape = Tape::<f32>::new();
/// let mut dense = |fan_in: usize, fan_out: usize| Dense {
///     w: tape.param(Array2::<f32>::zeros((fan_in, fan_out))),
///     b: tape.param(ndarray::Array1::<f32>::zeros(fan_out)),
/// };
/// let net = Net { layers: vec![dense(4, 8), dense(8, 8)], head: dense(8, 2), name: "mlp".into() };
/// let names: Vec<String> = net.named_params().into_iter().map(|(name, _)| name).collect();
/// assert_eq!(names, ["layers.0.w", "layers.0.b", "layers.1.w", "layers.1.b", "head.w", "head.b"]);
/// ```
///
/// Field options: `#[params(skip)]` leaves a field out (any type),
/// `#[params(rename = "weight")]` names it differently in paths and files,
/// `#[params(buffer)]` makes its `Var`s buffers ([`Tape::buffer`]): listed
/// by [`named_buffers`](Params::named_buffers) instead of `named_params`,
/// saved and loaded with the parameters, never given to an optimizer.
/// A tuple struct's fields are named `0`, `1`, ... (as the layers of
/// PyTorch's `Sequential`). A generic struct gets a `Params` bound on each
/// type parameter. Enums and unions are refused at compile time, and so is
/// a field of any other type, by this trait's message.
///
/// A derived model also saves and loads itself (safetensors files, by
/// these names): [`save`](Params::save), [`load`](Params::load); and
/// registers with an optimizer in one call: `opt.add_params(&tape, &model, |name| l2)`.
///
/// To implement it by hand (a container the derive does not know), call
/// [`ParamVisitor::field`] for each part, or [`ParamVisitor::param`] for a
/// `Var` at the current path.
#[diagnostic::on_unimplemented(
    message = "`{Self}` holds no parameters that `#[derive(Params)]` can list",
    label = "not a `Var`, a `#[derive(Params)]` struct, or a `Vec`, array, `Option` or `Box` of them",
    note = "mark a field that is not part of the model with `#[params(skip)]`"
)]
pub trait Params {
    /// Reports every parameter under the visitor's current path, in a
    /// fixed order (the derive: fields in declaration order).
    fn visit_params(&self, visitor: &mut ParamVisitor<'_>);

    /// Every parameter with its dotted path name (`layers.0.w`), in
    /// declaration order.
    fn named_params(&self) -> Vec<(String, Var)> {
        named(self, Wanted::Params)
    }

    /// Every buffer (a field marked `#[params(buffer)]`, made with
    /// [`Tape::buffer`]) with its dotted path name, in declaration order:
    /// tensors the model saves and loads but no optimizer trains.
    fn named_buffers(&self) -> Vec<(String, Var)> {
        named(self, Wanted::Buffers)
    }

    /// Writes every parameter's and buffer's value to a safetensors file at
    /// `path`, under its name, with the tape's element type; the file is replaced
    /// atomically. See [`io`](crate::io) for the layout.
    ///
    /// Errors, with no file written: a bad handle (stale, from another
    /// tape), two parameters with one name, an I/O failure.
    ///
    /// ```
    /// use grad_runtime::{Params, Tape, Var};
    /// use ndarray::array;
    ///
    /// #[derive(Params)]
    /// struct Dense { w: Var, b: Var }
    ///
    /// let path = std::env::temp_dir().join(format!("grad-doc-save-{}.safetensors", std::process::id()));
    /// let mut tape = Tape::<f64>::new();
    /// let trained = Dense { w: tape.param(array![[1.0, 2.0]]), b: tape.param(array![0.5]) };
    /// trained.save(&tape, &path)?;
    ///
    /// let mut fresh_tape = Tape::<f64>::new();
    /// let fresh = Dense { w: fresh_tape.param(array![[0.0, 0.0]]), b: fresh_tape.param(array![0.0]) };
    /// fresh.load(&mut fresh_tape, &path)?;
    /// assert_eq!(fresh_tape.value(fresh.w), array![[1.0, 2.0]].into_dyn());
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    #[track_caller]
    fn save<T: Float>(&self, tape: &Tape<T>, path: impl AsRef<Path>) -> Result<(), GradError>
    where
        Self: Sized,
    {
        crate::io::model::save(tape, &named(self, Wanted::Both), path.as_ref(), &[], Location::caller())
    }

    /// [`save`](Params::save), with string key-values in the file's header
    /// (read back by [`io::read_metadata`](crate::io::read_metadata)).
    #[track_caller]
    fn save_with_metadata<T: Float>(
        &self,
        tape: &Tape<T>,
        path: impl AsRef<Path>,
        metadata: &[(&str, &str)],
    ) -> Result<(), GradError>
    where
        Self: Sized,
    {
        crate::io::model::save(tape, &named(self, Wanted::Both), path.as_ref(), metadata, Location::caller())
    }

    /// Reads the parameters' and buffers' values back from a file
    /// [`save`](Params::save) (or any safetensors writer) made, into the
    /// existing parameters and buffers. A tensor is stored in the tape's
    /// element type or as `BF16` (PyTorch's `model.to(torch.bfloat16)`),
    /// which is widened exactly.
    ///
    /// All or nothing: every tensor is checked first, and any problem
    /// leaves every parameter bit-identical and returns a [`GradError`]
    /// naming the tensor and the difference: a parameter missing from the
    /// file ([`MissingTensor`](crate::ErrorKind::MissingTensor)), a tensor
    /// the model lacks ([`UnexpectedTensor`](crate::ErrorKind::UnexpectedTensor);
    /// allowed by [`load_with`](Params::load_with)), a wrong shape
    /// ([`TensorShape`](crate::ErrorKind::TensorShape)) or element type
    /// ([`TensorDtype`](crate::ErrorKind::TensorDtype)), a file cut short
    /// ([`Truncated`](crate::ErrorKind::Truncated)), a file that is not
    /// safetensors or whose header is damaged
    /// ([`NotSafetensors`](crate::ErrorKind::NotSafetensors)), an I/O
    /// failure ([`Io`](crate::ErrorKind::Io)), a bad handle.
    #[track_caller]
    fn load<T: Float>(&self, tape: &mut Tape<T>, path: impl AsRef<Path>) -> Result<(), GradError>
    where
        Self: Sized,
    {
        crate::io::model::load(tape, &named(self, Wanted::Both), path.as_ref(), LoadOptions::new(), Location::caller())
    }

    /// [`load`](Params::load) with options (tensors the model lacks ignored).
    #[track_caller]
    fn load_with<T: Float>(
        &self,
        tape: &mut Tape<T>,
        path: impl AsRef<Path>,
        options: LoadOptions,
    ) -> Result<(), GradError>
    where
        Self: Sized,
    {
        crate::io::model::load(tape, &named(self, Wanted::Both), path.as_ref(), options, Location::caller())
    }
}

/// The tensors of `model` a walk wanting `wanted` reports, with their names.
fn named<P: Params + ?Sized>(model: &P, wanted: Wanted) -> Vec<(String, Var)> {
    let mut named = Vec::new();
    model.visit_params(&mut ParamVisitor::wanting(wanted, &mut |name, var| named.push((name.to_string(), var))));
    named
}

/// Walks a model's parts, keeping the dotted path of the current one. Made
/// by [`Params::named_params`] (and the crate's other walks); a `Params`
/// impl only calls its methods.
pub struct ParamVisitor<'a> {
    path: String,
    sink: &'a mut dyn FnMut(&str, Var),
    /// What the walk reports: parameters, buffers, or both.
    wanted: Wanted,
    /// Whether the walk is inside a buffer field (`#[params(buffer)]`),
    /// whose `Var`s are buffers.
    in_buffer: bool,
}

/// Which of a model's tensors a walk reports.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wanted {
    Params,
    Buffers,
    /// Parameters and buffers, in declaration order: what a file holds.
    Both,
}

impl<'a> ParamVisitor<'a> {
    /// A visitor at the root (empty path) that hands each parameter to
    /// `sink` (and no buffer).
    pub fn new(sink: &'a mut dyn FnMut(&str, Var)) -> Self {
        ParamVisitor::wanting(Wanted::Params, sink)
    }

    pub(crate) fn wanting(wanted: Wanted, sink: &'a mut dyn FnMut(&str, Var)) -> Self {
        ParamVisitor { path: String::new(), sink, wanted, in_buffer: false }
    }

    /// Visits `part` under the path segment `name` as buffers: every `Var`
    /// in it is reported as a buffer (what `#[params(buffer)]` on a field
    /// calls).
    pub fn buffer<P: Params + ?Sized>(&mut self, name: &str, part: &P) {
        let outer = std::mem::replace(&mut self.in_buffer, true);
        self.field(name, part);
        self.in_buffer = outer;
    }

    /// Visits `part` under the path segment `name` (`w`, `layers`, `0`).
    pub fn field<P: Params + ?Sized>(&mut self, name: &str, part: &P) {
        let len = self.push(format_args!("{name}"));
        part.visit_params(self);
        self.path.truncate(len);
    }

    /// Visits `part` under the segment `index` (the elements of a `Vec` or array).
    pub fn index<P: Params + ?Sized>(&mut self, index: usize, part: &P) {
        let len = self.push(format_args!("{index}"));
        part.visit_params(self);
        self.path.truncate(len);
    }

    /// Reports `var` as the parameter at the current path (a buffer, inside
    /// [`buffer`](ParamVisitor::buffer)).
    pub fn param(&mut self, var: Var) {
        let reported = match self.wanted {
            Wanted::Params => !self.in_buffer,
            Wanted::Buffers => self.in_buffer,
            Wanted::Both => true,
        };
        if reported {
            (self.sink)(&self.path, var);
        }
    }

    /// Appends `.segment` (or `segment` at the root); returns the length to truncate back to.
    fn push(&mut self, segment: std::fmt::Arguments<'_>) -> usize {
        let len = self.path.len();
        if len > 0 {
            self.path.push('.');
        }
        // Writing to a String cannot fail.
        let _ = self.path.write_fmt(segment);
        len
    }
}

impl Params for Var {
    fn visit_params(&self, visitor: &mut ParamVisitor<'_>) {
        visitor.param(*self);
    }
}

impl<P: Params> Params for [P] {
    fn visit_params(&self, visitor: &mut ParamVisitor<'_>) {
        for (i, part) in self.iter().enumerate() {
            visitor.index(i, part);
        }
    }
}

impl<P: Params, const N: usize> Params for [P; N] {
    fn visit_params(&self, visitor: &mut ParamVisitor<'_>) {
        self.as_slice().visit_params(visitor);
    }
}

impl<P: Params> Params for Vec<P> {
    fn visit_params(&self, visitor: &mut ParamVisitor<'_>) {
        self.as_slice().visit_params(visitor);
    }
}

impl<P: Params> Params for Option<P> {
    fn visit_params(&self, visitor: &mut ParamVisitor<'_>) {
        if let Some(part) = self {
            part.visit_params(visitor);
        }
    }
}

impl<P: Params + ?Sized> Params for Box<P> {
    fn visit_params(&self, visitor: &mut ParamVisitor<'_>) {
        (**self).visit_params(visitor);
    }
}

impl<P: Params + ?Sized> Params for &P {
    fn visit_params(&self, visitor: &mut ParamVisitor<'_>) {
        (**self).visit_params(visitor);
    }
}

impl<T: Float> Tape<T> {
    /// Every parameter on the tape ([`param`](Tape::param) nodes), in
    /// creation order: to check that a model lists them all, or that an
    /// optimizer has each.
    ///
    /// ```
    /// use grad_runtime::{Params, Tape, Var};
    ///
    /// #[derive(Params)]
    /// struct Model { w: Var }
    ///
    /// let mut tape = Tape::<f32>::new();
    /// let model = Model { w: tape.param(ndarray::arr1(&[1.0f32, 2.0])) };
    /// let _forgotten = tape.param(ndarray::arr1(&[3.0f32]));
    /// let listed: Vec<Var> = model.named_params().into_iter().map(|(_, v)| v).collect();
    /// let missing: Vec<Var> = tape.params().into_iter().filter(|v| !listed.contains(v)).collect();
    /// assert_eq!(missing.len(), 1);
    /// ```
    pub fn params(&self) -> Vec<Var> {
        (0..self.len()).filter(|&id| self.is_param(id)).map(|id| self.var_at(id)).collect()
    }
}
