//! The plan of a fused region: its operations in the order the unfused
//! expansion would run them, each naming where its operands come from.
//! `grad!` writes it as a constant table with the constructors of
//! [`step`]; the runtime reads it to check handles and shapes exactly as
//! the unfused ops would (same op names, same order, same locations) and,
//! when a fused gradient could not equal theirs, to run the region as
//! those ops instead.

/// Where an operand of a step comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Src {
    /// Input `k` of the region: a `Var`, or a Rust scalar when the macro
    /// could not tell which (a free identifier).
    Leaf(usize),
    /// Scalar parameter `k`: a Rust scalar (a variable, a number `let`, a
    /// block), in `+ - * /` or passed to a built-in (`pow`'s `p`,
    /// `clamp`'s bounds).
    Param(usize),
    /// Constant `k` of the kernel (`Kernel::constant`): a number written
    /// in the region, compiled into its code.
    Const(usize),
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
/// fold only last, and `clamp` given its bounds. Evaluated when a kernel
/// is compiled (`Kernel::WELL_FORMED`), so the checks at run time skip it.
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
                    Src::Const(_) => true,
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

    /// Constant `k` of the kernel.
    pub const fn constant(k: usize) -> Src {
        Src::Const(k)
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
