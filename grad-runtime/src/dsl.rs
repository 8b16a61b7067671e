//! What `grad!` expansions call besides the `g_*` ops: not an API to use by
//! hand (hidden from the docs), but each item is documented for the
//! reader of an expansion.
//!
//! - [`AsTape`]: the block's tape, an owned `Tape` or a `&mut Tape` alike.
//! - [`lit`]: a literal read exactly as Rust reads it for the tape's type.
//! - [`add`], [`sub`], [`mul`], [`div`], [`neg`]: arithmetic on an operand
//!   the macro cannot classify (a free identifier: a `Var`, or a scalar).
//! - [`rsubs`], [`divs`], [`rdivs`]: `s - x`, `x / s`, `s / x` for a scalar
//!   `s`, as compositions exact to the bit.
//! - [`Declared`]: the run-time check of the block's shape declarations.
//! - [`size_div`], [`size_sub`]: an exact quotient and a difference of sizes
//!   in a dims list (`C / H`, `T - 1`), checked at run time.
//! - [`fused`], [`Plan`], [`step`], [`here`]: a fused region (a chain of
//!   elementwise ops recorded as one node): the call, the `static` plan the
//!   macro writes for it, the constructors of its steps, and the source
//!   location of each of its ops.
//! - [`Region`], [`Kernel`], [`Lanes`], [`BLOCK`], [`kernel`],
//!   [`Compiled`], [`lanes`]: a region's plan with its kernel (the region
//!   compiled, which a small region runs instead of interpreting its plan,
//!   a block at a time), the kernel compiled for each SIMD level, and the
//!   built-ins as a kernel applies them.
//! - [`OP_FUNCTIONS`]: every public op, for the built-in link test.

use std::any::TypeId;
use std::fmt::Write;
use std::panic::Location;

use ndarray::{Dimension, arr0};

use crate::error::{ErrorKind, GradError};
pub use crate::ops::OP_FUNCTIONS;
pub use crate::ops::fused::{
    BLOCK, Compiled, Func, Kernel, Lanes, Plan, Region, Src, Step, StepOp, fused, kernel, lanes, step,
};
use crate::{Float, Indices, Tape, Var, g_add, g_adds, g_div, g_mul, g_muls, g_neg, g_sub};

/// The tape of a `grad!` block. The expansion calls `(TAPE).as_tape()`:
/// method-call auto-ref borrows an owned `tape` mutably and reborrows a
/// `tp: &mut Tape` (without moving it, and without `tp` being `mut`).
pub trait AsTape<T: Float> {
    fn as_tape(&mut self) -> &mut Tape<T>;
}

impl<T: Float> AsTape<T> for Tape<T> {
    fn as_tape(&mut self) -> &mut Tape<T> {
        self
    }
}

/// A literal of the tape's type, from its digits read as `f32` and as
/// `f64` by the compiler: the value is exactly the literal's, as if it were
/// written with the type's suffix (`f32` round-trips through `f64`).
#[inline]
pub fn lit<T: Float>(single: f32, double: f64) -> T {
    if TypeId::of::<T>() == TypeId::of::<f32>() { T::from_f64(f64::from(single)) } else { T::from_f64(double) }
}

/// The location of the caller: in a fused region's table of sites, one
/// call spanned on each operator or function name, so that an op of the
/// region that fails reports where it is written.
#[track_caller]
pub const fn here() -> &'static Location<'static> {
    Location::caller()
}

/// An operand whose kind only the type checker knows: a tensor or a scalar.
// `u64`, so both variants' payloads start at byte 8, where the `Var` is
// written: a `grad!` block builds its leaves' array from the operands it
// just made, and with the default layout (an `f32` payload at byte 4)
// that copy read the bytes from 4 on, straddling the `Var`'s stores
// still in flight, a stall on every region (see `tape/append.rs`).
#[derive(Clone, Copy, Debug)]
#[repr(u64)]
pub enum Operand<T> {
    Var(Var),
    Scalar(T),
}

impl<T> From<Var> for Operand<T> {
    fn from(v: Var) -> Self {
        Operand::Var(v)
    }
}

