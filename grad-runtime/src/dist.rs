//! Data-parallel training across processes and machines over MPI (the `mpi`
//! cargo feature, off by default).
//!
//! Every rank (one process, launched by `mpirun`) holds the whole model and
//! its own optimizer, and trains on its own share of each batch. A [`Dist`]
//! wraps the MPI communicator and keeps the ranks in lockstep:
//!
//! - [`Dist::broadcast_params`] copies rank 0's registered parameters to
//!   every rank once, before training, so all ranks start identical
//!   whatever their seeds;
//! - [`Dist::step`] replaces `opt.step(&mut tape)` after `backward`: it
//!   averages the gradients of the optimizer's registered parameters across
//!   ranks (sum / world size) with **one** `MPI_Allreduce` over one
//!   contiguous buffer, then runs the optimizer's own step, which therefore
//!   clips by the global norm of the *averaged* gradient and refuses a
//!   non-finite one on every rank alike;
//! - every [`set_check_every`](Dist::set_check_every) steps (100 by
//!   default) it compares a checksum of every rank's parameter bits and
//!   returns [`ErrorKind::ParamsDiverged`] if one drifted.
//!
//! ```no_run
//! use grad_runtime::dist::Dist;
//! use grad_runtime::{grad, Adam, Tape};
//! # fn main() -> Result<(), grad_runtime::GradError> {
//! let mut dist = Dist::<f32>::init()?;      // MPI_Init; MPI_Finalize when dropped
//! let mut tape = Tape::<f32>::new();
//! let w = tape.param(ndarray::Array2::<f32>::zeros((4, 2)));
//! let mut opt = Adam::new(1e-3);
//! opt.add(&tape, w, 0.0)?;
//! dist.broadcast_params(&mut tape, &opt)?;   // rank 0's initial values everywhere
//! let mark = tape.mark();
//! for _ in 0..10 {
//!     // this rank's share of the batch
//!     let x = tape.constant(ndarray::Array2::<f32>::ones((8, 4)));
//!     let loss = grad!(tape; mean(x @ w));
//!     tape.backward(loss)?;
//!     dist.step(&mut tape, &mut opt)?;       // allreduce, then opt.step
//!     tape.reset_to(mark);
//! }
//! # Ok(()) }
//! ```
//!
//! # The exchange, exactly
//!
//! The buffer of a step holds, in the tape's float type: one error slot per
//! rank, one "has a gradient" count per registered parameter, then every
//! registered parameter's gradient in registration order (zeros where this
//! rank has none). After the elementwise-sum allreduce:
//!
//! - if any error slot is non-zero, the step fails on **every** rank before
//!   anything is written: a rank that failed (a poisoned tape, a stale
//!   parameter, an unregistered parameter with a gradient: the checks of
//!   [`Optimizer::check_step`]) returns its own error, the others
//!   [`ErrorKind::RankFailed`] naming it. Parameters, gradients and the
//!   optimizer state are untouched everywhere, and no rank waits for a
//!   rank that gave up: the error is agreed inside the one collective call;
//! - a parameter whose count is 0 had a gradient on no rank: its gradient
//!   stays absent and the optimizer skips it, as in one process;
//! - every other gradient becomes sum / world size, written on every rank
//!   (made where this rank's backward did not reach the parameter).
//!
//! Bit-identical parameters rely on the allreduce giving every rank the same
//! bits. The MPI standard only advises it (MPI-4.0 §6.9.1); Open MPI's
//! reduction algorithms for a commutative operation (recursive doubling,
//! ring, Rabenseifner: each either reduces a block once and distributes it,
//! or adds the same two partial sums on both partners, and IEEE addition is
//! commutative) provide it, and the periodic checksum turns any violation
//! into an error instead of silent drift. Summation order differs from one
//! process with the whole batch, so 2 ranks at batch B/2 equal 1 rank at
//! batch B only up to rounding (the guide, `guide/data_parallel.md`).
//!
//! # Failures
//!
//! An error a rank *returns* is agreed as above. A rank that *dies* (a
//! panic, a signal, `std::process::exit`) is not: Open MPI's `mpirun`
//! notices the process ended without `MPI_Finalize` and aborts the whole
//! job, killing the other ranks (which would otherwise wait in the
//! collective forever). There is no recovery inside a job; resume from a
//! checkpoint (`save`/`save_state` on rank 0).

