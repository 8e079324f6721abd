"""The statistics of a comparison, pure numpy over ``(seeds, tasks)`` matrices.

Every interval is ``intervals.py``'s two-level bootstrap (seeds and held-out tasks resampled, 2.5
and 97.5 % percentiles). A difference between two settings resamples the same task columns for
both, so a task that is hard for both cancels; its seeds are paired too when both settings ran
the same training seeds (seed k draws the same training tasks in both), else resampled each on
their own. A difference is ``better`` or ``worse`` only when its 95 % interval leaves 0 out.

The smallest detectable difference is 2.8 standard errors of the difference (the spread of its
bootstrap draws): the true difference that these seeds and tasks would call at the 5 % level
four times in five (1.96 + 0.84 standard errors). A difference that reads "no difference" with
a detectable difference of 0.30 says little about an effect of 0.10; one with 0.05 says more.

A paired difference also says where its noise comes from (``noise_split``): the variance between
training seeds, between held-out tasks, and the rest (how the effect differs from task to task
within a seed, and the episodes' own noise). From that split ``NoiseSplit.detectable`` predicts the
detectable difference with more seeds or more tasks: more seeds cannot shrink the tasks' part,
nor more tasks the seeds'.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from rspo_gym.intervals import bootstrap_mean_ci, difference_draws

__all__ = ["Estimate", "Difference", "NoiseSplit", "VERDICTS", "DETECTABLE_SES", "estimate", "difference", "noise_split", "verdict",
           "area_under_curve", "curve_at", "curve_band"]

#: What a difference's interval says: above 0, below 0, or around it.
VERDICTS = ("better", "worse", "no difference at this noise")
#: Standard errors of the smallest detectable difference: 1.96 (a two-sided 5 % test) + 0.84 (80 % power).
DETECTABLE_SES = 2.8


@dataclass(frozen=True)
class Estimate:
    """A group's mean over seeds and tasks, its 95 % interval, and what it rests on."""

    mean: float
    ci_low: float
    ci_high: float
    seeds: int
    tasks: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class NoiseSplit:
    """The variances of a ``(seeds, tasks)`` matrix of paired differences: between seeds, between
    tasks, and the residual (seed × task interaction plus the episodes' noise, which one cell per
    seed and task cannot tell apart); a two-way random-effects split (``noise_split``)."""

    seeds: float
    tasks: float
    residual: float

    def detectable(self, seeds: int, tasks: int) -> float:
        """The smallest detectable difference (module doc) with ``seeds`` seeds and ``tasks`` tasks.

        It is 2.8 times the standard error that the two-level bootstrap would give on a matrix of
        that shape drawn with these variances. That bootstrap's variance of the mean is exactly
        ``sum(row dev^2)/S^2 + sum(column dev^2)/T^2 + sum(residual^2)/(S T)^2``, whose expectation
        is the expression below; at the matrix's own shape it is the bootstrap's own variance
        (``difference``'s ``detectable`` up to its draws), unless a variance was cut at 0.
        """
        s, t = seeds, tasks
        if s < 1 or t < 1:
            raise ValueError(f"need at least one seed and one task, got {s} and {t}")
        variance = ((s - 1) / s**2 * (self.seeds + self.residual / t) + (t - 1) / t**2 * (self.tasks + self.residual / s)
                    + (s - 1) * (t - 1) / (s * t) ** 2 * self.residual)
        return float(DETECTABLE_SES * np.sqrt(variance))


def noise_split(differences: Sequence[Sequence[float]]) -> NoiseSplit | None:
    """The seed, task and residual variances of a ``(seeds, tasks)`` matrix of paired
    differences, by the method of moments of a two-way layout without replication (the expected
    mean squares); a variance the data put below 0 is 0. None under two seeds or two tasks.

    >>> split = noise_split([[0.1, 0.3, 0.2], [0.3, 0.5, 0.4]])  # seed 1 is 0.2 higher on every task
    >>> round(split.seeds, 4), round(split.tasks, 4), round(split.residual, 4)
    (0.02, 0.01, 0.0)
    """
    d = np.asarray(differences, dtype=float)
    if d.ndim != 2 or min(d.shape) < 2:
        return None
    seeds, tasks = d.shape
    rows, columns, grand = d.mean(axis=1), d.mean(axis=0), d.mean()
    residual = float(((d - rows[:, None] - columns[None, :] + grand) ** 2).sum() / ((seeds - 1) * (tasks - 1)))
    between_seeds = tasks * float(((rows - grand) ** 2).sum()) / (seeds - 1)
    between_tasks = seeds * float(((columns - grand) ** 2).sum()) / (tasks - 1)
    return NoiseSplit(max(0.0, (between_seeds - residual) / tasks), max(0.0, (between_tasks - residual) / seeds), residual)


@dataclass(frozen=True)
class Difference:
    """``a - b`` of two groups on the same tasks, its 95 % interval and verdict.

    ``paired_seeds``: whether the seeds were paired too (both groups ran the same seeds);
    ``detectable``: the smallest difference these seeds and tasks would detect (module doc);
    ``noise``: where a paired difference's noise comes from (``noise_split``; None unpaired or
    under two seeds)."""

    difference: float
    ci_low: float
    ci_high: float
    verdict: str
    seeds: tuple[int, int]
    tasks: int
    paired_seeds: bool
    detectable: float
    noise: NoiseSplit | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        out["seeds"] = list(self.seeds)
        return out


