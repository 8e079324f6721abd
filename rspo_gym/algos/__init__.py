"""The math: advantage estimators, losses and reward shaping as pure tensor functions.

Tensors in, tensors out: no I/O, no loop, no model, no environment (verl's ``core_algos.py``).
The training machinery that calls these functions is ``rspo_gym.training``.

- ``advantages``: GRPO, RLOO, GAE and GiGPO estimators, discounted step returns, the RSPO rank swap.
- ``losses``: PPO clip (dual clip, importance weights), value loss, KL estimators, entropy,
  loss aggregation, truncated importance weights.
- ``rewards``: the training reward of each step (outcome, score, dense) and the invalid penalty.
- ``estimates``: each algorithm's estimator on a ``RewardView`` (``grpo_estimate``,
  ``gigpo_estimate``, ``ppo_estimate``) and RSPO's reward swaps (``rank_swapped_view``,
  ``annealed_view``).
- ``kl_control``: the KL penalty in the reward and its fixed / adaptive coefficient.
- ``schedules``: the learning-rate factor of an iteration (constant, cosine, warmup).
- ``reward_alignment``: how often the dense reward and the outcome order two trajectories differently.

May import: ``rspo_gym.errors`` and nothing else of the package (the room order is checked by
``tests/test_layout.py``). The configs are named for the type checker only.

The trainers (``GRPOTrainer``, ``PPOTrainer``, ``GiGPOTrainer``, ``RSPOTrainer``) and their configs
stay reachable here as lazy names (``rspo_gym.algos.GRPOTrainer``), looked up in
``rspo_gym.training`` on first use; the functions load lazily too, so ``import rspo_gym.algos``
imports neither torch nor the training machinery.
"""

import rspo_gym

#: the pure tensor functions -> their module, imported on first access: ``import rspo_gym.algos``
#: (which the lazy trainer names below make common) must not cost a torch import
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

