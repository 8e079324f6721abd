"""The process-wide cache of ALFWorld worlds, bounded by bytes (least recently used evicted).

- ``world_nbytes(world, shared)``: the bytes a ``World`` holds on its own (a ``sys.getsizeof``
  walk that skips the objects it shares with other worlds).
- ``WorldCache``: a thread-safe LRU map ``key -> World`` whose total ``world_nbytes`` stays under
  ``max_bytes``.
- ``WORLD_CACHE``: the one instance every ALFWorld env of the process uses, as every WebShop env
  shares one catalog. Resize it with ``WORLD_CACHE.max_bytes = n`` (0 disables caching).

Why shared: an env meets a new task on almost every reset of the unbounded train split, so a
per-env cache grows with the tasks seen and is multiplied by the number of envs (~36 KB a task,
thousands of tasks, dozens of envs). One cache per process costs at most ``max_bytes`` however
many envs there are, and envs that reset to the same task (a GRPO group) share one world.
A ``World`` is immutable during play (every game copies its initial state), so sharing it between
envs cannot change what any env observes.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable
from typing import Any

from rspo_gym.envs.alfworld.world import World

__all__ = ["DEFAULT_MAX_BYTES", "WORLD_CACHE", "WorldCache", "world_nbytes"]

#: default bound of ``WORLD_CACHE``: ~1,400 generated worlds or ~1,200 real games (a miss costs
#: ~0.5 ms to generate a world, ~2 ms to parse a game file)
DEFAULT_MAX_BYTES = 64 * 2**20

_ATOMS = (str, bytes, int, float, bool, type(None))


def world_nbytes(world: World, shared: Collection[Any] = ()) -> int:
    """``sys.getsizeof`` summed over every object reachable from ``world``, each counted once.

    Objects in ``shared`` (by identity) and everything under them are not counted: they are
    shared by many worlds (the generator's one ``can_contain`` table) and cost nothing per world.
    Strings and small ints that CPython shares between worlds are counted too, so this is an upper
    bound of what dropping the world frees: ~45 KB for a generated world that ``tracemalloc`` sees
    retain ~36 KB, ~53 KB for a real game file that retains ~47 KB. It costs ~0.3 ms.
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

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._lock = threading.Lock()
        self._worlds: OrderedDict[Hashable, tuple[World, int]] = OrderedDict()
        self.nbytes = 0
        """Bytes of the cached worlds, as ``world_nbytes`` counts them."""
        self.hits = 0
        self.misses = 0
        self._max_bytes = 0
        self.max_bytes = max_bytes

    @property
    def max_bytes(self) -> int:
        """The byte budget; lowering it evicts at once; 0 keeps nothing."""
        return self._max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"max_bytes must be a non-negative integer, got {value!r}")
        with self._lock:
            self._max_bytes = value
            self._evict()

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
        with self._lock:
            if key not in self._worlds and size <= self._max_bytes:
                self._worlds[key] = (world, size)
                self.nbytes += size
                self._evict()
        return world

    def clear(self) -> None:
        """Drop every world and zero the counters."""
        with self._lock:
            self._worlds.clear()
            self.nbytes = self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._worlds)

    def _evict(self) -> None:
        while self.nbytes > self._max_bytes:
            _, (_, size) = self._worlds.popitem(last=False)
            self.nbytes -= size


WORLD_CACHE = WorldCache()
