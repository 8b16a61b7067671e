//! A region's kernel (`grad_runtime::dsl::Kernel`), derived by reverse-mode
//! differentiation of its scalar expression: a zero-sized type whose
//! `forward` is the region's value at one element and whose `backward`
//! is every input's gradient there.
//!
//! Both reproduce the unfused ops to the bit. `forward` calls their scalar
//! functions in their order. `backward` recomputes the values its
//! derivatives read (no others, the output `y` is given) and walks the
//! steps in reverse, as the tape does: a step's gradient is its consumer's
//! times the local derivative (`g * b` for `a * b`, `-g * (y / b) / ...`
//! as `g_div`'s rule writes it, `g * df` reading the input or the output
//! as the unfused rule reads it), and an input read twice sums its
//! contributions in the order the tape would add them.

use proc_macro2::{Ident, Literal, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};

use crate::ast::BinOp;
use crate::builtins::{Fusion, Reads};
use crate::fuse::{Region, Src, Step, StepOp};

/// The kernel type `ty` of `region`: its declaration and its `Kernel`
/// impl; `consts` are the expansions of its constants (scalars of `T`).
pub(crate) fn kernel(region: &Region, ty: &Ident, consts: &[TokenStream]) -> TokenStream {
    let (n, p) = (region.leaves.len(), region.params.len());
    let (n_lit, p_lit) = (Literal::usize_unsuffixed(n), Literal::usize_unsuffixed(p));
    let name = format!("fused {}", region.root);
    let steps = region.steps.iter().map(plan_entry);
    let sites = region.steps.iter().map(|s| quote_spanned!(s.span=> ::grad_runtime::dsl::here()));
    let d = Derivation::new(region, consts);
    let (forward, backward) = (d.forward(), d.backward());
    let constant = constants(consts);
    let t = Ident::new("T", Span::call_site());
    quote! {
        struct #ty;
        impl<#t: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<#t, #n_lit, #p_lit> for #ty {
            const NAME: &'static str = #name;
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
                use ::grad_runtime::dsl::step::*;
                &[#(#steps),*]
            };
            const SITES: &'static [&'static ::core::panic::Location<'static>] = &[#(#sites),*];
            #constant
            #forward
            #backward
        }
    }
}

/// `fn constant(k)`, when the region has constants.
fn constants(consts: &[TokenStream]) -> TokenStream {
    if consts.is_empty() {
        return TokenStream::new();
    }
    let k = (0..consts.len()).map(Literal::usize_unsuffixed);
    let arg = named("k");
    quote! {
        fn constant(#arg: usize) -> T {
            match #arg {
                #(#k => #consts,)*
                _ => ::grad_runtime::dsl::lit(<f32>::NAN, <f64>::NAN),
            }
        }
    }
}

