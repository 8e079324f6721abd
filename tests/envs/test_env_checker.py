"""Our registered envs under Gymnasium's own ``PassiveEnvChecker`` (which ``gym.make`` puts around
every env): a refused reset must leave it able to check the next episode."""

from __future__ import annotations

import gymnasium as gym
import pytest

import rspo_gym  # noqa: F401 - registers the envs

SETTINGS = {"rspo/ALFWorld-v0": {"split": "valid_seen"}, "rspo/WebShop-v0": {"num_products": 200, "split": "test"},
            "rspo/WebShop-v1": {"num_products": 200, "split": "test"}}


@pytest.mark.parametrize("env_id", list(SETTINGS))
def test_a_refused_first_reset_leaves_gymnasiums_env_checker_sound(env_id):
    env = gym.make(env_id, **SETTINGS[env_id])
    assert "PassiveEnvChecker" in str(env)  # the checker still runs, around the env as Gymnasium puts it
    with pytest.raises(ValueError, match="task_id 1000000 out of range"):
        env.reset(options={"task_id": 10**6})
    with pytest.raises(TypeError, match="task_id must be an integer, got float"):
        env.reset(options={"task_id": 1.5})
    with pytest.raises(gym.error.ResetNeeded):  # no episode was started
        env.step("look")
    env.reset(options={"task_id": 1})
    obs, reward, terminated, truncated, info = env.step("look")  # was a TypeError from the checker, at every step
    assert isinstance(obs, str) and isinstance(info, dict)
    again = gym.make(env.spec)  # the spec still recreates the same env
    assert str(again) == str(env) and again.spec == env.spec
