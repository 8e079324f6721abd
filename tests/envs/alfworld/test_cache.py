"""ALFWorld's worlds live in one process-wide cache bounded by bytes (``cache.py``): memory stays
bounded however many envs and tasks a process sees, and what the envs observe does not change."""

import gc
import tracemalloc

import gymnasium as gym
import pytest

import rspo_gym  # noqa: F401
from rspo_gym.envs.alfworld.cache import DEFAULT_MAX_BYTES, WORLD_CACHE, WorldCache, world_nbytes
from rspo_gym.envs.alfworld.generator import generate_world
from rspo_gym.envs.alfworld.scenes import tiny_kitchen
from rspo_gym.envs.alfworld.world import World

ENV_ID = "rspo/ALFWorld-v0"
BUDGET = 8 * 2**20


@pytest.fixture()
def small_world_cache():
    """``WORLD_CACHE`` emptied and bounded to ``BUDGET`` for one test, then following the
    environment again."""
    WORLD_CACHE.clear()
    WORLD_CACHE.max_bytes = BUDGET
    yield WORLD_CACHE
    WORLD_CACHE.clear()
    WORLD_CACHE.max_bytes = None


def _live_worlds() -> list[World]:
    """Every ``World`` alive in the process, found by the garbage collector, so the measure does
    not depend on the cache's own accounting."""
    gc.collect()
    return [obj for obj in gc.get_objects() if type(obj) is World]  # type(): no attribute lookups on lazy modules


@pytest.mark.slow
def test_eight_envs_over_5000_tasks_stay_under_the_byte_budget(small_world_cache):
    before = _live_worlds()  # kept alive, so their ids stay theirs; other tests may hold some
    envs = [gym.make(ENV_ID) for _ in range(8)]
    for task_id in range(5000):
        env = envs[task_id % 8]
        env.reset(options={"task_id": task_id})
        env.step("look")
    old = {id(w) for w in before}
    new = [w for w in _live_worlds() if id(w) not in old]
    count, nbytes = len(new), sum(world_nbytes(w, (w.can_contain,)) for w in new)
    # the cache's budget plus the eight worlds in play (each well under 100 KB)
    assert small_world_cache.nbytes <= BUDGET
    assert nbytes <= BUDGET + 8 * 100_000, (count, nbytes)
    assert 100 < len(small_world_cache) < 5000 and count <= len(small_world_cache) + 8


def test_envs_resetting_to_one_task_share_its_world(small_world_cache):
    a, b = gym.make(ENV_ID), gym.make(ENV_ID)
    a.reset(options={"task_id": 77})
    b.reset(options={"task_id": 77})
    assert a.unwrapped.world is b.unwrapped.world
    assert small_world_cache.misses == 1 and small_world_cache.hits == 1


def test_observations_are_the_same_with_and_without_the_cache(small_world_cache):
    def play(tasks: list[int]) -> list:
        env = gym.make(ENV_ID, split="valid_seen")
        out = []
        for task_id in tasks:
            obs, info = env.reset(options={"task_id": task_id})
            out.append((obs, info["admissible_actions"]))
            for command in env.unwrapped.expert_plan()[:4]:
                obs, reward, terminated, _, info = env.step(command)
                out.append((obs, reward, terminated, info["admissible_actions"]))
        return out

    tasks = [3, 9, 3, 17, 9, 3]
    cached = play(tasks)
    small_world_cache.max_bytes = 0  # nothing kept: every reset builds its world afresh
    assert play(tasks) == cached and len(small_world_cache) == 0


def test_lru_eviction_by_bytes():
    # one world behind every key: in a fresh process each new tiny_kitchen() measures 104 bytes
    # less than the one before (its instance dicts: CPython's key-sharing dicts), so run alone the
    # test saw three "equal" worlds that were not
    world = tiny_kitchen()
    size = world_nbytes(world)
    load = lambda: world  # noqa: E731
    cache = WorldCache(max_bytes=3 * size)
    for key in "abc":
        cache.get_or_load(key, load)
    cache.get_or_load("a", load)  # "a" is now the most recently used
    cache.get_or_load("d", load)  # evicts "b", the least recently used
    assert (cache.hits, cache.misses, len(cache), cache.nbytes) == (1, 4, 3, 3 * size)
    loads = []
    cache.get_or_load("b", lambda: loads.append("b") or world)
    assert loads == ["b"]  # "b" was evicted; "c" went in its place
    cache.max_bytes = size  # shrinking evicts at once, oldest first
    assert len(cache) == 1 and cache.nbytes == size
    cache.max_bytes = size - 1  # a world larger than the budget is returned but not kept
    assert len(cache) == 0 and isinstance(cache.get_or_load("e", load), World) and len(cache) == 0
    for bad in (-1, 1.5, "64", True):
        with pytest.raises(ValueError, match="max_bytes"):
            cache.max_bytes = bad


def test_world_nbytes_bounds_what_a_world_retains():
    generate_world("train", 0)  # import-time tables allocated before measuring
    gc.collect()
    tracemalloc.start()
    worlds = [generate_world("train", 1000 + i) for i in range(40)]
    gc.collect()
    retained, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    counted = sum(world_nbytes(w, (w.can_contain,)) for w in worlds)
    assert retained <= counted <= 1.5 * retained, (retained, counted)
    assert len({id(w.can_contain) for w in worlds}) == 1  # the one table the cache does not count


def test_an_unset_bound_is_this_processs_share_of_the_environments_budget(monkeypatch):
    cache = WorldCache(max_bytes=None)
    assert cache.max_bytes == WORLD_CACHE.max_bytes == DEFAULT_MAX_BYTES  # outside a pool
    monkeypatch.setenv("RSPO_GYM_ENV_WORKERS", "4")  # after the cache was built, as in a forked worker
    assert cache.max_bytes == DEFAULT_MAX_BYTES // 4
    monkeypatch.setenv("RSPO_GYM_WORLD_CACHE_BYTES", str(4 * DEFAULT_MAX_BYTES))
    assert cache.max_bytes == DEFAULT_MAX_BYTES
    assert WorldCache().max_bytes == DEFAULT_MAX_BYTES  # an explicit bound ignores the environment
    for name, bad in (("RSPO_GYM_ENV_WORKERS", "0"), ("RSPO_GYM_WORLD_CACHE_BYTES", "-1"),
                      ("RSPO_GYM_WORLD_CACHE_BYTES", "64MiB")):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ValueError, match=name):
            cache.get_or_load(("tiny", 0), tiny_kitchen)
        monkeypatch.undo()
