//! Every backward rule, checked three ways, one module per ops module of
//! `grad-runtime/src/ops/` (same names): central finite differences in f64,
//! an analytic identity that must hold to the bit, and the PyTorch float64
//! oracles (`oracle.rs` replays them through each module's `replay`).

#[path = "../common/mod.rs"]
mod common;

mod arithmetic;
mod attention;
mod attention_packed;
mod batch_norm;
mod conv;
mod cross_entropy;
mod cumsum;
mod custom;
mod detach;
mod dropout;
mod embedding;
mod fused;
mod group_norm;
mod hvp;
mod index;
mod layer_norm;
mod layout;
mod matmul;
mod mse;
mod oracle;
mod permute;
mod reduce;
mod second_order;
mod select;
mod softmax;
mod unary;
