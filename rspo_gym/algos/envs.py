"""How trainers turn their ``env`` argument into grouped vector envs.

- ``EnvFactory``: a picklable factory: ``gym.make(id, **kwargs)`` wrapped in ``ProcessReward``
  (``mode="info"``) when the env defines process potentials, so every rollout carries
  ``info["process_reward"]`` beside the outcome.
- ``make_vector_env``: env id / env instance / factory / ``GroupedVectorEnv`` -> a vector env.
- ``default_potential`` / ``default_eval_split``: per-family defaults.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import gymnasium as gym

from rspo_gym.envs.wrappers import ProcessReward
from rspo_gym.rollout.vector import GroupedVectorEnv

__all__ = ["EnvFactory", "make_vector_env", "default_potential", "default_eval_split", "env_family", "env_pool_settings"]


def env_family(env_id: str | None) -> str:
    name = (env_id or "").lower()
    return "alfworld" if "alfworld" in name else "webshop" if "webshop" in name else "generic"


def default_potential(env: gym.Env) -> str | None:
    """The env's own default potential name (the default of ``process_potential(name=...)``)."""
    method = getattr(env.unwrapped, "process_potential", None)
    if method is None:
        return None
    parameter = inspect.signature(method).parameters.get("name")
    return parameter.default if parameter is not None and parameter.default is not inspect.Parameter.empty else None


def default_eval_split(env_id: str | None) -> str | None:
    return {"alfworld": "valid_seen", "webshop": "test"}.get(env_family(env_id))


class EnvFactory:
    """``gym.make(env, **kwargs)`` (+ ``ProcessReward`` in info mode); picklable for worker processes."""

    def __init__(
        self,
        env: str | gym.envs.registration.EnvSpec | Callable[[], gym.Env],
        kwargs: dict | None = None,
        potential: str | None = None,
        process_gamma: float = 1.0,
    ):
        self.env, self.kwargs, self.potential, self.process_gamma = env, dict(kwargs or {}), potential, process_gamma

    def __call__(self) -> gym.Env:
        import rspo_gym  # noqa: F401  (registers our envs in worker processes)

        env = self.env() if callable(self.env) else gym.make(self.env, **self.kwargs)
        if isinstance(env, ProcessReward) or not hasattr(env.unwrapped, "process_potential"):
            return env
        potential = self.potential or default_potential(env)
        return ProcessReward(env, potential=potential, gamma=self.process_gamma, mode="info") if potential else env

    def with_kwargs(self, **kwargs: Any) -> "EnvFactory":
        """The same env with extra ``gym.make`` arguments (e.g. the evaluation split).

        A user's factory takes no arguments, so it is returned unchanged: evaluation then plays the
        factory's own env with the evaluation task ids or seeds.
        """
        if callable(self.env):
            return self
        return EnvFactory(self.env, {**self.kwargs, **kwargs}, self.potential, self.process_gamma)


def env_pool_settings(config: Any) -> dict[str, Any]:
    """``make_vector_env``'s ``processes`` and ``pool`` for a config's ``env_pool`` / ``env_workers``
    (values the config has already checked, ``validation.RULES``).

    >>> from rspo_gym.algos.config import TrainerConfig
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
    potential: str | None = None,
    process_gamma: float = 1.0,
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
        factory = EnvFactory(env.spec, env_kwargs, potential, process_gamma)
    elif isinstance(env, str) or callable(env):
        factory = EnvFactory(env, env_kwargs, potential, process_gamma)
    else:
        raise TypeError(f"env must be an env id, an env, a factory or a GroupedVectorEnv, got {type(env).__name__}")
    return GroupedVectorEnv(factory, num_groups, group_size, processes=processes, pool=pool), factory
