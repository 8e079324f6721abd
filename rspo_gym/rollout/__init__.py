"""The common vectorized multi-turn rollout API: grouped vector envs, prompts, collection, data.

- ``GroupedVectorEnv`` (``vector.py``): ``num_groups x group_size`` envs; groups share a task.
- ``DiscreteTextAdapter`` (``adapters.py``): ``Discrete``-action Gymnasium envs as text envs.
- ``PromptBuilder`` / ``parse_action`` (``prompts.py``): verl-agent style prompts and parsing.
- ``collect`` (``collector.py``): one batched generation per turn over every live env.
- ``Rollout`` / ``StepRow`` / ``to_batch`` (``trajectory.py``): rollout data and training tensors.
- ``GenerationConfig`` / ``GenerationBackend`` (``generation.py``): the interface the collector
  calls and every policy backend implements (token ids in, tokens and behaviour log-probs out).
- ``ray_pool.py``: the vector env's sub-envs on Ray actors; ``workers.py``: what a pool's worker
  is told (how many share the memory budgets).

May import: ``rspo_gym.envs``, ``rspo_gym.algos``, ``rspo_gym.errors`` (the room order is checked
by ``tests/test_layout.py``); the policies import this package, never the reverse.
"""

from rspo_gym.rollout.adapters import DiscreteTextAdapter
from rspo_gym.rollout.collector import CollectConfig, collect
from rspo_gym.rollout.prompts import PromptBuilder, parse_action, template_for
from rspo_gym.rollout.trajectory import Rollout, StepRow, Trajectory, to_batch
from rspo_gym.rollout.vector import GroupedVectorEnv

__all__ = [
    "GroupedVectorEnv",
    "DiscreteTextAdapter",
    "PromptBuilder",
    "parse_action",
    "template_for",
    "CollectConfig",
    "collect",
    "Rollout",
    "StepRow",
    "Trajectory",
    "to_batch",
]
