"""Where an ALFWorld env gets its games: real game files or the procedural generator.

- ``GameFiles``: ``game.tw-pddl`` files in sorted path order; each is parsed on first use and
  cached, so later resets of the same game cost no I/O.
- ``GeneratedTasks``: the generator's canonical split (``train`` unbounded, ``valid_seen`` and
  ``valid_unseen`` fixed); task k is the same world on every machine and for every seed.

Both answer ``size`` (``None`` for an unbounded split) and ``world(task_id)``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rspo_gym.envs.alfworld.pddl import find_games, load_game
from rspo_gym.envs.alfworld.world import World
from rspo_gym.envs.core import check_task_id

__all__ = ["GameFiles", "GeneratedTasks"]


class GameFiles:
    """Real ALFWorld games from a directory (searched recursively), a file, or a list of them."""

    def __init__(self, source: str | os.PathLike | Sequence[str | os.PathLike]) -> None:
        self.paths: list[Path] = find_games(source)
        self._cache: dict[int, World] = {}

    @property
    def size(self) -> int | None:
        return len(self.paths)

    def world(self, task_id: int) -> World:
        task_id = check_task_id(task_id, len(self.paths))
        world = self._cache.get(task_id)
        if world is None:
            world = self._cache[task_id] = load_game(self.paths[task_id])
        return world


class GeneratedTasks:
    """Tasks of the procedural generator for one split."""

    def __init__(self, split: str = "train") -> None:
        from rspo_gym.envs.alfworld.generator import SPLIT_SIZES

        if split not in SPLIT_SIZES:
            raise ValueError(f"Unknown split {split!r}; expected one of {sorted(SPLIT_SIZES)}")
        self.split = split
        self.size: int | None = SPLIT_SIZES[split]
        self._cache: dict[int, World] = {}

    def world(self, task_id: int) -> World:
        from rspo_gym.envs.alfworld.generator import generate_world

        task_id = check_task_id(task_id, self.size)
        world = self._cache.get(task_id)
        if world is None:
            world = generate_world(self.split, task_id)
            if len(self._cache) >= 4096:  # the train split is unbounded: keep the cache bounded
                self._cache.clear()
            self._cache[task_id] = world
        return world

