"""Advantage estimators: pure tensor functions, vectorized over groups with segment operations.

Contents:

- ``grpo_advantages``: group-normalized outcome advantage (GRPO; Dr.GRPO without the std).
- ``rloo_advantages``: leave-one-out baseline (RLOO), ``n/(n-1)`` scaling of the group-centred score.
- ``gae_advantages``: token-level GAE with masked carry-through and masked whitening (PPO).
- ``gigpo_advantages``: GiGPO episode + anchor-state step advantages over step rows.
- ``step_discounted_returns``: per-trajectory discounted returns of contiguous step rows.
- ``rank_swap``: RSPO rank-consistent return swap within a group (``swap="rank"``).
- ``ADVANTAGE_ESTIMATORS``: read-only name -> estimator registry.

Conventions follow verl (``verl/trainer/ppo/core_algos.py``) and verl-agent (``gigpo/core_gigpo.py``);
see ``docs/reference/algorithms.md`` §2.2 and §3.1. Unlike those, group statistics are computed with
``torch.unique`` + ``index_add_``/``scatter_reduce_`` instead of Python loops over rows, so the cost
stays negligible at 100k step rows. Row-level estimators return one value per row, shape ``(B,)``;
broadcasting to response tokens (and multiplying by the response mask) is the caller's job.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

__all__ = [
    "grpo_advantages",
    "rloo_advantages",
    "gae_advantages",
    "gigpo_advantages",
    "step_discounted_returns",
    "similar_anchor_codes",
    "rank_swap",
    "ADVANTAGE_ESTIMATORS",
]

_EPISODE_STATS = ("steps", "trajectories")
_GIGPO_NORMS = {"mean_std": True, "mean_std_norm": True, "mean": False, "mean_norm": False}


# --------------------------------------------------------------------------- helpers
def _float(x: torch.Tensor | Sequence[float]) -> torch.Tensor:
    """``x`` as a floating tensor (integer or bool scores become the default float dtype)."""
    x = torch.as_tensor(x)
    return x if x.is_floating_point() else x.to(torch.get_default_dtype())


def _codes(
    ids: torch.Tensor | Sequence[int], n: int, name: str, device: torch.device | None = None
) -> tuple[torch.Tensor, int]:
    """Dense codes ``0..k-1`` for the ids of ``n`` rows (on ``device``) and the number ``k`` of ids."""
    ids = torch.as_tensor(ids, device=device)
    if ids.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (one id per row), got {tuple(ids.shape)}")
    if ids.is_floating_point() or ids.is_complex():
        raise ValueError(f"{name} must be an integer tensor, got dtype {ids.dtype}")
    uniq, inverse = torch.unique(ids, return_inverse=True)
    return inverse, uniq.numel()


def _check_rows(x: torch.Tensor, name: str) -> int:
    if x.dim() != 1:
        raise ValueError(f"{name} must be 1-D (one value per row), got shape {tuple(x.shape)}")
    return x.shape[0]


def _segment_moments(
    values: torch.Tensor, seg: torch.Tensor, n_seg: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-segment count, mean and unbiased std (``torch.std`` semantics), each of shape ``(n_seg,)``.

    Two passes (mean, then squared deviations) for numerical stability. A segment with one entry gets
    std 0 here; callers decide what a singleton means for them.
    """
    zeros = values.new_zeros(n_seg)
    count = zeros.index_add(0, seg, torch.ones_like(values))
    mean = zeros.index_add(0, seg, values) / count
    dev = values - mean[seg]
    var = zeros.index_add(0, seg, dev * dev) / (count - 1).clamp_min(1)
    return count, mean, var.sqrt()


def _first_rows(keys: torch.Tensor, n_keys: int) -> torch.Tensor:
    """Index of the first row of each of the ``n_keys`` distinct codes in ``keys``."""
    rows = torch.arange(keys.numel(), device=keys.device)
    first = torch.full((n_keys,), keys.numel(), dtype=rows.dtype, device=keys.device)
    return first.scatter_reduce(0, keys, rows, reduce="amin")


