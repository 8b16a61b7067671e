//! What batch and group normalisation share: `x: [N, C, *]` seen as `N · C`
//! planes of `S` contiguous elements (plane `n · C + c` holds channel `c`
//! of sample `n`), normalised over groups of planes, then scaled and
//! shifted per channel. Batch norm's group is a channel across the batch;
//! group norm's, a block of channels of one sample.

use std::ops::Range;

use crate::Float;

/// `x`'s planes and how they are grouped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Planes {
    /// Samples.
    pub(crate) n: usize,
    /// Channels.
    pub(crate) c: usize,
    /// Elements per plane (the product of the dims after the channels).
    pub(crate) s: usize,
    pub(crate) grouping: Grouping,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Grouping {
    /// One group per channel, across every sample (batch norm).
    Channels,
    /// `groups` groups per sample, each of `c / groups` channels (group norm).
    Blocks { groups: usize },
}

impl Planes {
    /// `x`'s shape as planes, for `grouping`; `None` below two dims.
    pub(crate) fn of(shape: &[usize], grouping: Grouping) -> Option<Planes> {
        let [n, c, rest @ ..] = shape else { return None };
        Some(Planes { n: *n, c: *c, s: rest.iter().product(), grouping })
    }

    /// How many groups there are (one mean and one scale each).
    pub(crate) fn groups(&self) -> usize {
        match self.grouping {
            Grouping::Channels => self.c,
            Grouping::Blocks { groups } => self.n * groups,
        }
    }

    /// How many elements a group holds.
    pub(crate) fn count(&self) -> usize {
        match self.grouping {
            Grouping::Channels => self.n * self.s,
            Grouping::Blocks { groups } => self.c / groups * self.s,
        }
    }

    /// The planes of group `q`, as (element range, channel) pairs.
    fn planes(&self, q: usize) -> impl Iterator<Item = (Range<usize>, usize)> + '_ {
        let (first, step, len) = match self.grouping {
            Grouping::Channels => (q, self.c, self.n),
            Grouping::Blocks { groups } => {
                let per_group = self.c / groups;
                let (n, g) = (q / groups, q % groups);
                (n * self.c + g * per_group, 1, per_group)
            }
        };
        (0..len).map(move |k| {
            let plane = first + k * step;
            (plane * self.s..(plane + 1) * self.s, plane % self.c)
        })
    }
}

/// Each group's mean and biased variance, written to `mean` and `var`
/// (one entry per group).
pub(crate) fn moments<T: Float>(x: &[T], planes: &Planes, mean: &mut [T], var: &mut [T]) {
    let count = T::from_usize(planes.count().max(1));
    for q in 0..planes.groups() {
        let sum: T = planes.planes(q).map(|(r, _)| x[r].iter().copied().sum::<T>()).sum();
        let m = sum / count;
        let squares: T = planes.planes(q).map(|(r, _)| x[r].iter().map(|&v| (v - m) * (v - m)).sum::<T>()).sum();
        mean[q] = m;
        var[q] = squares / count;
    }
}

/// `out = (x − mean) · rstd · gamma + beta`, with each group's `mean` and
/// `rstd` and each channel's `gamma` and `beta`.
pub(crate) fn normalize<T: Float>(
    x: &[T],
    planes: &Planes,
    [mean, rstd]: [&[T]; 2],
    [gamma, beta]: [&[T]; 2],
    out: &mut [T],
) {
    for q in 0..planes.groups() {
        for (r, c) in planes.planes(q) {
            for (y, &v) in out[r.clone()].iter_mut().zip(&x[r]) {
                *y = (v - mean[q]) * rstd[q] * gamma[c] + beta[c];
            }
        }
    }
}

/// The input's gradient: `rstd · (ĝ − mean(ĝ) − x̂ · mean(ĝ · x̂))` per
/// group when the statistics are the batch's own (`through_stats`), else
/// `rstd · ĝ` (fixed statistics), where `ĝ = g · gamma` and
/// `x̂ = (x − mean) · rstd`.
pub(crate) fn input_grad<T: Float>(
    x: &[T],
    g: &[T],
    planes: &Planes,
    [mean, rstd]: [&[T]; 2],
    gamma: &[T],
    through_stats: bool,
    dx: &mut [T],
) {
    let count = T::from_usize(planes.count().max(1));
    for q in 0..planes.groups() {
        let (m, r) = (mean[q], rstd[q]);
        let (mut mean_g, mut mean_gx) = (T::zero(), T::zero());
        if through_stats {
            for (range, c) in planes.planes(q) {
                for (&v, &g) in x[range.clone()].iter().zip(&g[range]) {
                    let g_hat = g * gamma[c];
                    mean_g += g_hat;
                    mean_gx += g_hat * (v - m) * r;
                }
            }
            mean_g /= count;
            mean_gx /= count;
        }
        for (range, c) in planes.planes(q) {
            let rows = dx[range.clone()].iter_mut().zip(&x[range.clone()]).zip(&g[range]);
            for ((d, &v), &g) in rows {
                *d = (g * gamma[c] - mean_g - (v - m) * r * mean_gx) * r;
            }
        }
    }
}

/// The scale's and the shift's gradients, per channel: `Σ g · x̂` and `Σ g`
/// (added to `d_gamma` and `d_beta`, which start as zeros).
pub(crate) fn affine_grads<T: Float>(
    x: &[T],
    g: &[T],
    planes: &Planes,
    [mean, rstd]: [&[T]; 2],
    d_gamma: Option<&mut [T]>,
    d_beta: Option<&mut [T]>,
) {
    if let Some(d_gamma) = d_gamma {
        for q in 0..planes.groups() {
            for (range, c) in planes.planes(q) {
                let sum: T = x[range.clone()].iter().zip(&g[range]).map(|(&v, &g)| g * (v - mean[q]) * rstd[q]).sum();
                d_gamma[c] += sum;
            }
        }
    }
    if let Some(d_beta) = d_beta {
        for q in 0..planes.groups() {
            for (range, c) in planes.planes(q) {
                d_beta[c] += g[range].iter().copied().sum::<T>();
            }
        }
    }
}
