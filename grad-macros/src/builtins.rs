//! Every built-in function of the DSL, in one table: its name, the runtime
//! function it becomes, the kind of each argument and its shape rule.
//!
//! Adding a built-in is one row here, in the section named for the
//! runtime module that holds its op (`grad-runtime/src/ops/<module>.rs`),
//! plus a [`Rule`] variant and function in `rules.rs` if no existing rule
//! fits. The parser resolves each call to its row once (by name and
//! argument count) and keeps it in the AST; validation checks the
//! arguments against the row's kinds, the shape pass applies its rule, and
//! the expansion calls its runtime function. `tests/builtins_link.rs`
//! checks that every row's function exists in `grad_runtime` and that every
//! runtime op has a row.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

use crate::ast::BinOp;
use crate::rules::Rule;

/// What an argument is, which decides how it is parsed and passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A tensor: any DSL expression that is a `Var`.
    Var,
    /// A scalar of the tape's float type `T`: a literal, a Rust variable,
    /// or a `{ Rust block }`.
    Scalar,
    /// An `isize` axis, negative counting from the end: an integer literal
    /// (`-1`) or a Rust expression.
    Axis,
    /// A `usize` count (conv's `groups`): a non-negative integer literal or
    /// a Rust expression.
    Count,
    /// A `bool`: `true`, `false` or a Rust expression.
    Flag,
    /// A `&[usize]` list `[d, ...]`: each entry an integer literal, a
    /// declared symbol (`B`, its size at run time), a Rust `usize`
    /// variable, a `{ block }`, or a product of these (`B * T`).
    Dims,
    /// A `[usize; 2]` pair `[rows, columns]` (a conv's stride): two
    /// entries as in [`Kind::Dims`], passed as an array, not a slice.
    Pair,
    /// Rust tokens passed through untouched (`&mut rng`).
    Rust,
    /// Integer indices (`&ids`, `&targets`), Rust tokens passed through
    /// untouched; written as a name the block declares or `&` of one
    /// (`ids: [B, T]`), their shape is known to the shape rule.
    Indices,
}

/// One parameter: its name (for messages) and kind; a parameter with a
/// default may be left out (trailing parameters only).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Param {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) default: Option<&'static str>,
}

/// How a built-in enters a fused region (`fuse.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fusion {
    /// Never: a region ends at it, and its result is an input of the region around it.
    No,
    /// An elementwise function: a step of the region's plan, named as the
    /// built-in (`grad_runtime::dsl::step::<name>`).
    Elementwise,
    /// `sum(x)` and `mean(x)`: folded into the region they reduce.
    Fold,
}

/// A built-in function of the DSL.
#[derive(Debug)]
pub(crate) struct Builtin {
    /// The DSL name, `softmax`.
    pub(crate) name: &'static str,
    /// The function of `grad_runtime` it calls, `g_softmax`.
    pub(crate) func: &'static str,
    pub(crate) params: &'static [Param],
    pub(crate) rule: Rule,
    pub(crate) fusion: Fusion,
}

impl Builtin {
    /// The fewest arguments a call may give.
    pub(crate) fn required(&self) -> usize {
        self.params.iter().take_while(|p| p.default.is_none()).count()
    }

    pub(crate) fn accepts(&self, argc: usize) -> bool {
        (self.required()..=self.params.len()).contains(&argc)
    }

    /// `softmax(x, axis)`, `sum(x, axis, keepdim = false)`.
    pub(crate) fn usage(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| match p.default {
                Some(default) => format!("{} = {default}", p.name),
                None => p.name.to_string(),
            })
            .collect();
        format!("{}({})", self.name, params.join(", "))
    }
}

const fn param(name: &'static str, kind: Kind) -> Param {
    Param { name, kind, default: None }
}

const X: Param = param("x", Kind::Var);
const A: Param = param("a", Kind::Var);
const B: Param = param("b", Kind::Var);
const AXIS: Param = param("axis", Kind::Axis);

const fn row(name: &'static str, func: &'static str, params: &'static [Param], rule: Rule) -> Builtin {
    Builtin { name, func, params, rule, fusion: Fusion::No }
}

/// An elementwise built-in.
const fn elementwise(name: &'static str, func: &'static str, params: &'static [Param]) -> Builtin {
    Builtin { name, func, params, rule: Rule::Same, fusion: Fusion::Elementwise }
}

