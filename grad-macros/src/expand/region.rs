//! The expansion of a fused region (`fuse.rs` plans it): its leaves are
//! expanded as operands, in the order written (a product or a user's call
//! is bound to a temporary first), its numbers as scalars of the tape's
//! type, and the region becomes one `grad_runtime::dsl::fused` call
//! beside a `static` [plan](grad_runtime::dsl::Plan): the steps, each
//! step's source location, the counts of leaves and scalars. The runtime
//! interprets the plan, except on a region of a few dozen elements, which
//! runs the region's kernel (`kernel.rs`): one short loop, compiled for
//! each SIMD level grad-runtime dispatches to, the only code a region adds
//! to the user's crate.

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{quote, quote_spanned};

use super::{Expander, kernel};
use crate::ast::BinOp;
use crate::error::{Error, Errors, Result};
use crate::fuse::{Leaf, Region, Src, Step, StepOp};
use crate::operand::Value;

impl Expander {
    /// `fused(tape, &__GRAD_REGION_0, [leaves], [params])`, with the plan
    /// `__GRAD_REGION_0` declared among the statements before it.
    pub(super) fn region(&mut self, region: &Region) -> Result<Value> {
        let mut errors = Errors::default();
        let leaves: Vec<TokenStream> = region.leaves.iter().filter_map(|l| errors.keep(self.leaf(l))).collect();
        let params: Vec<TokenStream> = region.params.iter().filter_map(|p| errors.keep(self.param(p))).collect();
        errors.finish(())?;
        let plan = Ident::new(&format!("__GRAD_REGION_{}", self.regions), Span::mixed_site());
        let name = Ident::new(&format!("__GradKernel{}", self.regions), Span::mixed_site());
        self.regions += 1;
        self.stmts.push(declare(region, &plan));
        // The kernel is compiled without debug assertions only: a debug
        // build interprets every region (the same bits), and does not
        // compile a kernel for each.
        let region = match kernel::kernel(region, &name) {
            Some(kernel) => {
                self.stmts.push(kernel);
                quote!(const {
                    #[cfg(not(debug_assertions))]
                    let kernel = ::grad_runtime::dsl::kernel::<_, #name>();
                    #[cfg(debug_assertions)]
                    let kernel = ::core::option::Option::None;
                    &::grad_runtime::dsl::Region::new(&#plan, kernel)
                })
            }
            None => quote!(const { &::grad_runtime::dsl::Region::new(&#plan, ::core::option::Option::None) }),
        };
        let tape = &self.tape;
        Ok(Value::Var(quote!(::grad_runtime::dsl::fused(#tape, #region, [#(#leaves),*], [#(#params),*]))))
    }

    /// A leaf as an `Operand`: a `Var`, or a free name that may be a
    /// scalar where `+ - * /` read it (`IntoOperand` picks by type).
    fn leaf(&mut self, leaf: &Leaf) -> Result<TokenStream> {
        let span = leaf.expr.span.first;
        match self.operand(leaf.expr)? {
            Value::Var(t) => Ok(quote_spanned!(span=> ::grad_runtime::dsl::Operand::Var(#t))),
            Value::Ambiguous(t) if leaf.strict => Ok(quote_spanned!(span=> ::grad_runtime::dsl::Operand::Var(#t))),
            Value::Ambiguous(t) => Ok(quote_spanned!(span=> ::grad_runtime::dsl::IntoOperand::into_operand(#t))),
            Value::Number { .. } | Value::Flag(_) => {
                Err(Error::new(leaf.expr.span, format!("`{}` is not a tensor", leaf.expr)))
            }
        }
    }

    /// A number, or a Rust scalar passed to a built-in, as a `T`.
    fn param(&mut self, e: &crate::ast::Expr) -> Result<TokenStream> {
        match self.value(e)? {
            Value::Number { typed, .. } => Ok(typed),
            Value::Ambiguous(t) => Ok(t),
            Value::Var(_) | Value::Flag(_) => Err(Error::new(e.span, format!("`{e}` is not a number"))),
        }
    }
}

/// `static PLAN: Plan = Plan::new(name, &[steps], &[sites], leaves, params);`
fn declare(region: &Region, plan: &Ident) -> TokenStream {
    let name = format!("fused {}", region.root);
    let steps = region.steps.iter().map(plan_entry);
    let sites = region.steps.iter().map(|s| quote_spanned!(s.span=> ::grad_runtime::dsl::here()));
    let (n, p) = (Literal::usize_unsuffixed(region.leaves.len()), Literal::usize_unsuffixed(region.params.len()));
    quote! {
        static #plan: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            #name,
            {
                use ::grad_runtime::dsl::step::*;
                &[#(#steps),*]
            },
            &[#(#sites),*],
            #n,
            #p,
        );
    }
}

/// A step as the runtime's plan writes it: `mul(leaf(0), param(0))`.
fn plan_entry(step: &Step) -> TokenStream {
    let args = step.args.iter().map(|src| match *src {
        Src::Leaf(k) => call("leaf", k),
        Src::Param(k) => call("param", k),
        Src::Step(k) => call("step", k),
    });
    let f = Ident::new(
        match step.op {
            StepOp::Binary(BinOp::Add) => "add",
            StepOp::Binary(BinOp::Sub) => "sub",
            StepOp::Binary(BinOp::Mul) => "mul",
            StepOp::Binary(_) => "div",
            StepOp::Neg => "neg",
            StepOp::Call(b) | StepOp::Fold(b) => b.name,
        },
        Span::call_site(),
    );
    quote!(#f(#(#args),*))
}

fn call(f: &str, k: usize) -> TokenStream {
    let (f, k) = (Ident::new(f, Span::call_site()), Literal::usize_unsuffixed(k));
    quote!(#f(#k))
}
