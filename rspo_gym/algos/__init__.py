"""Algorithms: advantage estimators and losses as pure tensor functions (trainers build on them).

- ``advantages``: GRPO, RLOO, GAE and GiGPO estimators, discounted step returns, the RSPO rank swap.
- ``losses``: PPO clip (dual clip, importance weights), value loss, KL estimators, entropy,
  loss aggregation, truncated importance weights.
- Trainers (``GRPOTrainer``, ``PPOTrainer``, ``GiGPOTrainer``, ``RSPOTrainer``) and their configs
  load lazily, so importing the pure functions does not import transformers; the functions load
  lazily too, so importing the configs (``training.config``, ``training.validation``) imports no torch.
"""

import rspo_gym

#: the pure tensor functions -> their module, imported on first access: the configs and their
#: validation live in this package too, and must not cost a torch import (``rspo-gym config``,
#: a bad ``--set`` reported in well under 2 s)
_FUNCTIONS = {
    **dict.fromkeys(
        ("ADVANTAGE_ESTIMATORS", "gae_advantages", "gigpo_advantages", "grpo_advantages", "rank_swap",
         "rloo_advantages", "step_discounted_returns"),
        "rspo_gym.algos.advantages",
    ),
    **dict.fromkeys(
        ("AGG_MODES", "agg_loss", "entropy_from_logits", "kl_penalty", "ppo_policy_loss", "truncated_is_weights",
         "value_loss"),
        "rspo_gym.algos.losses",
    ),
}

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
_TRAINERS = {name: module for name, module in rspo_gym._LAZY.items() if module.startswith("rspo_gym.training.")}
__all__ += list(_TRAINERS)


def __getattr__(name: str):
    module = _FUNCTIONS.get(name) or _TRAINERS.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'rspo_gym.algos' has no attribute {name!r}")

