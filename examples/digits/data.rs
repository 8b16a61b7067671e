//! The UCI handwritten digits (8×8 images, 1797 samples) as shipped with
//! scikit-learn: one CSV row per sample, 64 pixel counts 0..16 then the
//! label 0..9 (`examples/data/README.md`).

use std::fmt;

use grad_runtime::Rng;
use ndarray::{Array2, Axis};

/// Pixels per image.
pub const PIXELS: usize = 64;
/// Digit classes.
pub const CLASSES: usize = 10;

/// Images scaled to `[0, 1]` (pixel / 16) and their labels.
#[derive(Debug)]
pub struct Digits {
    pub images: Array2<f32>,
    pub labels: Vec<usize>,
}

/// A malformed line of the CSV: where, and what was wrong.
#[derive(Debug)]
pub struct ParseError {
    line: usize,
    column: usize,
    message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "digits.csv line {}, column {}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ParseError {}

impl Digits {
    /// Parses the CSV text; any malformed line is an error naming it.
    pub fn parse(text: &str) -> Result<Digits, ParseError> {
        let mut pixels = Vec::new();
        let mut labels = Vec::new();
        for (index, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
            let error = |column: usize, message: String| ParseError { line: index + 1, column, message };
            let fields: Vec<&str> = line.split(',').collect();
            if fields.len() != PIXELS + 1 {
                return Err(error(
                    0,
                    format!("expected {} comma-separated integers, found {}", PIXELS + 1, fields.len()),
                ));
            }
            for (column, field) in fields.iter().enumerate() {
                let value: u8 =
                    field.trim().parse().map_err(|_| error(column + 1, format!("`{field}` is not an integer")))?;
                let limit = if column < PIXELS { 16 } else { 9 };
                if value > limit {
                    return Err(error(column + 1, format!("{value} is out of range 0..={limit}")));
                }
                if column < PIXELS {
                    pixels.push(f32::from(value) / 16.0);
                } else {
                    labels.push(usize::from(value));
                }
            }
        }
        let images = Array2::from_shape_vec((labels.len(), PIXELS), pixels).expect("one row of pixels per label");
        Ok(Digits { images, labels })
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// The first `n` samples and the rest (the reference split is 1437 / 360).
    pub fn split(self, n: usize) -> (Digits, Digits) {
        let n = n.min(self.len());
        let (head, tail) = self.images.view().split_at(Axis(0), n);
        let train = Digits { images: head.to_owned(), labels: self.labels[..n].to_vec() };
        let test = Digits { images: tail.to_owned(), labels: self.labels[n..].to_vec() };
        (train, test)
    }

    /// The samples at `indices`, in that order.
    pub fn batch(&self, indices: &[usize]) -> (Array2<f32>, Vec<usize>) {
        let images = self.images.select(Axis(0), indices);
        let labels = indices.iter().map(|&i| self.labels[i]).collect();
        (images, labels)
    }
}

/// Moves each 8×8 image (a row of `images`) by a random one-pixel shift:
/// with probability 1/2 it stays, otherwise it moves one pixel in x, in y
/// or both (zeros come in at the edge). Writers place digits slightly
/// differently; the shifted copies teach the model that this does not
/// change the digit.
pub fn shift_randomly(images: &mut Array2<f32>, rng: &mut Rng) {
    for mut image in images.rows_mut() {
        if rng.uniform() < 0.5 {
            continue;
        }
        let (dx, dy) = loop {
            let (dx, dy) = ((rng.next_u64() % 3) as isize - 1, (rng.next_u64() % 3) as isize - 1);
            if (dx, dy) != (0, 0) {
                break (dx, dy);
            }
        };
        let original = image.to_vec();
        for y in 0..8isize {
            for x in 0..8isize {
                let (sx, sy) = (x - dx, y - dy);
                let inside = (0..8).contains(&sx) && (0..8).contains(&sy);
                image[(y * 8 + x) as usize] = if inside { original[(sy * 8 + sx) as usize] } else { 0.0 };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_lines_are_errors_naming_the_line_and_column() {
        let good = format!("{},3\n", ["0"; PIXELS].join(","));
        assert_eq!(Digits::parse(&good).unwrap().labels, [3]);
        let short = format!("{good}1,2,3\n");
        assert!(Digits::parse(&short).unwrap_err().to_string().starts_with("digits.csv line 2, column 0: expected 65"));
        let bad_pixel = good.replacen("0", "17", 1);
        assert_eq!(
            Digits::parse(&bad_pixel).unwrap_err().to_string(),
            "digits.csv line 1, column 1: 17 is out of range 0..=16"
        );
        let not_number = good.replacen(",3", ",x", 1);
        assert_eq!(
            Digits::parse(&not_number).unwrap_err().to_string(),
            "digits.csv line 1, column 65: `x` is not an integer"
        );
    }

    #[test]
    fn a_shift_moves_the_whole_image_by_one_pixel() {
        let mut images = Array2::from_shape_fn((200, PIXELS), |(_, p)| if p == 27 { 1.0 } else { 0.0 });
        shift_randomly(&mut images, &mut Rng::new(1));
        let neighbours = [18, 19, 20, 26, 27, 28, 34, 35, 36];
        let mut moved = 0;
        for row in images.rows() {
            let lit: Vec<usize> = (0..PIXELS).filter(|&p| row[p] == 1.0).collect();
            assert_eq!(lit.len(), 1);
            assert!(neighbours.contains(&lit[0]), "pixel 27 went to {}", lit[0]);
            moved += usize::from(lit[0] != 27);
        }
        assert!((70..130).contains(&moved), "{moved} of 200 moved");
    }
}
