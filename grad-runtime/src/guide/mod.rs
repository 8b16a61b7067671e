//! The guide: how to use grad, chapter by chapter.
//!
//! These modules hold no code, only documentation. Every Rust code block
//! in them is a doctest, compiled and run by `cargo test` (`cargo test -p
//! grad-runtime --doc` runs the guide alone), so the guide cannot drift
//! from the library. The chapters are markdown files beside this one
//! (`grad-runtime/src/guide/*.md`), readable on GitHub as well.
//!
//! | chapter | what it answers |
//! |---|---|
//! | [`getting_started`] | install, a first model in five minutes, the tape in one page |
//! | [`examples`] | the runnable examples, what each shows, the digits recipe |
//! | [`grad_macro`] | writing math with `grad!`, your own functions, shape checking |
//! | [`errors`] | reading an error: compile-time shape errors, run-time `GradError`s, NaNs |
//! | [`fusion`] | which operations fuse into one node, what that changes, what it costs |
//! | [`models`] | models as structs, `#[derive(Params)]`, `nn` layers, a custom layer, saving and loading |
//! | [`higher_order`] | gradients of gradients: Hessian-vector products, gradient penalties, physics-informed losses |
//! | [`extending`] | custom ops with their own backward, stop-gradient, the gradient check, buffers, batch and group norm |
//! | [`memory`] | what a step holds, checkpointing a block, inference mode, measured against PyTorch |
//! | [`optimizers`] | `Sgd`, `Adam`, `AdamW`, per-parameter decay, clipping, schedules, resuming |
//! | [`data_parallel`] | training over MPI (the `mpi` feature) |
//! | [`export`] | a trained model as an ONNX file for onnxruntime and other runtimes (the `onnx` feature) |
//! | [`reliability`] | what is guaranteed, and what is not |
//! | [`performance`] | the benchmark harness, the current figures and their machine, how to reproduce them |
//! | [`from_pytorch`] | a PyTorch idiom and its grad equivalent, and what grad lacks |
//!
//! The API reference is the rest of this crate's documentation; the full
//! manual of the macro is [`grad!`](crate::grad).

#[doc = include_str!("getting_started.md")]
pub mod getting_started {}

#[doc = include_str!("examples.md")]
pub mod examples {}

#[doc = include_str!("grad_macro.md")]
pub mod grad_macro {}

#[doc = include_str!("errors.md")]
pub mod errors {}

#[doc = include_str!("fusion.md")]
pub mod fusion {}

#[doc = include_str!("models.md")]
pub mod models {}

#[doc = include_str!("higher_order.md")]
pub mod higher_order {}

#[doc = include_str!("extending.md")]
pub mod extending {}

#[doc = include_str!("memory.md")]
pub mod memory {}

#[doc = include_str!("optimizers.md")]
pub mod optimizers {}

#[doc = include_str!("data_parallel.md")]
pub mod data_parallel {}

#[cfg(feature = "onnx")]
#[doc = include_str!("export.md")]
pub mod export {}

#[doc = include_str!("reliability.md")]
pub mod reliability {}

#[doc = include_str!("performance.md")]
pub mod performance {}

#[doc = include_str!("from_pytorch.md")]
pub mod from_pytorch {}
