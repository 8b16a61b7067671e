//! Nothing left out silently: a tape remembers which of its parameters an
//! optimizer registered (or [`Tape::freeze`] fixed on purpose), and every
//! optimizer's `step` refuses to run while a parameter that received a
//! gradient is claimed by neither: it would never be trained, and nothing
//! else would say so.
//!
//! The rule is an error, not a warning: the step returns
//! [`ErrorKind::UnregisteredParameter`] naming the parameter (`#index`, its
//! position on the tape, and its shape) and updates nothing. It holds
//! across optimizers (a model split between `Adam` and `Sgd` is fine), and
//! checks only parameters backward reached, so a parameter no loss uses
//! never trips it.

use std::panic::Location;
use std::sync::Mutex;

use crate::error::{ErrorKind, GradError};
use crate::{Float, Tape, Var};

/// For each node position, the generation of the parameter claimed there.
///
/// Optimizers register parameters through `&Tape` (their `add` borrows the
/// tape shared), so the set sits behind a lock; it is taken once per
/// `add` and once per step, and never allocates in a step.
#[derive(Default)]
pub(crate) struct Claims {
    generations: Mutex<Vec<Option<u64>>>,
}

impl Claims {
    /// Records that `var` (a live parameter) is taken care of.
    pub(crate) fn claim(&self, var: Var) {
        let mut generations = self.generations.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let index = var.index();
        if generations.len() <= index {
            generations.resize(index + 1, None);
        }
        generations[index] = Some(var.generation);
    }

    /// Refuses the first parameter of `tape` that has a gradient and no claim.
    pub(crate) fn check<T: Float>(
        &self,
        op: &'static str,
        tape: &Tape<T>,
        location: &'static Location<'static>,
    ) -> Result<(), GradError> {
        let generations = self.generations.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let unclaimed = (0..tape.len()).find(|&id| {
            tape.is_param(id)
                && tape.grad_of(id).is_some()
                && generations.get(id).copied().flatten() != Some(tape.generation_of(id))
        });
        match unclaimed {
            Some(id) => {
                let kind = ErrorKind::UnregisteredParameter { name: format!("#{id}") };
                Err(GradError::new(op, kind, vec![tape.shape(id).to_vec()], location))
            }
            None => Ok(()),
        }
    }
}

impl<T: Float> Tape<T> {
    /// Keeps the parameter `var` fixed on purpose: no optimizer has it, and
    /// optimizer steps stop reporting it when it receives a gradient (see
    /// [`ErrorKind::UnregisteredParameter`]). A frozen parameter an
    /// optimizer does register is still trained by it.
    ///
    /// ```
    /// use grad_runtime::{g_add, g_sum, ErrorKind, Sgd, Tape};
    /// use ndarray::array;
    ///
    /// let mut tape = Tape::<f64>::new();
    /// let trained = tape.param(array![1.0, 2.0]);
    /// let fixed = tape.param(array![0.5, 0.5]); // e.g. a pretrained embedding
    /// let mut opt = Sgd::new(0.1);
    /// opt.add(&tape, trained, 0.0)?;
    /// let mark = tape.mark();
    /// let step = |tape: &mut Tape<f64>, opt: &mut Sgd<f64>| {
    ///     let sum = g_add(tape, trained, fixed);
    ///     let loss = g_sum(tape, sum);
    ///     tape.backward(loss)?;
    ///     let result = opt.step(tape);
    ///     tape.reset_to(mark);
    ///     result
    /// };
    /// let err = step(&mut tape, &mut opt).unwrap_err();
    /// assert!(matches!(err.kind(), ErrorKind::UnregisteredParameter { name } if name == "#1"));
    /// tape.freeze(fixed)?;
    /// step(&mut tape, &mut opt)?;
    /// assert_eq!(tape.value(fixed), array![0.5, 0.5].into_dyn());
    /// # Ok::<(), grad_runtime::GradError>(())
    /// ```
    ///
    /// Errors: `var` is not a live parameter of this tape.
    #[track_caller]
    pub fn freeze(&mut self, var: Var) -> Result<(), GradError> {
        const OP: &str = "Tape::freeze";
        let location = Location::caller();
        let id = self.check_or_error(OP, var, location)?;
        if !self.is_param(id) {
            let shapes = vec![self.shape(id).to_vec()];
            return Err(GradError::new(OP, ErrorKind::NotAParameter, shapes, location));
        }
        self.claims().claim(var);
        Ok(())
    }
}
