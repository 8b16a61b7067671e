//! The plan of a fused region: its operations in the order the unfused
//! expansion would run them, each naming where its operands come from.
//! `grad!` writes it as a `static` [`Plan`] with the constructors of
//! [`step`]; the runtime reads it to check handles and shapes exactly as
//! the unfused ops would (same op names, same order, same locations), and
//! interprets it (`tile.rs`, `whole.rs`): a region costs its user's crate
//! a table of data, not code.

use std::panic::Location;

/// A fused region of a `grad!` block, as its expansion declares it in a
/// `static`: its steps, the source location of each, and what
/// [`Plan::new`] works out from them when the user's crate is compiled.
#[derive(Debug)]
pub struct Plan {
    /// The region as the tape lists it: `fused tanh(h * 0.9 + 0.1)`.
    pub(crate) name: &'static str,
    /// The operations in the order the unfused ops would run; a folded
    /// `sum` or `mean` is the last.
    pub(crate) steps: &'static [Step],
    /// The location of each step's operator or function name, for its errors.
    pub(crate) sites: &'static [&'static Location<'static>],
    /// The number of leaves and of scalar parameters the region reads.
    pub(crate) leaves: usize,
    pub(crate) params: usize,
    /// Whether `steps` is a well-formed plan over them ([`well_formed`]).
    pub(crate) well_formed: bool,
    /// The steps whose values the backward rules read (or recompute the
    /// read ones from).
    pub(crate) needed: Bits,
    /// The steps a gradient flows through when every leaf's is wanted
    /// (the usual case, worked out once here rather than on every
    /// backward; `tile::live_steps` for the others).
    pub(crate) live_all: Bits,
}

impl Plan {
    /// The plan of a region over `leaves` inputs and `params` scalars,
    /// checked and analysed at compile time (a `static`'s initialiser).
    pub const fn new(
        name: &'static str,
        steps: &'static [Step],
        sites: &'static [&'static Location<'static>],
        leaves: usize,
        params: usize,
    ) -> Plan {
        let well_formed = well_formed(steps, leaves, params) && sites.len() == steps.len();
        let needed = if well_formed { needed(steps) } else { Bits::ALL };
        let live_all = if well_formed { super::tile::live_steps(steps, root(steps), u32::MAX) } else { Bits::ALL };
        Plan { name, steps, sites, leaves, params, well_formed, needed, live_all }
    }

    /// The last elementwise step (a folded `sum` or `mean` follows it).
    pub(crate) const fn root(&self) -> usize {
        root(self.steps)
    }
}

/// The last elementwise step of a well-formed plan.
const fn root(steps: &[Step]) -> usize {
    match fold(steps) {
        Some(_) => steps.len() - 2,
        None => steps.len() - 1,
    }
}

/// A set of step indices; indices past its 256 bits are always members
/// (a region that long recomputes every value it might read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bits([u64; 4]);

impl Bits {
    pub(crate) const NONE: Bits = Bits([0; 4]);
    pub(crate) const ALL: Bits = Bits([u64::MAX; 4]);

    pub(crate) const fn has(&self, k: usize) -> bool {
        k >= 256 || self.0[k / 64] & (1 << (k % 64)) != 0
    }

    pub(crate) const fn set(&mut self, k: usize) {
        if k < 256 {
            self.0[k / 64] |= 1 << (k % 64);
        }
    }
}

/// Runs `$body` with `$f` bound to the elementwise function of `Func`
/// `$func` (with its scalar parameters `$p`, `$q`), so each loop is
/// compiled for each function instead of matching per element.
#[rustfmt::skip]
macro_rules! with_func {
    ($func:expr, $p:expr, $q:expr, $f:ident => $body:expr) => {{
        use $crate::ops::fused::Func;
        use $crate::ops::unary as u;
        match $func {
            Func::Relu => { let $f = u::Relu; $body }
            Func::Sigmoid => { let $f = u::Sigmoid; $body }
            Func::Tanh => { let $f = u::Tanh; $body }
            Func::Exp => { let $f = u::Exp; $body }
            Func::Log => { let $f = u::Log; $body }
            Func::Sqrt => { let $f = u::Sqrt; $body }
            Func::Abs => { let $f = u::Abs; $body }
            Func::Gelu => { let $f = u::Gelu; $body }
            Func::Silu => { let $f = u::Silu; $body }
            Func::Softplus => { let $f = u::Softplus; $body }
            Func::Pow => { let $f = u::Pow($p); $body }
            Func::LeakyRelu => { let $f = u::LeakyRelu($p); $body }
            Func::Clamp => { let $f = u::Clamp($p, $q); $body }
        }
    }};
}
pub(crate) use with_func;

