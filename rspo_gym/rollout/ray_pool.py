"""``RayEnvs``: the grouped vector env's sub-envs on Ray actors, so they can live on other nodes.

Same interface as ``SubprocessEnvs`` (``reset`` / ``step`` / ``call`` / ``close``): each actor owns
a contiguous slice of the sub-envs, and a batched call sends every actor its share at once and
then gathers the answers, so actors step in parallel. Select it with
``GroupedVectorEnv(..., processes=k, pool="ray")``.

Why Ray: it is what verl-agent uses for its env workers, and it places actors on a cluster's
nodes without any code here knowing about nodes. ``ray`` is an optional dependency, imported only
when a ``RayEnvs`` is built (install the ``[ray]`` extra: ``pip install 'rspo-gym[ray]'``). The
caller owns the Ray runtime: call ``ray.init(...)`` to join a cluster or to size a local one; when
Ray is not initialised, its first use starts a local runtime with Ray's defaults.

>>> import pytest
>>> ray = pytest.importorskip("ray")
>>> from rspo_gym.rollout.vector import _MakeEnv
>>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
>>> pool = RayEnvs([_MakeEnv("rspo/ALFWorld-v0", {})] * 2, num_workers=2)
>>> len({info["task"] for _, info in pool.reset([0, 1], [7, 7], [None, None])})
1
>>> pool.close(); ray.shutdown()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rspo_gym.rollout.workers import join_pool

__all__ = ["RayEnvs"]


class _EnvWorker:
    """The actor body: a slice of sub-envs, addressed by local index; one of ``num_workers`` actors
    sharing the vector env's memory budgets (``workers.join_pool``)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], num_workers: int) -> None:
        join_pool(num_workers)
        self.envs = [fn() for fn in env_fns]

    def reset(self, jobs: Sequence[tuple[int, int | None, dict | None]]) -> list:
        return [self.envs[i].reset(seed=s, options=o) for i, s, o in jobs]

    def step(self, jobs: Sequence[tuple[int, Any]]) -> list:
        return [self.envs[i].step(a) for i, a in jobs]

    def call(self, index: int, name: str, args: tuple, kwargs: dict) -> Any:
        return getattr(self.envs[index].unwrapped, name)(*args, **kwargs)

    def close(self) -> None:
        for env in self.envs:
            env.close()


class RayEnvs:
    """Sub-envs spread over ``num_workers`` Ray actors (each ``num_cpus`` CPUs).

    Factories must be picklable (a registered env id is). Errors inside an actor surface as
    ``ray.exceptions.RayTaskError`` with the actor's traceback.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], num_workers: int = 2, *, num_cpus: float = 1.0) -> None:
        try:
            import ray
        except ImportError as error:
            raise ImportError("RayEnvs needs ray: install the [ray] extra, pip install 'rspo-gym[ray]'") from error
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self._ray = ray
        num_workers = min(num_workers, len(env_fns))
        bounds = np.linspace(0, len(env_fns), num_workers + 1).astype(int)
        self._owner = np.repeat(np.arange(num_workers), np.diff(bounds))
        self._offset = bounds[:-1]
        actor = ray.remote(num_cpus=num_cpus)(_EnvWorker)
        self._actors = [actor.remote(list(env_fns[bounds[w]:bounds[w + 1]]), num_workers) for w in range(num_workers)]

    def _scatter(self, method: str, indices: Sequence[int], items: Sequence[tuple]) -> list:
        per_worker: dict[int, list[tuple[int, tuple]]] = {}
        for k, (i, item) in enumerate(zip(indices, items)):
            w = int(self._owner[i])
            per_worker.setdefault(w, []).append((k, (i - int(self._offset[w]), *item)))
        workers = list(per_worker)
        futures = [getattr(self._actors[w], method).remote([job for _, job in per_worker[w]]) for w in workers]
        results: list = [None] * len(indices)
        for w, answer in zip(workers, self._ray.get(futures)):
            for (k, _), value in zip(per_worker[w], answer):
                results[k] = value
        return results

    def reset(self, indices: Sequence[int], seeds: Sequence[int | None], options: Sequence[dict | None]) -> list:
        return self._scatter("reset", indices, list(zip(seeds, options)))

    def step(self, indices: Sequence[int], actions: Sequence[Any]) -> list:
        return self._scatter("step", indices, [(a,) for a in actions])

    def call(self, index: int, name: str, *args: Any, **kwargs: Any) -> Any:
        w = int(self._owner[index])
        return self._ray.get(self._actors[w].call.remote(index - int(self._offset[w]), name, args, kwargs))

    def close(self) -> None:
        if not self._actors:
            return
        self._ray.get([actor.close.remote() for actor in self._actors])
        for actor in self._actors:
            self._ray.kill(actor)
        self._actors = []