def verdict(ci_low: float, ci_high: float) -> str:
    """``better`` when the interval is above 0, ``worse`` below it, else no difference at this noise.

    >>> verdict(0.01, 0.2), verdict(-0.2, -0.01), verdict(-0.1, 0.1), verdict(0.0, 0.0)
    ('better', 'worse', 'no difference at this noise', 'no difference at this noise')
    """
    return VERDICTS[0] if ci_low > 0 else VERDICTS[1] if ci_high < 0 else VERDICTS[2]


def estimate(matrix: Sequence[Sequence[float]], *, replicates: int = 2000, seed: int = 0) -> Estimate:
    """The mean of a ``(seeds, tasks)`` matrix with its two-level 95 % interval."""
    m = np.asarray(matrix, dtype=float)
    mean, low, high = bootstrap_mean_ci(m, replicates=replicates, seed=seed)
    return Estimate(mean, low, high, m.shape[0], m.shape[1])


def difference(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], *, paired_seeds: bool, replicates: int = 2000,
               seed: int = 0) -> Difference:
    """``mean(a) - mean(b)`` on the same task columns, with its interval, verdict and smallest
    detectable difference; ``paired_seeds`` when row k of both is the same training seed.

    Paired, the difference is the mean of the per-(seed, task) differences, ``mean(a - b)``: the
    same number in exact arithmetic, and in floats the one ``intervals.paired_difference_ci`` gives,
    so results reported through either agree to the last bit (two equal matrices give exactly 0).

    >>> d = difference([[1, 0, 1, 1], [1, 0, 1, 0]], [[1, 0, 1, 1], [1, 0, 1, 0]], paired_seeds=True)
    >>> d.difference, d.ci_low, d.ci_high, d.verdict
    (0.0, 0.0, 0.0, 'no difference at this noise')
    >>> a, b = [[0.1, 0.2, 0.3]], [[0.3, 0.2, 0.1]]
    >>> difference(a, b, paired_seeds=True).difference, difference(a, b, paired_seeds=False).difference
    (0.0, 5.551115123125783e-17)
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    draws = difference_draws(a, b, paired_seeds=paired_seeds, replicates=replicates, seed=seed)
    low, high = (float(v) for v in np.percentile(draws, [2.5, 97.5]))
    diff = float((a - b).mean() if paired_seeds else a.mean() - b.mean())
    return Difference(diff, low, high, verdict(low, high), (a.shape[0], b.shape[0]), a.shape[1], paired_seeds,
                      float(DETECTABLE_SES * draws.std()), noise_split(a - b) if paired_seeds else None)


def area_under_curve(iterations: Sequence[float], values: np.ndarray, *, span: float | None = None) -> np.ndarray:
    """Per task, the mean of a held-out curve over its span: the trapezoid area under
    ``values`` (``(evaluations, tasks)``, one row per entry of ``iterations``) divided by the
    span of ``iterations``; a curve that rises sooner has the larger area (speed).

    ``span`` divides by a fixed budget instead: runs compared over one budget are each divided by
    it, so a run whose evaluations stop short of the budget adds nothing past its last one.

    >>> area_under_curve([0, 10, 20], np.array([[0.0, 1.0], [1.0, 1.0], [1.0, 1.0]])).tolist()
    [0.75, 1.0]
    >>> area_under_curve([0, 10, 20], np.array([[0.0, 1.0], [1.0, 1.0], [1.0, 1.0]]), span=40).tolist()
    [0.375, 0.5]
    """
    x = np.asarray(iterations, dtype=float)
    if len(x) < 2 or x[-1] <= x[0]:
        raise ValueError("an area under a curve needs two evaluations at different iterations")
    return np.trapezoid(np.asarray(values, dtype=float), x, axis=0) / (x[-1] - x[0] if span is None else span)


def curve_at(steps: Sequence[float], values: np.ndarray, grid: Sequence[float]) -> np.ndarray:
    """Per task, a held-out curve read at ``grid`` (``(len(grid), tasks)``): ``values``
    (``(evaluations, tasks)``, measured at the increasing ``steps``) joined linearly between
    evaluations. Runs evaluated at different env steps are compared on one grid this way.

    >>> curve_at([0, 10, 30], np.array([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]), [5, 20]).tolist()
    [[0.5, 1.0], [0.5, 0.5]]
    """
    values = np.asarray(values, dtype=float)
    return np.stack([np.interp(grid, steps, values[:, k]) for k in range(values.shape[1])], axis=1)


def curve_band(matrices: Sequence[Sequence[Sequence[float]]], *, replicates: int = 1000, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and 95 % two-level band of a held-out curve: one ``(seeds, tasks)`` matrix per
    evaluation point. Returns means, lows and highs, one per point."""
    points = [bootstrap_mean_ci(m, replicates=replicates, seed=seed) for m in matrices]
    return tuple(np.array(column, dtype=float) for column in zip(*points)) if points else (np.array([]),) * 3
