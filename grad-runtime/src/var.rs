//! Handles into a tape: [`Var`] names a node, [`Mark`] a point to rewind to.

use std::fmt;

/// A handle to one node of a [`Tape`](crate::Tape): small, `Copy`, and
/// checked on every use.
///
/// A `Var` remembers which tape made it and which generation of that tape's
/// nodes it belongs to, so a handle from another tape, or one whose node was
/// dropped by [`Tape::reset_to`](crate::Tape::reset_to), is reported as an
/// error instead of silently reading whatever node now sits at its index.
///
/// **The guarantee does not wear out.** Tape ids and generations are `u64`
/// counters: a new tape takes the next id of one process-wide counter, and
/// each `reset_to` advances its tape's generation by one. Neither wraps in
/// practice (at one tape or one reset per nanosecond, 2^64 takes 584 years),
/// so no number of tapes or resets can make an old handle match a new node.
/// Node indices are `usize`, so no tape is too long for its handles either.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Var {
    pub(crate) tape: u64,
    pub(crate) generation: u64,
    pub(crate) index: usize,
}

impl Var {
    /// The index no node ever has: the handle returned by an op that failed.
    const POISONED_INDEX: usize = usize::MAX;

    pub(crate) fn poisoned(tape: u64) -> Var {
        Var { tape, generation: 0, index: Self::POISONED_INDEX }
    }

    /// True for the handle an op returns when it failed or the tape was
    /// already poisoned; such a handle names no node.
    pub fn is_poisoned(self) -> bool {
        self.index == Self::POISONED_INDEX
    }

    /// The node's position on its tape (creation order).
    pub fn index(self) -> usize {
        self.index
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
///
/// A mark names its tape and generation with the same `u64` counters as
/// [`Var`], so a mark from another tape, or one an earlier `reset_to`
/// already went back past, is always recognised, however many tapes and
/// resets came before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    pub(crate) tape: u64,
    pub(crate) len: usize,
    pub(crate) generation: u64,
    /// Whether the tape already held an error when the mark was taken: such
    /// an error belongs to the earlier episode and survives `reset_to`.
    pub(crate) poisoned: bool,
}

impl Mark {
    /// The number of nodes the tape held when the mark was taken.
    pub fn len(self) -> usize {
        self.len
    }

    /// True when the mark was taken on an empty tape.
    pub fn is_empty(self) -> bool {
        self.len == 0
    }
}
