//! Appending a node to the arena without first building it on the stack.
//!
//! `nodes.push(Node { .. })` assembles the 144-byte node in a stack slot,
//! field by field, and then copies the slot into the vector with `memcpy`.
//! That copy reads the slot back with 64-byte loads a few instructions after
//! the narrower stores that filled it, before the CPU has committed them:
//! each load spans several pending stores, so it cannot be forwarded from
//! them and waits until they reach the cache. Every op paid that stall once:
//! `perf` put 26% of the samples of W2's forward as `g_*` calls, and 10% of
//! it as `grad!` blocks, on that `memcpy`, while callgrind counted only ~60
//! instructions in it. Without the copy, W2 went from 111 to 105 ns a node
//! as `g_*` calls and from 0.169 to 0.163 ms as `grad!` blocks
//! (`figures --bench w2`, 3 alternated runs of each build).
//!
//! Writing each field straight into the vector's spare capacity leaves no
//! slot to read back.

// The one use of `unsafe` outside the SIMD dispatch (see lib.rs): proved
// sound below and tested at the end of this file.
#![allow(unsafe_code)]

use super::Node;
use crate::Float;
use crate::ops::Op;
use crate::tensor::Tensor;

/// Stops compiling if `Node` gains a field: `append` must then write it too
/// (its soundness rests on writing every field).
const _: fn(Node<f32>) = |Node { op: _, value: _, generation: _, requires_grad: _ }| {};

/// Appends the node `{ op, value, generation, requires_grad }` to `nodes`.
#[inline(always)]
pub(super) fn append<T: Float>(
    nodes: &mut Vec<Node<T>>,
    op: Op<T>,
    value: Tensor<T>,
    generation: u64,
    requires_grad: bool,
) {
    nodes.reserve(1);
    let len = nodes.len();
    let slot = nodes.spare_capacity_mut()[0].as_mut_ptr();
    // SAFETY: `reserve(1)` leaves room for one more node, so `slot` (the
    // first element of the spare capacity, which indexing checked exists)
    // points to memory owned by `nodes`, aligned and sized for a `Node<T>`
    // and not yet part of its initialised prefix. Each `write` initialises
    // one field through a raw pointer projected from `slot` (`&raw mut`,
    // which reads nothing and creates no reference to uninitialised
    // memory), and the four writes cover every field of `Node` (the
    // `const` above fails to compile if one is added), so after
    // them the element is a valid `Node<T>` (padding needs no value).
    // Nothing between `reserve` and `set_len` can panic or unwind (plain
    // writes of moved values), so `nodes` never holds an uninitialised
    // element, and `set_len(len + 1)` is within its capacity.
    unsafe {
        (&raw mut (*slot).op).write(op);
        (&raw mut (*slot).value).write(value);
        (&raw mut (*slot).generation).write(generation);
        (&raw mut (*slot).requires_grad).write(requires_grad);
        nodes.set_len(len + 1);
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{Dimension, IxDyn};

    use super::*;

    #[test]
    fn appended_nodes_read_back_whole_across_reallocations() {
        // Capacity 1, then growth on the 2nd, 3rd, 5th, 9th... append: every
        // path through `reserve`, with owned buffers that must survive it.
        let mut nodes = Vec::with_capacity(1);
        for k in 0..100_usize {
            let value = Tensor::new(IxDyn(&[k % 3 + 1, 2]), vec![k as f32; (k % 3 + 1) * 2]);
            append(&mut nodes, Op::Sum(k.saturating_sub(1)), value, k as u64, k % 2 == 0);
        }
        assert_eq!(nodes.len(), 100);
        for (k, node) in nodes.iter().enumerate() {
            assert!(matches!(node.op, Op::Sum(id) if id == k.saturating_sub(1)));
            assert_eq!(node.value.shape.slice(), [k % 3 + 1, 2]);
            assert_eq!(node.value.data, vec![k as f32; (k % 3 + 1) * 2]);
            assert_eq!((node.generation, node.requires_grad), (k as u64, k % 2 == 0));
        }
    }

    #[test]
    fn appended_nodes_drop_their_buffers_once() {
        // A node owns its value's buffer and its op's payload: both must
        // be readable, and dropping the vector frees each once (a second
        // free of one aborts under glibc's heap checks; Miri, where it
        // runs, checks every access).
        let mut nodes = Vec::new();
        for k in 0..10 {
            let op = Op::CrossEntropy { logits: k, targets: vec![k; k + 1] };
            append(&mut nodes, op, Tensor::new(IxDyn(&[k + 1]), vec![0.5; k + 1]), 0, true);
        }
        let Op::CrossEntropy { targets, .. } = &nodes[9].op else { panic!("the op is kept") };
        assert_eq!(targets.len(), 10);
        drop(nodes);
    }
}