const fn unary(name: &'static str, func: &'static str) -> Builtin {
    elementwise(name, func, &[X])
}

/// `sum(x)` or `mean(x)`: every element to a scalar, folded into a region.
const fn fold(name: &'static str, func: &'static str) -> Builtin {
    Builtin { name, func, params: &[X], rule: Rule::ReduceAll, fusion: Fusion::Fold }
}

/// The built-ins, in the order the manual lists them. A name may have
/// several rows with different arities (`sum(x)`, `sum(x, axis)`).
pub(crate) const BUILTINS: &[Builtin] = &[
    // ops/unary.rs (the operators of ops/arithmetic.rs are in `operator`).
    unary("relu", "g_relu"),
    unary("sigmoid", "g_sigmoid"),
    unary("tanh", "g_tanh"),
    unary("exp", "g_exp"),
    unary("log", "g_log"),
    unary("sqrt", "g_sqrt"),
    unary("abs", "g_abs"),
    unary("gelu", "g_gelu"),
    unary("silu", "g_silu"),
    unary("softplus", "g_softplus"),
    elementwise("pow", "g_pow", &[X, param("p", Kind::Scalar)]),
    elementwise("leaky_relu", "g_leaky_relu", &[X, param("slope", Kind::Scalar)]),
    elementwise("clamp", "g_clamp", &[X, param("lo", Kind::Scalar), param("hi", Kind::Scalar)]),
    // ops/reduce.rs
    fold("sum", "g_sum"),
    row("sum", "g_sum_axis", &[X, AXIS, KEEPDIM], Rule::ReduceAxis),
    fold("mean", "g_mean"),
    row("mean", "g_mean_axis", &[X, AXIS, KEEPDIM], Rule::ReduceAxis),
    row("max", "g_max_axis", &[X, AXIS, KEEPDIM], Rule::ReduceAxis),
    row("min", "g_min_axis", &[X, AXIS, KEEPDIM], Rule::ReduceAxis),
    // ops/matmul.rs
    row("matmul", "g_matmul", &[A, B], Rule::MatMul),
    row("bmm", "g_bmm", &[A, B], Rule::Bmm),
    // ops/attention.rs
    row(
        "attention",
        "g_attention",
        &[param("q", Kind::Var), param("k", Kind::Var), param("v", Kind::Var), param("causal", Kind::Flag)],
        Rule::Attention,
    ),
    // ops/attention_packed.rs
    row(
        "attention_packed",
        "g_attention_packed",
        &[param("qkv", Kind::Var), param("heads", Kind::Count), param("causal", Kind::Flag)],
        Rule::AttentionPacked,
    ),
    // ops/layout.rs
    row("transpose", "g_transpose", &[X], Rule::Transpose),
    row("reshape", "g_reshape", &[X, param("dims", Kind::Dims)], Rule::Reshape),
    row("flatten", "g_flatten", &[X, param("from_axis", Kind::Axis)], Rule::Flatten),
    row("slice", "g_slice", &[X, param("starts", Kind::Dims), param("stops", Kind::Dims)], Rule::Slice),
    row("concat", "g_concat", &[A, B, AXIS], Rule::Concat),
    // ops/permute.rs
    row("permute", "g_permute", &[X, param("axes", Kind::Dims)], Rule::Permute),
    // ops/softmax.rs
    row("softmax", "g_softmax", &[X, AXIS], Rule::Softmax),
    row("log_softmax", "g_log_softmax", &[X, AXIS], Rule::Softmax),
    // ops/mse.rs
    row("mse", "g_mse", &[param("y", Kind::Var), param("t", Kind::Var)], Rule::Mse),
    // ops/cross_entropy.rs
    row(
        "cross_entropy",
        "g_cross_entropy",
        &[param("logits", Kind::Var), param("targets", Kind::Indices)],
        Rule::CrossEntropy,
    ),
    // ops/embedding.rs
    row("embedding", "g_embedding", &[param("table", Kind::Var), param("ids", Kind::Indices)], Rule::Embedding),
    // ops/layer_norm.rs
    row(
        "layer_norm",
        "g_layer_norm",
        &[X, param("gamma", Kind::Var), param("beta", Kind::Var), param("eps", Kind::Scalar)],
        Rule::LayerNorm,
    ),
    // ops/batch_norm.rs
    row(
        "batch_norm",
        "g_batch_norm",
        &[
            X,
            param("running_mean", Kind::Var),
            param("running_var", Kind::Var),
            param("gamma", Kind::Var),
            param("beta", Kind::Var),
            param("train", Kind::Flag),
            param("momentum", Kind::Scalar),
            param("eps", Kind::Scalar),
        ],
        Rule::ChannelNorm,
    ),
    // ops/group_norm.rs
    row(
        "group_norm",
        "g_group_norm",
        &[
            X,
            param("groups", Kind::Count),
            param("gamma", Kind::Var),
            param("beta", Kind::Var),
            param("eps", Kind::Scalar),
        ],
        Rule::ChannelNorm,
    ),
    // ops/dropout.rs
    row(
        "dropout",
        "g_dropout",
        &[X, param("p", Kind::Scalar), param("rng", Kind::Rust), param("train", Kind::Flag)],
        Rule::Same,
    ),
    // ops/conv.rs
    row(
        "conv2d",
        "g_conv2d",
        &[
            X,
            param("w", Kind::Var),
            param("b", Kind::Rust),
            Param { name: "stride", kind: Kind::Pair, default: Some("[1, 1]") },
            Param { name: "padding", kind: Kind::Pair, default: Some("[0, 0]") },
            Param { name: "dilation", kind: Kind::Pair, default: Some("[1, 1]") },
            Param { name: "groups", kind: Kind::Count, default: Some("1") },
        ],
        Rule::Conv2d,
    ),
    // ops/pool.rs
    row("max_pool2d", "g_max_pool2d", POOL, Rule::Pool2d),
    row("avg_pool2d", "g_avg_pool2d", POOL, Rule::Pool2d),
    // ops/index.rs
    row("gather", "g_gather", &[X, AXIS, param("indices", Kind::Rust)], Rule::Gather),
    row("index_select", "g_index_select", &[X, AXIS, param("indices", Kind::Rust)], Rule::IndexSelect),
    // ops/select.rs (`where` has no method form: its first argument, the mask, is Rust data)
    row("where", "g_where", &[param("mask", Kind::Rust), A, B], Rule::Where),
    row("masked_fill", "g_masked_fill", &[X, param("mask", Kind::Rust), param("value", Kind::Scalar)], Rule::Same),
    // ops/cumsum.rs
    row("cumsum", "g_cumsum", &[X, AXIS], Rule::Softmax),
    // ops/detach.rs
    row("detach", "g_detach", &[X], Rule::Same),
    // ops/grad.rs: the gradient of `y` in `x`, recorded as ops.
    row("grad", "g_grad", &[param("y", Kind::Var), X], Rule::GradOf),
    // ops/checkpoint.rs: `x`'s ops as a segment recomputed in backward
    // (the expansion passes them as a closure, see `expand.rs`).
    row(CHECKPOINT, "g_checkpoint", &[X], Rule::Same),
];

