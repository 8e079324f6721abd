"""Bootstrap confidence intervals for per-task results (pure numpy).

A result is a ``(replicates, tasks)`` matrix: the held-out success (or score) on each evaluation
task, one row per training seed (the comparison benchmarks) or per episode seed (the quick start's
several episodes per task). Two sources of noise move its mean: the replicates (training or
sampling randomness) and which tasks were drawn (evaluation sample). The two-level bootstrap
resamples both, rows with replacement and tasks with replacement, and reads the 2.5 / 97.5 %
percentiles of the resampled means.

A paired comparison of two matrices on the same rows and the same tasks (two policies, or one
policy before and after training) resamples the *same* row and task indices for both, so what
they share (a hard task, a lucky seed) cancels in the difference; the interval is that of the mean
difference.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["bootstrap_mean_ci", "paired_difference_ci", "difference_draws", "binned_band"]


def _resampled_means(matrices: Sequence[np.ndarray], replicates: int, seed: int, *, shared_rows: bool = True) -> list[np.ndarray]:
    """Means of each matrix over ``replicates`` resamples of seeds (rows) and tasks (columns).

    The task columns drawn are the same for every matrix; so are the rows with ``shared_rows``
    (row k of each matrix is one seed), else each matrix's rows are drawn on their own (its
    seeds have nothing to do with the other's, and their numbers may differ)."""
    tasks = matrices[0].shape[1]
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, matrices[0].shape[0], size=(replicates, matrices[0].shape[0]))
    columns = rng.integers(0, tasks, size=(replicates, tasks))
    out = []
    for k, m in enumerate(matrices):
        if not shared_rows and k > 0:
            rows = rng.integers(0, m.shape[0], size=(replicates, m.shape[0]))
        # mean over resampled rows of (mean over resampled columns): the column choice is shared by rows
        per_row = np.stack([m[:, c].mean(axis=1) for c in columns])  # (replicates, seeds)
        out.append(np.take_along_axis(per_row, rows, axis=1).mean(axis=1))
    return out


def bootstrap_mean_ci(matrix: Sequence[Sequence[float]], *, replicates: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of a ``(seeds, tasks)`` result matrix and its 95 % two-level bootstrap interval.

    >>> mean, low, high = bootstrap_mean_ci([[1, 0, 1, 1], [0, 0, 1, 0]])
    >>> mean, low <= mean <= high, 0.0 <= low and high <= 1.0
    (0.5, True, True)
    >>> bootstrap_mean_ci([[1.0, 1.0], [1.0, 1.0]])
    (1.0, 1.0, 1.0)
    """
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.size == 0:
        raise ValueError(f"expected a non-empty (seeds, tasks) matrix, got shape {m.shape}")
    (means,) = _resampled_means([m], replicates, seed)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(m.mean()), float(low), float(high)


def paired_difference_ci(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], *, replicates: int = 2000,
                         seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``a - b`` (same seeds in the same rows, same tasks in the same columns) and its 95 %
    paired bootstrap interval.

    >>> diff, low, high = paired_difference_ci([[1, 1, 0], [1, 0, 0]], [[1, 0, 0], [0, 0, 0]])
    >>> round(diff, 3), low <= diff <= high
    (0.333, True)
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 2 or a.size == 0:
        raise ValueError(f"paired matrices must have one (seeds, tasks) shape, got {a.shape} and {b.shape}")
    low, high = np.percentile(difference_draws(a, b, replicates=replicates, seed=seed), [2.5, 97.5])
    return float((a - b).mean()), float(low), float(high)


def difference_draws(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], *, paired_seeds: bool = True,
                     replicates: int = 2000, seed: int = 0) -> np.ndarray:
    """The bootstrap replicates of ``mean(a) - mean(b)`` for two ``(seeds, tasks)`` matrices on
    the same tasks (columns): the tasks are resampled together, always; the seeds together with
    ``paired_seeds`` (same shape: row k of both is training seed k), else each matrix's on its
    own (seeds that share nothing, or different numbers of them). Percentiles of the draws are
    the interval; their spread is the standard error.

    >>> draws = difference_draws([[1, 1, 0], [1, 0, 0]], [[1, 0, 0]], paired_seeds=False, replicates=200)
    >>> draws.shape, bool(draws.min() >= -1 and draws.max() <= 1)
    ((200,), True)
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 2 or b.ndim != 2 or a.size == 0 or b.size == 0 or a.shape[1] != b.shape[1] or (paired_seeds and a.shape != b.shape):
        raise ValueError(f"expected (seeds, tasks) matrices on the same tasks{' and seeds' if paired_seeds else ''}, "
                         f"got {a.shape} and {b.shape}")
    ra, rb = _resampled_means([a, b], replicates, seed, shared_rows=paired_seeds)
    return ra - rb


def binned_band(curves: Sequence[Sequence[tuple[float, float]]], edges: Sequence[float], *, replicates: int = 1000,
                seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A learning curve's mean over seeds and its 95 % bootstrap band, per bin of env steps.

    ``curves`` holds one ``[(env_steps, value), ...]`` list per seed; each seed's values are averaged
    within each bin of ``edges``, then the seeds are resampled. Returns bin centres, means, lows and
    highs (bins without a value in every seed are left out).

    >>> x, mean, low, high = binned_band([[(5, 0.0), (15, 1.0)], [(5, 0.0), (15, 0.5)]], [0, 10, 20])
    >>> x.tolist(), mean.tolist()
    ([5.0, 15.0], [0.0, 0.75])
    """
    edges = np.asarray(edges, dtype=float)
    per_seed = np.full((len(curves), len(edges) - 1), np.nan)
    for s, curve in enumerate(curves):
        if not curve:
            continue
        steps, values = np.asarray(curve, dtype=float).T
        index = np.digitize(steps, edges) - 1
        for k in range(len(edges) - 1):
            inside = values[index == k]
            if inside.size:
                per_seed[s, k] = inside.mean()
    keep = ~np.isnan(per_seed).any(axis=0)
    per_seed = per_seed[:, keep]
    centres = ((edges[:-1] + edges[1:]) / 2)[keep]
    rng = np.random.default_rng(seed)
    draws = per_seed[rng.integers(0, len(curves), size=(replicates, len(curves)))].mean(axis=1)
    low, high = np.percentile(draws, [2.5, 97.5], axis=0) if per_seed.size else (np.array([]), np.array([]))
    return centres, per_seed.mean(axis=0), low, high
