"""What RSPO's replay does to its learner: pure measures of one iteration, logged under ``explorer/``.

Three questions about the explorer swap are answered from tensors and outcomes the trainer already
has; these functions hold the arithmetic, the trainer (``rspo_gym.training.rspo``) the bookkeeping:

- ``is_weight_stats``: do the truncated importance weights ``min(pi_learner / pi_explorer, cap)``
  shrink the replayed rows of winning trajectories? Their mean, and the share below ``LOW_WEIGHT``,
  on winning and on losing replayed rows.
- ``logp_gain``: does the learner move toward the explorer's winning actions? The mean change of
  its log-prob on those tokens across the iteration's update.
- ``summed`` / ``from_sums``: the same means pooled over ranks, as totals that add up.
- ``task_labels`` and ``revisits``: does a goal only the explorer won become one the learner wins?
  Each task played is labelled by who won it; when a labelled task is next played, the learner's
  success on it is credited to the label, against goals nobody won as the comparison.
- ``run_labels``, ``transfer_sample`` and ``transfer_summary``: the same question where goals are
  rarely played twice (a large pool). Each goal gets one label over the whole run, and at the end
  a sample of each label is played by the learner's start and final weights on the same episodes:
  the transfer is the explorer-only goals' gain less the nobody-won goals' gain (a difference in
  differences, so that what the learner learnt everywhere is not credited to the explorer).

Every mean comes with its count (tokens or tasks), 0 when there is nothing to average, so that
means over iterations weight by the count instead of averaging empty iterations.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

__all__ = [
    "LOW_WEIGHT", "LABELS", "MEANS_OVER", "is_weight_stats", "logp_gain", "summed", "from_sums", "task_labels", "revisits",
    "run_labels", "transfer_sample", "transfer_summary",
]

#: a replayed token whose weight is below this contributes less than a tenth of an on-policy token
LOW_WEIGHT = 0.1
#: who won a task on the iteration it was played; ``learner`` tasks are not compared
LABELS = ("explorer_only", "nobody")


def _masked(values: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """The values on the response tokens of the selected rows, flat."""
    keep = mask.bool() & rows.bool().unsqueeze(-1)
    return values[keep]


def is_weight_stats(weights: torch.Tensor, mask: torch.Tensor, won: torch.Tensor, *, low: float = LOW_WEIGHT) -> dict[str, float]:
    """Token counts, mean weights and shares below ``low`` of replayed rows, by their trajectory's outcome.

    Args:
        weights: ``(B, T)`` importance weights of the replayed rows.
        mask: ``(B, T)`` response mask.
        won: ``(B,)`` whether each row's trajectory won.

    >>> w = torch.tensor([[1.0, 0.05], [0.5, 0.0], [2.0, 0.0]]); m = torch.tensor([[1, 1], [1, 0], [1, 0]])
    >>> {k: round(v, 4) for k, v in is_weight_stats(w, m, torch.tensor([True, True, False])).items()}
    {'replay_win_tokens': 3.0, 'is_weight_win': 0.5167, 'is_weight_win_low': 0.3333, 'replay_loss_tokens': 1.0, 'is_weight_loss': 2.0, 'is_weight_loss_low': 0.0}
    """
    out: dict[str, float] = {}
    for name, rows in (("win", won), ("loss", ~won.bool())):
        values = _masked(weights.float(), mask, rows)
        n = values.numel()
        out[f"replay_{name}_tokens"] = float(n)
        out[f"is_weight_{name}"] = float(values.mean()) if n else 0.0
        out[f"is_weight_{name}_low"] = float((values < low).float().mean()) if n else 0.0
    return out


def logp_gain(before: torch.Tensor, after: torch.Tensor, mask: torch.Tensor) -> tuple[float, float]:
    """(tokens, mean of ``after − before`` over them): how far an update moved the log-probs of the
    masked tokens; positive means the policy now samples them more often.

    >>> logp_gain(torch.tensor([[-2.0, -1.0], [-3.0, 0.0]]), torch.tensor([[-1.5, -1.0], [-2.0, 0.0]]), torch.tensor([[1, 1], [1, 0]]))
    (3.0, 0.5)
    """
    delta = _masked(after.float() - before.float(), mask, torch.ones(mask.shape[0], dtype=torch.bool))
    n = delta.numel()
    return float(n), float(delta.mean()) if n else 0.0


#: Each count of ``is_weight_stats`` and of the trainer's ``logp_gain`` rows, and the means over it.
MEANS_OVER = {
    "replay_win_tokens": ("is_weight_win", "is_weight_win_low"),
    "replay_loss_tokens": ("is_weight_loss", "is_weight_loss_low"),
    "replay_win_logp_tokens": ("replay_win_logp_gain",),
    "own_win_logp_tokens": ("own_win_logp_gain",),
}


def summed(stats: dict[str, float]) -> list[float]:
    """The counts, then each mean times its count: totals that ranks can add, so that the pooled
    means weight every token alike whichever rank held it (``from_sums`` divides back).

    >>> summed({"replay_win_tokens": 4.0, "is_weight_win": 0.5, "is_weight_win_low": 0.25, "replay_loss_tokens": 0.0,
    ...         "is_weight_loss": 0.0, "is_weight_loss_low": 0.0, "replay_win_logp_tokens": 2.0,
    ...         "replay_win_logp_gain": 0.1, "own_win_logp_tokens": 0.0, "own_win_logp_gain": 0.0})
    [4.0, 0.0, 2.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.2, 0.0]
    """
    return [stats[n] for n in MEANS_OVER] + [stats[m] * stats[n] for n, means in MEANS_OVER.items() for m in means]


def from_sums(totals: list[float]) -> dict[str, float]:
    """``summed``'s totals back as counts and means (a mean over no tokens is 0).

    >>> from_sums([4.0, 0.0, 2.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.2, 0.0])["is_weight_win_low"]
    0.25
    """
    counts = dict(zip(MEANS_OVER, totals))
    out = dict(counts)
    keys = [(n, m) for n, means in MEANS_OVER.items() for m in means]
    for (n, m), total in zip(keys, totals[len(MEANS_OVER):]):
        out[m] = total / counts[n] if counts[n] else 0.0
    return out


def task_labels(trajectories: Iterable[Any]) -> dict[Any, tuple[str, float]]:
    """Each task played this iteration: ``(label, learner's success)``. The label is
    ``explorer_only`` when an explorer trajectory won and none of the learner's did, ``nobody``
    when none won, ``learner`` when the learner won; success is the share of the learner's
    episodes won. Trajectories carry ``task_id``, ``won`` and ``source``.

    >>> from types import SimpleNamespace as T
    >>> played = [T(task_id=1, won=False, source="learner"), T(task_id=1, won=True, source="explorer"),
    ...           T(task_id=2, won=False, source="learner"), T(task_id=2, won=False, source="explorer"),
    ...           T(task_id=3, won=True, source="learner"), T(task_id=3, won=False, source="learner")]
    >>> task_labels(played)
    {1: ('explorer_only', 0.0), 2: ('nobody', 0.0), 3: ('learner', 0.5)}
    """
    learner: dict[Any, list[bool]] = {}
    explorer_won: dict[Any, bool] = {}
    for t in trajectories:
        if t.source == "learner":
            learner.setdefault(t.task_id, []).append(bool(t.won))
        else:
            explorer_won[t.task_id] = explorer_won.get(t.task_id, False) or bool(t.won)
    labels = {}
    for task, wins in learner.items():
        label = "learner" if any(wins) else "explorer_only" if explorer_won.get(task, False) else "nobody"
        labels[task] = (label, sum(wins) / len(wins))
    return labels


def revisits(pending: Mapping[Any, str], played: Mapping[Any, tuple[str, float]]) -> tuple[dict[str, float], dict[Any, str]]:
    """The learner's success on tasks played again, by the label they got when last played, and the
    labels kept for the next iteration (this iteration's replace the earlier; ``learner`` tasks are
    dropped, as they need no transfer).

    Returns ``({"revisits_<label>": tasks, "revisit_success_<label>": mean success}, pending)``.

    >>> pending = {1: "explorer_only", 2: "nobody", 4: "explorer_only"}
    >>> revisits(pending, {1: ("learner", 0.5), 2: ("nobody", 0.0), 5: ("explorer_only", 0.0)})
    ({'revisits_explorer_only': 1.0, 'revisit_success_explorer_only': 0.5, 'revisits_nobody': 1.0, 'revisit_success_nobody': 0.0}, {4: 'explorer_only', 2: 'nobody', 5: 'explorer_only'})
    """
    metrics: dict[str, float] = {}
    for label in LABELS:
        successes = [success for task, (_, success) in played.items() if pending.get(task) == label]
        metrics[f"revisits_{label}"] = float(len(successes))
        metrics[f"revisit_success_{label}"] = sum(successes) / len(successes) if successes else 0.0
    kept = {task: label for task, label in pending.items() if task not in played}
    kept.update({task: label for task, (label, _) in played.items() if label in LABELS})
    return metrics, kept


def run_labels(labels: Mapping[Any, str], played: Mapping[Any, tuple[str, float]]) -> dict[Any, str]:
    """Each goal's label over the whole run so far: ``learner`` once the learner won it in any
    play, else ``explorer_only`` once an explorer won it, else ``nobody``. Both compared labels thus
    hold goals the learner never won in training, which is what makes them comparable.

    >>> run_labels({1: "explorer_only", 2: "nobody", 3: "nobody"}, {1: ("nobody", 0.0), 2: ("explorer_only", 0.0), 3: ("learner", 0.5)})
    {1: 'explorer_only', 2: 'explorer_only', 3: 'learner'}
    """
    rank = {"nobody": 0, "explorer_only": 1, "learner": 2}
    out = dict(labels)
    for task, (label, _) in played.items():
        if task not in out or rank[label] > rank[out[task]]:
            out[task] = label
    return out


def transfer_sample(labels: Mapping[Any, str], per_label: int, seed: int) -> dict[str, list[Any]]:
    """Up to ``per_label`` goals of each compared label, drawn without replacement by ``seed``
    from the goals in sorted order (so the draw depends on the labels, not on the order in which
    ranks or iterations met the goals).

    >>> transfer_sample({5: "nobody", 1: "explorer_only", 2: "nobody", 3: "learner", 4: "nobody"}, 2, seed=0)
    {'explorer_only': [1], 'nobody': [2, 4]}
    """
    rng = random.Random(seed)
    out = {}
    for label in LABELS:
        goals = _in_order([task for task, got in labels.items() if got == label])
        out[label] = _in_order(rng.sample(goals, min(per_label, len(goals))))
    return out


def _in_order(tasks: list[Any]) -> list[Any]:
    """Task ids sorted: by value (ids are numbers or names), by text when they do not compare."""
    try:
        return sorted(tasks)
    except TypeError:
        return sorted(tasks, key=repr)


def transfer_summary(start: Mapping[str, Sequence[float]], end: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Per label, its goals' share of episodes won by the start and by the final weights (the same
    episodes, as per-goal means) and the gain; ``transfer`` is the explorer-only gain less the
    nobody-won gain (NaN when a label has no goals: nothing to compare).

    >>> transfer_summary({"explorer_only": [0.0, 0.5], "nobody": [0.0, 0.0]}, {"explorer_only": [0.5, 0.5], "nobody": [0.25, 0.0]})
    {'explorer_only_tasks': 2.0, 'explorer_only_start': 0.25, 'explorer_only_end': 0.5, 'explorer_only_gain': 0.25, \
'nobody_tasks': 2.0, 'nobody_start': 0.0, 'nobody_end': 0.125, 'nobody_gain': 0.125, 'transfer': 0.125}
    """
    out: dict[str, float] = {}
    for label in LABELS:
        before, after = list(start[label]), list(end[label])
        n = len(before)
        out[f"{label}_tasks"] = float(n)
        out[f"{label}_start"] = sum(before) / n if n else float("nan")
        out[f"{label}_end"] = sum(after) / n if n else float("nan")
        out[f"{label}_gain"] = out[f"{label}_end"] - out[f"{label}_start"]
    out["transfer"] = out["explorer_only_gain"] - out["nobody_gain"]
    return out
