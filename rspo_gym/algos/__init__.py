"""Algorithms: advantage estimators and losses as pure tensor functions (trainers build on them).

- ``advantages``: GRPO, RLOO, GAE and GiGPO estimators, discounted step returns, the RSPO rank swap.
- ``losses``: PPO clip (dual clip, importance weights), value loss, KL estimators, entropy,
  loss aggregation, truncated importance weights.
- Trainers (``GRPOTrainer``, ``PPOTrainer``, ``GiGPOTrainer``, ``RSPOTrainer``) and their configs
  load lazily, so importing the pure functions does not import transformers.
"""

import rspo_gym
from rspo_gym.algos.advantages import (
    ADVANTAGE_ESTIMATORS,
    gae_advantages,
    gigpo_advantages,
    grpo_advantages,
    rank_swap,
    rloo_advantages,
    step_discounted_returns,
)
from rspo_gym.algos.losses import (
    AGG_MODES,
    agg_loss,
    entropy_from_logits,
    kl_penalty,
    ppo_policy_loss,
    truncated_is_weights,
    value_loss,
)

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AGG_MODES",
    "agg_loss",
    "entropy_from_logits",
    "gae_advantages",
    "gigpo_advantages",
    "grpo_advantages",
    "kl_penalty",
    "ppo_policy_loss",
    "rank_swap",
    "rloo_advantages",
    "step_discounted_returns",
    "truncated_is_weights",
    "value_loss",
]

#: the trainers and configs, named at the top level too (``rspo_gym._LAZY``): one map for both
_TRAINERS = {name: module for name, module in rspo_gym._LAZY.items() if module.startswith("rspo_gym.algos.")}
__all__ += list(_TRAINERS)


def __getattr__(name: str):
    if name in _TRAINERS:
        import importlib

        return getattr(importlib.import_module(_TRAINERS[name]), name)
    raise AttributeError(f"module 'rspo_gym.algos' has no attribute {name!r}")

