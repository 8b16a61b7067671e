//! A region run as the ops the unfused expansion calls, one node per step:
//! what `Tape::grad_graph` differentiates for a fused node, and what an
//! ONNX export writes for it. The plan has passed its checks, so no op
//! here fails.

use super::check::Scalars;
use super::plan::{Func, Src, Step, StepOp};
use crate::dsl::{self, Operand};
use crate::{Float, Tape, Var};
use crate::{
    g_abs, g_clamp, g_exp, g_gelu, g_leaky_relu, g_log, g_mean, g_pow, g_relu, g_sigmoid, g_silu, g_softplus, g_sqrt,
    g_sum, g_tanh,
};

/// The value of the plan's last step, computed op by op.
pub(crate) fn run<T: Float>(tp: &mut Tape<T>, steps: &[Step], leaves: &[Operand<T>], scalars: Scalars<'_, T>) -> Var {
    let Some(root) = steps.len().checked_sub(1) else { return tp.poisoned_var() };
    Unfused { steps, leaves, scalars }.step(tp, root)
}

struct Unfused<'a, T> {
    steps: &'a [Step],
    leaves: &'a [Operand<T>],
    scalars: Scalars<'a, T>,
}

impl<T: Float> Unfused<'_, T> {
    /// Step `k`, after the steps it reads (left operand first, as written).
    fn step(&self, tp: &mut Tape<T>, k: usize) -> Var {
        let step = self.steps[k];
        let a = self.operand(tp, step.a);
        let b = step.b.map(|b| self.operand(tp, b));
        match (step.op, b) {
            (StepOp::Add, Some(b)) => dsl::add(tp, a, b),
            (StepOp::Sub, Some(b)) => dsl::sub(tp, a, b),
            (StepOp::Mul, Some(b)) => dsl::mul(tp, a, b),
            (StepOp::Div, Some(b)) => dsl::div(tp, a, b),
            (StepOp::Neg, _) => dsl::neg(tp, a),
            (op, b) => {
                let x = match a {
                    Operand::Var(x) => x,
                    Operand::Scalar(s) => tp.constant_with(&[], |c| c[0] = s),
                };
                let c = step.c.map(|c| self.operand(tp, c));
                self.apply(tp, op, x, [b, c].map(|s| self.number(s)))
            }
        }
    }

    fn operand(&self, tp: &mut Tape<T>, src: Src) -> Operand<T> {
        match src {
            Src::Leaf(i) => self.leaves[i],
            Src::Param(_) => Operand::Scalar(self.scalars.get(src).unwrap_or_else(T::nan)),
            Src::Step(j) => Operand::Var(self.step(tp, j)),
        }
    }

    fn number(&self, operand: Option<Operand<T>>) -> T {
        match operand {
            Some(Operand::Scalar(s)) => s,
            _ => T::nan(),
        }
    }

    fn apply(&self, tp: &mut Tape<T>, op: StepOp, x: Var, [p, q]: [T; 2]) -> Var {
        match op {
            StepOp::Apply(f) => match f {
                Func::Relu => g_relu(tp, x),
                Func::Sigmoid => g_sigmoid(tp, x),
                Func::Tanh => g_tanh(tp, x),
                Func::Exp => g_exp(tp, x),
                Func::Log => g_log(tp, x),
                Func::Sqrt => g_sqrt(tp, x),
                Func::Abs => g_abs(tp, x),
                Func::Gelu => g_gelu(tp, x),
                Func::Silu => g_silu(tp, x),
                Func::Softplus => g_softplus(tp, x),
                Func::Pow => g_pow(tp, x, p),
                Func::LeakyRelu => g_leaky_relu(tp, x, p),
                Func::Clamp => g_clamp(tp, x, p, q),
            },
            StepOp::Mean => g_mean(tp, x),
            // The binary ops are matched by `step`; `Sum` is what remains.
            _ => g_sum(tp, x),
        }
    }
}