/// The built-in whose argument is expanded as a closure, not a value.
pub(crate) const CHECKPOINT: &str = "checkpoint";

/// `max_pool2d` and `avg_pool2d`: `(x, kernel, stride, padding = [0, 0])`.
const POOL: &[Param] = &[
    X,
    param("kernel", Kind::Pair),
    param("stride", Kind::Pair),
    Param { name: "padding", kind: Kind::Pair, default: Some("[0, 0]") },
];

const KEEPDIM: Param = Param { name: "keepdim", kind: Kind::Flag, default: Some("false") };

/// The rows of `name`.
pub(crate) fn rows(name: &str) -> impl Iterator<Item = &'static Builtin> + '_ {
    BUILTINS.iter().filter(move |b| b.name == name)
}

/// The row of `name` that takes `argc` arguments; `Err` lists every row
/// of a built-in called with the wrong number; `Ok(None)` for a name that
/// is no built-in (a user's function).
pub(crate) fn resolve(name: &str, argc: usize) -> Result<Option<&'static Builtin>, Vec<&'static Builtin>> {
    let candidates: Vec<_> = rows(name).collect();
    if candidates.is_empty() {
        return Ok(None);
    }
    match candidates.iter().find(|b| b.accepts(argc)) {
        Some(found) => Ok(Some(found)),
        None => Err(candidates),
    }
}

