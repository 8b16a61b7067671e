//! The `grad!` macro; see the grad-runtime crate, which re-exports it.
