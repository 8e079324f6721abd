"""Does a goal only the explorer won become one its learner wins? The end-of-run measurement.

In a large goal pool a training goal is rarely played twice, so the learner's later success on the
explorer's wins cannot be read from training (``explorer/revisit*`` stays near empty). Instead the
run labels every goal it played (``replay_metrics.run_labels``) and, at the end, a sample of the
goals only the explorer won and of those nobody won is played by the learner's start weights and
by its final weights, on the same episodes. The gain on the explorer-only goals less the gain on
the nobody-won goals is what the explorer's wins added beyond what the learner learnt everywhere
(``replay_metrics.transfer_summary``). Both labels hold goals the learner never won in training.

The arithmetic lives in ``algos/replay_metrics.py``; this module plays the episodes and swaps the
weights; ``RSPOTrainer`` keeps the labels and the start weights.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

import torch

from rspo_gym.algos.replay_metrics import LABELS, transfer_sample, transfer_summary

__all__ = ["detached_copy", "goal_successes", "measure_transfer"]


def detached_copy(state: Any) -> Any:
    """A ``state_dict`` whose tensors are copies on the CPU: what the weights were, whatever the
    policy's own tensors (which a ``state_dict`` shares) go through later.

    >>> w = torch.ones(2); saved = detached_copy({"model": {"w": w}, "commands": ["look"]}); _ = w.add_(1)
    >>> saved["model"]["w"].tolist(), saved["commands"]
    ([1.0, 1.0], ['look'])
    """
    if isinstance(state, torch.Tensor):
        return state.detach().to("cpu", copy=True)
    if isinstance(state, dict):
        return {key: detached_copy(value) for key, value in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(detached_copy(value) for value in state)
    return copy.deepcopy(state)


def goal_successes(trainer: Any, sample: Mapping[str, list[Any]], episodes: int, temperature: float | None) -> dict[str, list[float]]:
    """Each sampled goal's share of ``episodes`` won by the trainer's current weights, by label:
    one evaluation of the labels' goals in order, so any trainer with the same evaluation seed
    plays the same episodes (another run's policy on this run's goals)."""
    ids = [task for label in LABELS for task in sample[label] for _ in range(episodes)]
    _, played = trainer.evaluate(task_ids=ids, return_episodes=True, temperature=temperature, training_envs=True)
    won: dict[Any, list[float]] = {}
    for trajectory in played:
        won.setdefault(trajectory.task_id, []).append(float(trajectory.won))
    return {label: [sum(won[task]) / len(won[task]) for task in sample[label]] for label in LABELS}


def measure_transfer(
    trainer: Any, start_weights: Any, labels: Mapping[Any, str], *, tasks: int, episodes: int, seed: int,
    temperature: float | None = None,
) -> dict[str, Any]:
    """``transfer_summary`` of up to ``tasks`` goals per label, each played ``episodes`` times by
    the final and by the start weights, with the goals, their per-goal successes and the label
    counts beside it. The trainer's final weights are back in place afterwards, also on an error."""
    sample = transfer_sample(labels, tasks, seed)
    counts = {label: sum(1 for got in labels.values() if got == label) for label in LABELS}
    empty = {label: [] for label in LABELS}
    if not any(sample.values()):
        return {**transfer_summary(empty, empty), "episodes": episodes, "labelled": counts, "goals": {}}
    end = goal_successes(trainer, sample, episodes, temperature)
    final = detached_copy(trainer.policy.state_dict())
    try:
        trainer.policy.load_state_dict(start_weights)
        start = goal_successes(trainer, sample, episodes, temperature)
    finally:
        trainer.policy.load_state_dict(final)
    goals = {label: {"task_ids": sample[label], "start": start[label], "end": end[label]} for label in LABELS}
    return {**transfer_summary(start, end), "episodes": episodes, "labelled": counts, "goals": goals}
