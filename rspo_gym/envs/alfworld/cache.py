"""The process-wide cache of ALFWorld worlds, bounded by bytes (least recently used evicted).

- ``world_nbytes(world, shared)``: the bytes a ``World`` holds on its own (a ``sys.getsizeof``
  walk that skips the objects it shares with other worlds).
- ``WorldCache``: a thread-safe LRU map ``key -> World`` whose total ``world_nbytes`` stays under
  ``max_bytes``.
- ``WORLD_CACHE``: the one instance every ALFWorld env of the process uses, as every WebShop env
  shares one catalog. Resize it with ``WORLD_CACHE.max_bytes = n`` (0 disables caching).
- ``environ_max_bytes()``: ``WORLD_CACHE``'s bound unless set: this process's share of the vector
  env's budget, ``RSPO_GYM_WORLD_CACHE_BYTES`` (default ``DEFAULT_MAX_BYTES``) divided by the
  number of workers its pool set in ``RSPO_GYM_ENV_WORKERS`` (1 outside a pool).

Why shared: an env meets a new task on almost every reset of the unbounded train split, so a
per-env cache grows with the tasks seen and is multiplied by the number of envs (~40 KB a task,
thousands of tasks, dozens of envs). One cache per process costs at most ``max_bytes`` however
many envs there are, and envs that reset to the same task (a GRPO group) share one world.
The budget is divided among a pool's worker processes because each has its own cache: 8 workers at
the full budget each would hold 8 times the bound.
A ``World`` is immutable during play (every game copies its initial state), so sharing it between
envs cannot change what any env observes.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable
from typing import Any

from rspo_gym.envs.alfworld.world import World

__all__ = ["BUDGET_ENV_VAR", "DEFAULT_MAX_BYTES", "WORLD_CACHE", "WorldCache", "environ_max_bytes", "world_nbytes"]

#: default bound of ``WORLD_CACHE``: ~1,400 generated worlds or ~1,150 real games (a miss costs
#: ~0.5 ms to generate a world, ~2 ms to parse a game file)
DEFAULT_MAX_BYTES = 64 * 2**20
#: the budget of a whole vector env, in bytes, shared by its worker processes
BUDGET_ENV_VAR = "RSPO_GYM_WORLD_CACHE_BYTES"
#: set by the process pools of ``rspo_gym.rollout.vector`` (not imported: envs do not depend on
#: rollout) in each worker to the number of workers
_WORKERS_ENV_VAR = "RSPO_GYM_ENV_WORKERS"

_ATOMS = (str, bytes, int, float, bool, type(None))


def world_nbytes(world: World, shared: Collection[Any] = ()) -> int:
    """``sys.getsizeof`` summed over every object reachable from ``world``, each counted once.

    Objects in ``shared`` (by identity) and everything under them are not counted: they are
    shared by many worlds (the generator's one ``can_contain`` table) and cost nothing per world.
    Strings and small ints that CPython shares between worlds are counted too, so this is an upper
    bound of what dropping the world frees: ~49 KB for a generated world that ``tracemalloc`` sees
    retain ~40 KB, ~58 KB for a real game file that retains ~51 KB. It costs ~0.3 ms.
    """
    seen = {id(obj) for obj in shared}
    stack: list[Any] = [world]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, _ATOMS):
            continue
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "items") and hasattr(obj, "keys"):  # read-only mappings (MappingProxyType)
            stack.extend(obj.keys())
            stack.extend(obj.values())
        if hasattr(obj, "__dict__"):
            stack.append(vars(obj))
    return total


def _environ_int(name: str, default: int, minimum: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value: int | None = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {text!r}")
    return value


def environ_max_bytes() -> int:
    """This process's share of the world-cache budget: ``RSPO_GYM_WORLD_CACHE_BYTES`` (default
    ``DEFAULT_MAX_BYTES``) divided by ``RSPO_GYM_ENV_WORKERS`` (default 1).

    >>> environ_max_bytes() == DEFAULT_MAX_BYTES  # in a process of its own
    True
    """
    return _environ_int(BUDGET_ENV_VAR, DEFAULT_MAX_BYTES, 0) // _environ_int(_WORKERS_ENV_VAR, 1, 1)


class WorldCache:
    """``key -> World`` under a byte budget, least recently used evicted first; thread-safe.

    >>> from rspo_gym.envs.alfworld.scenes import tiny_kitchen
    >>> cache = WorldCache(max_bytes=10**6)
    >>> world = cache.get_or_load(("tiny", 0), tiny_kitchen)
    >>> cache.get_or_load(("tiny", 0), tiny_kitchen) is world, len(cache), cache.hits, cache.misses
    (True, 1, 1, 1)
    >>> 0 < cache.nbytes <= cache.max_bytes
    True
    """

    def __init__(self, max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
        self._lock = threading.Lock()
        self._worlds: OrderedDict[Hashable, tuple[World, int]] = OrderedDict()
        self.nbytes = 0
        """Bytes of the cached worlds, as ``world_nbytes`` counts them."""
        self.hits = 0
        self.misses = 0
        self._max_bytes: int | None = 0
        self.max_bytes = max_bytes

    @property
    def max_bytes(self) -> int:
        """The byte budget; lowering it evicts at once; 0 keeps nothing. ``None`` follows
        ``environ_max_bytes()``, read again at every insertion: a pool's worker forked with this
        cache already built learns only then that it is one of k."""
        return environ_max_bytes() if self._max_bytes is None else self._max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int | None) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"max_bytes must be a non-negative integer or None, got {value!r}")
        with self._lock:
            self._max_bytes = value
            self._evict(self.max_bytes)

    def get_or_load(
        self, key: Hashable, load: Callable[[], World], shared: Callable[[World], Collection[Any]] | None = None
    ) -> World:
        """The cached world of ``key``, else ``load()`` cached under ``key``. ``shared(world)``
        names the parts of a loaded world that other worlds share (not counted, see
        ``world_nbytes``). A world larger than the whole budget is returned but not kept."""
        with self._lock:
            entry = self._worlds.get(key)
            if entry is not None:
                self._worlds.move_to_end(key)
                self.hits += 1
                return entry[0]
            self.misses += 1
        world = load()  # outside the lock: loading a real game reads a file
        size = world_nbytes(world, shared(world) if shared is not None else ())
        limit = self.max_bytes
        with self._lock:
            if key not in self._worlds and size <= limit:
                self._worlds[key] = (world, size)
                self.nbytes += size
                self._evict(limit)
        return world

    def clear(self) -> None:
        """Drop every world and zero the counters."""
        with self._lock:
            self._worlds.clear()
            self.nbytes = self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._worlds)

    def _evict(self, limit: int) -> None:
        while self.nbytes > limit:
            _, (_, size) = self._worlds.popitem(last=False)
            self.nbytes -= size


WORLD_CACHE = WorldCache(max_bytes=None)