use std::panic::Location;
use std::time::Instant;

pub use mpi;
use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence, Root};

use crate::error::{ErrorKind, GradError};
use crate::{Float, Optimizer, Tape};

/// One rank of a data-parallel job: the communicator, the exchange buffers,
/// and the time spent communicating. See the [module docs](self).
pub struct Dist<T> {
    // Field order is drop order: the communicator before the universe,
    // whose drop calls MPI_Finalize.
    comm: SimpleCommunicator,
    universe: Option<Universe>,
    rank: usize,
    size: usize,
    check_every: u64,
    steps: u64,
    send: Vec<T>,
    recv: Vec<T>,
    stats: CommStats,
}

/// What a [`Dist`] spent on gradient exchange so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CommStats {
    /// Gradient allreduce calls (one per step).
    pub allreduces: u64,
    /// Bytes this rank handed to those allreduces.
    pub bytes: u64,
    /// Wall-clock seconds inside them (including waiting for slower ranks).
    pub seconds: f64,
}

impl<T: Float + Equivalence> Dist<T> {
    /// Initialises MPI and wraps `MPI_COMM_WORLD`; MPI is finalised when the
    /// `Dist` is dropped. Under `mpirun` each process becomes one rank; run
    /// alone, Open MPI makes a job of one rank. An error if MPI was already
    /// initialised in this process (use [`with_communicator`](Dist::with_communicator)).
    #[track_caller]
    pub fn init() -> Result<Dist<T>, GradError> {
        let location = Location::caller();
        let Some(universe) = mpi::initialize() else {
            let kind = ErrorKind::InvalidArgument {
                name: "MPI",
                value: f64::NAN,
                expected: "MPI not initialised yet in this process (Dist::init initialises it once)",
            };
            return Err(GradError::new("Dist::init", kind, Vec::new(), location));
        };
        let mut dist = Dist::with_communicator(universe.world());
        dist.universe = Some(universe);
        Ok(dist)
    }

    /// Wraps a communicator of an MPI the caller initialised (and finalises).
    pub fn with_communicator(comm: SimpleCommunicator) -> Dist<T> {
        let rank = usize::try_from(comm.rank()).expect("MPI ranks are >= 0");
        let size = usize::try_from(comm.size()).expect("MPI sizes are >= 1");
        Dist {
            comm,
            universe: None,
            rank,
            size,
            check_every: 100,
            steps: 0,
            send: Vec::new(),
            recv: Vec::new(),
            stats: CommStats::default(),
        }
    }

    /// This process's rank, `0..size()`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks (the world size).
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether this is rank 0, the one that prints and saves.
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    /// The wrapped communicator, for the caller's own collectives.
    pub fn communicator(&self) -> &SimpleCommunicator {
        &self.comm
    }

    /// Checks that parameters are bit-identical on every rank after every
    /// `n`-th [`step`](Dist::step); 0 never checks. 100 by default.
    pub fn set_check_every(&mut self, n: u64) {
        self.check_every = n;
    }

    /// Steps taken through [`step`](Dist::step) (refused ones not counted).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Time and bytes spent in gradient allreduces so far.
    pub fn stats(&self) -> CommStats {
        self.stats
    }

    /// The elementwise sum of `values` over all ranks, in place, on every
    /// rank: for metrics (summed losses, correct counts), not gradients.
    pub fn all_sum(&self, values: &mut [f64]) {
        let send = values.to_vec();
        self.comm.all_reduce_into(&send[..], values, SystemOperation::sum());
    }