def _group_moments(
    scores: torch.Tensor,
    group_ids: torch.Tensor | Sequence[int],
    traj_ids: torch.Tensor | Sequence[int] | None,
    episode_stats: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Count, mean and unbiased std of each row's group, broadcast to rows (each ``(B,)``).

    ``episode_stats="steps"`` uses every row as an entry (verl-agent's default
    ``compute_mean_std_cross_all_data=True``: longer trajectories weigh more). ``"trajectories"``
    uses one entry per (group, trajectory): the score of that trajectory's first row, as verl-agent
    does with ``compute_mean_std_cross_all_data=False`` (GiGPO Eq. 3).
    """
    n = _check_rows(scores, "scores")
    group, n_groups = _codes(group_ids, n, "group_ids", scores.device)
    if episode_stats not in _EPISODE_STATS:
        raise ValueError(f"episode_stats must be one of {_EPISODE_STATS}, got {episode_stats!r}")
    if episode_stats == "steps":
        entries, entry_group = scores, group
    else:
        if traj_ids is None:
            raise ValueError('episode_stats="trajectories" needs traj_ids (one trajectory id per row)')
        traj, n_traj = _codes(traj_ids, n, "traj_ids", scores.device)
        pairs, pair = torch.unique(group * n_traj + traj, return_inverse=True)
        first = _first_rows(pair, pairs.numel())
        entries, entry_group = scores[first], group[first]
    count, mean, std = _segment_moments(entries, entry_group, n_groups)
    return count[group], mean[group], std[group]


def _hashable(anchor: Any) -> Hashable:
    """verl-agent's ``to_hashable``: arrays become flat tuples, lists tuples, dicts sorted item tuples."""
    if isinstance(anchor, (str, bytes, int, float, bool)):
        return anchor
    if isinstance(anchor, np.generic):
        return anchor.item()
    if isinstance(anchor, (np.ndarray, torch.Tensor)):
        return tuple(anchor.flatten().tolist())
    if isinstance(anchor, (list, tuple)):
        return tuple(_hashable(a) for a in anchor)
    if isinstance(anchor, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in anchor.items()))
    if isinstance(anchor, Hashable):
        return anchor
    raise TypeError(f"anchor of type {type(anchor).__name__} is not hashable and has no conversion")


def _anchor_codes(anchors: Sequence[Hashable] | torch.Tensor | np.ndarray, n: int) -> torch.Tensor:
    """Dense integer codes for ``n`` anchors; equal anchors (exact equality) share a code.

    Tensors and numeric arrays are coded with ``torch.unique`` (rows along dim 0); other sequences
    (str, object arrays) go through a dict, the one per-row Python pass left, since arbitrary
    hashables have no tensor form.
    """
    if isinstance(anchors, np.ndarray) and anchors.dtype.kind in "biuf":
        anchors = torch.from_numpy(anchors)
    if isinstance(anchors, torch.Tensor):
        if anchors.dim() == 0 or anchors.shape[0] != n:
            raise ValueError(f"anchors must have {n} rows, got shape {tuple(anchors.shape)}")
        return torch.unique(anchors, dim=0 if anchors.dim() > 1 else None, return_inverse=True)[1]
    if len(anchors) != n:
        raise ValueError(f"anchors must hold one anchor per row ({n}), got {len(anchors)}")
    table: dict[Hashable, int] = {}
    return torch.tensor([table.setdefault(_hashable(a), len(table)) for a in anchors], dtype=torch.long)


