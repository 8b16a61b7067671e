//! Shapes as the shape pass knows them: each dim a product of a number and
//! symbols (`784`, `B`, `B * T`), or unknown (`_`). Two dims are equal when
//! their products are; a symbol never equals a number or another symbol.

use std::fmt;

/// One dim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Dim {
    /// `coef * syms[0] * syms[1] * ...`, the symbols sorted.
    Known {
        coef: u128,
        syms: Vec<String>,
    },
    Unknown,
}

impl Dim {
    pub(crate) fn fixed(n: u128) -> Dim {
        Dim::Known { coef: n, syms: Vec::new() }
    }

    pub(crate) fn sym(name: &str) -> Dim {
        Dim::Known { coef: 1, syms: vec![name.to_string()] }
    }

    /// The number, for a dim without symbols.
    pub(crate) fn value(&self) -> Option<u128> {
        match self {
            Dim::Known { coef, syms } if syms.is_empty() => Some(*coef),
            _ => None,
        }
    }

    pub(crate) fn is_one(&self) -> bool {
        self.value() == Some(1)
    }

    pub(crate) fn has_symbol(&self) -> bool {
        matches!(self, Dim::Known { syms, .. } if !syms.is_empty())
    }

    /// `Some(true)` when equal, `Some(false)` when they differ, `None` when
    /// one is unknown.
    pub(crate) fn same(&self, other: &Dim) -> Option<bool> {
        match (self, other) {
            (Dim::Unknown, _) | (_, Dim::Unknown) => None,
            (a, b) => Some(a == b),
        }
    }

    /// True when the dims are known to differ.
    pub(crate) fn differs(&self, other: &Dim) -> bool {
        self.same(other) == Some(false)
    }

    pub(crate) fn times(&self, other: &Dim) -> Dim {
        match (self, other) {
            (Dim::Known { coef: a, syms: sa }, Dim::Known { coef: b, syms: sb }) => match a.checked_mul(*b) {
                Some(coef) => {
                    let mut syms: Vec<String> = sa.iter().chain(sb).cloned().collect();
                    syms.sort();
                    Dim::Known { coef, syms }
                }
                None => Dim::Unknown,
            },
            _ => Dim::Unknown,
        }
    }

    /// The sum, when it is a product again (`3 + 4`, `B + B`); else unknown.
    pub(crate) fn plus(&self, other: &Dim) -> Dim {
        match (self, other) {
            (Dim::Known { coef: a, syms: sa }, Dim::Known { coef: b, syms: sb }) if sa == sb => {
                a.checked_add(*b).map_or(Dim::Unknown, |coef| Dim::Known { coef, syms: sa.clone() })
            }
            _ => Dim::Unknown,
        }
    }

    /// `self / other` when it is a product again: numbers, and products
    /// whose symbols and number `other`'s divide (`B * T / T` is `B`,
    /// `C * 4 / 2` is `C * 2`); else unknown (`C / 2` is known at run time
    /// only). `Err` for numbers that do not divide: what is wrong.
    pub(crate) fn divided_by(&self, other: &Dim) -> Result<Dim, String> {
        match (self.value(), other.value()) {
            (_, Some(0)) => return Err("divides by zero".to_string()),
            (Some(a), Some(b)) if a % b != 0 => {
                return Err(format!("is not a whole number: {a} = {} * {b} + {}", a / b, a % b));
            }
            _ => {}
        }
        let (Dim::Known { coef: a, syms: sa }, Dim::Known { coef: b, syms: sb }) = (self, other) else {
            return Ok(Dim::Unknown);
        };
        let mut syms = sa.clone();
        for sym in sb {
            match syms.iter().position(|s| s == sym) {
                Some(at) => {
                    syms.remove(at);
                }
                None => return Ok(Dim::Unknown),
            }
        }
        Ok(if a % b == 0 { Dim::Known { coef: a / b, syms } } else { Dim::Unknown })
    }

    /// `self - other`: for numbers with `other <= self`, `self - 0`, and `B - B`; else unknown.
    pub(crate) fn minus(&self, other: &Dim) -> Dim {
        match (self.value(), other.value()) {
            (Some(a), Some(b)) if b <= a => Dim::fixed(a - b),
            (_, Some(0)) => self.clone(),
            _ if self == other && *self != Dim::Unknown => Dim::fixed(0),
            _ => Dim::Unknown,
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Unknown => write!(f, "_"),
            Dim::Known { coef, syms } if syms.is_empty() => write!(f, "{coef}"),
            Dim::Known { coef, syms } => {
                write!(f, "{}", syms.join(" * "))?;
                if *coef != 1 {
                    write!(f, " * {coef}")?;
                }
                Ok(())
            }
        }
    }
}

/// A tensor's shape, or unknown (an undeclared input, a user function's result).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    Known(Vec<Dim>),
    Unknown,
}

impl Shape {
    pub(crate) fn scalar() -> Shape {
        Shape::Known(Vec::new())
    }

    pub(crate) fn dims(&self) -> Option<&[Dim]> {
        match self {
            Shape::Known(dims) => Some(dims),
            Shape::Unknown => None,
        }
    }

    /// The element count, when every dim is known.
    pub(crate) fn elements(&self) -> Dim {
        match self {
            Shape::Known(dims) => dims.iter().fold(Dim::fixed(1), |n, d| n.times(d)),
            Shape::Unknown => Dim::Unknown,
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Unknown => write!(f, "unknown"),
            Shape::Known(dims) => {
                write!(f, "[")?;
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{d}")?;
                }
                write!(f, "]")
            }
        }
    }
}

