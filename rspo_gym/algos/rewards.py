"""Reward shaping for training, as pure functions of rollout arrays.

- ``REWARD_KINDS``: ``"outcome"``, ``"score"``, ``"dense"``.
- ``training_step_rewards``: the per-step training reward of each row for a reward kind.
- ``episode_scores``: per-row sum of a trajectory's step rewards (what GRPO/GiGPO normalise).
- ``invalid_penalty``: verl-agent's penalty, applied to rows after the sums.

Conventions (verl-agent, reference §2.3): ``outcome`` pays ``success_reward`` (10) on the winning
step and nothing else; ``score`` pays ``success_reward x`` the env reward (WebShop's purchase score,
ALFWorld's 0/1 win, so identical to ``outcome`` there); ``dense`` adds the process reward
(``process_coef x info["process_reward"]``) on every step to ``outcome``, or to ``score`` with
``dense_outcome="score"``. RSPO's learner only ever
sees ``outcome`` or ``score``; ``dense`` is for the baselines and for RSPO's explorer.
"""

from __future__ import annotations

import torch

__all__ = ["REWARD_KINDS", "DENSE_OUTCOMES", "training_step_rewards", "episode_scores", "invalid_penalty"]

REWARD_KINDS = ("outcome", "score", "dense")
DENSE_OUTCOMES = ("outcome", "score")


def training_step_rewards(
    env_rewards: torch.Tensor,
    wins: torch.Tensor,
    process_rewards: torch.Tensor,
    kind: str = "outcome",
    *,
    success_reward: float = 10.0,
    process_coef: float = 1.0,
    dense_outcome: str = "outcome",
) -> torch.Tensor:
    """Per-row training reward.

    Args:
        env_rewards: (B,) the env's reward at each step row.
        wins: (B,) bool, True on the final row of a won trajectory.
        process_rewards: (B,) ``info["process_reward"]`` of each row.
        kind: one of ``REWARD_KINDS``.
        dense_outcome: the outcome term of ``dense``: ``outcome`` or ``score``.

    >>> training_step_rewards(torch.tensor([0., 0.75]), torch.tensor([False, False]), torch.tensor([.5, .2]), "score").tolist()
    [0.0, 7.5]
    >>> training_step_rewards(torch.tensor([0., 0.75]), torch.tensor([False, False]), torch.tensor([.5, .25]), "dense", dense_outcome="score").tolist()
    [0.5, 7.75]
    """
    if kind not in REWARD_KINDS:
        raise ValueError(f"unknown reward kind {kind!r}; expected one of {REWARD_KINDS}")
    if dense_outcome not in DENSE_OUTCOMES:
        raise ValueError(f"dense_outcome must be one of {DENSE_OUTCOMES}, got {dense_outcome!r}")
    if kind == "score":
        return success_reward * env_rewards.double()
    if kind == "dense":
        outcome = training_step_rewards(env_rewards, wins, process_rewards, dense_outcome, success_reward=success_reward)
        return outcome + process_coef * process_rewards.double()
    return success_reward * wins.double()


def episode_scores(step_rewards: torch.Tensor, traj_ids: torch.Tensor) -> torch.Tensor:
    """(B,) each row's trajectory total (``episode_rewards`` of verl-agent, copied to every row)."""
    _, inverse = torch.unique(traj_ids, return_inverse=True)
    totals = torch.zeros(int(inverse.max()) + 1, dtype=step_rewards.dtype).index_add_(0, inverse, step_rewards)
    return totals[inverse]


def invalid_penalty(values: torch.Tensor, invalid: torch.Tensor, penalty: float = 0.1) -> torch.Tensor:
    """``values - penalty`` on invalid rows (applied after discounting / summing, as verl-agent)."""
    return values - penalty * invalid.to(values.dtype)
