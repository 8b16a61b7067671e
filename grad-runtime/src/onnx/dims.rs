//! The batch dim through each op: which axis of a value grows with the
//! graph inputs' first dim (at most one), so that the shapes an op holds
//! are written relative to it and a model exported at one batch size runs
//! at another. What cannot follow the batch (a reshape that splits it
//! among other dims, a constant of the batch's size) is refused here.

use super::ops::Refusal;

/// A written value: its name in the graph, and its batch axis if any.
#[derive(Clone, Debug)]
pub(crate) struct Value {
    pub(crate) name: String,
    pub(crate) dynamic: Option<usize>,
}

/// NumPy broadcasting of `inputs` (value, traced shape) to `out`: the
/// batch axis of the output, refusing two different ones or an operand
/// without the batch whose size there is not 1 (a tensor traced at the
/// batch size would not broadcast at another).
pub(crate) fn broadcast(out: &[usize], inputs: &[(&Value, &[usize])]) -> Result<Option<usize>, Refusal> {
    let mut dynamic = None;
    for (value, shape) in inputs {
        if let Some(d) = value.dynamic {
            let axis = out.len() - shape.len() + d;
            if dynamic.is_some_and(|other| other != axis) {
                return Err("its operands carry the batch in different dims");
            }
            dynamic = Some(axis);
        }
    }
    if let Some(axis) = dynamic {
        for (value, shape) in inputs {
            let offset = out.len() - shape.len();
            if value.dynamic.is_none() && axis >= offset && shape[axis - offset] > 1 {
                return Err(
                    "it combines the batch with a tensor traced at the batch size, which would not broadcast at another",
                );
            }
        }
    }
    Ok(dynamic)
}

/// After a reduction over `axis`.
pub(crate) fn reduce(dynamic: Option<usize>, axis: usize, keepdim: bool) -> Option<usize> {
    match dynamic {
        Some(d) if d == axis => None,
        Some(d) if !keepdim && d > axis => Some(d - 1),
        other => other,
    }
}

/// Of `a @ b` (ranks `ra`, `rb`, output rank `r`): a batch in a contracted
/// dim leaves the output without it.
pub(crate) fn matmul(
    a: Option<usize>,
    ra: usize,
    b: Option<usize>,
    rb: usize,
    r: usize,
) -> Result<Option<usize>, Refusal> {
    let from_a = a.filter(|&d| d + 1 != ra).map(|d| r - ra + d);
    let from_b = b.filter(|&d| d + 2 != rb).map(|d| r - rb + d);
    same_axis(from_a, from_b)
}

/// After a permutation: output axis `k` is input axis `order[k]`.
pub(crate) fn permute(dynamic: Option<usize>, order: &[usize]) -> Option<usize> {
    dynamic.and_then(|d| order.iter().position(|&a| a == d))
}

/// One batch axis of two operands (concat, matmul).
pub(crate) fn same_axis(a: Option<usize>, b: Option<usize>) -> Result<Option<usize>, Refusal> {
    match (a, b) {
        (Some(a), Some(b)) if a != b => Err("its operands carry the batch in different dims"),
        (a, b) => Ok(a.or(b)),
    }
}

/// Convolution and pooling: the batch may only be the first dim.
pub(crate) fn batch_only(dynamic: Option<usize>) -> Result<Option<usize>, Refusal> {
    match dynamic {
        Some(d) if d != 0 => Err("the batch is not its first (N) dim"),
        other => Ok(other),
    }
}