/// The broadcast of two shapes, NumPy's rule: aligned from the right, each
/// pair equal or one of them 1. `Err((i, j))` names the first pair from the
/// right that fails, as indices into `a` and `b`.
pub(crate) fn broadcast(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, (usize, usize)> {
    let n = a.len().max(b.len());
    let mut out = vec![Dim::Unknown; n];
    for k in 0..n {
        let da = (k < a.len()).then(|| &a[a.len() - 1 - k]);
        let db = (k < b.len()).then(|| &b[b.len() - 1 - k]);
        out[n - 1 - k] = match (da, db) {
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (Some(x), Some(y)) => match (x, y) {
                _ if x.is_one() => y.clone(),
                _ if y.is_one() => x.clone(),
                (Dim::Unknown, _) | (_, Dim::Unknown) => Dim::Unknown,
                _ if x == y => x.clone(),
                _ => return Err((a.len() - 1 - k, b.len() - 1 - k)),
            },
            (None, None) => unreachable!("k < max(len)"),
        };
    }
    Ok(out)
}

/// Resolves an axis that may count from the end, for a tensor of `ndim` dims.
pub(crate) fn axis(axis: i128, ndim: usize) -> Option<usize> {
    let n = ndim as i128;
    let resolved = if axis < 0 { axis + n } else { axis };
    (0..n).contains(&resolved).then_some(resolved as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> Vec<Dim> {
        text.split(',')
            .filter(|t| !t.trim().is_empty())
            .map(|t| match t.trim() {
                "_" => Dim::Unknown,
                t => t.parse().map(Dim::fixed).unwrap_or_else(|_| Dim::sym(t)),
            })
            .collect()
    }

    #[test]
    fn products_of_symbols_compare_and_print() {
        let bt = Dim::sym("T").times(&Dim::sym("B"));
        assert_eq!(bt, Dim::sym("B").times(&Dim::sym("T")));
        assert_eq!(bt.to_string(), "B * T");
        assert_eq!(Dim::fixed(2).times(&Dim::sym("B")).to_string(), "B * 2");
        assert_eq!(Dim::sym("B").plus(&Dim::sym("B")).to_string(), "B * 2");
        assert_eq!(Dim::sym("B").plus(&Dim::fixed(1)), Dim::Unknown);
        assert!(Dim::sym("B").differs(&Dim::sym("N")));
        assert!(Dim::sym("B").differs(&Dim::fixed(64)));
        assert_eq!(Dim::sym("B").same(&Dim::Unknown), None);
        assert_eq!(Dim::fixed(u128::MAX).times(&Dim::fixed(2)), Dim::Unknown);
        assert_eq!(Shape::Known(s("B, 784")).elements().to_string(), "B * 784");
    }

    #[test]
    fn exact_quotients_are_products_and_inexact_numbers_are_errors() {
        let bt = Dim::sym("B").times(&Dim::sym("T"));
        assert_eq!(bt.divided_by(&Dim::sym("T")), Ok(Dim::sym("B")));
        assert_eq!(Dim::fixed(4).times(&Dim::sym("C")).divided_by(&Dim::fixed(2)).unwrap().to_string(), "C * 2");
        assert_eq!(Dim::fixed(12).divided_by(&Dim::fixed(4)), Ok(Dim::fixed(3)));
        assert_eq!(Dim::sym("C").divided_by(&Dim::fixed(2)), Ok(Dim::Unknown));
        assert_eq!(Dim::sym("C").divided_by(&Dim::sym("H")), Ok(Dim::Unknown));
        assert_eq!(Dim::Unknown.divided_by(&Dim::fixed(2)), Ok(Dim::Unknown));
        assert_eq!(Dim::fixed(2).times(&Dim::sym("C")).divided_by(&Dim::fixed(4)), Ok(Dim::Unknown));
        assert_eq!(Dim::fixed(10).divided_by(&Dim::fixed(4)).unwrap_err(), "is not a whole number: 10 = 2 * 4 + 2");
        assert_eq!(Dim::sym("C").divided_by(&Dim::fixed(0)).unwrap_err(), "divides by zero");
    }

    #[test]
    fn broadcasting_follows_numpy() {
        let show = |r: Result<Vec<Dim>, (usize, usize)>| match r {
            Ok(dims) => Shape::Known(dims).to_string(),
            Err(pair) => format!("{pair:?}"),
        };
        assert_eq!(show(broadcast(&s("B, 10"), &s("10"))), "[B, 10]");
        assert_eq!(show(broadcast(&s("2, 1, 3"), &s("4, 1"))), "[2, 4, 3]");
        assert_eq!(show(broadcast(&s("B, 10"), &s("1, 10"))), "[B, 10]");
        assert_eq!(show(broadcast(&s("B, 10"), &s(""))), "[B, 10]");
        assert_eq!(show(broadcast(&s("B, 10"), &s("_, 10"))), "[_, 10]");
        assert_eq!(show(broadcast(&s("B, 256"), &s("128"))), "(1, 0)");
        assert_eq!(show(broadcast(&s("B, 3"), &s("N, 3"))), "(0, 0)");
    }

    #[test]
    fn axes_count_from_either_end() {
        assert_eq!(axis(-1, 2), Some(1));
        assert_eq!(axis(1, 2), Some(1));
        assert_eq!(axis(2, 2), None);
        assert_eq!(axis(-3, 2), None);
        assert_eq!(axis(0, 0), None);
    }
}