def similar_anchor_codes(anchors: Sequence[Hashable], group_ids: torch.Tensor | Sequence[int], threshold: float) -> torch.Tensor:
    """Integer codes that put similar anchors of one group in one step group (verl-agent's newer
    ``core_gigpo`` ``enable_similarity``).

    Within each group, rows in order: an anchor joins the first cluster whose representative (its
    first anchor) it equals or matches with ``difflib.SequenceMatcher(None, a, b).ratio() >=
    threshold`` (on ``str`` forms), else it starts a cluster. Greedy and order-dependent, as
    upstream; near-identical observations (a counter or a line of inventory apart) then share
    their step-level baseline instead of each being a singleton with ``A_S = 0``.

    >>> similar_anchor_codes(["a red apple", "a red appel", "a blue car"], [0, 0, 0], 0.9).tolist()
    [0, 0, 1]
    """
    import difflib

    groups = [int(g) for g in torch.as_tensor(group_ids).tolist()]
    if len(anchors) != len(groups):
        raise ValueError(f"anchors must hold one anchor per row ({len(groups)}), got {len(anchors)}")
    clusters: dict[int, list[tuple[str, int]]] = {}  # group -> (representative, code)
    codes = []
    for anchor, group in zip(anchors, groups):
        text = anchor if isinstance(anchor, str) else str(_hashable(anchor))
        members = clusters.setdefault(group, [])
        code = next((c for rep, c in members if rep == text or difflib.SequenceMatcher(None, text, rep).ratio() >= threshold), None)
        if code is None:
            code = sum(len(m) for m in clusters.values())
            members.append((text, code))
        codes.append(code)
    return torch.tensor(codes, dtype=torch.long)


