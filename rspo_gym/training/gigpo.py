"""GiGPO: GRPO's episode-level advantage plus an anchor-state step-level advantage.

Step groups gather rows of one task group whose raw observations (anchors) are identical; their
γ-discounted step returns are normalised within the step group (verl-agent's ``core_gigpo``,
reference §2.2). ``A = A_E + ω·A_S``; the invalid penalty hits the row's episode score and its
step return after discounting.
"""

from __future__ import annotations

from rspo_gym.algos.advantages import gigpo_advantages
from rspo_gym.training.config import GiGPOConfig
from rspo_gym.algos.kl_control import penalised_scores
from rspo_gym.training.trainer import Estimate, RewardView, Trainer

__all__ = ["GiGPOTrainer", "gigpo_estimate"]


def gigpo_estimate(view: RewardView, config: GiGPOConfig) -> Estimate:
    """Row advantages from a reward view (pure)."""
    advantages, metrics = gigpo_advantages(
        penalised_scores(view.episode, view.token_penalty),
        view.step_rewards,
        view.group_ids,
        view.traj_ids,
        view.anchors,
        gamma=config.gamma,
        omega=config.omega,
        norm=config.gigpo_norm if config.norm_by_std else "mean",
        episode_stats=config.episode_stats,
        invalid=view.invalid,
        invalid_penalty=config.invalid_penalty,
        similarity_thresh=config.similarity_thresh if config.enable_similarity else None,
    )
    return Estimate(advantages, metrics=metrics)


class GiGPOTrainer(Trainer):
    """Group-in-Group Policy Optimization (Feng et al., 2025)."""

    algo = "gigpo"
    config_class = GiGPOConfig

    def step_discount(self) -> float:
        return self.config.gamma

    def estimate(self, view, batch, old_values):
        return gigpo_estimate(view, self.config)