    /// Copies rank 0's values of `opt`'s registered parameters to every
    /// rank, in one broadcast. Call it once after registering them, before
    /// training. An error on every rank ([`ErrorKind::ParamsLayout`]) if
    /// the ranks registered different element counts; any error of
    /// [`Optimizer::check_step`] first on the rank it concerns (then the
    /// others fail with [`ErrorKind::RankFailed`]).
    #[track_caller]
    pub fn broadcast_params(&mut self, tape: &mut Tape<T>, opt: &impl Optimizer<T>) -> Result<(), GradError> {
        let location = Location::caller();
        let op = "Dist::broadcast_params";
        self.agree_layout(op, tape, opt, location)?;
        let mut buffer = std::mem::take(&mut self.send);
        buffer.clear();
        if self.is_root() {
            for (_, var, _) in opt.registered() {
                buffer.extend_from_slice(&tape.value_of(var.index()).data);
            }
        } else {
            buffer.resize(elements(opt), T::default());
        }
        self.comm.process_at_rank(0).broadcast_into(&mut buffer[..]);
        if !self.is_root() {
            let mut offset = 0;
            for (_, var, _) in opt.registered() {
                let value = tape.value_mut(var.index());
                value.copy_from_slice(&buffer[offset..offset + value.len()]);
                offset += value.len();
            }
        }
        self.send = buffer;
        Ok(())
    }

    /// Agrees on errors and on the registered element count before a broadcast.
    fn agree_layout(
        &mut self,
        op: &'static str,
        tape: &Tape<T>,
        opt: &impl Optimizer<T>,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        let local = opt.check_step(tape);
        let elements = if local.is_ok() { elements(opt) as u64 } else { u64::MAX };
        let mut all = vec![0u64; self.size];
        self.comm.all_gather_into(&elements, &mut all[..]);
        local?;
        let failed: Vec<usize> = (0..self.size).filter(|&r| all[r] == u64::MAX).collect();
        if !failed.is_empty() {
            return Err(GradError::new(op, ErrorKind::RankFailed { ranks: failed }, Vec::new(), location));
        }
        if let Some(rank) = (0..self.size).find(|&r| all[r] != all[0]) {
            let kind = ErrorKind::ParamsLayout { rank, expected: all[0], found: all[rank] };
            return Err(GradError::new(op, kind, Vec::new(), location));
        }
        Ok(())
    }

    /// One data-parallel training step, after `tape.backward(loss)`:
    /// [`average_gradients`](Dist::average_gradients), then `opt.step(tape)`
    /// (identical on every rank), then, every `check_every` steps,
    /// [`check_params`](Dist::check_params). On an error nothing was
    /// updated on any rank (except a checksum error, found after the update).
    #[track_caller]
    pub fn step(&mut self, tape: &mut Tape<T>, opt: &mut impl Optimizer<T>) -> Result<(), GradError> {
        let location = Location::caller();
        self.average_gradients_at(tape, opt, location)?;
        opt.step(tape)?;
        self.steps += 1;
        if self.check_every > 0 && self.steps.is_multiple_of(self.check_every) {
            self.check_params_at(tape, opt, location)?;
        }
        Ok(())
    }

    /// Replaces the gradient of every registered parameter of `opt` by its
    /// average over the ranks (sum / world size), with one allreduce; a
    /// parameter that had a gradient on no rank keeps none. Fails on every
    /// rank, changing nothing, if any rank fails [`Optimizer::check_step`]
    /// (see the [module docs](self)). The ranks must have registered the
    /// same parameters ([`broadcast_params`](Dist::broadcast_params) checks).
    #[track_caller]
    pub fn average_gradients(&mut self, tape: &mut Tape<T>, opt: &impl Optimizer<T>) -> Result<(), GradError> {
        self.average_gradients_at(tape, opt, Location::caller())
    }

