"""verl-agent's env builders over our envs: change one import and its managers run unchanged.

verl-agent (``agent_system/environments``) builds its vector envs with ``build_alfworld_envs`` and
``build_webshop_envs`` and wraps them in ``AlfWorldEnvironmentManager`` /
``WebshopEnvironmentManager``, which format prompts, keep the history window and feed its
``TrajectoryCollector``. These two functions take the same arguments and return objects with the
same calls and return shapes, played by our envs in this process (no Ray actors, no TextWorld, no
Java), so the one change is where they are imported from, with the projection::

    # was: from agent_system.environments.env_package.alfworld import build_alfworld_envs, alfworld_projection
    from rspo_gym.integrations.verl_agent import build_alfworld_envs, alfworld_projection

``alfworld_projection`` and ``webshop_projection`` here are verl-agent's own functions, loaded from
its ``env_package/<env>/projection.py`` on first use (``verl_agent_projection``): importing them
from verl-agent's package runs the package's ``__init__``, whose ``from .envs import
build_alfworld_envs`` needs the workers' torchvision, Ray and TextWorld.

- ALFWorld: ``reset()`` → ``(text_obs, None, infos)``, ``step(actions)`` → ``(text_obs, None,
  rewards, dones, infos)``; each info carries ``won``, ``admissible_commands``, ``extra.gamefile``
  and ``observation_text``; reward ``10 × won``; the games are those of ``rspo_gym.compat.alfworld``
  (the config's data paths when they hold games, else our generated split); env ``i`` is seeded
  ``seed + i // group_n``, so a group's members play the same games. Observations keep ALFWorld's
  banner, as upstream's do (verl-agent's prompts show it).
- WebShop: ``reset(goal_indices=None)`` → ``(obs, infos)``, ``step(actions)`` → ``(obs, rewards,
  dones, infos)``; infos carry ``available_actions`` (``{has_search_bar, clickables}``, with
  ``search`` on the search page), ``won``, ``task_score`` (the purchase score) and on reset
  ``goal_index``; reward 10 for a purchase scoring 1.0, else 0. Goals: ``is_train`` draws from
  upstream goal indices ``500..`` and evaluation from ``0..499`` (our ``test`` split).

``resources_per_worker`` (Ray resources) is accepted and unused: every env lives in this process.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from rspo_gym.compat.alfworld import AlfredBatchEnv, AlfredTWEnv, default_config
from rspo_gym.compat.webshop import WebAgentTextEnv

__all__ = ["build_alfworld_envs", "build_webshop_envs", "AlfworldEnvs", "WebshopEnvs", "WEBSHOP_FILE_KEYS", "verl_agent_projection"]

#: the projection names this module gives (verl-agent's own, ``verl_agent_projection``), and their env packages
PROJECTIONS = {"alfworld_projection": "alfworld", "webshop_projection": "webshop"}

#: verl-agent's WebShop ``env_kwargs`` that name upstream's data files: dropped (the catalog is ours)
WEBSHOP_FILE_KEYS = ("file_path", "attr_path")


def _load_alfworld_config(path: str | os.PathLike | None) -> dict[str, Any]:
    if path is None or not os.path.exists(path):
        return default_config()
    import yaml

    with open(path, encoding="utf-8") as reader:
        return yaml.safe_load(reader)


class AlfworldEnvs:
    """verl-agent's ``AlfworldEnvs``: ``env_num × group_n`` single-game ALFWorld envs."""

    def __init__(self, alf_config_path, seed: int, env_num: int, group_n: int, resources_per_worker=None,
                 is_train: bool = True, env_kwargs: Mapping[str, Any] | None = None) -> None:
        env_kwargs = dict(env_kwargs or {})
        config = _load_alfworld_config(alf_config_path)
        eval_dataset = env_kwargs.get("eval_dataset", "eval_in_distribution")
        base_env = AlfredTWEnv(config, train_eval="train" if is_train else eval_dataset)
        self.multi_modal = False
        self.num_processes = env_num * group_n
        self.group_n = group_n
        self.envs: list[AlfredBatchEnv] = []
        for i in range(self.num_processes):
            env = base_env.init_env(batch_size=1)
            env.seed(seed + i // group_n)
            self.envs.append(env)
        self.prev_admissible_commands: list[Any] = [None] * self.num_processes

    @staticmethod
    def _single(obs: Sequence[str], infos: Mapping[str, list]) -> tuple[str, dict]:
        info = {key: values[0] for key, values in infos.items()}
        info["observation_text"] = obs[0]
        return obs[0], info

    def reset(self) -> tuple[list[str], None, list[dict]]:
        text_obs, info_list = [], []
        for i, env in enumerate(self.envs):
            obs, info = self._single(*env.reset())
            self.prev_admissible_commands[i] = info["admissible_commands"]
            text_obs.append(obs)
            info_list.append(info)
        return text_obs, None, info_list

    def step(self, actions: Sequence[str]) -> tuple[list[str], None, list[float], list[bool], list[dict]]:
        if len(actions) != self.num_processes:
            raise ValueError(f"The num of actions must be equal to the num of processes ({self.num_processes}), got {len(actions)}")
        text_obs, rewards, dones, info_list = [], [], [], []
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            obs, _, done, infos = env.step([action])
            obs, info = self._single(obs, infos)
            self.prev_admissible_commands[i] = info["admissible_commands"]
            text_obs.append(obs)
            rewards.append(10.0 * float(info["won"]))
            dones.append(done[0])
            info_list.append(info)
        return text_obs, None, rewards, dones, info_list

    @property
    def get_admissible_commands(self) -> list[Any]:
        return self.prev_admissible_commands

    def close(self) -> None:
        for env in self.envs:
            env.close()


def build_alfworld_envs(alf_config_path, seed, env_num, group_n, resources_per_worker=None, is_train=True, env_kwargs=None) -> AlfworldEnvs:
    """verl-agent's ``build_alfworld_envs``, same arguments, same return shapes."""
    return AlfworldEnvs(alf_config_path, seed, env_num, group_n, resources_per_worker, is_train, env_kwargs)


class WebshopEnvs:
    """verl-agent's ``WebshopMultiProcessEnv``: ``env_num × group_n`` WebShop envs, groups share a goal."""

    def __init__(self, seed: int, env_num: int, group_n: int, resources_per_worker=None, is_train: bool = True,
                 env_kwargs: Mapping[str, Any] | None = None) -> None:
        if not is_train and group_n != 1:
            raise ValueError("evaluation envs take group_n = 1, as verl-agent's")
        kwargs = {"observation_mode": "text", "num_products": None} if env_kwargs is None else dict(env_kwargs)
        for key in WEBSHOP_FILE_KEYS:
            kwargs.pop(key, None)
        kwargs.pop("seed", None)
        self.group_n, self.env_num = group_n, env_num
        self.num_processes = env_num * group_n
        self.is_train = is_train
        self._rng = np.random.RandomState(seed)
        self.envs = [WebAgentTextEnv(seed=seed + i // group_n, **kwargs) for i in range(self.num_processes)]
        num_goals = len(self.envs[0].server.goals)
        self.goal_idxs = range(500, num_goals) if is_train else range(500)

    def reset(self, goal_indices: Sequence[int] | None = None) -> tuple[list[str], list[dict]]:
        if goal_indices is None:
            idx = self._rng.choice(self.goal_idxs, size=self.env_num, replace=False)
        else:
            idx = np.asarray(goal_indices, dtype=np.int64).reshape(-1)
            if len(idx) != self.env_num:
                raise ValueError(f"Expected {self.env_num} goal indices, got {len(idx)}")
            outside = [int(i) for i in idx if i not in self.goal_idxs]
            if outside:
                raise ValueError(f"Goal indices outside this split: {outside}")
        idx = np.repeat(idx, self.group_n).tolist()
        obs_list, info_list = [], []
        for env, goal in zip(self.envs, idx):
            obs, _ = env.reset(session=int(goal))
            obs_list.append(obs)
            info_list.append({"goal_index": int(goal), "available_actions": env.get_available_actions(), "won": False})
        return obs_list, info_list

    def step(self, actions: Sequence[str]) -> tuple[list[str], list[float], list[bool], list[dict]]:
        if len(actions) != self.num_processes:
            raise ValueError(f"Expected {self.num_processes} actions, got {len(actions)}")
        obs_list, rewards, dones, info_list = [], [], [], []
        for env, action in zip(self.envs, actions):
            obs, score, done, _ = env.step(action)
            won = bool(done and score == 1.0)
            info = {"available_actions": env.get_available_actions(), "task_score": score, "won": won}
            obs_list.append(obs)
            rewards.append(10.0 if won else 0)
            dones.append(done)
            info_list.append(info)
        return obs_list, rewards, dones, info_list

    def close(self) -> None:
        for env in self.envs:
            env.close()


def build_webshop_envs(seed, env_num, group_n, resources_per_worker=None, is_train=True, env_kwargs=None) -> WebshopEnvs:
    """verl-agent's ``build_webshop_envs``, same arguments, same return shapes."""
    return WebshopEnvs(seed, env_num, group_n, resources_per_worker, is_train, env_kwargs)


def verl_agent_projection(env: str) -> Callable[..., Any]:
    """verl-agent's own ``<env>_projection`` (``env``: ``alfworld`` or ``webshop``), loaded from its
    ``agent_system/environments/env_package/<env>/projection.py`` without running that package's
    ``__init__``: the ``__init__`` also imports the env's Ray workers (``from .envs import ...``),
    which need torchvision, Ray and TextWorld, none of which our builders use. The module is
    registered under its own name, so a later import of it (or of the package) reuses it."""
    package = f"agent_system.environments.env_package.{env}"
    name = f"{package}.projection"
    module = sys.modules.get(name)
    if module is None:
        try:
            found = importlib.util.find_spec(package)  # imports the parents, not the package itself
        except ModuleNotFoundError:
            found = None
        if found is None or not found.submodule_search_locations:
            raise ImportError(f"{env}_projection is verl-agent's: run this inside verl-agent (its agent_system package "
                              f"is not importable here; it is not on PyPI, put its checkout on the path)")
        path = Path(next(iter(found.submodule_search_locations))) / "projection.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return getattr(module, f"{env}_projection")


def __getattr__(name: str) -> Any:
    """``alfworld_projection`` / ``webshop_projection``: verl-agent's own, loaded on first use."""
    if name in PROJECTIONS:
        return verl_agent_projection(PROJECTIONS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
