"""``rspo/WebShop-v0`` follows the text-env contract (design §3)."""

import random
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import rspo_gym  # noqa: F401
from rspo_gym.envs.core import INFO_KEYS, STEP_INFO_KEYS
from rspo_gym.envs.wrappers import ProcessReward

ENV_ID = "rspo/WebShop-v0"
SMALL = {"num_products": 300}


def _buy_target(env):
    """Search the target's exact title, open it, pick the goal's options, buy: the oracle path."""
    session = env.unwrapped.session
    target = env.unwrapped.catalog.item(env.unwrapped.catalog.index_of(session.goal.asin))
    obs, *_ , info = env.step(f"search[{target.product.name.lower()}]")
    assert info["valid"]
    rows = 0
    while f"click[{target.product.asin.lower()}]" not in info["admissible_actions"] and rows < 5:
        obs, *_, info = env.step("click[next >]")
        rows += 1
    obs, *_, info = env.step(f"click[{target.product.asin.lower()}]")
    assert info["valid"]
    wanted = {str(o).lower() for o in session.goal.options}
    for name, values in target.options.items():
        for value in values:
            if value.lower() in wanted:
                env.step(f"click[{value.lower()}]")
                break
    return env.step("click[buy now]")


@pytest.mark.parametrize("env_id", [ENV_ID, "rspo/WebShop-v1"])
def test_check_env_is_clean(env_id):
    env = gym.make(env_id, **SMALL).unwrapped  # outside: Gymnasium notes v0 is not the newest
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)


def test_reset_is_deterministic_and_info_keys():
    env = gym.make(ENV_ID, **SMALL)
    first = env.reset(seed=11)
    assert env.reset(seed=11) == first
    assert set(INFO_KEYS) <= set(first[1])
    assert first[1]["admissible_actions"] == ["search[<your query>]"]
    _, _, _, _, info = env.step("search[shoes]")
    assert set(STEP_INFO_KEYS) <= set(info) and info["valid"]


def test_splits_are_canonical_and_task_ids_checked():
    test_env = gym.make(ENV_ID, split="test", **SMALL)
    _, info = test_env.reset(options={"task_id": 499})
    with pytest.raises(ValueError):
        test_env.reset(options={"task_id": 500})
    with pytest.raises(ValueError):
        gym.make(ENV_ID, split="dev", **SMALL)
    # The same task id of a split is the same goal whatever the env's seed history.
    other = gym.make(ENV_ID, split="test", **SMALL)
    other.reset(seed=123)
    assert other.reset(options={"task_id": 499})[1]["task"] == info["task"]


def test_buying_the_target_with_the_goal_options_scores_one():
    env = gym.make(ENV_ID, split="test", **SMALL)
    wins = 0
    for task_id in range(20):
        env.reset(options={"task_id": task_id})
        obs, reward, terminated, truncated, info = _buy_target(env)
        assert terminated and info["score"] == reward
        assert set(info["reward_parts"]) >= {"r_type", "attr_hits", "n_attr", "opt_hits", "n_opt", "price_ok"}
        wins += info["won"]
        assert info["won"] == (reward == 1.0)
        assert obs.startswith("Thank you for shopping with us!")
    assert wins >= 18  # ranged prices hide a random price: a few targets can miss their price bound


def test_random_and_malformed_actions_never_raise():
    env = gym.make(ENV_ID, **SMALL)
    rng = random.Random(0)
    junk = ["", "search[]", "click[]", "search[<q> shoes]", "click[nothing]", "buy", "ж" * 1000, None, 7]
    for episode in range(40):
        obs, info = env.reset(seed=episode)
        for _ in range(15):
            if rng.random() < 0.4:
                action = rng.choice(junk)
                before = env.unwrapped.session.state_key()
                obs2, reward, terminated, truncated, info = env.step(action)
                assert not info["valid"] and obs2 == obs and reward == 0.0
                assert env.unwrapped.session.state_key() == before
            else:
                actions = info["admissible_actions"]
                action = "search[red shoes]" if actions == ["search[<your query>]"] else rng.choice(actions)
                obs, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break


def test_truncation_at_fifteen_steps():
    env = gym.make(ENV_ID, **SMALL)
    env.reset(seed=0)
    for _ in range(15):
        *_, terminated, truncated, info = env.step("click[back to search]")
    assert truncated and not terminated and not info["won"]


def test_process_reward_is_zero_in_total_when_nothing_is_bought():
    env = ProcessReward(gym.make(ENV_ID, split="test", **SMALL), "score")
    env.reset(options={"task_id": 1})
    session = env.unwrapped.session
    target = env.unwrapped.catalog.item(env.unwrapped.catalog.index_of(session.goal.asin))
    env.step(f"search[{target.product.name.lower()}]")
    _, _, _, _, info = env.step(f"click[{target.product.asin.lower()}]")
    assert info["process_reward"] > 0  # viewing the right item raises Φ ...
    total = info["process_reward"]
    for _ in range(13):
        *_, terminated, truncated, info = env.step("click[description]" if not total else "click[< prev]")
        total += info["process_reward"]
        if terminated or truncated:
            break
    assert truncated and total == pytest.approx(0.0)  # ... but without buying, the total is 0


def test_make_vec_shares_one_catalog():
    envs = gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="sync", **SMALL)
    obs, info = envs.reset(seed=[5, 5])
    assert obs[0] == obs[1]
    assert envs.envs[0].unwrapped.catalog is envs.envs[1].unwrapped.catalog
    assert envs.envs[0].unwrapped.index is envs.envs[1].unwrapped.index
    envs.close()


def test_hundred_thousand_random_and_malformed_actions():
    """Valid clicks and searches mixed with malformed actions: nothing raises, invalid ones are no-ops."""
    env = gym.make(ENV_ID, **SMALL).unwrapped  # no step limit: long random episodes
    rng = random.Random(7)
    junk = ["", " ", "search[", "click[", "search[]", "click[]", "search[<q> shoes]", "search[<r>]",
            "click[Buy Now]", "CLICK[buy now]", "click[buy now]x", "search[a]b", "ж" * 50, "\x00", "x" * 5000,
            "search[" + "y" * 600 + "]", "click[next >", "click[[next >]]"]
    queries = ["red shoes", "organic tea", "usb c charger", "wooden desk", "face cream", "pack of 2"]
    steps = invalid = 0
    obs, info = env.reset(seed=0)
    while steps < 100_000:
        if env.session.done or rng.random() < 0.002:
            obs, info = env.reset(seed=steps)
        roll = rng.random()
        if roll < 0.35:
            action = rng.choice(junk)
        elif info["admissible_actions"][:1] == ["search[<your query>]"]:
            action = f"search[{rng.choice(queries)}]"
        else:
            action = rng.choice(info["admissible_actions"])
        before = env.session.state_key()
        new_obs, reward, terminated, truncated, info = env.step(action)
        if not info["valid"]:
            assert new_obs == obs and reward == 0.0 and env.session.state_key() == before
            invalid += 1
        obs = new_obs
        steps += 1
    assert invalid > 30_000


@pytest.mark.parametrize("after", ["click[buy now]", "click[back to search]", "search[anything]", "nonsense"])
def test_the_episode_stays_terminated_after_a_purchase_whatever_comes_next(after):
    env = gym.make(ENV_ID, **SMALL)
    env.reset(seed=0, options={"task_id": 0})
    _, _, terminated, _, _ = _buy_target(env)
    assert terminated
    _, reward, terminated, truncated, info = env.step(after)  # as ALFWorld: over once over
    assert terminated and reward == 0.0 and not truncated