/// Whether a built-in's derivative is formed from its value (`sigmoid`,
/// `tanh`, `exp`, `sqrt`) rather than from its input, as the unfused rule
/// forms it.
pub(crate) const fn reads_output(f: Func) -> bool {
    matches!(f, Func::Sigmoid | Func::Tanh | Func::Exp | Func::Sqrt)
}

/// The steps whose values the backward rules read: a product's other
/// operand, a quotient's divisor (and its value, for the divisor's
/// gradient), a built-in's input or value; then, latest first, the values
/// those are computed from.
const fn needed(steps: &[Step]) -> Bits {
    const fn is_var(src: Src) -> bool {
        matches!(src, Src::Leaf(_) | Src::Step(_))
    }
    const fn need(bits: &mut Bits, src: Src) {
        if let Src::Step(k) = src {
            bits.set(k);
        }
    }
    let mut bits = Bits::NONE;
    let root = root(steps);
    let mut k = 0;
    while k <= root {
        let step = steps[k];
        match (step.op, step.b) {
            (StepOp::Mul, Some(b)) => {
                if is_var(step.a) {
                    need(&mut bits, b);
                }
                if is_var(b) {
                    need(&mut bits, step.a);
                }
            }
            (StepOp::Div, Some(b)) => {
                if is_var(step.a) || is_var(b) {
                    need(&mut bits, b);
                }
                if is_var(b) {
                    bits.set(k);
                }
            }
            (StepOp::Apply(f), _) if reads_output(f) => bits.set(k),
            (StepOp::Apply(_), _) => need(&mut bits, step.a),
            _ => {}
        }
        k += 1;
    }
    // A folded region's backward recomputes its root (an unfolded one is
    // given it), so the root's operands are read too.
    let mut k = if fold(steps).is_some() { root + 1 } else { root };
    while k > 0 {
        k -= 1;
        if bits.has(k) {
            let step = steps[k];
            need(&mut bits, step.a);
            if let Some(b) = step.b {
                need(&mut bits, b);
            }
            if let Some(c) = step.c {
                need(&mut bits, c);
            }
        }
    }
    bits
}

/// Where an operand of a step comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Src {
    /// Input `k` of the region: a `Var`, or a Rust scalar when the macro
    /// could not tell which (a free identifier).
    Leaf(usize),
    /// Scalar parameter `k`: a number written in the region, or a Rust
    /// scalar (a variable, a number `let`, a block), in `+ - * /` or passed
    /// to a built-in (`pow`'s `p`, `clamp`'s bounds).
    Param(usize),
    /// The value of an earlier step.
    Step(usize),
}

/// An elementwise built-in, named for its op (`Relu` is `g_relu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    /// `g_relu`.
    Relu,
    /// `g_sigmoid`.
    Sigmoid,
    /// `g_tanh`.
    Tanh,
    /// `g_exp`.
    Exp,
    /// `g_log`.
    Log,
    /// `g_sqrt`.
    Sqrt,
    /// `g_abs`.
    Abs,
    /// `g_gelu`.
    Gelu,
    /// `g_silu`.
    Silu,
    /// `g_softplus`.
    Softplus,
    /// `g_pow`.
    Pow,
    /// `g_leaky_relu`.
    LeakyRelu,
    /// `g_clamp`.
    Clamp,
}

impl Func {
    /// The op that applies it unfused.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Func::Relu => "g_relu",
            Func::Sigmoid => "g_sigmoid",
            Func::Tanh => "g_tanh",
            Func::Exp => "g_exp",
            Func::Log => "g_log",
            Func::Sqrt => "g_sqrt",
            Func::Abs => "g_abs",
            Func::Gelu => "g_gelu",
            Func::Silu => "g_silu",
            Func::Softplus => "g_softplus",
            Func::Pow => "g_pow",
            Func::LeakyRelu => "g_leaky_relu",
            Func::Clamp => "g_clamp",
        }
    }
}

/// What a step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `-a`.
    Neg,
    /// An elementwise built-in; its scalar parameters are the step's `b`
    /// (`p`, `slope`, `lo`) and `c` (`hi`).
    Apply(Func),
    /// `sum(x)` folded into the region: only ever the last step.
    Sum,
    /// `mean(x)` folded into the region: only ever the last step.
    Mean,
}

/// One operation of a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// What the step computes.
    pub op: StepOp,
    /// The tensor operand (the left one of `+ - * /`).
    pub a: Src,
    /// The right operand of `+ - * /`, or the first scalar parameter.
    pub b: Option<Src>,
    /// `clamp`'s upper bound.
    pub c: Option<Src>,
}

