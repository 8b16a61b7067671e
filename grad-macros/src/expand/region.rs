//! The expansion of a fused region (`fuse.rs` plans it, `derive.rs`
//! writes its kernel): its leaves are expanded as operands, in the order
//! written (a product or a user's call is bound to a temporary first), its
//! numbers as scalars of the tape's type (its run-time parameters passed
//! to the call, its constants written into the kernel), and the region
//! becomes one `grad_runtime::dsl::fused` call beside the declaration of
//! its kernel.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{quote, quote_spanned};

use super::Expander;
use crate::derive;
use crate::error::{Error, Errors, Result};
use crate::fuse::{Leaf, Region};
use crate::operand::Value;

impl Expander {
    /// `fused(tape, __Region0, [leaves], [params])`, with the kernel
    /// `__Region0` declared among the statements before it.
    pub(super) fn region(&mut self, region: &Region) -> Result<Value> {
        let mut errors = Errors::default();
        let leaves: Vec<TokenStream> = region.leaves.iter().filter_map(|l| errors.keep(self.leaf(l))).collect();
        let params: Vec<TokenStream> = region.params.iter().filter_map(|p| errors.keep(self.param(p))).collect();
        let consts: Vec<TokenStream> = region.consts.iter().filter_map(|c| errors.keep(self.param(c))).collect();
        errors.finish(())?;
        let ty = Ident::new(&format!("__Region{}", self.regions), Span::mixed_site());
        self.regions += 1;
        self.stmts.push(derive::kernel(region, &ty, &consts));
        let tape = &self.tape;
        Ok(Value::Var(quote!(::grad_runtime::dsl::fused(#tape, #ty, [#(#leaves),*], [#(#params),*]))))
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