impl<T: Float> From<T> for Operand<T> {
    fn from(s: T) -> Self {
        Operand::Scalar(s)
    }
}

/// What a name the macro cannot classify may be: a `Var`, or a scalar of
/// the tape's float type. The bound of [`add`], [`sub`], [`mul`], [`div`],
/// [`neg`] and of a fused region's leaves; its message is what a user sees
/// for an `f64` scalar in a block on a `Tape<f32>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is neither a `Var` nor a scalar of the tape's float type",
    label = "a `{Self}` in a `grad!` block",
    note = "a scalar in a `grad!` block has the tape's float type: an `f32` on a `Tape<f32>`, an `f64` on a \
            `Tape<f64>`; convert it (`s as f32`)"
)]
pub trait IntoOperand<T> {
    fn into_operand(self) -> Operand<T>;
}

impl<T> IntoOperand<T> for Var {
    fn into_operand(self) -> Operand<T> {
        Operand::Var(self)
    }
}

impl<T: Float> IntoOperand<T> for T {
    fn into_operand(self) -> Operand<T> {
        Operand::Scalar(self)
    }
}

impl<T> IntoOperand<T> for Operand<T> {
    fn into_operand(self) -> Operand<T> {
        self
    }
}

/// `a + b`: `g_add`, or `g_adds` with a scalar on either side.
#[track_caller]
pub fn add<T: Float>(tp: &mut Tape<T>, a: impl IntoOperand<T>, b: impl IntoOperand<T>) -> Var {
    match (a.into_operand(), b.into_operand()) {
        (Operand::Var(a), Operand::Var(b)) => g_add(tp, a, b),
        (Operand::Var(x), Operand::Scalar(s)) | (Operand::Scalar(s), Operand::Var(x)) => g_adds(tp, x, s),
        (Operand::Scalar(a), Operand::Scalar(b)) => tp.constant(arr0(a + b)),
    }
}

/// `a - b`: `g_sub`, `g_adds(x, -s)` (IEEE subtraction is exactly the
/// addition of the negation), or [`rsubs`].
#[track_caller]
pub fn sub<T: Float>(tp: &mut Tape<T>, a: impl IntoOperand<T>, b: impl IntoOperand<T>) -> Var {
    match (a.into_operand(), b.into_operand()) {
        (Operand::Var(a), Operand::Var(b)) => g_sub(tp, a, b),
        (Operand::Var(x), Operand::Scalar(s)) => g_adds(tp, x, -s),
        (Operand::Scalar(s), Operand::Var(x)) => rsubs(tp, s, x),
        (Operand::Scalar(a), Operand::Scalar(b)) => tp.constant(arr0(a - b)),
    }
}

/// `a * b`: `g_mul`, or `g_muls` with a scalar on either side.
#[track_caller]
pub fn mul<T: Float>(tp: &mut Tape<T>, a: impl IntoOperand<T>, b: impl IntoOperand<T>) -> Var {
    match (a.into_operand(), b.into_operand()) {
        (Operand::Var(a), Operand::Var(b)) => g_mul(tp, a, b),
        (Operand::Var(x), Operand::Scalar(s)) | (Operand::Scalar(s), Operand::Var(x)) => g_muls(tp, x, s),
        (Operand::Scalar(a), Operand::Scalar(b)) => tp.constant(arr0(a * b)),
    }
}

/// `a / b`: `g_div`, [`divs`] or [`rdivs`].
#[track_caller]
pub fn div<T: Float>(tp: &mut Tape<T>, a: impl IntoOperand<T>, b: impl IntoOperand<T>) -> Var {
    match (a.into_operand(), b.into_operand()) {
        (Operand::Var(a), Operand::Var(b)) => g_div(tp, a, b),
        (Operand::Var(x), Operand::Scalar(s)) => divs(tp, x, s),
        (Operand::Scalar(s), Operand::Var(x)) => rdivs(tp, s, x),
        (Operand::Scalar(a), Operand::Scalar(b)) => tp.constant(arr0(a / b)),
    }
}

