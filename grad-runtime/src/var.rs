//! Handles into a tape: [`Var`] names a node, [`Mark`] a point to rewind to.

use std::fmt;

/// A handle to one node of a [`Tape`](crate::Tape): small, `Copy`, and
/// checked on every use.
///
/// A `Var` remembers which tape made it and which generation of that tape's
/// nodes it belongs to, so a handle from another tape, or one whose node was
/// dropped by [`Tape::reset_to`](crate::Tape::reset_to), is reported as an
/// error instead of silently reading whatever node now sits at its index.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Var {
    pub(crate) tape: u32,
    pub(crate) generation: u32,
    pub(crate) index: u32,
}

impl Var {
    /// The index no node ever has: the handle returned by an op that failed.
    const POISONED_INDEX: u32 = u32::MAX;

    pub(crate) fn poisoned(tape: u32) -> Var {
        Var { tape, generation: 0, index: Self::POISONED_INDEX }
    }

    /// True for the handle an op returns when it failed or the tape was
    /// already poisoned; such a handle names no node.
    pub fn is_poisoned(self) -> bool {
        self.index == Self::POISONED_INDEX
    }

    /// The node's position on its tape (creation order).
    pub fn index(self) -> usize {
        self.index as usize
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_poisoned() {
            write!(f, "Var(poisoned)")
        } else {
            write!(f, "Var(#{} of tape {}, generation {})", self.index, self.tape, self.generation)
        }
    }
}

/// A point on a tape returned by [`Tape::mark`](crate::Tape::mark):
/// [`Tape::reset_to`](crate::Tape::reset_to) drops every node made after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    pub(crate) tape: u32,
    pub(crate) len: u32,
    pub(crate) generation: u32,
    /// Whether the tape already held an error when the mark was taken: such
    /// an error belongs to the earlier episode and survives `reset_to`.
    pub(crate) poisoned: bool,
}

impl Mark {
    /// The number of nodes the tape held when the mark was taken.
    pub fn len(self) -> usize {
        self.len as usize
    }

    /// True when the mark was taken on an empty tape.
    pub fn is_empty(self) -> bool {
        self.len == 0
    }
}
