//! Reverse-mode automatic differentiation on a single-owner tape.
//!
//! A [`Tape`] is an arena: every op (`g_add`, `g_matmul`, `g_softmax`, ...)
//! computes its value eagerly and appends one node; [`Tape::backward`]
//! walks the nodes once in reverse. Handles ([`Var`]) are small `Copy`
//! values checked on every use, values and gradients are borrowed
//! `ndarray` views, and errors poison the tape instead of panicking
//! ([`GradError`]).
//!
//! New here? The [`guide`] starts with a first model in five minutes and
//! goes on to the `grad!` macro, models, saving and loading, optimizers,
//! errors, reliability and performance; [`guide::from_pytorch`] maps
//! PyTorch idioms to grad.
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

// No unsafe code but where a benchmark proved it worth it, allowed in that
// module alone with its soundness argument and tests: the SIMD dispatch
// (`simd.rs`), appending a node without a stack copy (`tape/append.rs`),
// the AVX512-BF16 micro-kernel of the bf16 products (`gemm/bf16.rs`) and
// the AVX-512 and AVX2 transposes of the `f32` packing (`gemm/transpose.rs`).
#![deny(unsafe_code)]
#![warn(missing_docs)]

// `grad!` and `#[derive(Params)]` expand to `::grad_runtime::...` paths; this
// makes those paths resolve inside the crate too (the `nn` layers use both).
extern crate self as grad_runtime;

mod batches;
mod broadcast;
mod cache;
pub mod check;
mod claims;
mod copy;
#[cfg(feature = "mpi")]
pub mod dist;
#[doc(hidden)]
pub mod dsl;
mod error;
mod finite;
mod float;
mod gemm;
pub mod guide;
mod indices;
pub mod init;
pub mod io;
mod math;
pub mod nn;
#[cfg(feature = "onnx")]
pub mod onnx;
mod ops;
mod optim;
mod pair;
mod parallel;
mod params;
mod pool;
mod rng;
pub mod schedule;
mod simd;
mod size;
mod tape;
mod tensor;
mod var;

/// The `ndarray` grad is built on (0.17): values and gradients are its
/// views and parameters its arrays. Use it through this path
/// (`use grad_runtime::ndarray::array;`) so the versions always match: an
/// array of another ndarray release is not a [`TensorInput`], and the error
/// then reads `ArrayBase<...>: TensorInput<f32> is not satisfied`.
pub use ndarray;

pub use batches::Minibatches;
pub use error::{ErrorKind, GradError};
pub use float::Float;
#[doc(hidden)]
pub use grad_macros::__builtin_table;
/// Derives [`Params`](trait@Params) for a model struct; see the trait.
pub use grad_macros::Params;
#[doc = include_str!("grad_macro.md")]
pub use grad_macros::grad;
pub use indices::Indices;
pub use ops::*;
pub use optim::{Adam, AdamW, Optimizer, Sgd};
pub use parallel::{num_threads, set_num_threads};
pub use params::{ParamVisitor, Params};
pub use rng::Rng;
pub use tape::{MemoryStats, Precision, Tape};
pub use tensor::TensorInput;
pub use var::{Mark, Var};

/// The README's example is a doctest too, so the first code a newcomer
/// copies compiles and runs. Only under `cfg(doctest)`: the README lies
/// outside this package, and is read only when the doctests are built.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