/// `-a`: `g_neg`, or a constant.
#[track_caller]
pub fn neg<T: Float>(tp: &mut Tape<T>, a: impl IntoOperand<T>) -> Var {
    match a.into_operand() {
        Operand::Var(x) => g_neg(tp, x),
        Operand::Scalar(s) => tp.constant(arr0(-s)),
    }
}

/// `s - x` as `-x + s`: exact (IEEE `s - x` is `s + (-x)`), gradient `-g`.
#[track_caller]
pub fn rsubs<T: Float>(tp: &mut Tape<T>, s: T, x: Var) -> Var {
    let negated = g_neg(tp, x);
    g_adds(tp, negated, s)
}

/// `x / s` as `g_div` by a scalar constant: the value is the IEEE quotient
/// (`x * (1 / s)` would round twice) and the gradient is `g_div`'s, `g / s`.
#[track_caller]
pub fn divs<T: Float>(tp: &mut Tape<T>, x: Var, s: T) -> Var {
    let s = tp.constant(arr0(s));
    g_div(tp, x, s)
}

/// `s / x` as `g_div` of a scalar constant: gradient `-g * (s / x) / x`.
#[track_caller]
pub fn rdivs<T: Float>(tp: &mut Tape<T>, s: T, x: Var) -> Var {
    let s = tp.constant(arr0(s));
    g_div(tp, s, x)
}

/// `a + b` on scalars (a function, so that both literals take one type).
pub fn sadd<T: Float>(a: T, b: T) -> T {
    a + b
}

/// `a - b` on scalars.
pub fn ssub<T: Float>(a: T, b: T) -> T {
    a - b
}

/// `a * b` on scalars.
pub fn smul<T: Float>(a: T, b: T) -> T {
    a * b
}

/// `a / b` on scalars.
pub fn sdiv<T: Float>(a: T, b: T) -> T {
    a / b
}

/// `-a` on a scalar.
pub fn sneg<T: Float>(a: T) -> T {
    -a
}

/// `a / b` for the size `text` of a dims list (`C / H`): the quotient
/// when it is exact; otherwise the tape is poisoned with
/// [`ErrorKind::SizeArithmetic`], located at the `/`, and the size is 0 (no
/// op runs on a poisoned tape).
#[track_caller]
pub fn size_div<T: Float>(tp: &mut Tape<T>, a: usize, b: usize, text: &'static str) -> usize {
    match a.checked_rem(b) {
        Some(0) => a / b,
        _ => size_error(tp, text, a, '/', b),
    }
}

/// `a - b` for the size `text` of a dims list (`T - 1`): the difference
/// when it is at least 0; otherwise as [`size_div`].
#[track_caller]
pub fn size_sub<T: Float>(tp: &mut Tape<T>, a: usize, b: usize, text: &'static str) -> usize {
    a.checked_sub(b).unwrap_or_else(|| size_error(tp, text, a, '-', b))
}

#[track_caller]
fn size_error<T: Float>(tp: &mut Tape<T>, size: &'static str, left: usize, op: char, right: usize) -> usize {
    if tp.is_ok() {
        let kind = ErrorKind::SizeArithmetic { size, left, op, right };
        tp.poison(GradError::new("grad!", kind, Vec::new(), Location::caller()));
    }
    0
}

/// One dim of a declared shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A literal size.
    Fixed(usize),
    /// The symbol at this index of the block's symbol list.
    Sym(usize),
    /// `_`: any size.
    Any,
}

