"""What every peer shares (``rspo_gym.integrations.episode``), and the verl-agent builders, which
need no peer installed."""

from __future__ import annotations

import re
import time

import pytest

from rspo_gym.integrations.episode import EPISODE_OVER, Episode, EpisodeConfig, outcome_reward, task_ids
from rspo_gym.integrations.verl_agent import build_alfworld_envs, build_webshop_envs

ALFWORLD = {"split": "valid_seen"}
WEBSHOP = {"num_products": 200, "split": "test"}


def play_expert(episode: Episode) -> list:
    turns = []
    while not episode.done:
        turns.append(episode.step(episode.env.unwrapped.expert_action()))
    return turns


def test_outcome_reward_conventions():
    assert outcome_reward("verl-agent", 1.0, True, False) == 10.0
    assert outcome_reward("verl-agent", 1.0, True, True) == 0.0  # paid once, on the winning step
    assert outcome_reward("verl-agent", 0.7, False, False) == 0.0  # a WebShop purchase below 1.0
    assert outcome_reward("env", 0.7, False, False) == 0.7
    with pytest.raises(ValueError, match="reward must be one of"):
        EpisodeConfig(reward="score")


def test_task_ids_bounded_and_unbounded():
    ids = task_ids(5, 12, seed=1)
    assert sorted(ids[:5]) == list(range(5)) and sorted(ids[5:10]) == list(range(5))  # every task before repeats
    start = time.perf_counter()
    drawn = task_ids(None, 10_000, seed=1)
    assert time.perf_counter() - start < 0.5 and len(set(drawn)) > 9_990  # nothing is enumerated
    assert task_ids(None, 3, seed=1) == drawn[:3]


@pytest.mark.parametrize("num_tasks,count,expected", [
    (500, 10**10, "count must be an integer from 0 to 100000, got 10000000000"),  # was 5.6 GB
    (10**10, 5, "num_tasks must be None or an integer from 1 to 2147483648, got 10000000000"),  # a 80 GB permutation
    (500, 2.5, "count must be an integer from 0 to 100000, got 2.5"),
])
def test_task_ids_beyond_their_bounds_are_refused_before_they_allocate(num_tasks, count, expected):
    started = time.perf_counter()
    with pytest.raises(ValueError, match=re.escape(expected)):
        task_ids(num_tasks, count)
    assert time.perf_counter() - started < 1


def test_task_ids_of_a_set_too_large_to_shuffle_are_drawn_without_repeats():
    started = time.perf_counter()
    ids = task_ids(2**31, 1000, seed=3)
    assert time.perf_counter() - started < 1 and len(set(ids)) == 1000 and all(0 <= k < 2**31 for k in ids)


def test_a_task_id_that_is_no_integer_is_refused_not_rounded():
    import numpy as np

    episode = Episode(env_id="rspo/ALFWorld-v0", env_kwargs=ALFWORLD)
    for task_id, kind in ((1.9, "float"), (True, "bool"), ("3", "str")):  # were played as tasks 1, 1 and 3
        with pytest.raises(TypeError, match=f"task_id must be an integer, got {kind}"):
            episode.reset(task_id)
    episode.reset(np.int64(2))
    assert episode.result()["task_id"] == 2
    episode.close()


@pytest.mark.parametrize("env_id, kwargs", [("rspo/ALFWorld-v0", ALFWORLD), ("rspo/WebShop-v0", WEBSHOP)])
def test_expert_episode_rewards_and_messages(env_id, kwargs):
    episode = Episode(env_id=env_id, env_kwargs=kwargs)
    first = episode.reset(1)
    assert not first.startswith("-= Welcome") and "Your admissible actions" in first  # the banner is dropped
    turns = play_expert(episode)
    assert [t.reward for t in turns] == [0.0] * (len(turns) - 1) + [10.0] and turns[-1].done
    result = episode.result()
    assert result["won"] and result["reward"] == 10.0 and result["task_id"] == 1
    assert result["task_score"] == (1.0 if env_id.endswith("WebShop-v0") else 0.0)
    assert episode.step("look").message == EPISODE_OVER
    assert "Admissible actions:" in turns[0].message  # append: the new observation and the actions only


def test_window_messages_stand_alone_and_process_reward_adds():
    episode = Episode(env_id="rspo/ALFWorld-v0", env_kwargs=ALFWORLD, history="window", history_length=1,
                      process_reward="milestones", reward="env")
    episode.reset(1)
    turns = play_expert(episode)
    assert all("Below are the most recent 1 observations" in t.message for t in turns[:-1])
    assert sum(t.reward for t in turns) == pytest.approx(1.0 + sum(t.info["process_reward"] for t in turns))


def test_turn_limit_ends_the_episode():
    episode = Episode(env_id="rspo/WebShop-v0", env_kwargs=WEBSHOP, max_turns=2)
    episode.reset(0)
    assert [episode.step("click[nothing]").done for _ in range(2)] == [False, True]


def test_verl_agent_alfworld_builder_shapes_and_groups():
    envs = build_alfworld_envs(None, seed=0, env_num=2, group_n=2, resources_per_worker={"num_cpus": 0.1},
                               is_train=False, env_kwargs={"eval_dataset": "eval_in_distribution"})
    text_obs, images, infos = envs.reset()
    assert len(text_obs) == 4 and images is None and text_obs[0].startswith("-= Welcome to TextWorld, ALFRED! =-")
    games = [info["extra.gamefile"] for info in infos]
    assert games[0] == games[1] and games[2] == games[3]  # seed + i // group_n: a group shares its game
    assert {"won", "admissible_commands", "extra.gamefile", "observation_text"} <= set(infos[0])
    plan = envs.envs[0].envs[0].expert_plan()
    for action in plan:
        text_obs, images, rewards, dones, infos = envs.step([action, "look", "look", "look"])
    assert rewards[0] == 10.0 and dones[0] and infos[0]["won"] and rewards[1:] == [0.0, 0.0, 0.0]
    assert envs.get_admissible_commands[1] == infos[1]["admissible_commands"]
    with pytest.raises(ValueError, match="num of actions"):
        envs.step(["look"])


def test_verl_agent_webshop_builder_shapes_and_rewards():
    from rspo_gym.envs.webshop.expert import ScriptedShopper

    envs = build_webshop_envs(seed=0, env_num=2, group_n=2, resources_per_worker={"num_cpus": 0.1},
                              env_kwargs={"observation_mode": "text", "num_products": 200, "file_path": "items_shuffle_1000.json"})
    obs, infos = envs.reset()
    assert len(obs) == 4 and infos[0]["goal_index"] == infos[1]["goal_index"] >= 500  # train goals, shared by a group
    assert infos[0]["available_actions"] == {"has_search_bar": True, "clickables": ["search"]}
    evaluation = build_webshop_envs(seed=0, env_num=1, group_n=1, resources_per_worker={}, is_train=False,
                                    env_kwargs={"num_products": 200})
    obs, infos = evaluation.reset(goal_indices=[2])
    shopper = ScriptedShopper(evaluation.envs[0].get_instruction_text())
    for _ in range(15):
        obs, rewards, dones, infos = evaluation.step([shopper.act(obs[0], infos[0]["available_actions"])])
        if dones[0]:
            break
    assert dones[0] and 0.0 < infos[0]["task_score"] <= 1.0 and rewards[0] == (10.0 if infos[0]["task_score"] == 1.0 else 0)
    with pytest.raises(ValueError, match="outside this split"):
        evaluation.reset(goal_indices=[600])
