"""Grouped vector env: ``num_groups x group_size`` copies of a text env, groups share a task.

- ``GroupedVectorEnv``: the vector env every trainer consumes (a ``gymnasium.vector.VectorEnv``).
- ``InProcessEnvs`` / ``SubprocessEnvs``: where the sub-envs live (this process, or worker
  processes); both answer the same two batched calls, so the vector env does not care. A third
  pool, ``rspo_gym.rollout.ray_pool.RayEnvs`` (``pool="ray"``), puts them on Ray actors.

Why not ``SyncVectorEnv``: its autoreset would start a fresh random task inside a group, and it
steps finished sub-envs. Here autoreset is disabled (``metadata["autoreset_mode"]``), member ``i``
of group ``g`` is reset with the group's seed (or ``options={"task_ids": [...]}``, one per group),
and a finished member is *not stepped again*: it repeats its last observation with reward 0 and
its done flags, and ``active`` turns False (verl-agent's active masks), so groups stay aligned.

Process-wide memory budgets (ALFWorld's world cache) hold for the whole vector env: each worker
process is told through ``RSPO_GYM_ENV_WORKERS`` that it is one of k, and such a cache takes 1/k of
its budget. An environment variable keeps the pool ignorant of which envs keep caches, and a cache
built before the worker was forked reads it just as one imported after a spawn does.

Sharing a seed is how group members share a task for any Gymnasium env (ours choose the task from
the seed, as design §3 requires). It also means members of a stochastic env see the same random
stream until their actions differ.

>>> import rspo_gym
>>> venv = GroupedVectorEnv("rspo/ALFWorld-v0", num_groups=2, group_size=3)
>>> obs, infos = venv.reset(seed=7)
>>> [info["task"] for info in venv.infos][:3] == [venv.infos[0]["task"]] * 3
True
>>> venv.close()
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rspo_gym.rollout.workers import WORKERS_ENV_VAR, join_pool

__all__ = ["GroupedVectorEnv", "InProcessEnvs", "SubprocessEnvs", "EnvSpec", "WORKERS_ENV_VAR", "join_pool"]

#: what can describe an env: a registered id, an env instance (group_size x num_groups = 1), or a factory
EnvSpec = str | gym.Env | Callable[[], gym.Env]

StepResult = tuple[Any, float, bool, bool, dict]


class InProcessEnvs:
    """Sub-envs in this process: the default, since our text envs step in microseconds."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]):
        self.envs = [fn() for fn in env_fns]

    def reset(self, indices: Sequence[int], seeds: Sequence[int | None], options: Sequence[dict | None]):
        return [self.envs[i].reset(seed=s, options=o) for i, s, o in zip(indices, seeds, options)]

    def step(self, indices: Sequence[int], actions: Sequence[Any]) -> list[StepResult]:
        return [self.envs[i].step(a) for i, a in zip(indices, actions)]

    def call(self, index: int, name: str, *args, **kwargs):
        return getattr(self.envs[index].unwrapped, name)(*args, **kwargs)

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _worker(conn, env_fns, num_workers: int) -> None:
    join_pool(num_workers)
    envs = [fn() for fn in env_fns]
    while True:
        command, payload = conn.recv()
        try:
            if command == "reset":
                result = [envs[i].reset(seed=s, options=o) for i, s, o in payload]
            elif command == "step":
                result = [envs[i].step(a) for i, a in payload]
            elif command == "call":
                index, name, args, kwargs = payload
                result = getattr(envs[index].unwrapped, name)(*args, **kwargs)
            elif command == "close":
                for env in envs:
                    env.close()
                conn.send(("ok", None))
                return
            else:
                raise ValueError(f"unknown command {command!r}")
            conn.send(("ok", result))
        except Exception:  # report to the parent instead of dying silently
            conn.send(("error", traceback.format_exc()))


