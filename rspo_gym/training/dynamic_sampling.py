"""DAPO's dynamic sampling (verl's ``algorithm.filter_groups``): keep the groups that teach something.

A group whose trajectories all got the same reward has every group-relative advantage 0: it costs a
rollout and an update pass and moves nothing but the entropy and KL terms. ``informative_groups``
finds the others; the trainer samples more groups until it has enough (``Trainer.collect_batch``).
The rollout helpers keep ids unique when groups of several rollouts share one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rspo_gym.rollout.trajectory import Rollout

__all__ = ["informative_groups", "select_groups", "offset_ids", "concat_rollouts"]


def informative_groups(group_ids: Sequence[int], scores: Sequence[float]) -> list[int]:
    """The groups, in first-seen order, whose trajectories' ``scores`` are not all equal, and the
    groups of one trajectory (verl keeps those: ``std > 0 or len == 1``).

    One entry per trajectory.

    >>> informative_groups([0, 0, 1, 1, 2], [10.0, 0.0, 0.0, 0.0, 5.0])
    [0, 2]
    """
    seen: dict[int, list[float]] = {}
    for group, score in zip(group_ids, scores, strict=True):
        seen.setdefault(group, []).append(float(score))
    return [group for group, values in seen.items() if len(values) == 1 or max(values) > min(values)]


def select_groups(rollout: Rollout, groups: Sequence[int]) -> Rollout:
    """The rows and trajectories of ``groups``, in the rollout's order."""
    keep = set(groups)
    return Rollout([r for r in rollout.rows if r.group_id in keep], [t for t in rollout.trajectories if t.group_id in keep])


def offset_ids(rollout: Rollout, traj_offset: int, group_offset: int) -> Rollout:
    """The rollout with ``traj_offset`` added to every trajectory id and ``group_offset`` to every
    group id, so that it joins another rollout's batch without sharing a group or a trajectory."""
    if traj_offset == 0 and group_offset == 0:
        return rollout
    return Rollout(
        [replace(r, traj_id=r.traj_id + traj_offset, group_id=r.group_id + group_offset) for r in rollout.rows],
        [replace(t, traj_id=t.traj_id + traj_offset, group_id=t.group_id + group_offset) for t in rollout.trajectories],
    )


def concat_rollouts(rollouts: Sequence[Rollout]) -> Rollout:
    """One rollout of several, in order (their ids must already differ: ``offset_ids``)."""
    return Rollout([r for x in rollouts for r in x.rows], [t for x in rollouts for t in x.trajectories])