def _trajectory_segments(
    traj_ids: torch.Tensor | Sequence[int], n: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: index of its trajectory run and the exclusive end row of that run.

    Rows of one trajectory must be contiguous; a trajectory id that reappears after another one is an
    error (it would silently split the discounted return).
    """
    traj = torch.as_tensor(traj_ids, device=device)
    _, n_traj = _codes(traj, n, "traj_ids")
    starts = torch.ones(n, dtype=torch.bool, device=traj.device)
    starts[1:] = traj[1:] != traj[:-1]
    run = torch.cumsum(starts, 0) - 1
    n_runs = int(run[-1]) + 1 if n else 0
    if n_runs != n_traj:
        raise ValueError(
            "rows of each trajectory must be contiguous and in time order; "
            f"found {n_runs} runs of traj_ids for {n_traj} distinct trajectories"
        )
    ends = torch.bincount(run, minlength=n_runs).cumsum(0)
    return run, ends[run]


# --------------------------------------------------------------------------- estimators
def grpo_advantages(
    scores: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    norm_by_std: bool = True,
    eps: float = 1e-6,
    traj_ids: torch.Tensor | None = None,
    episode_stats: str = "steps",
    invalid: torch.Tensor | None = None,
    invalid_penalty: float = 0.1,
) -> torch.Tensor:
    """GRPO outcome advantage: each score centred (and scaled) by its group's statistics.

    Follows verl ``compute_grpo_outcome_advantage`` (GRPO, DeepSeekMath arXiv 2402.03300;
    ``norm_by_std=False`` is Dr.GRPO, arXiv 2503.20783) and verl-agent's step-row variant.

    Args:
        scores: ``(B,)`` one scalar score per row (verl: the token sum of the row's rewards).
        group_ids: ``(B,)`` integer group id per row (verl ``index``/``uid``: rows of one task).
        norm_by_std: divide by ``std + eps`` (GRPO) or only subtract the mean (Dr.GRPO).
        eps: added to the std, ``1e-6`` as in verl (TRL uses ``1e-4``).
        traj_ids: ``(B,)`` integer trajectory id per row; needed for ``episode_stats="trajectories"``.
        episode_stats: ``"steps"`` (default, verl-agent): the group's mean and std run over all of its
            rows, so multi-step trajectories weigh by length. ``"trajectories"``: one entry per
            (group, trajectory), the score of its first row (GiGPO Eq. 3).
        invalid: ``(B,)`` bool, rows whose action was invalid; their score is lowered by
            ``invalid_penalty`` (verl-agent's ``apply_invalid_action_penalty``). Under ``"steps"`` the
            penalised rows are the group's entries, as in verl-agent. Under ``"trajectories"`` the
            entries are the *unpenalised* scores, so a trajectory's entry does not depend on whether
            its first step happened to be invalid.

    Returns:
        ``(B,)`` advantages. Std is unbiased (``torch.std``); a group with a single entry gets mean 0
        and std 1 (verl), so its advantage is its raw score (scaled by ``1/(1+eps)``). A group whose
        entries are all equal has no spread to scale by and also gets std 1: its advantages are the
        centred scores themselves (0, or ``-invalid_penalty`` on a penalised row under
        ``"trajectories"``), where verl's ``std + eps`` would give ``-0.1 / 1e-6 = -1e5``.

    >>> grpo_advantages(torch.tensor([1.0, 0.0, 3.0, 3.0]), torch.tensor([0, 0, 1, 1]), norm_by_std=False)
    tensor([ 0.5000, -0.5000,  0.0000,  0.0000])
    """
    scores = _float(scores)
    penalty = torch.zeros_like(scores) if invalid is None else invalid_penalty * torch.as_tensor(invalid, device=scores.device).to(scores.dtype)
    if penalty.shape != scores.shape:
        raise ValueError(f"invalid must have shape {tuple(scores.shape)}, got {tuple(penalty.shape)}")
    entries = scores - penalty if episode_stats == "steps" else scores
    count, mean, std = _group_moments(entries, group_ids, traj_ids, episode_stats)
    single = count == 1
    centred = scores - penalty - mean.masked_fill(single, 0.0)
    if not norm_by_std:
        return centred
    return centred / (std.masked_fill(single | (std == 0), 1.0) + eps)


def rloo_advantages(
    scores: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    traj_ids: torch.Tensor | None = None,
    episode_stats: str = "steps",
) -> torch.Tensor:
    """RLOO advantage: score minus the mean of the *other* entries of its group.

    Follows verl ``compute_rloo_outcome_advantage`` (Ahmadian et al., arXiv 2402.14740): with ``n``
    entries, ``adv = (s - mean) * n / (n - 1)``, which equals ``s`` minus the leave-one-out mean.

    Args:
        scores: ``(B,)`` one score per row.
        group_ids: ``(B,)`` integer group id per row.
        traj_ids: as in :func:`grpo_advantages`.
        episode_stats: as in :func:`grpo_advantages` (``n`` counts rows or trajectories).

    Returns:
        ``(B,)`` advantages; a group with a single entry has no baseline, so ``adv = s`` (verl).
    """
    scores = _float(scores)
    count, mean, _ = _group_moments(scores, group_ids, traj_ids, episode_stats)
    scale = count / (count - 1).clamp_min(1)
    return torch.where(count > 1, (scores - mean) * scale, scores)


def gae_advantages(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float,
    lam: float,
    eps: float = 1e-8,
    sum_over_ranks: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level GAE with masked carry-through and masked whitening (PPO with a critic).

    Follows verl ``compute_gae_advantage_return`` + ``masked_whiten`` (GAE: Schulman et al., arXiv
    1506.02438). Backward over tokens: ``delta_t = r_t + gamma * nextV - V_t`` and
    ``A_t = delta_t + gamma * lam * A_{t+1}``. Tokens with mask 0 (observation tokens inside a
    multi-turn response, or padding) neither update ``nextV`` nor the running advantage, so GAE runs
    over the valid tokens as if the masked ones were absent; their rewards are ignored.

    Args:
        rewards: ``(B, T)`` token-level rewards (verl-agent: the episode reward on the last valid token).
        values: ``(B, T)`` critic values ``V_t``.
        mask: ``(B, T)`` 1 for response tokens that count, 0 otherwise (bool or 0/1 float).
        gamma: discount; verl-agent's PPO default is 1.0.
        lam: GAE lambda; verl-agent's PPO default is 1.0.
        eps: added to the variance before ``rsqrt`` in the whitening (``1e-8`` as in verl).
        sum_over_ranks: sums a tensor over data-parallel ranks, so the whitening moments are the
            global batch's (None: this batch is the whole batch).

    Returns:
        ``(advantages, returns)``, both ``(B, T)``, detached, and 0 at masked positions. ``returns = A + V`` with
        ``A`` taken **before** whitening (the critic target); ``advantages`` are whitened over the mask:
        ``(A - mean) * rsqrt(var + eps)`` with the masked mean and the unbiased masked variance.

    Raises:
        ValueError: if the mask holds fewer than 2 tokens (the unbiased variance is undefined).
    """
    rewards, values = _float(rewards), _float(values)
    if rewards.dim() != 2 or rewards.shape != values.shape or rewards.shape != torch.Size(mask.shape):
        raise ValueError(
            "rewards, values and mask must all have shape (B, T); got "
            f"{tuple(rewards.shape)}, {tuple(values.shape)}, {tuple(mask.shape)}"
        )
    m = torch.as_tensor(mask, device=values.device).to(values.dtype)
    total = sum_over_ranks or (lambda x: x)
    n_tokens = total(m.sum())
    if n_tokens < 2:
        raise ValueError(f"GAE whitening needs at least 2 unmasked tokens, the mask has {int(n_tokens)}")
    rewards, values = rewards.detach(), values.detach()
    next_value = values.new_zeros(values.shape[0])
    running = values.new_zeros(values.shape[0])
    raw = torch.zeros_like(values)
    # A loop over tokens (not rows) is inherent to the recursion; it is vectorized over the batch.
    for t in range(values.shape[1] - 1, -1, -1):
        keep = m[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = keep * (delta + gamma * lam * running) + (1 - keep) * running
        next_value = keep * values[:, t] + (1 - keep) * next_value
        raw[:, t] = running
    raw = raw * m
    returns = (raw + values) * m
    mean = total(raw.sum()) / n_tokens
    var = total(((raw - mean) ** 2 * m).sum()) / (n_tokens - 1)
    advantages = (raw - mean) * torch.rsqrt(var + eps) * m
    return advantages, returns


def step_discounted_returns(
    step_rewards: torch.Tensor, traj_ids: torch.Tensor, *, gamma: float
) -> torch.Tensor:
    """Discounted return ``G_t = r_t + gamma * G_{t+1}`` of each step row within its trajectory.

    verl-agent ``compute_step_discounted_returns`` (GiGPO Eq. 5), vectorized as a log-depth scan: after
    round ``j`` every row holds the discounted sum of the next ``2^j`` rewards of its own trajectory, so
    ``ceil(log2(max length))`` full-batch tensor operations replace the per-trajectory loop. Only
    non-negative powers of ``gamma`` appear, so the result is as stable as the sequential recursion.

    Args:
        step_rewards: ``(B,)`` env reward of each step row.
        traj_ids: ``(B,)`` integer trajectory id per row; rows of one trajectory contiguous, in time order.
        gamma: discount factor (verl-agent: 0.95).

    Returns:
        ``(B,)`` discounted returns.

    >>> step_discounted_returns(torch.tensor([0.0, 0.0, 10.0, 1.0]), torch.tensor([7, 7, 7, 8]), gamma=0.5)
    tensor([ 2.5000,  5.0000, 10.0000,  1.0000])
    """
    rewards = _float(step_rewards)
    n = _check_rows(rewards, "step_rewards")
    if n == 0:
        return rewards.clone()
    _, ends = _trajectory_segments(traj_ids, n, rewards.device)
    rows = torch.arange(n, device=rewards.device)
    longest = int((ends - rows).max())
    returns = rewards.clone()
    shift = 1
    while shift < longest:
        ahead = torch.zeros_like(returns)
        ahead[:-shift] = returns[shift:]
        returns = returns + gamma**shift * torch.where(rows + shift < ends, ahead, 0.0)
        shift *= 2
    return returns


def gigpo_advantages(
    episode_scores: torch.Tensor,
    step_rewards: torch.Tensor,
    group_ids: torch.Tensor,
    traj_ids: torch.Tensor,
    anchors: Sequence[Hashable] | torch.Tensor | np.ndarray,
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    norm: str = "mean_std",
    episode_stats: str = "steps",
    invalid: torch.Tensor | None = None,
    invalid_penalty: float = 0.1,
    eps: float = 1e-6,
    similarity_thresh: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GiGPO advantage ``A = A_E + omega * A_S`` over step rows (GiGPO, arXiv 2505.10978, Eqs. 3-8).

    Follows verl-agent ``compute_gigpo_outcome_advantage``: every env step is one row.

    1. Step returns: discounted per trajectory from ``step_rewards`` (:func:`step_discounted_returns`).
    2. Invalid penalty: ``invalid_penalty`` is subtracted from the step return and from the episode
       score of each invalid row, *after* discounting, so it is not propagated to earlier steps.
    3. ``A_E``: the (penalized) episode score normalized over its group as in :func:`grpo_advantages`
       (singleton group: mean 0, std 1).
    4. Step groups: rows of one group whose anchors (raw env observations) are exactly equal; repeated
       visits within one trajectory join the same step group.
    5. ``A_S``: the step return normalized over its step group; a singleton step group gets mean = its
       own value (std 1), so ``A_S = 0`` there and GiGPO falls back to ``A_E``.

    Args:
        episode_scores: ``(B,)`` the trajectory's episode reward, repeated on each of its rows.
        step_rewards: ``(B,)`` env reward at each step row.
        group_ids: ``(B,)`` integer group id (verl-agent ``uid``); all rows of a trajectory share it.
        traj_ids: ``(B,)`` integer trajectory id (``traj_uid``); rows of one trajectory contiguous, in
            time order.
        anchors: one anchor per row: hashables (str obs), or a tensor/array whose rows are the anchors.
            Lists, dicts and arrays inside a sequence are converted as verl-agent's ``to_hashable``.
        gamma: step-return discount (0.95). omega: weight of ``A_S`` (1.0).
        norm: ``"mean_std"`` (``mean_std_norm``, divide by ``std + eps``) or ``"mean"`` (``mean_norm``);
            the verl-agent names are accepted too.
        episode_stats: ``"steps"`` (verl-agent default) or ``"trajectories"`` for ``A_E`` statistics.
        invalid: ``(B,)`` bool, True where the step's action was invalid; None = all valid.
        invalid_penalty: subtracted on invalid rows (verl-agent ``invalid_action_penalty_coef`` 0.1).
        eps: added to the std (``1e-6``).
        similarity_thresh: None: exact anchors (verl-agent's default); else anchors of a group at
            least this similar share a step group (:func:`similar_anchor_codes`).

    Returns:
        ``(advantages (B,), metrics)``; metrics describe the step groups (count, mean/max size,
        fraction of singleton step groups — GiGPO Fig. 5) and the share of invalid rows.
    """
    if norm not in _GIGPO_NORMS:
        raise ValueError(f"norm must be one of {tuple(_GIGPO_NORMS)}, got {norm!r}")
    by_std = _GIGPO_NORMS[norm]
    scores = _float(episode_scores)
    n = _check_rows(scores, "episode_scores")
    returns = step_discounted_returns(step_rewards, traj_ids, gamma=gamma).to(scores.dtype)
    if returns.shape != (n,):
        raise ValueError(f"step_rewards must have shape ({n},), got {tuple(returns.shape)}")
    if invalid is not None:
        invalid = torch.as_tensor(invalid, dtype=torch.bool, device=scores.device)
        if invalid.shape != (n,):
            raise ValueError(f"invalid must have shape ({n},), got {tuple(invalid.shape)}")
        returns = returns - invalid.to(scores.dtype) * invalid_penalty

    episode_adv = grpo_advantages(
        scores, group_ids, norm_by_std=by_std, eps=eps, traj_ids=traj_ids, episode_stats=episode_stats,
        invalid=invalid, invalid_penalty=invalid_penalty,
    )

    group, _ = _codes(group_ids, n, "group_ids", scores.device)
    if similarity_thresh is None:
        anchor = _anchor_codes(anchors, n).to(scores.device)
    else:
        anchor = similar_anchor_codes(anchors, group_ids, similarity_thresh).to(scores.device)
    step_groups, step_group = torch.unique(group * (int(anchor.max()) + 1) + anchor, return_inverse=True)
    size, mean, std = _segment_moments(returns, step_group, step_groups.numel())
    step_adv = returns - mean[step_group]
    if by_std:
        step_adv = step_adv / (std.masked_fill(size == 1, 1.0)[step_group] + eps)

    metrics = {
        "step_group/count": float(step_groups.numel()),
        "step_group/size_mean": float(size.mean()),
        "step_group/size_max": float(size.max()),
        "step_group/singleton_frac": float((size == 1).to(scores.dtype).mean()),
        "invalid_frac": float(invalid.to(scores.dtype).mean()) if invalid is not None else 0.0,
    }
    return episode_adv + omega * step_adv, metrics


def rank_swap(
    outcomes: torch.Tensor, process_returns: torch.Tensor, group_ids: torch.Tensor
) -> torch.Tensor:
    """RSPO rank-consistent return swap (``RSPOConfig.swap="rank"``).

    Within each group, trajectories are ranked by ``(outcome, process return)`` ascending, ties broken
    by original index (deterministic), and the k-th ranked trajectory receives the group's k-th
    smallest process return. Why: the group keeps the dense spread of the process rewards (no
    all-equal collapse when every outcome is equal), while the order always agrees with the outcome
    (``o_i > o_j`` implies ``swapped_i >= swapped_j``). Feed the result to any group estimator.

    Args:
        outcomes: ``(N,)`` outcome return of each trajectory (e.g. success 0/1).
        process_returns: ``(N,)`` process return of each trajectory.
        group_ids: ``(N,)`` integer group id of each trajectory.

    Returns:
        ``(N,)`` swapped returns: per group, a permutation of that group's process returns.

    >>> rank_swap(torch.tensor([1, 0, 0, 1]), torch.tensor([0.2, 0.9, 0.5, 0.7]), torch.tensor([0, 0, 0, 0]))
    tensor([0.7000, 0.5000, 0.2000, 0.9000])
    """
    process = _float(process_returns)
    n = _check_rows(process, "process_returns")
    outcomes = torch.as_tensor(outcomes, device=process.device)
    if outcomes.shape != (n,):
        raise ValueError(f"outcomes must have shape ({n},), got {tuple(outcomes.shape)}")
    group, _ = _codes(group_ids, n, "group_ids", process.device)

    def lexsort(keys: Sequence[torch.Tensor]) -> torch.Tensor:
        """Row order sorted by ``keys`` (most significant last), then by row index."""
        order = torch.arange(n, device=process.device)
        for key in keys:
            order = order[torch.sort(key[order], stable=True).indices]
        return order

    # Both orders list the groups in the same order with the same block sizes, so position k of the
    # trajectory ranking and of the sorted returns always falls in the same group.
    ranked = lexsort([process, outcomes, group])
    sorted_values = process[lexsort([process, group])]
    swapped = torch.empty_like(process)
    swapped[ranked] = sorted_values
    return swapped


ADVANTAGE_ESTIMATORS: Mapping[str, Callable[..., Any]] = MappingProxyType(
    {
        "grpo": grpo_advantages,
        "rloo": rloo_advantages,
        "gae": gae_advantages,
        "gigpo": gigpo_advantages,
    }
)
