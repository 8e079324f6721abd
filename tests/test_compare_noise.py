"""Where a paired difference's noise comes from (``rspo_gym.compare.stats.noise_split``) and the
detectable difference it predicts with more seeds or tasks (``NoiseSplit.detectable``)."""

import numpy as np
import pytest

from rspo_gym.compare.stats import DETECTABLE_SES, NoiseSplit, difference, noise_split


def _paired(seeds: int, tasks: int, seed_sd: float, task_sd: float, residual_sd: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """Two settings' (seeds, tasks) results whose difference has the given parts."""
    b = rng.random((seeds, tasks))
    effect = (rng.normal(0, seed_sd, (seeds, 1)) + rng.normal(0, task_sd, (1, tasks)) + rng.normal(0, residual_sd, (seeds, tasks)))
    return b + 0.05 + effect, b


def test_at_the_matrix_shape_the_prediction_is_the_two_level_bootstraps_own_spread():
    """The split's variances, put back into the bootstrap's variance formula at the matrix's shape,
    give the exact variance of the bootstrap; its 20,000 draws agree to their own error."""
    a, b = _paired(4, 24, 0.06, 0.08, 0.1, np.random.default_rng(3))
    d = a - b
    split = noise_split(d)
    assert min(split.seeds, split.tasks, split.residual) > 0  # nothing cut at 0: the identity is exact
    rows, columns = d.mean(1) - d.mean(), d.mean(0) - d.mean()
    residual = d - d.mean(1, keepdims=True) - d.mean(0, keepdims=True) + d.mean()
    exact = (rows**2).sum() / 4**2 + (columns**2).sum() / 24**2 + (residual**2).sum() / (4 * 24) ** 2
    assert split.detectable(4, 24) == pytest.approx(DETECTABLE_SES * np.sqrt(exact), rel=1e-12)
    drawn = difference(a, b, paired_seeds=True, replicates=20_000)
    assert drawn.noise == split and drawn.detectable == pytest.approx(split.detectable(4, 24), rel=0.03)


def test_more_seeds_cannot_shrink_the_tasks_part_nor_more_tasks_the_seeds_part():
    split = NoiseSplit(seeds=0.004, tasks=0.006, residual=0.05)
    by_seeds = [split.detectable(s, 24) for s in (2, 5, 10, 100, 1_000_000)]
    assert by_seeds == sorted(by_seeds, reverse=True)
    assert by_seeds[-1] == pytest.approx(DETECTABLE_SES * np.sqrt(23 / 24**2 * 0.006), rel=1e-3)  # the tasks' floor
    by_tasks = [split.detectable(10, t) for t in (24, 240, 1_000_000)]
    assert by_tasks[-1] == pytest.approx(DETECTABLE_SES * np.sqrt(9 / 10**2 * 0.004), rel=1e-3)  # the seeds' floor
    with pytest.raises(ValueError, match="at least one seed"):
        split.detectable(0, 24)


def test_the_split_recovers_known_variances_and_is_absent_where_it_cannot_be_told():
    a, b = _paired(200, 200, 0.1, 0.2, 0.3, np.random.default_rng(0))
    split = noise_split(a - b)
    assert (split.seeds, split.tasks, split.residual) == pytest.approx((0.01, 0.04, 0.09), rel=0.25)
    assert noise_split([[0.1, 0.2, 0.3]]) is None and noise_split([[0.1], [0.2]]) is None
    assert difference(a[:1], b[:1], paired_seeds=True).noise is None  # one seed: no seed variance to split off
    assert difference(a[:3], b[:2], paired_seeds=False).noise is None  # unpaired seeds: no per-seed differences
    no_seed_effect = np.tile([0.0, 0.2, 0.4], (3, 1))
    assert noise_split(no_seed_effect).seeds == 0.0