/// The run-time check of a block's shape declarations, made once per
/// execution of the block: each symbol is bound to the real size where it
/// first occurs (`x: [B, 784]` with a `[64, 784]` input binds `B = 64`),
/// and an input that contradicts its declaration poisons the tape with
/// [`ErrorKind::DeclaredShape`], located at the declaration.
#[derive(Debug)]
pub struct Declared<const N: usize> {
    symbols: [&'static str; N],
    /// Each symbol's size and the input that bound it.
    bound: [Option<(usize, &'static str)>; N],
}

impl<const N: usize> Declared<N> {
    pub fn new(symbols: [&'static str; N]) -> Self {
        Declared { symbols, bound: [None; N] }
    }

    /// Checks `input` (named `name` in the block) against `dims`. Does
    /// nothing on a tape that already holds an error.
    #[track_caller]
    pub fn check<T: Float>(&mut self, tp: &mut Tape<T>, name: &'static str, input: Var, dims: &[Dim]) {
        if !tp.is_ok() {
            return;
        }
        let location = Location::caller();
        let id = match tp.check(input) {
            Ok(id) => id,
            Err(kind) => return tp.poison(GradError::new("grad!", kind, Vec::new(), location)),
        };
        // Inline up to four dims: a check that passes allocates nothing.
        let real = tp.value_of(id).shape.clone();
        self.compare(tp, name, real.slice(), dims, location);
    }

    /// Checks integer indices (`ids` in `embedding(table, &ids)`, named
    /// `name` in the block) against `dims`, as [`check`](Declared::check)
    /// checks a tensor.
    #[track_caller]
    pub fn check_indices<T: Float, I: Indices + ?Sized>(
        &mut self,
        tp: &mut Tape<T>,
        name: &'static str,
        input: &I,
        dims: &[Dim],
    ) {
        if !tp.is_ok() {
            return;
        }
        self.compare(tp, name, input.index_shape().slice(), dims, Location::caller());
    }

    /// Binds the symbols of `dims` to the `real` shape of input `name`;
    /// poisons the tape with what contradicts, if anything.
    fn compare<T: Float>(
        &mut self,
        tp: &mut Tape<T>,
        name: &'static str,
        real: &[usize],
        dims: &[Dim],
        location: &'static Location<'static>,
    ) {
        if let Some(problem) = self.bind(name, real, dims) {
            let bound = self.bindings(name, dims);
            let declared = if bound.is_empty() { self.show(dims) } else { format!("{} with {bound}", self.show(dims)) };
            let kind = ErrorKind::DeclaredShape { input: name.to_string(), declared, problem };
            tp.poison(GradError::new("grad!", kind, vec![real.to_vec()], location));
        }
    }

    /// The symbols' sizes, 0 for one never bound (the tape is then poisoned).
    pub fn sizes(&self) -> [usize; N] {
        self.bound.map(|b| b.map_or(0, |(size, _)| size))
    }

    /// Binds the symbols of `dims` to `real`'s sizes; what contradicts, if anything.
    fn bind(&mut self, name: &'static str, real: &[usize], dims: &[Dim]) -> Option<String> {
        if real.len() != dims.len() {
            let plural = if real.len() == 1 { "" } else { "s" };
            return Some(format!("it has {} dim{plural}", real.len()));
        }
        for (axis, (&size, dim)) in real.iter().zip(dims).enumerate() {
            let expected = match *dim {
                Dim::Any => continue,
                Dim::Fixed(n) => n,
                Dim::Sym(s) => match self.bound[s] {
                    Some((n, _)) => n,
                    None => {
                        self.bound[s] = Some((size, name));
                        continue;
                    }
                },
            };
            if size != expected {
                return Some(format!("dim {axis} is {size}"));
            }
        }
        None
    }

    /// `[B, 784]`.
    fn show(&self, dims: &[Dim]) -> String {
        let parts: Vec<String> = dims
            .iter()
            .map(|d| match *d {
                Dim::Fixed(n) => n.to_string(),
                Dim::Sym(s) => self.symbols[s].to_string(),
                Dim::Any => "_".to_string(),
            })
            .collect();
        format!("[{}]", parts.join(", "))
    }

    /// `B = 64 (bound by `x`), T = 10`: the bound symbols of `dims`.
    fn bindings(&self, name: &str, dims: &[Dim]) -> String {
        let mut out = String::new();
        let mut seen = Vec::new();
        for dim in dims {
            let Dim::Sym(s) = *dim else { continue };
            let Some((size, by)) = self.bound[s] else { continue };
            if seen.contains(&s) {
                continue;
            }
            seen.push(s);
            if !out.is_empty() {
                out.push_str(", ");
            }
            let _ = write!(out, "{} = {size}", self.symbols[s]);
            if by != name {
                let _ = write!(out, " (bound by `{by}`)");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array2, array};

    #[test]
    #[allow(clippy::excessive_precision)] // the digits are the point
    fn literals_read_exactly_as_the_suffixed_literal() {
        assert_eq!(lit::<f32>(0.1f32, 0.1f64).to_bits(), 0.1f32.to_bits());
        assert_eq!(lit::<f64>(0.1f32, 0.1f64).to_bits(), 0.1f64.to_bits());
        // Just above the midpoint of two f32s: read as f64 it lands on the
        // midpoint, and rounding that to f32 goes down (ties to even), one
        // ulp away from the f32 literal. `lit` never rounds twice.
        let single = 1.00000005960464477539062500000001f32;
        let double = 1.00000005960464477539062500000001f64;
        assert_ne!(double as f32, single);
        assert_eq!(lit::<f32>(single, double), single);
    }

    #[test]
    fn ambiguous_operands_dispatch_on_their_type() {
        let mut tape = Tape::<f64>::new();
        let x = tape.param(array![1.0, 2.0, 4.0]);
        let cases: [(Var, [f64; 3]); 8] = [
            (add(&mut tape, x, 1.0), [2.0, 3.0, 5.0]),
            (add(&mut tape, 1.0, x), [2.0, 3.0, 5.0]),
            (sub(&mut tape, x, 1.0), [0.0, 1.0, 3.0]),
            (sub(&mut tape, 1.0, x), [0.0, -1.0, -3.0]),
            (mul(&mut tape, 2.0, x), [2.0, 4.0, 8.0]),
            (div(&mut tape, x, 2.0), [0.5, 1.0, 2.0]),
            (div(&mut tape, 2.0, x), [2.0, 1.0, 0.5]),
            (neg(&mut tape, x), [-1.0, -2.0, -4.0]),
        ];
        for (i, (v, want)) in cases.iter().enumerate() {
            assert_eq!(tape.value(*v), array![want[0], want[1], want[2]].into_dyn(), "case {i}");
        }
        let s = mul(&mut tape, 2.0, 3.0);
        assert_eq!(tape.scalar(s), 6.0);
        let xx = mul(&mut tape, x, x);
        assert_eq!(tape.value(xx), array![1.0, 4.0, 16.0].into_dyn());
    }

    #[test]
    fn declared_shapes_bind_symbols_and_report_contradictions() {
        let mut tape = Tape::<f32>::new();
        let x = tape.constant(Array2::<f32>::zeros((64, 784)));
        let t = tape.constant(Array2::<f32>::zeros((32, 10)));
        let mut shapes = Declared::new(["B"]);
        shapes.check(&mut tape, "x", x, &[Dim::Sym(0), Dim::Fixed(784)]);
        assert!(tape.is_ok());
        assert_eq!(shapes.sizes(), [64]);
        let line = line!() + 1;
        shapes.check(&mut tape, "t", t, &[Dim::Sym(0), Dim::Fixed(10)]);
        let err = tape.error().expect("B = 64 contradicts t's 32 rows").clone();
        assert_eq!(err.op(), "grad!");
        assert_eq!(err.location().line(), line);
        assert_eq!(
            err.kind(),
            &ErrorKind::DeclaredShape {
                input: "t".into(),
                declared: "[B, 10] with B = 64 (bound by `x`)".into(),
                problem: "dim 0 is 32".into(),
            }
        );
        assert_eq!(err.shapes(), &[vec![32, 10]]);
    }

    #[test]
    fn a_rank_mismatch_and_a_bad_handle_are_reported() {
        let mut tape = Tape::<f64>::new();
        let v = tape.constant(array![1.0, 2.0]);
        let mut shapes = Declared::new([]);
        shapes.check(&mut tape, "v", v, &[Dim::Any, Dim::Fixed(2)]);
        let message = tape.error().unwrap().to_string();
        assert!(message.starts_with("grad!: input `v` was declared [_, 2], but it has 1 dim; input [2]"), "{message}");

        let mut other = Tape::<f64>::new();
        let foreign = other.constant(array![1.0]);
        let mut tape = Tape::<f64>::new();
        Declared::new([]).check(&mut tape, "v", foreign, &[Dim::Any]);
        assert_eq!(tape.error().unwrap().kind(), &ErrorKind::ForeignVar);
    }
}
