"""How trainers turn their ``env`` argument into grouped vector envs.

- ``EnvFactory``: a picklable factory: ``gym.make(id, **kwargs)`` wrapped in ``ProcessReward``
  (``mode="info"``) when the env offers process rewards, so every rollout carries
  ``info["process_reward"]`` beside the outcome.
- ``make_vector_env``: env id / env instance / factory / ``GroupedVectorEnv`` -> a vector env.
- ``default_eval_split``: per-family defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import gymnasium as gym

from rspo_gym.envs.process_rewards import reward_specs
from rspo_gym.envs.wrappers import ProcessReward
from rspo_gym.rollout.vector import GroupedVectorEnv

__all__ = ["EnvFactory", "ProcessSettings", "make_vector_env", "default_eval_split", "env_family", "env_pool_settings"]


def env_family(env_id: str | None) -> str:
    name = (env_id or "").lower()
    return "alfworld" if "alfworld" in name else "webshop" if "webshop" in name else "generic"


def default_eval_split(env_id: str | None) -> str | None:
    return {"alfworld": "valid_seen", "webshop": "test"}.get(env_family(env_id))


@dataclass(frozen=True)
class ProcessSettings:
    """Which process reward the training envs carry (``ProcessReward``'s arguments)."""

    name: str | None = None
    """A name of ``process_rewards(env_id)``; None: the env's default (its first, a potential)."""
    gamma: float = 1.0
    weights: dict[str, float] = field(default_factory=dict)
    once: bool = False


class EnvFactory:
    """``gym.make(env, **kwargs)`` (+ ``ProcessReward`` in info mode); picklable for worker processes."""

    def __init__(
        self,
        env: str | gym.envs.registration.EnvSpec | Callable[[], gym.Env],
        kwargs: dict | None = None,
        process: ProcessSettings | None = None,
    ):
        self.env, self.kwargs, self.process = env, dict(kwargs or {}), process or ProcessSettings()

    def __call__(self) -> gym.Env:
        import rspo_gym  # noqa: F401  (registers our envs in worker processes)

        env = self.env() if callable(self.env) else gym.make(self.env, **self.kwargs)
        if isinstance(env, ProcessReward) or not reward_specs(env):
            return env
        p = self.process
        return ProcessReward(env, p.name, gamma=p.gamma, weights=p.weights, once=p.once, mode="info")

    def with_kwargs(self, **kwargs: Any) -> "EnvFactory":
        """The same env with extra ``gym.make`` arguments (e.g. the evaluation split).

        A user's factory takes no arguments, so it is returned unchanged: evaluation then plays the
        factory's own env with the evaluation task ids or seeds.
        """
        if callable(self.env):
            return self
        return EnvFactory(self.env, {**self.kwargs, **kwargs}, self.process)


def env_pool_settings(config: Any) -> dict[str, Any]:
    """``make_vector_env``'s ``processes`` and ``pool`` for a config's ``env_pool`` / ``env_workers``
    (values the config has already checked, ``validation.RULES``).

    >>> from rspo_gym.training.config import TrainerConfig
    >>> env_pool_settings(TrainerConfig(env_pool="ray", env_workers=4))
    {'processes': 4, 'pool': 'ray'}
    >>> env_pool_settings(TrainerConfig(processes=3))
    {'processes': 3, 'pool': None}
    """
    pool = config.env_pool or ("processes" if config.processes > 0 else "inprocess")
    workers = config.env_workers if config.env_workers is not None else (config.processes or 2)
    if pool == "inprocess":
        return {"processes": 0, "pool": None}
    return {"processes": workers, "pool": "ray" if pool == "ray" else None}


def make_vector_env(
    env: Any,
    num_groups: int,
    group_size: int,
    *,
    env_kwargs: dict | None = None,
    process: ProcessSettings | None = None,
    processes: int = 0,
    pool: str | None = None,
) -> tuple[GroupedVectorEnv, EnvFactory | None]:
    """A ``GroupedVectorEnv`` for ``env`` and the factory behind it (None for a given vector env).

    An env instance is re-made from its registered spec (copies of a live env cannot be made
    safely); an unregistered instance needs a factory instead.
    """
    if isinstance(env, GroupedVectorEnv):
        return env, None
    if isinstance(env, gym.Env):
        if env.spec is None:
            raise ValueError("this env instance has no registered spec: pass a factory (a callable returning a new env)")
        factory = EnvFactory(env.spec, env_kwargs, process)
    elif isinstance(env, str) or callable(env):
        factory = EnvFactory(env, env_kwargs, process)
    else:
        raise TypeError(f"env must be an env id, an env, a factory or a GroupedVectorEnv, got {type(env).__name__}")
    return GroupedVectorEnv(factory, num_groups, group_size, processes=processes, pool=pool), factory
