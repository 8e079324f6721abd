"""The fast policy's expert clone: which tasks it demonstrates."""

import gymnasium as gym
import pytest

pytest.importorskip("torch")

from rspo_gym.policies.action_scorer import ActionScorerPolicy  # noqa: E402
from rspo_gym.policies.scorer_warmstart import expert_choices  # noqa: E402

ALFWORLD = "rspo/ALFWorld-v0"


def _first_observation(task_id: int) -> str:
    env = gym.make(ALFWORLD)
    try:
        observation, _ = env.reset(seed=0, options={"task_id": task_id})
    finally:
        env.close()
    return observation


def test_given_task_ids_the_expert_episodes_play_them_in_turn():
    rows = expert_choices(ActionScorerPolicy(seed=0), ALFWORLD, 3, seed=7, task_ids=[5, 9])
    openings = [row.anchor for row in rows if row.step == 0]
    assert openings == [_first_observation(5), _first_observation(9), _first_observation(5)]


def test_without_task_ids_the_reset_seeds_draw_the_tasks():
    rows = expert_choices(ActionScorerPolicy(seed=0), ALFWORLD, 2, seed=7)
    env = gym.make(ALFWORLD)
    try:
        drawn = [env.reset(seed=7 + episode)[0] for episode in range(2)]
    finally:
        env.close()
    assert [row.anchor for row in rows if row.step == 0] == drawn
