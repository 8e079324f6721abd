"""Where an ALFWorld env gets its games: real game files or the procedural generator.

- ``GameFiles``: ``game.tw-pddl`` files in sorted path order; each is parsed on first use.
- ``GeneratedTasks``: the generator's canonical split (``train`` unbounded, ``valid_seen`` and
  ``valid_unseen`` fixed); task k is the same world on every machine and for every seed.

Both keep their worlds in the process-wide ``WORLD_CACHE`` (``cache.py``, bounded by bytes), so
later resets of a task cost no I/O and no generation, and memory does not grow with the number of
envs or of tasks seen.

Both answer ``size`` (``None`` for an unbounded split) and ``world(task_id)``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rspo_gym.envs.alfworld.cache import WORLD_CACHE
from rspo_gym.envs.alfworld.pddl import find_games, load_game
from rspo_gym.envs.alfworld.world import World
from rspo_gym.envs.core import check_task_id

__all__ = ["GameFiles", "GeneratedTasks"]


class GameFiles:
    """Real ALFWorld games from a directory (searched recursively), a file, or a list of them."""

    def __init__(self, source: str | os.PathLike | Sequence[str | os.PathLike]) -> None:
        self.paths: list[Path] = find_games(source)

    @property
    def size(self) -> int | None:
        return len(self.paths)

    def world(self, task_id: int) -> World:
        task_id = check_task_id(task_id, len(self.paths))
        path = self.paths[task_id]
        return WORLD_CACHE.get_or_load(("game", os.fspath(path)), lambda: load_game(path))


class GeneratedTasks:
    """Tasks of the procedural generator for one split."""

    def __init__(self, split: str = "train") -> None:
        from rspo_gym.envs.alfworld.generator import SPLIT_SIZES

        if split not in SPLIT_SIZES:
            raise ValueError(f"Unknown split {split!r}; expected one of {sorted(SPLIT_SIZES)}")
        self.split = split
        self.size: int | None = SPLIT_SIZES[split]

    def world(self, task_id: int) -> World:
        from rspo_gym.envs.alfworld.generator import generate_world

        task_id = check_task_id(task_id, self.size)
        # every generated world refers to the generator's one can_contain table: not a per-world cost
        return WORLD_CACHE.get_or_load(
            ("generated", self.split, task_id),
            lambda: generate_world(self.split, task_id),
            shared=lambda world: (world.can_contain,),
        )