/// A step as the runtime's plan writes it: `mul(leaf(0), constant(0))`.
fn plan_entry(step: &Step) -> TokenStream {
    let args = step.args.iter().map(|src| match *src {
        Src::Leaf(k) => call("leaf", k),
        Src::Param(k) => call("param", k),
        Src::Const(k) => call("constant", k),
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

/// A local of the kernel, hygienic (the user's names never clash with it).
fn local(prefix: &str, k: usize) -> Ident {
    named(&format!("{prefix}{k}"))
}

fn named(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

fn underscore() -> Ident {
    Ident::new("_", Span::call_site())
}

/// Every identifier in `tokens`, as text.
fn idents(tokens: &TokenStream, out: &mut Vec<String>) {
    for tree in tokens.clone() {
        match tree {
            TokenTree::Ident(ident) => out.push(ident.to_string()),
            TokenTree::Group(group) => idents(&group.stream(), out),
            _ => {}
        }
    }
}

struct Derivation<'r, 'a> {
    region: &'r Region<'a>,
    consts: &'r [TokenStream],
    /// The last elementwise step (a fold, if any, is the runtime's).
    root: usize,
    /// Which step values `backward` reads or recomputes.
    needed: Vec<bool>,
}

impl<'r, 'a> Derivation<'r, 'a> {
    fn new(region: &'r Region<'a>, consts: &'r [TokenStream]) -> Self {
        let last = region.steps.len() - 1;
        let root = if matches!(region.steps[last].op, StepOp::Fold(_)) { last - 1 } else { last };
        let mut d = Derivation { region, consts, root, needed: vec![false; region.steps.len()] };
        d.mark_needed();
        d
    }

    fn steps(&self) -> &'r [Step] {
        &self.region.steps[..=self.root]
    }

    /// Marks the values the derivatives read, then the values those are
    /// recomputed from (latest first, so one pass reaches them all).
    fn mark_needed(&mut self) {
        for (k, step) in self.steps().iter().enumerate() {
            let differentiable = |src: &Src| matches!(src, Src::Leaf(_) | Src::Step(_));
            match (step.op, step.args.as_slice()) {
                (StepOp::Binary(BinOp::Mul), [a, b]) => {
                    self.need_if(differentiable(a), *b);
                    self.need_if(differentiable(b), *a);
                }
                (StepOp::Binary(BinOp::Div), [a, b]) => {
                    self.need_if(differentiable(a) || differentiable(b), *b);
                    self.need_if(differentiable(b), Src::Step(k));
                }
                (StepOp::Call(builtin), [x, ..]) => match builtin.fusion {
                    Fusion::Elementwise(Reads::Output) => self.need(Src::Step(k)),
                    _ => self.need(*x),
                },
                _ => {}
            }
        }
        for k in (0..self.root).rev() {
            if self.needed[k] {
                for src in self.region.steps[k].args.clone() {
                    self.need(src);
                }
            }
        }
    }

    fn need_if(&mut self, condition: bool, src: Src) {
        if condition {
            self.need(src);
        }
    }

    fn need(&mut self, src: Src) {
        if let Src::Step(k) = src {
            self.needed[k] = true;
        }
    }

    /// `fn forward([x0, ..]: [T; N], [p0, ..]: [T; P]) -> T`.
    fn forward(&self) -> TokenStream {
        let lets = self.steps()[..self.root].iter().enumerate().map(|(k, step)| {
            let (v, value) = (local("v", k), self.value(step, false));
            quote!(let #v = #value;)
        });
        let result = self.value(&self.steps()[self.root], false);
        let body = quote!(#(#lets)* #result);
        let all = |name: &Ident| name.clone();
        let (leaves, params) =
            (self.pattern("x", self.region.leaves.len(), &all), self.pattern("p", self.region.params.len(), &all));
        let (n, p) = self.counts();
        let consts = self.bind_consts(&body);
        quote! {
            #[inline(always)]
            fn forward(#leaves: [T; #n], #params: [T; #p]) -> T {
                #consts
                #body
            }
        }
    }

    /// `fn backward([x0, ..], y, g, [p0, ..]) -> [T; N]`: `_` for what it
    /// does not read.
    fn backward(&self) -> TokenStream {
        let mut body = TokenStream::new();
        for k in (0..self.root).filter(|&k| self.needed[k]) {
            let (v, value) = (local("v", k), self.value(&self.region.steps[k], true));
            body.extend(quote!(let #v = #value;));
        }
        let mut seen = vec![false; self.region.leaves.len()];
        for k in (0..=self.root).rev() {
            body.extend(self.propagate(k, &mut seen));
        }
        let grads = (0..self.region.leaves.len()).map(|i| local("d", i));
        body.extend(quote!([#(#grads),*]));
        let mut read = Vec::new();
        idents(&body, &mut read);
        let used = |name: &Ident| if read.contains(&name.to_string()) { name.clone() } else { underscore() };
        let leaves = self.pattern("x", self.region.leaves.len(), &used);
        let params = self.pattern("p", self.region.params.len(), &used);
        let (y, g, (n, p)) = (used(&named("y")), named("g"), self.counts());
        let consts = self.bind_consts(&body);
        quote! {
            #[inline(always)]
            fn backward(#leaves: [T; #n], #y: T, #g: T, #params: [T; #p]) -> [T; #n] {
                #consts
                #body
            }
        }
    }

    /// `let c0: T = ...;` for each constant `body` reads (typed, so a
    /// constant on the left of an operator is a `T` too).
    fn bind_consts(&self, body: &TokenStream) -> TokenStream {
        let mut read = Vec::new();
        idents(body, &mut read);
        let binds = self.consts.iter().enumerate().filter(|(k, _)| read.contains(&format!("c{k}"))).map(|(k, c)| {
            let name = local("c", k);
            quote!(let #name: T = #c;)
        });
        quote!(#(#binds)*)
    }

    fn counts(&self) -> (Literal, Literal) {
        (Literal::usize_unsuffixed(self.region.leaves.len()), Literal::usize_unsuffixed(self.region.params.len()))
    }

    /// `[x0, _, x2]`: each name passed through `used`.
    fn pattern(&self, prefix: &str, n: usize, used: &dyn Fn(&Ident) -> Ident) -> TokenStream {
        let names = (0..n).map(|i| used(&local(prefix, i)));
        quote!([#(#names),*])
    }

    /// The tokens of an operand's value; in `backward` the root is `y`.
    fn operand(&self, src: Src, in_backward: bool) -> TokenStream {
        let ident = match src {
            Src::Const(k) => local("c", k),
            Src::Leaf(i) => local("x", i),
            Src::Param(i) => local("p", i),
            Src::Step(k) if in_backward && k == self.root => named("y"),
            Src::Step(k) => local("v", k),
        };
        quote!(#ident)
    }

    /// The value of `step` from its operands.
    fn value(&self, step: &Step, in_backward: bool) -> TokenStream {
        let args: Vec<TokenStream> = step.args.iter().map(|&s| self.operand(s, in_backward)).collect();
        match (step.op, args.as_slice()) {
            (StepOp::Binary(BinOp::Add), [a, b]) => quote!(#a + #b),
            (StepOp::Binary(BinOp::Sub), [a, b]) => quote!(#a - #b),
            (StepOp::Binary(BinOp::Mul), [a, b]) => quote!(#a * #b),
            (StepOp::Binary(_), [a, b]) => quote!(#a / #b),
            (StepOp::Neg, [a]) => quote!(-#a),
            (StepOp::Call(builtin), args) => {
                let f = Ident::new(builtin.name, Span::call_site());
                quote!(::grad_runtime::dsl::scalar::#f(#(#args),*))
            }
            _ => quote!(::core::compile_error!("grad!: a malformed fused step")),
        }
    }

    /// The gradient of step `k`'s value: `g` for the root.
    fn adjoint(&self, k: usize) -> Ident {
        if k == self.root { named("g") } else { local("g", k) }
    }

    /// Step `k`'s contributions to its operands' gradients.
    fn propagate(&self, k: usize, seen: &mut [bool]) -> TokenStream {
        let step = &self.region.steps[k];
        let adj = self.adjoint(k);
        let arg = |i: usize| self.operand(step.args[i], true);
        let contributions: Vec<TokenStream> = match step.op {
            StepOp::Binary(BinOp::Add) => vec![quote!(#adj), quote!(#adj)],
            StepOp::Binary(BinOp::Sub) => vec![quote!(#adj), quote!(-#adj)],
            StepOp::Binary(BinOp::Mul) => {
                let (a, b) = (arg(0), arg(1));
                vec![quote!(#adj * #b), quote!(#adj * #a)]
            }
            StepOp::Binary(_) => {
                let (b, y) = (arg(1), self.operand(Src::Step(k), true));
                vec![quote!(#adj / #b), quote!(-#adj * (#y / #b))]
            }
            StepOp::Neg => vec![quote!(#adj * ::grad_runtime::dsl::scalar::neg_df::<T>())],
            StepOp::Call(builtin) => {
                let df = format_ident!("{}_df", builtin.name);
                let reads = match builtin.fusion {
                    Fusion::Elementwise(Reads::Output) => self.operand(Src::Step(k), true),
                    _ => arg(0),
                };
                let params = (1..step.args.len()).map(arg);
                vec![quote!(#adj * ::grad_runtime::dsl::scalar::#df(#reads #(, #params)*))]
            }
            StepOp::Fold(_) => Vec::new(),
        };
        let mut out = TokenStream::new();
        for (src, contribution) in step.args.iter().zip(contributions) {
            match *src {
                Src::Step(j) => {
                    let g = self.adjoint(j);
                    out.extend(quote!(let #g = #contribution;));
                }
                Src::Leaf(i) => {
                    let d = local("d", i);
                    out.extend(if seen[i] {
                        quote!(let #d = #d + #contribution;)
                    } else {
                        quote!(let #d = #contribution;)
                    });
                    seen[i] = true;
                }
                Src::Param(_) | Src::Const(_) => {}
            }
        }
        out
    }
}
