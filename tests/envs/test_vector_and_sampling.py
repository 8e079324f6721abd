"""Both envs in ``gym.make_vec`` (sync and async, with Gymnasium's shared memory) and their random
policy ``sample_admissible()``."""

import gymnasium as gym
import pytest

import rspo_gym  # noqa: F401
from rspo_gym.envs.core import SharedTexts

ENVS = {
    "rspo/ALFWorld-v0": ({"split": "valid_seen"}, ["look", "inventory", "go to nowhere"]),
    "rspo/WebShop-v0": ({"num_products": 200, "split": "test"}, ["search[snack]", "click[buy now]", "search[coffee]"]),
}


@pytest.mark.parametrize("env_id", list(ENVS))
def test_async_make_vec_returns_the_same_text_as_sync(env_id):
    kwargs, actions = ENVS[env_id]
    runs = {}
    for mode in ("sync", "async"):
        envs = gym.make_vec(env_id, num_envs=3, vectorization_mode=mode, **kwargs)
        try:
            obs, info = envs.reset(seed=[1, 2, 3])
            record = [obs, list(info["task"])]
            obs, reward, terminated, truncated, info = envs.step(actions)
            record += [obs, reward.tolist(), terminated.tolist(), info["valid"].tolist()]
        finally:
            envs.close()
        assert all(isinstance(o, tuple) and all(isinstance(t, str) for t in o) for o in (record[0], record[2]))
        runs[mode] = record
    assert runs["async"] == runs["sync"]
    assert all(len(text) < 2000 and not text.startswith("\t") for text in runs["async"][0])


def test_async_make_vec_without_copies_returns_a_live_view():
    kwargs, actions = ENVS["rspo/ALFWorld-v0"]
    envs = gym.make_vec("rspo/ALFWorld-v0", num_envs=3, vectorization_mode="async",
                        vector_kwargs={"copy": False}, **kwargs)
    try:
        first, _ = envs.reset(seed=[1, 2, 3])
        assert isinstance(first, SharedTexts) and len(first) == 3 and first[0].startswith("-= Welcome")
        obs, *_ = envs.step(actions)
        assert obs is first and first[2] == "Nothing happens." and first[0:2] == tuple(obs)[0:2]
    finally:
        envs.close()


@pytest.mark.parametrize("env_id", list(ENVS))
def test_sample_admissible_is_a_seeded_random_policy_of_valid_actions(env_id):
    kwargs, _ = ENVS[env_id]

    def play(seed: int) -> list[str]:
        env = gym.make(env_id, **kwargs)
        env.reset(seed=seed)
        taken = []
        for _ in range(12):
            action = env.unwrapped.sample_admissible()
            _, _, terminated, truncated, info = env.step(action)
            assert info["valid"], action
            taken.append(action)
            if terminated or truncated:
                env.reset()
        return taken

    assert play(5) == play(5)
    assert play(5) != play(6)
    env = gym.make(env_id, **kwargs)
    env.reset(seed=0)
    # what Gymnasium's own sampler gives is a random string, not an action
    env.action_space.seed(0)
    _, _, _, _, info = env.step(env.action_space.sample())
    assert not info["valid"]


def test_sample_admissible_before_reset_and_after_a_purchase():
    for env_id, (kwargs, _) in ENVS.items():
        with pytest.raises(gym.error.ResetNeeded):
            gym.make(env_id, **kwargs).unwrapped.sample_admissible()
    env = gym.make("rspo/WebShop-v0", num_products=200, split="test")
    env.reset(seed=0)
    env.step("search[snack]")
    env.step(env.unwrapped.session.admissible_actions()[-1])  # the last result's item link
    _, _, terminated, _, _ = env.step("click[buy now]")
    assert terminated
    with pytest.raises(gym.error.ResetNeeded, match="purchase"):
        env.unwrapped.sample_admissible()
