"""ALFWorld's own Python API over ``rspo/ALFWorld-v0``: code written for ``alfworld`` runs unchanged.

- ``AlfredTWEnv(config, train_eval)``: upstream's text env class; ``init_env(batch_size)`` gives the
  batched env (``AlfredBatchEnv``) with ``seed``, ``reset()`` → ``(obs, infos)`` and
  ``step(commands)`` → ``(obs, scores, dones, infos)``, every value a list over the batch and
  ``infos`` a dict of lists with upstream's keys ``won``, ``admissible_commands`` and
  ``extra.gamefile``.
- ``get_environment(env_type)``: upstream's lookup; only ``"AlfredTWEnv"`` exists here (the THOR
  envs render images).
- ``default_config()``: the parts of upstream's ``base_config.yaml`` this layer reads.

Splits: ``train_eval`` ``"train"``, ``"eval_in_distribution"``, ``"eval_out_of_distribution"`` map to
our ``train``, ``valid_seen`` and ``valid_unseen`` task sets. When the config's data path for the
split is a directory of real games (``$ALFWORLD_DATA/json_2.1.1/valid_seen``, ...), those games are
played (by our engine); otherwise the generated tasks of the split, with no download. Generated
``train`` is unbounded, so it is cut to upstream's 3,553 training games unless
``dataset.num_train_games`` says otherwise (a game list must be finite to shuffle and cycle).

As upstream's TextWorld batch env, each ``reset()`` moves every slot to the next game of a list
shuffled once from the seed (``seed(s)``; slot ``i`` of a batch plays game ``k * batch_size + i``
at its ``k``-th reset), ``done`` is also set at the step limit
(``max_nb_steps_per_episode``, 50), and a done slot keeps answering its last observation.
Observations keep the ``-= Welcome to TextWorld, ALFRED! =-`` banner, as upstream prints it:
ReAct-style code strips it itself (``'\\n'.join(obs[0].split('\\n\\n')[1:])``).

``extra.gamefile`` is the real file for real games; for generated ones an upstream-shaped path,
``<split>/<task_type>-<Object>-None-<Parent>-<id>/trial_<id>/game.tw-pddl``, so that code that
reads the task type from the folder name (ReAct's prefix match) works.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rspo_gym.envs.alfworld.env import AlfworldEnv
from rspo_gym.errors import UserError

__all__ = ["AlfredTWEnv", "AlfredBatchEnv", "get_environment", "default_config", "SPLITS", "UPSTREAM_TRAIN_GAMES", "MAX_GAMES",
           "MAX_BATCH_SIZE"]

#: upstream ``train_eval`` → (our split, the config key of its data path, the key of its game count)
SPLITS: dict[str, tuple[str, str, str]] = {
    "train": ("train", "data_path", "num_train_games"),
    "eval_in_distribution": ("valid_seen", "eval_id_data_path", "num_eval_games"),
    "eval_out_of_distribution": ("valid_unseen", "eval_ood_data_path", "num_eval_games"),
}
#: training games of ALFWorld 0.4 (``json_2.1.1/train``), the generated ``train`` split's default cut
UPSTREAM_TRAIN_GAMES = 3553
#: Most games of one ``AlfredTWEnv`` (28x upstream's training set): its game list is built whole,
#: and a ``task_types`` subset of generated games is found by generating each (about 1 ms).
MAX_GAMES = 100_000
#: Most slots of one ``init_env`` batch, each a live env: the trainers' own limit on envs.
MAX_BATCH_SIZE = 65_536
#: upstream's task type numbers (``env.task_types`` in ``base_config.yaml``)
TASK_TYPES = {
    1: "pick_and_place_simple",
    2: "look_at_obj_in_light",
    3: "pick_clean_then_place_in_recep",
    4: "pick_heat_then_place_in_recep",
    5: "pick_cool_then_place_in_recep",
    6: "pick_two_obj_and_place",
}


def default_config() -> dict[str, Any]:
    """The keys of upstream's ``base_config.yaml`` this layer reads, at upstream's defaults."""
    return {
        "dataset": {
            "data_path": "$ALFWORLD_DATA/json_2.1.1/train",
            "eval_id_data_path": "$ALFWORLD_DATA/json_2.1.1/valid_seen",
            "eval_ood_data_path": "$ALFWORLD_DATA/json_2.1.1/valid_unseen",
            "num_train_games": -1,
            "num_eval_games": -1,
        },
        "env": {"type": "AlfredTWEnv", "task_types": [1, 2, 3, 4, 5, 6]},
        "general": {"training_method": "dagger"},
        "dagger": {"training": {"max_nb_steps_per_episode": 50}},
        "rl": {"training": {"max_nb_steps_per_episode": 50}},
    }


def _is_integer(value: Any) -> bool:
    """An integer (numpy's included), not a ``bool``, a float or a string that looks like one."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _game_count(value: Any, key: str) -> int:
    """A config's ``num_train_games`` / ``num_eval_games``: -1 (upstream's "all"; also None or any
    integer <= 0, as before) or a count of at most ``MAX_GAMES``, checked before the game list is
    built (``10**9`` used to end in a ``MemoryError``)."""
    if value is None:
        return -1
    if not _is_integer(value) or value > MAX_GAMES:
        raise UserError(f"dataset.{key} must be -1 or an integer from 1 to {MAX_GAMES}, got {value!r}")
    return int(value)


def get_environment(env_type: str) -> type:
    """Upstream's ``alfworld.agents.environment.get_environment``: the env class for a config's
    ``env.type``."""
    if env_type == "AlfredTWEnv":
        return AlfredTWEnv
    if env_type in ("AlfredThorEnv", "AlfredHybrid"):
        raise ValueError(f"{env_type} renders THOR images, which rspo_gym does not offer; use env.type AlfredTWEnv")
    raise ValueError(f"Unknown ALFWorld env type {env_type!r}; expected 'AlfredTWEnv'")


def _section(config: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = config.get(key) or {}
    if not isinstance(value, Mapping):
        raise TypeError(f"config[{key!r}] must be a mapping, got {type(value).__name__}")
    return value


class AlfredTWEnv:
    """Upstream's ``AlfredTWEnv(config, train_eval)``: picks the games of a split, then
    ``init_env(batch_size)`` gives the batched env that plays them.

    ``game_files`` lists one path per game (``num_games`` of them), as upstream's attribute does.
    A ``task_types`` subset of the generated ``train`` split is found by generating its games
    (about a millisecond each), once per instance.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, train_eval: str = "train") -> None:
        config = default_config() if config is None else config
        if train_eval not in SPLITS:
            raise ValueError(f"Unknown train_eval {train_eval!r}; expected one of {sorted(SPLITS)}")
        self.config = config
        self.train_eval = train_eval
        split, path_key, count_key = SPLITS[train_eval]
        dataset = _section(config, "dataset")
        data_path = os.path.expandvars(str(dataset.get(path_key, "")))
        wanted = [TASK_TYPES[t] for t in _section(config, "env").get("task_types", list(TASK_TYPES))]
        self.split = split
        self.games: str | None = data_path if data_path and Path(data_path).is_dir() else None
        self._env = AlfworldEnv(games=self.games) if self.games else AlfworldEnv(split=split)
        size = self._env.num_tasks
        count = _game_count(dataset.get(count_key, -1), count_key)
        if size is None:  # the generated train split is unbounded: cut it to a finite game list
            size = count if count > 0 else UPSTREAM_TRAIN_GAMES
        elif count > 0:
            size = min(size, count)
        ids = range(size)
        if sorted(wanted) != sorted(TASK_TYPES.values()):
            ids = [k for k in ids if self._task_type(k) in wanted]  # generation is cheap; real games are cached
        self.task_ids: list[int] = list(ids)
        if not self.task_ids:
            raise ValueError(f"No {split} games of task types {wanted}")
        self.num_games = len(self.task_ids)
        self._game_files: list[str] | None = None
        method = _section(config, "general").get("training_method", "dagger")
        limits = _section(_section(config, "rl" if method == "dqn" else "dagger"), "training")
        self.max_episode_steps = int(limits.get("max_nb_steps_per_episode", 50))

    @property
    def game_files(self) -> list[str]:
        """One path per game, in game order (built on first read: each names its task)."""
        if self._game_files is None:
            self._game_files = [self._gamefile(k) for k in self.task_ids]
        return self._game_files

    def gamefile(self, game: int) -> str:
        """The path of game ``game`` (an index into ``game_files``)."""
        return self._game_files[game] if self._game_files is not None else self._gamefile(self.task_ids[game])

    def _task_type(self, task_id: int) -> str:
        return self._env.tasks.world(task_id).task.task_type

    def _gamefile(self, task_id: int) -> str:
        if self.games:
            return os.fspath(self._env.tasks.paths[task_id])
        task = self._env.tasks.world(task_id).task
        second = task.parent_type or task.toggle_type  # look_at_obj_in_light names its lamp there
        folder = f"{task.task_type}-{task.object_type.capitalize()}-None-{str(second).capitalize()}-{task_id}"
        return f"rspo_gym/alfworld/json_2.1.1/{self.split}/{folder}/trial_{task_id}/game.tw-pddl"

    def init_env(self, batch_size: int) -> "AlfredBatchEnv":
        """The batched env over this split's games (upstream registers a TextWorld batch env)."""
        return AlfredBatchEnv(self, batch_size)


class AlfredBatchEnv:
    """What upstream's ``init_env`` returns: a batch of ``batch_size`` games stepped together."""

    def __init__(self, source: AlfredTWEnv, batch_size: int) -> None:
        if not _is_integer(batch_size) or not 1 <= batch_size <= MAX_BATCH_SIZE:  # each slot is a live env: check first
            raise UserError(f"batch_size must be an integer from 1 to {MAX_BATCH_SIZE}, got {batch_size!r}")
        self.source = source
        self.batch_size = int(batch_size)
        self.envs = [AlfworldEnv(games=source.games) if source.games else AlfworldEnv(split=source.split) for _ in range(batch_size)]
        self._order = np.arange(source.num_games)
        self._next = 0
        self._steps = [0] * batch_size
        self._done = [False] * batch_size
        self._last: list[tuple[str, dict]] = [("", {})] * batch_size
        self.seed(None)

    def seed(self, seed: int | None = None) -> list[int | None]:
        """Shuffle the game list from ``seed`` (None: fresh entropy) and start it from the top."""
        self._order = np.random.default_rng(seed).permutation(self.source.num_games)
        self._next = 0
        return [seed]

    def _infos(self, infos: Sequence[dict], slots: Sequence[int]) -> dict[str, list]:
        return {
            "won": [info["won"] for info in infos],
            "admissible_commands": [list(info["admissible_actions"]) for info in infos],
            "extra.gamefile": [self._gamefiles[i] for i in slots],
        }

    def reset(self) -> tuple[list[str], dict[str, list]]:
        """Every slot starts the next game of the shuffled list (cycling)."""
        observations, infos = [], []
        self._gamefiles = []
        for i, env in enumerate(self.envs):
            game = int(self._order[self._next % len(self._order)])
            self._next += 1
            task_id = self.source.task_ids[game]
            obs, info = env.reset(options={"task_id": task_id})
            self._gamefiles.append(self.source.gamefile(game))
            self._steps[i], self._done[i] = 0, False
            self._last[i] = (obs, info)
            observations.append(obs)
            infos.append(info)
        return observations, self._infos(infos, range(self.batch_size))

    def step(self, commands: Sequence[str]) -> tuple[list[str], list[int], list[bool], dict[str, list]]:
        """One command per slot; a slot already done is not stepped and repeats its last answer."""
        if len(commands) != self.batch_size:
            raise ValueError(f"Expected {self.batch_size} commands, got {len(commands)}")
        observations, scores, dones, infos = [], [], [], []
        for i, (env, command) in enumerate(zip(self.envs, commands)):
            if not self._done[i]:
                obs, _, _, _, info = env.step(command)
                self._steps[i] += 1
                self._last[i] = (obs, info)
                self._done[i] = bool(info["won"]) or self._steps[i] >= self.source.max_episode_steps
            obs, info = self._last[i]
            observations.append(obs)
            scores.append(int(info["won"]))
            dones.append(self._done[i])
            infos.append(info)
        return observations, scores, dones, self._infos(infos, range(self.batch_size))

    def close(self) -> None:
        for env in self.envs:
            env.close()