/// A reshape's target from `input` (batch axis `dynamic`) to `out`: the
/// traced sizes, with `-1` at the output dim that holds the batch, which
/// must be the outer part of one output dim made of whole input dims, or
/// the outer part of the input's batch dim (`[B·T, D] → [B, T, D]`).
pub(crate) fn reshape(
    input: &[usize],
    dynamic: Option<usize>,
    out: &[usize],
) -> Result<(Vec<i64>, Option<usize>), Refusal> {
    let mut target: Vec<i64> = out.iter().map(|&d| d as i64).collect();
    let Some(d) = dynamic else { return Ok((target, None)) };
    const SPLITS: Refusal = "it splits the batch dim across output dims in a way that does not follow the batch";
    // Products of the dims before the batch (`before`) and through it (`through`).
    let before: usize = input[..d].iter().product();
    let through = before * input[d];
    let mut outer = 1usize;
    let mut axis = None;
    for (j, &size) in out.iter().enumerate() {
        let next = outer * size;
        let found = if input[d] == 1 { outer == before && size == 1 } else { next > before };
        if found {
            axis = Some((j, outer, next));
            break;
        }
        outer = next;
    }
    let Some((j, outer, next)) = axis else { return Err(SPLITS) };
    let merged = next >= through && before.is_multiple_of(outer.max(1)) && next.is_multiple_of(through.max(1));
    let split = next < through && outer == before && through.is_multiple_of(next.max(1));
    if !(merged || split) {
        return Err(SPLITS);
    }
    target[j] = -1;
    Ok((target, Some(j)))
}

/// A slice's ends: `starts + out`, and "to the end" in the batch dim,
/// which must be taken whole.
pub(crate) fn slice_ends(
    input: &[usize],
    dynamic: Option<usize>,
    starts: &[usize],
    out: &[usize],
) -> Result<Vec<i64>, Refusal> {
    let mut ends: Vec<i64> = starts.iter().zip(out).map(|(&s, &o)| (s + o) as i64).collect();
    if let Some(d) = dynamic {
        if starts[d] != 0 || out[d] != input[d] {
            return Err("it slices the batch dim, whose size is not fixed");
        }
        ends[d] = i64::MAX;
    }
    Ok(ends)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reshape_merging_the_batch_puts_minus_one_where_it_went() {
        assert_eq!(reshape(&[4, 8, 16], Some(0), &[32, 16]).unwrap(), (vec![-1, 16], Some(0)));
        assert_eq!(reshape(&[4, 8, 16], Some(0), &[4, 128]).unwrap(), (vec![-1, 128], Some(0)));
        assert_eq!(reshape(&[3, 4, 8], Some(1), &[3, 32]).unwrap(), (vec![3, -1], Some(1)));
    }

    #[test]
    fn a_reshape_splitting_the_batch_keeps_it_outermost() {
        assert_eq!(reshape(&[32, 16], Some(0), &[4, 8, 16]).unwrap(), (vec![-1, 8, 16], Some(0)));
        assert_eq!(reshape(&[1, 5], Some(0), &[1, 5, 1]).unwrap(), (vec![-1, 5, 1], Some(0)));
        // The batch spread over two output dims, not as their outer part.
        assert!(reshape(&[4, 6], Some(1), &[8, 3]).is_err());
        // A batch of 1 that disappears cannot be followed.
        assert!(reshape(&[1, 5], Some(0), &[5]).is_err());
    }

    #[test]
    fn broadcasting_refuses_a_constant_of_the_batch_size() {
        let batch = Value { name: "x".into(), dynamic: Some(0) };
        let fixed = Value { name: "c".into(), dynamic: None };
        assert_eq!(broadcast(&[4, 3], &[(&batch, &[4, 3]), (&fixed, &[3])]).unwrap(), Some(0));
        assert_eq!(broadcast(&[4, 3], &[(&batch, &[4, 3]), (&fixed, &[1, 3])]).unwrap(), Some(0));
        assert!(broadcast(&[4, 3], &[(&batch, &[4, 3]), (&fixed, &[4, 3])]).is_err());
    }

    #[test]
    fn the_batch_follows_products_and_permutations() {
        // [B, T, K] @ [K, N]: the batch stays; a contracted batch leaves.
        assert_eq!(matmul(Some(0), 3, None, 2, 3).unwrap(), Some(0));
        assert_eq!(matmul(Some(1), 2, None, 2, 2).unwrap(), None);
        assert_eq!(matmul(None, 2, Some(1), 2, 2).unwrap(), Some(1));
        assert_eq!(permute(Some(0), &[1, 0, 2]), Some(1));
        assert_eq!(reduce(Some(2), 1, false), Some(1));
        assert_eq!(reduce(Some(1), 1, true), None);
    }
}
