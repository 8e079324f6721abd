import gymnasium as gym
import numpy as np
import pytest

import rspo_gym  # noqa: F401
from rspo_gym.rollout.adapters import DiscreteTextAdapter
from rspo_gym.envs.alfworld.cache import DEFAULT_MAX_BYTES, WORLD_CACHE
from rspo_gym.rollout.vector import GroupedVectorEnv, SubprocessEnvs


def test_members_of_a_group_share_the_task_and_groups_differ():
    venv = GroupedVectorEnv("rspo/ALFWorld-v0", num_groups=3, group_size=4)
    venv.reset(seed=11)
    tasks = [info["task_id"] for info in venv.infos]
    for g in range(3):
        assert len(set(tasks[g * 4:(g + 1) * 4])) == 1
    assert len({tasks[0], tasks[4], tasks[8]}) == 3
    venv.close()


def test_task_ids_option_sets_one_task_per_group():
    venv = GroupedVectorEnv("rspo/ALFWorld-v0", num_groups=2, group_size=2, env_kwargs={"split": "valid_seen"})
    venv.reset(options={"task_ids": [5, 9]})
    assert [info["task_id"] for info in venv.infos] == [5, 5, 9, 9]
    with pytest.raises(ValueError, match="one task per group"):
        venv.reset(options={"task_ids": [1]})
    venv.close()


def test_finished_members_are_not_stepped_and_report_inactive():
    venv = GroupedVectorEnv("rspo/ALFWorld-v0", num_groups=1, group_size=2, env_kwargs={"split": "valid_seen"})
    venv.reset(options={"task_ids": [0]})
    plan = venv.pool.envs[0].unwrapped.expert_plan()
    for k, action in enumerate(plan):
        obs, rewards, terminated, truncated, infos = venv.step([action, "look"])
    assert terminated[0] and not terminated[1]
    assert rewards[0] == 1.0 and venv.active.tolist() == [False, True]
    steps_before = venv.pool.envs[0].get_wrapper_attr("_elapsed_steps")
    obs2, rewards2, terminated2, _, infos2 = venv.step(["look", "look"])
    assert venv.pool.envs[0].get_wrapper_attr("_elapsed_steps") == steps_before  # not stepped
    assert obs2[0] == obs[0] and rewards2[0] == 0.0 and terminated2[0]
    assert infos2["active"].tolist() == [False, True]
    venv.close()


def test_reset_mask_resets_only_masked_members():
    venv = GroupedVectorEnv("rspo/ALFWorld-v0", num_groups=1, group_size=2)
    venv.reset(seed=3)
    venv.step(["look", "inventory"])
    before = venv.observations[1]
    venv.reset(seed=3, options={"reset_mask": np.array([True, False])})
    assert venv.observations[1] == before
    with pytest.raises(ValueError, match="reset_mask"):
        venv.reset(options={"reset_mask": np.array([False, False])})
    venv.close()


def test_subprocess_pool_matches_in_process():
    kwargs = dict(num_groups=2, group_size=2)
    local = GroupedVectorEnv("rspo/ALFWorld-v0", **kwargs)
    remote = GroupedVectorEnv("rspo/ALFWorld-v0", processes=2, **kwargs)
    try:
        a, _ = local.reset(seed=5)
        b, _ = remote.reset(seed=5)
        assert a == b
        actions = ["look", "inventory", "go to cabinet 1", "look"]
        ra = local.step(actions)
        rb = remote.step(actions)
        assert ra[0] == rb[0] and ra[1].tolist() == rb[1].tolist()
        assert local.call_unwrapped(0, "expert_action") == remote.call_unwrapped(0, "expert_action")
    finally:
        local.close()
        remote.close()


class _WorldCacheProbe(gym.Env):
    """A sub-env that reports the world-cache bound of the process it lives in."""

    def world_cache_bound(self) -> int:
        return WORLD_CACHE.max_bytes


def test_worker_processes_share_the_world_cache_budget():
    pool = SubprocessEnvs([_WorldCacheProbe] * 8, num_workers=4)
    try:
        assert [pool.call(i, "world_cache_bound") for i in range(0, 8, 2)] == [DEFAULT_MAX_BYTES // 4] * 4
    finally:
        pool.close()
    assert WORLD_CACHE.max_bytes == DEFAULT_MAX_BYTES  # the parent's is unchanged


def test_env_argument_is_validated():
    with pytest.raises(ValueError, match="1x1"):
        GroupedVectorEnv(gym.make("rspo/ALFWorld-v0"), num_groups=2)
    with pytest.raises(TypeError, match="env id"):
        GroupedVectorEnv(42)
    with pytest.raises(ValueError, match="group_size"):
        GroupedVectorEnv("rspo/ALFWorld-v0", group_size=0)


def test_discrete_adapter_plays_frozen_lake_and_ignores_bad_actions():
    env = DiscreteTextAdapter(gym.make("FrozenLake-v1", is_slippery=False))
    obs, info = env.reset(seed=0)
    assert info["admissible_actions"] == ["left", "down", "right", "up"]
    same, reward, term, trunc, info = env.step("jump")
    assert same == obs and not info["valid"] and reward == 0 and not term
    for action in ["down", "down", "right", "right", "down", "right"]:
        obs, reward, term, trunc, info = env.step(action)
    assert term and reward == 1.0 and info["won"]


def test_discrete_adapter_rejects_non_discrete_envs():
    with pytest.raises(TypeError, match="Discrete"):
        DiscreteTextAdapter(gym.make("Pendulum-v1"))
