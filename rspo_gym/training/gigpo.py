"""GiGPO: GRPO's episode-level advantage plus an anchor-state step-level advantage.

Step groups gather rows of one task group whose raw observations (anchors) are identical; their
γ-discounted step returns are normalised within the step group (verl-agent's ``core_gigpo``,
reference §2.2). ``A = A_E + ω·A_S``; the invalid penalty hits the row's episode score and its
step return after discounting.
"""

from __future__ import annotations

from rspo_gym.algos.estimates import gigpo_estimate
from rspo_gym.training.config import GiGPOConfig
from rspo_gym.training.trainer import Trainer

__all__ = ["GiGPOTrainer", "gigpo_estimate"]


class GiGPOTrainer(Trainer):
    """Group-in-Group Policy Optimization (Feng et al., 2025)."""

    algo = "gigpo"
    config_class = GiGPOConfig

    def step_discount(self) -> float:
        return self.config.gamma

    def estimate(self, view, batch, old_values):
        return gigpo_estimate(view, self.config)
