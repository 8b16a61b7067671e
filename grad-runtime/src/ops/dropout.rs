//! `dropout`: a composite of a random mask (a constant node) and `g_mul`,
//! so its backward is the multiplication's.

use std::panic::Location;

use crate::error::ErrorKind;
use crate::ops::Op;
use crate::ops::arithmetic::g_mul;
use crate::{Float, Rng, Tape, Var};

/// Inverted dropout: in training (`train = true`) each element is zeroed
/// with probability `p` and the survivors are scaled by `1 / (1 - p)`, so
/// the expected value is unchanged; in evaluation (`train = false`) it is
/// the identity and returns `x` itself. The mask is drawn from `rng`, so a
/// run is reproducible from the generator's seed. `p` must be in `[0, 1)`.
///
/// Gradient: `g` times the same mask.
///
/// ```
/// use grad_runtime::{g_dropout, Rng, Tape};
/// use ndarray::Array1;
///
/// let mut tape = Tape::<f32>::new();
/// let x = tape.param(Array1::<f32>::ones(1000));
/// let mut rng = Rng::new(7);
/// let y = g_dropout(&mut tape, x, 0.25, &mut rng, true);
/// let kept = tape.value(y).iter().filter(|&&v| v != 0.0).count();
/// assert!((700..800).contains(&kept));
/// assert!(tape.value(y).iter().all(|&v| v == 0.0 || v == 1.0 / 0.75));
/// assert_eq!(g_dropout(&mut tape, x, 0.25, &mut rng, false), x);
/// ```
#[track_caller]
pub fn g_dropout<T: Float>(tp: &mut Tape<T>, x: Var, p: T, rng: &mut Rng, train: bool) -> Var {
    const NAME: &str = "g_dropout";
    let location = Location::caller();
    let Some([id]) = tp.resolve(NAME, [x], location) else {
        return tp.poisoned_var();
    };
    if !(T::zero()..T::one()).contains(&p) {
        let kind = ErrorKind::InvalidArgument { name: "p", value: p.to_f64(), expected: "a probability in [0, 1)" };
        return tp.fail(NAME, kind, &[id], location);
    }
    if !train || p == T::zero() {
        return x;
    }
    let keep_scale = T::one() / (T::one() - p);
    let p = p.to_f64();
    let Some(mut mask) = tp.output(NAME, tp.value_of(id).shape.clone(), &[id], location) else {
        return tp.poisoned_var();
    };
    for m in &mut mask.data {
        *m = if rng.uniform() < p { T::zero() } else { keep_scale };
    }
    let mask = tp.push(Op::DropoutMask, mask);
    g_mul(tp, x, mask)
}
