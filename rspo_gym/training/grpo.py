"""GRPO for multi-turn agents: every step row gets its trajectory's group-normalised score.

As in verl-agent, the score of a row is its trajectory's total training reward minus the invalid
penalty on that row, normalised over the task's group (every step row by default, so longer
trajectories weigh more; ``episode_stats="trajectories"`` for one entry per trajectory).

>>> import rspo_gym
>>> trainer = GRPOTrainer("rspo/ALFWorld-v0", iterations=1, num_groups=1, group_size=2, max_turns=2, eval_every=0, progress=False)
>>> history = trainer.learn()  # doctest: +ELLIPSIS
Logging to .../grpo-ALFWorld-v0-...
>>> sorted(k for k in history[0] if k.startswith("rollout/"))[:3]
['rollout/invalid_rate', 'rollout/length', 'rollout/outcome_return']
"""

from __future__ import annotations

from rspo_gym.algos.estimates import grpo_estimate
from rspo_gym.training.config import TrainerConfig
from rspo_gym.training.trainer import Trainer

__all__ = ["GRPOTrainer", "grpo_estimate"]


class GRPOTrainer(Trainer):
    """Group Relative Policy Optimization over grouped multi-turn rollouts."""

    algo = "grpo"
    config_class = TrainerConfig

    def estimate(self, view, batch, old_values):
        return grpo_estimate(view, self.config)