class SubprocessEnvs:
    """Sub-envs spread over worker processes, for envs slow enough to be worth the IPC.

    Each worker owns a contiguous slice of the sub-envs; a batched call sends every worker its
    share at once and then collects the answers, so workers step in parallel. Factories must be
    picklable (a registered env id is).
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], num_workers: int = 2, context: str | None = None):
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        ctx = mp.get_context(context)
        num_workers = min(num_workers, len(env_fns))
        bounds = np.linspace(0, len(env_fns), num_workers + 1).astype(int)
        self._owner = np.repeat(np.arange(num_workers), np.diff(bounds))
        self._offset = bounds[:-1]
        self._conns, self._procs = [], []
        for w in range(num_workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child, list(env_fns[bounds[w]:bounds[w + 1]]), num_workers),
                               daemon=True)
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)

    def _scatter(self, command: str, indices: Sequence[int], items: Sequence[tuple]) -> list:
        per_worker: dict[int, list[tuple[int, tuple]]] = {}
        for k, (i, item) in enumerate(zip(indices, items)):
            w = int(self._owner[i])
            per_worker.setdefault(w, []).append((k, (i - int(self._offset[w]), *item)))
        for w, jobs in per_worker.items():
            self._conns[w].send((command, [job for _, job in jobs]))
        results: list = [None] * len(indices)
        for w, jobs in per_worker.items():
            status, answer = self._conns[w].recv()
            if status == "error":
                raise RuntimeError(f"env worker {w} failed:\n{answer}")
            for (k, _), value in zip(jobs, answer):
                results[k] = value
        return results

    def reset(self, indices, seeds, options):
        return self._scatter("reset", indices, list(zip(seeds, options)))

    def step(self, indices, actions):
        return self._scatter("step", indices, [(a,) for a in actions])

    def call(self, index: int, name: str, *args, **kwargs):
        w = int(self._owner[index])
        self._conns[w].send(("call", (index - int(self._offset[w]), name, args, kwargs)))
        status, answer = self._conns[w].recv()
        if status == "error":
            raise RuntimeError(f"env worker {w} failed:\n{answer}")
        return answer

    def close(self) -> None:
        for conn, proc in zip(self._conns, self._procs):
            try:
                conn.send(("close", None))
                conn.recv()
            except (BrokenPipeError, EOFError):
                pass
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()


class _MakeEnv:
    """A picklable factory for a registered env id (lambdas do not cross process boundaries)."""

    def __init__(self, env_id: str, kwargs: dict):
        self.env_id, self.kwargs = env_id, kwargs

    def __call__(self) -> gym.Env:
        import rspo_gym  # noqa: F401  (registers our envs in a fresh worker process)

        return gym.make(self.env_id, **self.kwargs)


def _factories(env: EnvSpec, count: int, env_kwargs: dict) -> list[Callable[[], gym.Env]]:
    if isinstance(env, str):
        return [_MakeEnv(env, env_kwargs)] * count
    if isinstance(env, gym.Env):
        if count != 1:
            raise ValueError(
                "an env instance can only fill a 1x1 vector env; pass an env id or a factory "
                f"(a callable returning a new env) for {count} sub-envs"
            )
        return [lambda: env]
    if callable(env):
        return [env] * count
    raise TypeError(f"env must be an env id, a gymnasium.Env or a factory, got {type(env).__name__}")


class GroupedVectorEnv(VectorEnv):
    """``num_groups x group_size`` text envs; the members of a group play the same task.

    Sub-env ``i`` belongs to group ``i // group_size``. ``reset(seed=s)`` gives group ``g`` the seed
    ``s + g``; ``reset(options={"task_ids": [...]})`` gives group ``g`` ``task_ids[g]`` (for envs
    that take ``options={"task_id": k}``, as ours do). ``options={"reset_mask": mask}`` resets only
    the masked sub-envs. ``step(actions)`` steps active sub-envs only; ``actions[i]`` of an inactive
    one is ignored (``None`` is fine).

    ``infos`` follow Gymnasium (a dict of arrays with ``_key`` masks); :attr:`infos` keeps the
    per-sub-env dicts, which is what the rollout collector reads.

    Args:
        env: a registered env id, a factory, or (for a 1x1 vector env) an env instance.
        num_groups: number of distinct tasks per reset.
        group_size: sub-envs per task (GRPO's N).
        processes: 0 keeps the sub-envs in this process; k > 0 spreads them over k workers.
        env_kwargs: keyword arguments for ``gym.make`` when ``env`` is an id.
        pool: ``None`` for the above; ``"ray"`` puts the sub-envs on ``max(processes, 1)`` Ray
            actors (``RayEnvs``; needs the ``[ray]`` extra, and uses the caller's ``ray.init``).
    """

    metadata = {"autoreset_mode": AutoresetMode.DISABLED}

    def __init__(
        self,
        env: EnvSpec,
        num_groups: int = 1,
        group_size: int = 1,
        *,
        processes: int = 0,
        env_kwargs: dict | None = None,
        pool: str | None = None,
    ):
        for name, value in (("num_groups", num_groups), ("group_size", group_size)):
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.num_groups, self.group_size = int(num_groups), int(group_size)
        self.num_envs = self.num_groups * self.group_size
        fns = _factories(env, self.num_envs, dict(env_kwargs or {}))
        if pool == "ray":
            from rspo_gym.rollout.ray_pool import RayEnvs

            self.pool = RayEnvs(fns, max(processes, 1))
        elif pool is None:
            self.pool = SubprocessEnvs(fns, processes) if processes else InProcessEnvs(fns)
        else:
            raise ValueError(f"Unknown pool {pool!r}; expected None or 'ray'")
        probe = self.pool.envs[0] if isinstance(self.pool, InProcessEnvs) else fns[0]()
        self.single_observation_space = probe.observation_space
        self.single_action_space = probe.action_space
        self.spec = probe.spec
        self.max_episode_steps = probe.spec.max_episode_steps if probe.spec is not None else None
        if not isinstance(self.pool, InProcessEnvs):
            probe.close()
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.group_ids = np.arange(self.num_envs) // self.group_size
        self.active = np.zeros(self.num_envs, dtype=bool)
        self.observations: list[Any] = [None] * self.num_envs
        self.infos: list[dict] = [{} for _ in range(self.num_envs)]
        self._terminated = np.zeros(self.num_envs, dtype=bool)
        self._truncated = np.zeros(self.num_envs, dtype=bool)

    # -- gymnasium API -------------------------------------------------------------------------
    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict | None = None):
        options = dict(options or {})
        mask = np.asarray(options.pop("reset_mask", np.ones(self.num_envs, dtype=bool)), dtype=bool)
        if mask.shape != (self.num_envs,) or not mask.any():
            raise ValueError(f"reset_mask must be a bool array of shape ({self.num_envs},) with a True entry")
        task_ids = options.pop("task_ids", None)
        if task_ids is not None and len(task_ids) != self.num_groups:
            raise ValueError(f"task_ids needs one task per group ({self.num_groups}), got {len(task_ids)}")
        group_seeds = self._group_seeds(seed)
        indices = np.flatnonzero(mask).tolist()
        seeds, opts = [], []
        for i in indices:
            g = int(self.group_ids[i])
            member_opts = dict(options)
            if task_ids is not None:
                member_opts["task_id"] = task_ids[g]
            seeds.append(group_seeds[g])
            opts.append(member_opts or None)
        for i, (obs, info) in zip(indices, self.pool.reset(indices, seeds, opts)):
            self.observations[i], self.infos[i] = obs, dict(info, active=True)
            self.active[i] = True
            self._terminated[i] = self._truncated[i] = False
        return tuple(self.observations), self._batched_infos()

    def step(self, actions: Sequence[Any]):
        rewards = self.advance(actions)
        return (
            tuple(self.observations),
            rewards,
            self._terminated.copy(),
            self._truncated.copy(),
            self._batched_infos(),
        )

    def advance(self, actions: Sequence[Any]) -> np.ndarray:
        """``step`` without Gymnasium's batched info dict: the rewards, with :attr:`observations`,
        :attr:`infos` and :attr:`active` updated. The collector reads those per sub-env, and
        batching every info of every sub-env at every step costs as much as an env step."""
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(actions)}")
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        indices = np.flatnonzero(self.active).tolist()
        results = self.pool.step(indices, [actions[i] for i in indices]) if indices else []
        for i, (obs, reward, terminated, truncated, info) in zip(indices, results):
            self.observations[i], rewards[i] = obs, float(reward)
            self._terminated[i], self._truncated[i] = bool(terminated), bool(truncated)
            self.active[i] = not (terminated or truncated)
            self.infos[i] = dict(info, active=True)
        for i in np.flatnonzero(~self.active).tolist():
            if i not in indices:
                self.infos[i] = dict(self.infos[i], active=False)
        return rewards

    def call_unwrapped(self, index: int, name: str, *args, **kwargs):
        """Call ``env.unwrapped.<name>(*args, **kwargs)`` on sub-env ``index`` (e.g. ``expert_action``)."""
        return self.pool.call(index, name, *args, **kwargs)

    def close_extras(self, **kwargs) -> None:
        self.pool.close()

    # -- helpers -------------------------------------------------------------------------------
    def _group_seeds(self, seed: int | Sequence[int] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_groups
        if isinstance(seed, (int, np.integer)):
            return [int(seed) + g for g in range(self.num_groups)]
        seeds = [int(s) for s in seed]
        if len(seeds) != self.num_groups:
            raise ValueError(f"seed sequence needs one seed per group ({self.num_groups}), got {len(seeds)}")
        return seeds

    def _batched_infos(self) -> dict:
        batched: dict = {}
        for i, info in enumerate(self.infos):
            batched = self._add_info(batched, info, i)
        return batched
