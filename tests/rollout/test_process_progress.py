"""``Trajectory.process_progress``: how far an episode got, where summed process rewards cannot say.

WebShop's dense reward sums to −Φ(start) over every episode (its potential ends at 0), so RSPO's
rank swap ranks by Φ(end) − Φ(start), Φ(end) being the potential the episode ended on; on ALFWorld
that is exactly the summed process reward.
"""

import gymnasium as gym
import pytest

import rspo_gym  # noqa: F401
from rspo_gym.training.envs import ProcessSettings, make_vector_env
from rspo_gym.envs.wrappers import ProcessReward
from rspo_gym.rollout.generation import GenerationOutput
from rspo_gym.rollout.collector import CollectConfig, collect

ENVS = {
    "rspo/WebShop-v0": ({"split": "test", "num_products": 300}, "score", 3),
    "rspo/ALFWorld-v0": ({}, "milestones", 5),
}


class _Replay:
    """Replies with the next action of a fixed list (a stand-in for a model)."""

    def __init__(self, actions):
        from rspo_gym.policies.models import load_model

        self.tokenizer, self.actions = load_model("tiny")[1], list(actions)

    def generate(self, prompt_ids, config, allowed=None):
        action = self.actions.pop(0)
        ids = [self.tokenizer(action, add_special_tokens=False)["input_ids"]] * len(prompt_ids)
        return GenerationOutput([action] * len(prompt_ids), ids, [[0.0] * len(i) for i in ids])


def _expert_episode(env_id):
    kwargs, potential, task_id = ENVS[env_id]
    env = ProcessReward(gym.make(env_id, **kwargs), potential)
    _, info = env.reset(options={"task_id": task_id})
    actions, potentials, done = [], [info["potential"]], False
    while not done:
        actions.append(env.unwrapped.expert_action())
        _, _, terminated, truncated, info = env.step(actions[-1])
        potentials.append(info["potential"])
        done = terminated or truncated
    env.close()
    return actions, potentials


@pytest.mark.parametrize("env_id", sorted(ENVS))
def test_progress_is_the_potential_the_episode_ended_on(env_id):
    pytest.importorskip("transformers")
    kwargs, potential, task_id = ENVS[env_id]
    actions, potentials = _expert_episode(env_id)
    venv, _ = make_vector_env(env_id, 1, 2, env_kwargs=kwargs, process=ProcessSettings(potential))
    rollout = collect(_Replay(actions), venv, CollectConfig(max_turns=len(actions)), task_ids=[task_id])
    venv.close()
    for trajectory in rollout.trajectories:
        assert trajectory.length == len(actions) and trajectory.outcome > 0
        assert trajectory.process_progress == pytest.approx(potentials[-1] - potentials[0], abs=1e-12)
        if env_id == "rspo/WebShop-v0":  # the potential ends at 0: every episode's process return is −Φ(start)
            assert trajectory.process_return == pytest.approx(-potentials[0], abs=1e-12)
            assert trajectory.process_progress == pytest.approx(trajectory.outcome, abs=1e-12)  # the selection bought
        else:
            assert trajectory.process_progress == pytest.approx(trajectory.process_return, abs=1e-12)


def test_a_webshop_time_limit_keeps_the_potential_in_view():
    env = ProcessReward(gym.make("rspo/WebShop-v0", split="test", num_products=300, max_episode_steps=3), "score")
    env.reset(options={"task_id": 3})
    seen, done = [], False
    while not done:
        _, _, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        seen.append(env.unwrapped.process_potential("score"))
        done = terminated or truncated
    assert truncated and not terminated and seen[-1] > 0
    assert info["potential"] == pytest.approx(seen[-1]) and info["process_reward"] == pytest.approx(-seen[-2])
