//! The text as characters: its vocabulary, the ids of each character, the
//! training and validation parts, random batches of windows, and sampling.

use std::collections::BTreeSet;

use grad_runtime::Rng;
use grad_runtime::ndarray::{Array2, ArrayView1};

/// The characters of a text, numbered in code-point order.
pub struct Vocab {
    chars: Vec<char>,
}

impl Vocab {
    pub fn of(text: &str) -> Vocab {
        Vocab { chars: text.chars().collect::<BTreeSet<_>>().into_iter().collect() }
    }

    pub fn len(&self) -> usize {
        self.chars.len()
    }

    /// The ids of `text`; a character the vocabulary lacks is an error naming it.
    pub fn encode(&self, text: &str) -> Result<Vec<usize>, String> {
        text.chars()
            .map(|c| self.chars.binary_search(&c).map_err(|_| format!("{c:?} is not in the text's vocabulary")))
            .collect()
    }

    pub fn decode(&self, ids: &[usize]) -> String {
        ids.iter().map(|&id| self.chars[id]).collect()
    }
}

/// `batch` random windows of `block + 1` ids of `ids`: the inputs (each
/// window's first `block`) and the targets (its last `block`), each
/// `[batch, block]`.
pub fn batch(ids: &[usize], batch: usize, block: usize, rng: &mut Rng) -> (Array2<usize>, Array2<usize>) {
    let (mut inputs, mut targets) = (Array2::zeros((batch, block)), Array2::zeros((batch, block)));
    for row in 0..batch {
        let start = (rng.next_u64() % (ids.len() - block) as u64) as usize;
        inputs.row_mut(row).assign(&ArrayView1::from(&ids[start..start + block]));
        targets.row_mut(row).assign(&ArrayView1::from(&ids[start + 1..start + block + 1]));
    }
    (inputs, targets)
}

/// An id drawn from the softmax of `logits / temperature`.
pub fn sample(logits: &[f32], temperature: f64, rng: &mut Rng) -> usize {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &l| m.max(l));
    let weights: Vec<f64> = logits.iter().map(|&l| ((f64::from(l - max)) / temperature).exp()).collect();
    let mut r = rng.uniform() * weights.iter().sum::<f64>();
    for (id, w) in weights.iter().enumerate() {
        r -= w;
        if r <= 0.0 {
            return id;
        }
    }
    weights.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_unknown_characters_are_named() {
        let vocab = Vocab::of("hello, world");
        assert_eq!(vocab.len(), 9); // "helo, wrd"
        let ids = vocab.encode("world").unwrap();
        assert_eq!(vocab.decode(&ids), "world");
        assert_eq!(vocab.encode("x").unwrap_err(), "'x' is not in the text's vocabulary");
    }

    #[test]
    fn targets_are_the_inputs_shifted_by_one() {
        let ids: Vec<usize> = (0..100).collect();
        let (inputs, targets) = batch(&ids, 3, 8, &mut Rng::new(1));
        for (i, t) in inputs.iter().zip(&targets) {
            assert_eq!(i + 1, *t);
        }
    }

    #[test]
    fn sampling_follows_the_logits() {
        let mut rng = Rng::new(2);
        let draws: Vec<usize> = (0..1000).map(|_| sample(&[0.0, 3.0, -1e9], 1.0, &mut rng)).collect();
        let ones = draws.iter().filter(|&&d| d == 1).count();
        // e^3 / (1 + e^3) = 0.953
        assert!((900..990).contains(&ones), "{ones}");
        assert!(!draws.contains(&2));
    }
}