/// The folded `sum` or `mean` that ends `steps`, if any.
pub const fn fold(steps: &[Step]) -> Option<StepOp> {
    match steps.last() {
        Some(Step { op: op @ (StepOp::Sum | StepOp::Mean), .. }) => Some(*op),
        _ => None,
    }
}

/// Whether `steps` is a plan over `leaves` inputs and `params` parameters:
/// not empty, every operand an earlier step, an input or a parameter, a
/// fold only last, and `clamp` given its bounds. Evaluated when the
/// user's crate is compiled ([`Plan::new`]), so the checks at run time skip it.
pub const fn well_formed(steps: &[Step], leaves: usize, params: usize) -> bool {
    let mut k = 0;
    while k < steps.len() {
        let step = steps[k];
        let fold = matches!(step.op, StepOp::Sum | StepOp::Mean);
        let clamp = matches!(step.op, StepOp::Apply(Func::Clamp));
        let srcs = [Some(step.a), step.b, step.c];
        let mut i = 0;
        while i < srcs.len() {
            if let Some(src) = srcs[i] {
                let ok = match src {
                    Src::Leaf(j) => j < leaves,
                    Src::Param(j) => j < params,
                    Src::Step(j) => j < k,
                };
                if !ok {
                    return false;
                }
            }
            i += 1;
        }
        if (fold && k + 1 != steps.len()) || (clamp && (step.b.is_none() || step.c.is_none())) {
            return false;
        }
        // A fold sums the elementwise step just before it.
        if fold && (k == 0 || !matches!(step.a, Src::Step(j) if j + 1 == k)) {
            return false;
        }
        k += 1;
    }
    !steps.is_empty()
}

/// Constructors of plan entries, short enough to read in an expansion:
/// `&[mul(leaf(0), param(0)), add(step(0), param(1)), tanh(step(1))]`.
pub mod step {
    use super::{Func, Src, Step, StepOp};

    const fn unary(op: StepOp, a: Src) -> Step {
        Step { op, a, b: None, c: None }
    }

    const fn binary(op: StepOp, a: Src, b: Src) -> Step {
        Step { op, a, b: Some(b), c: None }
    }

    /// Input `k` of the region.
    pub const fn leaf(k: usize) -> Src {
        Src::Leaf(k)
    }

    /// Scalar parameter `k`.
    pub const fn param(k: usize) -> Src {
        Src::Param(k)
    }

    /// The value of step `k`.
    pub const fn step(k: usize) -> Src {
        Src::Step(k)
    }

    /// `a + b`.
    pub const fn add(a: Src, b: Src) -> Step {
        binary(StepOp::Add, a, b)
    }

    /// `a - b`.
    pub const fn sub(a: Src, b: Src) -> Step {
        binary(StepOp::Sub, a, b)
    }

    /// `a * b`.
    pub const fn mul(a: Src, b: Src) -> Step {
        binary(StepOp::Mul, a, b)
    }

    /// `a / b`.
    pub const fn div(a: Src, b: Src) -> Step {
        binary(StepOp::Div, a, b)
    }

    /// `-a`.
    pub const fn neg(a: Src) -> Step {
        unary(StepOp::Neg, a)
    }

    /// `sum(a)`, folded.
    pub const fn sum(a: Src) -> Step {
        unary(StepOp::Sum, a)
    }

    /// `mean(a)`, folded.
    pub const fn mean(a: Src) -> Step {
        unary(StepOp::Mean, a)
    }

    /// `pow(a, p)`.
    pub const fn pow(a: Src, p: Src) -> Step {
        binary(StepOp::Apply(Func::Pow), a, p)
    }

    /// `leaky_relu(a, slope)`.
    pub const fn leaky_relu(a: Src, slope: Src) -> Step {
        binary(StepOp::Apply(Func::LeakyRelu), a, slope)
    }

    /// `clamp(a, lo, hi)`.
    pub const fn clamp(a: Src, lo: Src, hi: Src) -> Step {
        Step { op: StepOp::Apply(Func::Clamp), a, b: Some(lo), c: Some(hi) }
    }

    macro_rules! functions {
        ($($name:ident => $func:ident),* $(,)?) => {$(
            #[doc = concat!("`", stringify!($name), "(a)`.")]
            pub const fn $name(a: Src) -> Step {
                unary(StepOp::Apply(Func::$func), a)
            }
        )*};
    }

    functions! {
        relu => Relu, sigmoid => Sigmoid, tanh => Tanh, exp => Exp, log => Log, sqrt => Sqrt, abs => Abs,
        gelu => Gelu, silu => Silu, softplus => Softplus,
    }
}