/// The runtime function and shape rule of an operator on two tensors.
pub(crate) fn operator(op: BinOp) -> (&'static str, Rule) {
    match op {
        BinOp::Add => ("g_add", Rule::Broadcast),
        BinOp::Sub => ("g_sub", Rule::Broadcast),
        BinOp::Mul => ("g_mul", Rule::Broadcast),
        BinOp::Div => ("g_div", Rule::Broadcast),
        BinOp::MatMul => ("g_matmul", Rule::MatMul),
    }
}

/// Unary `-x`.
pub(crate) const NEG: &str = "g_neg";
/// `x + s` and `x - s` with a scalar `s`.
pub(crate) const ADD_SCALAR: &str = "g_adds";
/// `x * s` with a scalar `s`.
pub(crate) const MUL_SCALAR: &str = "g_muls";

/// Every (DSL form, runtime function) pair the expansion can emit.
fn links() -> impl Iterator<Item = (String, &'static str)> {
    let binary = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::MatMul]
        .map(|op| (format!("a {} b", op.symbol()), operator(op).0));
    let scalar = [("-x", NEG), ("x + s", ADD_SCALAR), ("x * s", MUL_SCALAR)].map(|(form, f)| (form.to_string(), f));
    let rows = BUILTINS.iter().map(|b| (b.usage(), b.func));
    binary.into_iter().chain(scalar).chain(rows)
}

/// The table for grad-runtime's link test (`tests/builtins_link.rs`): a
/// `&[(DSL form, runtime function name)]` that compiles only if every
/// function exists in `grad_runtime`.
pub(crate) fn link_table() -> TokenStream {
    let (forms, funcs): (Vec<String>, Vec<&str>) = links().unzip();
    let paths = funcs.iter().map(|f| Ident::new(f, Span::call_site()));
    quote! {
        {
            // A `use` names each function whatever its generic parameters.
            #[allow(unused_imports)]
            mod every_function_exists {
                #(use ::grad_runtime::#paths as _;)*
            }
            &[#((#forms, #funcs)),*] as &[(&str, &str)]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_well_formed() {
        for b in BUILTINS.iter() {
            assert!(b.func.starts_with("g_"), "{}", b.name);
            // The first parameter is the receiver of the method form; a row
            // whose first parameter is Rust data (`where`'s mask) has none.
            assert!(
                matches!(b.params[0].kind, Kind::Var | Kind::Rust),
                "{}: the first parameter must be a tensor (the method form's receiver) or Rust data",
                b.name
            );
            let defaults_trail = b.params.iter().skip_while(|p| p.default.is_none()).all(|p| p.default.is_some());
            assert!(defaults_trail, "{}: defaults must be trailing", b.name);
        }
    }

    #[test]
    fn rows_of_one_name_have_disjoint_arities() {
        let all: Vec<&Builtin> = BUILTINS.iter().collect();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                if a.name == b.name {
                    let overlap = (0..8).any(|n| a.accepts(n) && b.accepts(n));
                    assert!(!overlap, "{} has two rows for one arity", a.name);
                }
            }
        }
    }

    #[test]
    fn resolution_by_name_and_arity() {
        assert_eq!(resolve("softmax", 2).unwrap().unwrap().func, "g_softmax");
        assert!(resolve("linear", 2).unwrap().is_none());
        assert_eq!(resolve("softmax", 1).unwrap_err().len(), 1);
        assert_eq!(resolve("reshape", 2).unwrap().unwrap().params[1].kind, Kind::Dims);
        assert!(resolve("reshape", 3).is_err());
        assert_eq!(BUILTINS.iter().find(|b| b.name == "softmax").unwrap().usage(), "softmax(x, axis)");
        assert_eq!(resolve("sum", 2).unwrap().unwrap().usage(), "sum(x, axis, keepdim = false)");
        assert_eq!(resolve("sum", 1).unwrap().unwrap().func, "g_sum");
        assert_eq!(resolve("sum", 3).unwrap().unwrap().func, "g_sum_axis");
        assert_eq!(resolve("dropout", 4).unwrap().unwrap().params[2].kind, Kind::Rust);
    }
}
