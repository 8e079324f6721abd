"""verl-agent's env builders over our envs: change one import and its managers run unchanged.

verl-agent (``agent_system/environments``) builds its vector envs with ``build_alfworld_envs`` and
``build_webshop_envs`` and wraps them in ``AlfWorldEnvironmentManager`` /
``WebshopEnvironmentManager``, which format prompts, keep the history window and feed its
``TrajectoryCollector``. These two functions take the same arguments and return objects with the
same calls and return shapes, played by our envs in this process (no Ray actors, no TextWorld, no
Java), so the one change is where they are imported from::

    # from agent_system.environments.env_package.alfworld import build_alfworld_envs
    from rspo_gym.integrations.verl_agent import build_alfworld_envs

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

import os
from typing import Any, Mapping, Sequence

import numpy as np

from rspo_gym.compat.alfworld import AlfredBatchEnv, AlfredTWEnv, default_config
from rspo_gym.compat.webshop import WebAgentTextEnv

__all__ = ["build_alfworld_envs", "build_webshop_envs", "AlfworldEnvs", "WebshopEnvs", "WEBSHOP_FILE_KEYS"]

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
