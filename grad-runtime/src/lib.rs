//! Reverse-mode automatic differentiation on a single-owner tape.
//!
//! A [`Tape`] is an arena: every op (`g_add`, `g_matmul`, `g_softmax`, ...)
//! computes its value eagerly and appends one node; [`Tape::backward`]
//! walks the nodes once in reverse. Handles ([`Var`]) are small `Copy`
//! values checked on every use, values and gradients are borrowed
//! `ndarray` views, and errors poison the tape instead of panicking
//! ([`GradError`]).
//!
//! ```
//! use grad_runtime::{g_add, g_matmul, g_mse, g_relu, Tape};
//! use ndarray::{array, Array2};
//!
//! let mut tape = Tape::<f64>::new();
//! let w = tape.param(array![[0.5, -0.25], [0.75, 1.0]]);
//! let b = tape.param(array![0.1, -0.1]);
//! let mark = tape.mark();
//! for step in 0..3 {
//!     let x = tape.constant(Array2::from_elem((4, 2), f64::from(step)));
//!     let t = tape.constant(Array2::<f64>::ones((4, 2)));
//!     let xw = g_matmul(&mut tape, x, w);
//!     let z = g_add(&mut tape, xw, b);
//!     let y = g_relu(&mut tape, z);
//!     let loss = g_mse(&mut tape, y, t);
//!     tape.backward(loss)?;
//!     assert_eq!(tape.grad(w).shape(), &[2, 2]);
//!     tape.reset_to(mark); // parameters survive, the step's nodes go
//! }
//! assert_eq!(tape.len(), 2);
//! # Ok::<(), grad_runtime::GradError>(())
//! ```

// `grad!` and `#[derive(Params)]` expand to `::grad_runtime::...` paths; this
// makes those paths resolve inside the crate too (the `nn` layers use both).
extern crate self as grad_runtime;

mod backward;
mod batches;
mod broadcast;
mod claims;
#[doc(hidden)]
pub mod dsl;
mod error;
mod float;
pub mod init;
pub mod io;
pub mod nn;
mod ops;
mod optim;
mod params;
mod pool;
mod rng;
pub mod schedule;
mod tape;
mod tensor;
mod var;

pub use batches::Minibatches;
pub use error::{ErrorKind, GradError};
pub use float::Float;
/// Derives [`Params`](trait@Params) for a model struct; see the trait.
pub use grad_macros::Params;
#[doc = include_str!("grad_macro.md")]
pub use grad_macros::grad;
pub use ops::binary::{g_add, g_div, g_mul, g_sub};
pub use ops::dropout::g_dropout;
pub use ops::embedding::g_embedding;
pub use ops::layout::{g_concat, g_reshape, g_slice, g_transpose};
pub use ops::loss::{g_cross_entropy, g_mse};
pub use ops::matmul::{g_bmm, g_matmul};
pub use ops::norm::g_layer_norm;
pub use ops::reduce::{argmax, g_max_axis, g_mean, g_mean_axis, g_sum, g_sum_axis};
pub use ops::softmax::{g_log_softmax, g_softmax};
pub use ops::unary::{
    g_abs, g_adds, g_clamp, g_exp, g_gelu, g_leaky_relu, g_log, g_muls, g_neg, g_pow, g_relu, g_sigmoid, g_silu,
    g_softplus, g_sqrt, g_tanh,
};
pub use optim::{Adam, AdamW, Optimizer, Sgd};
pub use params::{ParamVisitor, Params};
pub use rng::Rng;
pub use tape::Tape;
pub use tensor::TensorInput;
pub use var::{Mark, Var};
