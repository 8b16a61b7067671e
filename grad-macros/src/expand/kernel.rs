//! The kernel of a fused region: its plan as straight-line arithmetic,
//! one loop over a block of elements, which grad-runtime runs instead of
//! interpreting the plan on a region of a few dozen elements (there the
//! interpreter's decoding of each step costs more than the arithmetic).
//! It is a unit struct implementing `grad_runtime::dsl::Kernel`, whose
//! `run` grad-runtime compiles once for each SIMD level it dispatches to
//! (`grad_runtime::dsl::kernel`).
//!
//! Forward, each step's value in the plan's order. Backward, the values
//! the rules read (recomputed; the root's is the region's value `y`),
//! then from the root down each step's gradient handed to its operands
//! with the interpreter's own arithmetic: an inner step's gradient bound
//! once, a leaf's first contribution bound and later ones added, in the
//! interpreter's order. So a kernel gives the interpreter's bits. The
//! built-ins are `grad_runtime::dsl::lanes`'s, which are the
//! interpreter's scalar functions.
//!
//! A region gets no kernel (it is always interpreted) when it ends in a
//! folded `sum` or `mean`, passes a leaf as a built-in's scalar, or has a
//! leaf that no step reads as an operand; and a build with debug
//! assertions compiles none (`region.rs`).

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};

use crate::ast::BinOp;
use crate::fuse::{Region, Src, StepOp};

