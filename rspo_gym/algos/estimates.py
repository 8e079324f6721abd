"""The estimators of the four algorithms as pure functions: reward tensors in, advantages out.

- ``RewardView``: the per-row reward tensors an estimator reads (the trainer builds it from a
  rollout, ``Trainer.reward_view``).
- ``Estimate``: what an estimator answers: advantages, returns for a critic, metrics.
- ``grpo_estimate``, ``gigpo_estimate``, ``ppo_estimate``: each algorithm's advantages from a
  reward view and its config (``GRPOTrainer.estimate`` and the others call them).
- ``rank_swapped_view``, ``annealed_view``: RSPO's reward swaps on a reward view (rank and anneal).

No I/O and no loop: the configs are only read (their classes are named for the type checker).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Hashable

import torch

from rspo_gym.algos.advantages import gae_advantages, gigpo_advantages, grpo_advantages, rank_swap
from rspo_gym.algos.kl_control import penalised_scores
from rspo_gym.algos.rewards import episode_scores, invalid_penalty

if TYPE_CHECKING:
    from rspo_gym.training.config import GiGPOConfig, PPOConfig, TrainerConfig

__all__ = ["RewardView", "Estimate", "grpo_estimate", "gigpo_estimate", "ppo_estimate", "rank_swapped_view", "annealed_view"]


@dataclass
class RewardView:
    """Per-row reward tensors (rows in trajectory order) for one reward kind."""

    step_rewards: torch.Tensor  # (B,) float64 training reward of each step
    episode: torch.Tensor  # (B,) the row's trajectory total of step_rewards
    invalid: torch.Tensor  # (B,) bool: penalised rows (see TrainerConfig.invalid_penalty_on)
    group_ids: torch.Tensor  # (B,) long
    traj_ids: torch.Tensor  # (B,) long
    anchors: list[Hashable]
    token_penalty: torch.Tensor | None = None  # (B, R) subtracted from the token rewards (KL in the reward)


@dataclass
class Estimate:
    """An estimator's answer: advantages (B,) or (B, R), optional returns for a critic, metrics."""

    advantages: torch.Tensor
    returns: torch.Tensor | None = None
    metrics: dict[str, float] | None = None


def grpo_estimate(view: RewardView, config: TrainerConfig) -> Estimate:
    """Row advantages from a reward view (pure)."""
    advantages = grpo_advantages(
        penalised_scores(view.episode, view.token_penalty),
        view.group_ids,
        norm_by_std=config.norm_by_std,
        traj_ids=view.traj_ids,
        episode_stats=config.episode_stats,
        invalid=view.invalid,
        invalid_penalty=config.invalid_penalty,
    )
    return Estimate(advantages)


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


def ppo_estimate(
    view: RewardView, config: PPOConfig, response_mask: torch.Tensor, values: torch.Tensor,
    sum_over_ranks: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> Estimate:
    """Token advantages and returns (pure): terminal score at each row's last response token.

    The whitening spans the whole batch: across data-parallel ranks ``sum_over_ranks`` makes its
    moments the global batch's (``Trainer.dist.sum_tensor``)."""
    scores = invalid_penalty(view.episode, view.invalid, config.invalid_penalty).to(values.dtype)
    rewards = torch.zeros_like(values)
    lengths = response_mask.sum(dim=1).long()
    has_tokens = lengths > 0
    rows = torch.arange(len(scores))[has_tokens]
    rewards[rows, lengths[has_tokens] - 1] = scores[has_tokens]
    if view.token_penalty is not None:  # KL in the reward, per token (verl's apply_kl_penalty)
        rewards = rewards - view.token_penalty.to(rewards.dtype)
    advantages, returns = gae_advantages(rewards, values, response_mask, gamma=config.gae_gamma, lam=config.gae_lambda, sum_over_ranks=sum_over_ranks)
    return Estimate(advantages, returns)


def rank_swapped_view(view: RewardView, process_per_row: torch.Tensor) -> RewardView:
    """F2 on a reward view: each trajectory's return becomes its swapped process return.

    The swapped return is paid on the trajectory's last row and nowhere else, as the outcome is,
    so ``step_rewards`` sum to ``episode`` and step-level estimators (GiGPO's discounted step
    returns) read the swap too, not the outcome it replaced.

    ``process_per_row`` is (B,): each row's trajectory process return (rows of a trajectory are
    contiguous, so the k-th trajectory start marks trajectory k).
    """
    n = len(view.traj_ids)
    starts = torch.ones(n, dtype=torch.bool)
    starts[1:] = view.traj_ids[1:] != view.traj_ids[:-1]
    last = torch.ones(n, dtype=torch.bool)
    last[:-1] = starts[1:]
    first = torch.nonzero(starts).flatten()
    swapped = rank_swap(view.episode[first], process_per_row[first], view.group_ids[first]).to(view.episode.dtype)
    episode = swapped[starts.long().cumsum(0) - 1]
    return replace(view, episode=episode, step_rewards=torch.where(last, episode, torch.zeros_like(episode)))


def annealed_view(dense: RewardView, outcome: RewardView, beta: float) -> RewardView:
    """F3: ``(1 - beta) dense + beta outcome`` for step rewards and episode totals."""
    step = (1.0 - beta) * dense.step_rewards + beta * outcome.step_rewards
    return replace(outcome, step_rewards=step, episode=episode_scores(step, outcome.traj_ids))