    fn average_gradients_at(
        &mut self,
        tape: &mut Tape<T>,
        opt: &impl Optimizer<T>,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        let local = opt.check_step(tape);
        let params = opt.registered().len();
        let header = self.size + params;
        let mut send = std::mem::take(&mut self.send);
        send.clear();
        send.resize(header, T::default());
        if local.is_err() {
            send[self.rank] = T::from_usize(1);
            // Every rank must hand the allreduce the same count, so a failed
            // rank sends as many zeros as the others send elements.
            send.resize(header + elements(opt), T::default());
        } else {
            for (i, (_, var, len)) in opt.registered().enumerate() {
                let id = var.index();
                match tape.grad_of(id) {
                    Some(grad) => {
                        send[self.size + i] = T::from_usize(1);
                        send.extend_from_slice(grad);
                    }
                    None => send.resize(send.len() + len, T::default()),
                }
            }
        }
        let mut recv = std::mem::take(&mut self.recv);
        recv.clear();
        recv.resize(send.len(), T::default());
        let start = Instant::now();
        self.comm.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
        self.stats.seconds += start.elapsed().as_secs_f64();
        self.stats.allreduces += 1;
        self.stats.bytes += (send.len() * size_of::<T>()) as u64;
        self.send = send;
        let result = self.unpack(tape, opt, local, &recv, location);
        self.recv = recv;
        result
    }

    /// Writes the averaged gradients, or returns the agreed error.
    fn unpack(
        &self,
        tape: &mut Tape<T>,
        opt: &impl Optimizer<T>,
        local: Result<(), GradError>,
        recv: &[T],
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        local?;
        let failed: Vec<usize> = (0..self.size).filter(|&r| recv[r] != T::default()).collect();
        if !failed.is_empty() {
            return Err(GradError::new("Dist::step", ErrorKind::RankFailed { ranks: failed }, Vec::new(), location));
        }
        let size = T::from_usize(self.size);
        let mut offset = self.size + opt.registered().len();
        for (i, (_, var, len)) in opt.registered().enumerate() {
            let id = var.index();
            if recv[self.size + i] != T::default() {
                let grad = tape.grad_mut_or_zeros(id);
                for (g, &sum) in grad.iter_mut().zip(&recv[offset..offset + len]) {
                    *g = sum / size;
                }
            }
            offset += len;
        }
        Ok(())
    }

    /// A checksum (64-bit FNV-1a over every element's bits, registration
    /// order) of `opt`'s registered parameters, compared across ranks with
    /// one allgather: [`ErrorKind::ParamsDiverged`] on every rank, naming
    /// the ranks whose parameters differ from rank 0's.
    #[track_caller]
    pub fn check_params(&mut self, tape: &Tape<T>, opt: &impl Optimizer<T>) -> Result<(), GradError> {
        self.check_params_at(tape, opt, Location::caller())
    }

    fn check_params_at(
        &mut self,
        tape: &Tape<T>,
        opt: &impl Optimizer<T>,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        let local = checksum(tape, opt);
        let mut all = vec![0u64; self.size];
        self.comm.all_gather_into(&local, &mut all[..]);
        let diverged: Vec<usize> = (1..self.size).filter(|&r| all[r] != all[0]).collect();
        if diverged.is_empty() {
            Ok(())
        } else {
            let kind = ErrorKind::ParamsDiverged { ranks: diverged };
            Err(GradError::new("Dist::check_params", kind, Vec::new(), location))
        }
    }
}

/// The registered parameters' element count (as registered, so a handle
/// `reset_to` dropped still counts).
fn elements<T: Float>(opt: &impl Optimizer<T>) -> usize {
    opt.registered().map(|(_, _, len)| len).sum()
}

/// FNV-1a over the bits of every registered parameter's elements (a handle
/// that is not a live node of `tape` hashes as no elements).
fn checksum<T: Float>(tape: &Tape<T>, opt: &impl Optimizer<T>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (_, var, _) in opt.registered() {
        let Ok(id) = tape.check(var) else { continue };
        for &x in &tape.value_of(id).data {
            hash ^= x.to_f64().to_bits();
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}