/// `struct NAME;` and its `Kernel<T>` impl, both compiled without debug
/// assertions only (`region.rs`), or `None` for a region that is always
/// interpreted.
pub(super) fn kernel(region: &Region, name: &Ident) -> Option<TokenStream> {
    let (leaves, params) = (region.leaves.len(), region.params.len());
    if leaves == 0 || !compilable(region) {
        return None;
    }
    let x = idents("x", leaves);
    let a = idents("_a", leaves);
    let d = idents("d", leaves);
    let p = idents("_p", params);
    let forward = forward(region);
    let backward = backward(region)?;
    // Every slice cut to the shortest, and to one block: a counted loop
    // the compiler vectorises (one vector of 16 `f32` with AVX-512), with
    // no bounds checks in it. `run` and the loops are inlined into each
    // SIMD level's version. Names a rule may not read start with `_`, so
    // that no lint needs to be allowed but clippy's count of arguments.
    Some(quote! {
        #[cfg(not(debug_assertions))]
        struct #name;
        #[cfg(not(debug_assertions))]
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T> for #name {
            #[allow(clippy::too_many_arguments)]
            #[inline(always)]
            fn run(lanes: ::grad_runtime::dsl::Lanes<'_, T>) {
                #[inline(always)]
                fn forward<T: ::grad_runtime::Float>(out: &mut [T], #(#x: &[T],)* #(#p: T),*) {
                    let n = out.len().min(::grad_runtime::dsl::BLOCK) #(.min(#x.len()))*;
                    let out = &mut out[..n];
                    #(let #x = &#x[..n];)*
                    for j in 0..n {
                        #(let #a = #x[j];)*
                        #forward
                    }
                }
                #[inline(always)]
                fn backward<T: ::grad_runtime::Float>(#(#d: &mut [T],)* #(#x: &[T],)* y: &[T], g: &[T], #(#p: T),*) {
                    let n = y.len().min(::grad_runtime::dsl::BLOCK).min(g.len()) #(.min(#x.len()))* #(.min(#d.len()))*;
                    let (y, g) = (&y[..n], &g[..n]);
                    #(let #x = &#x[..n];)*
                    #(let #d = &mut #d[..n];)*
                    for j in 0..n {
                        #(let #a = #x[j];)*
                        let (_y, _g) = (y[j], g[j]);
                        #backward
                    }
                }
                match lanes {
                    ::grad_runtime::dsl::Lanes::Forward { x, p, out } => {
                        if let ([#(#x),*], &[#(#p),*]) = (x, p) {
                            forward(out, #(#x,)* #(#p),*);
                        }
                    }
                    ::grad_runtime::dsl::Lanes::Backward { x, p, y, g, d } => {
                        if let ([#(#x),*], &[#(#p),*], [#(#d),*]) = (x, p, d) {
                            backward(#(#d,)* #(#x,)* y, g, #(#p),*);
                        }
                    }
                }
            }
        }
    })
}

/// Whether the region can be written as a kernel (see the module docs).
fn compilable(region: &Region) -> bool {
    let mut read = vec![false; region.leaves.len()];
    for step in &region.steps {
        let operands = match step.op {
            StepOp::Fold(_) => return false,
            StepOp::Call(_) if step.args[1..].iter().any(|s| !matches!(s, Src::Param(_))) => return false,
            StepOp::Call(_) | StepOp::Neg => &step.args[..1],
            StepOp::Binary(_) => &step.args[..],
        };
        for src in operands {
            if let Src::Leaf(i) = *src {
                read[i] = true;
            }
        }
    }
    !region.steps.is_empty() && read.iter().all(|&r| r)
}

/// `prefix0, prefix1, ...`.
fn idents(prefix: &str, n: usize) -> Vec<Ident> {
    (0..n).map(|k| format_ident!("{prefix}{k}")).collect()
}

/// An operand's value inside the loop.
fn operand(src: Src) -> Ident {
    match src {
        Src::Leaf(i) => format_ident!("_a{i}"),
        Src::Param(i) => format_ident!("_p{i}"),
        Src::Step(j) => format_ident!("_s{j}"),
    }
}

/// Step `k`'s value from its operands: `_s2 = lanes::tanh(_s1)`.
fn value(region: &Region, k: usize) -> TokenStream {
    let step = &region.steps[k];
    let a = operand(step.args[0]);
    match step.op {
        StepOp::Binary(op) => {
            let b = operand(step.args[1]);
            match op {
                BinOp::Add => quote!(#a + #b),
                BinOp::Sub => quote!(#a - #b),
                BinOp::Mul => quote!(#a * #b),
                _ => quote!(#a / #b),
            }
        }
        StepOp::Neg => quote!(-#a),
        StepOp::Call(b) | StepOp::Fold(b) => {
            let f = Ident::new(b.name, Span::call_site());
            let params = step.args[1..].iter().map(|&s| operand(s));
            quote!(::grad_runtime::dsl::lanes::#f(#a #(, #params)*))
        }
    }
}

/// The forward loop's body: every step's value, the last into `out`.
fn forward(region: &Region) -> TokenStream {
    let root = region.steps.len() - 1;
    let steps = (0..=root).map(|k| {
        let (s, v) = (format_ident!("_s{k}"), value(region, k));
        quote!(let #s = #v;)
    });
    let s_root = format_ident!("_s{root}");
    quote!(#(#steps)* out[j] = #s_root;)
}

/// The backward loop's body: the values below the root, then each
/// step's gradient handed to its operands from the root down, then each
/// leaf's gradient stored; `None` if a leaf would get no gradient.
fn backward(region: &Region) -> Option<TokenStream> {
    let root = region.steps.len() - 1;
    let mut body = TokenStream::new();
    for k in 0..root {
        let (s, v) = (format_ident!("_s{k}"), value(region, k));
        body.extend(quote!(let #s = #v;));
    }
    let s_root = format_ident!("_s{root}");
    let g_root = format_ident!("_g{root}");
    body.extend(quote!(let #s_root = _y; let #g_root = _g;));
    let mut has_adjoint = vec![false; region.steps.len()];
    has_adjoint[root] = true;
    let mut seen = vec![false; region.leaves.len()];
    for k in (0..=root).rev() {
        if !has_adjoint[k] {
            continue;
        }
        let step = &region.steps[k];
        let (gk, sk) = (format_ident!("_g{k}"), format_ident!("_s{k}"));
        let a = step.args[0];
        let terms: Vec<(Src, TokenStream)> = match step.op {
            StepOp::Call(b) | StepOp::Fold(b) => {
                let df = format_ident!("{}_df", b.name);
                let (x, params) = (operand(a), step.args[1..].iter().map(|&s| operand(s)));
                vec![(a, quote!(#gk * ::grad_runtime::dsl::lanes::#df(#x, #sk #(, #params)*)))]
            }
            StepOp::Neg => vec![(a, quote!(#gk * ::grad_runtime::dsl::lanes::minus_one::<T>()))],
            StepOp::Binary(op) => {
                let b = step.args[1];
                let (va, vb) = (operand(a), operand(b));
                match op {
                    BinOp::Add => vec![(a, quote!(#gk)), (b, quote!(#gk))],
                    BinOp::Sub => vec![(a, quote!(#gk)), (b, quote!(-#gk))],
                    BinOp::Mul => vec![(a, quote!(#gk * #vb)), (b, quote!(#gk * #va))],
                    _ => vec![(a, quote!(#gk / #vb)), (b, quote!(-#gk * (#sk / #vb)))],
                }
            }
        };
        for (src, term) in terms {
            match src {
                Src::Step(j) => {
                    has_adjoint[j] = true;
                    let gj = format_ident!("_g{j}");
                    body.extend(quote!(let #gj = #term;));
                }
                Src::Leaf(i) => {
                    let e = format_ident!("e{i}");
                    body.extend(if seen[i] { quote!(let #e = #e + #term;) } else { quote!(let #e = #term;) });
                    seen[i] = true;
                }
                Src::Param(_) => {}
            }
        }
    }
    if !seen.iter().all(|&s| s) {
        return None;
    }
    for i in 0..seen.len() {
        let (d, e) = (format_ident!("d{i}"), format_ident!("e{i}"));
        body.extend(quote!(#d[j] = #e;));
    }
    Some(body)
}
