"""``Trajectory.process_progress``: how far an episode got, where summed process rewards cannot say.

WebShop's dense reward sums to −Φ(start) over every episode (its potential ends at 0), so RSPO's
rank swap ranks by the peak potential instead; on ALFWorld the expert's potential never falls and
the two agree.
"""

import gymnasium as gym
import pytest

import rspo_gym  # noqa: F401
from rspo_gym.algos.envs import make_vector_env
from rspo_gym.envs.wrappers import ProcessReward
from rspo_gym.policies.generation import GenerationOutput
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
    env = ProcessReward(gym.make(env_id, **kwargs), potential=potential)
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
def test_progress_is_the_peak_potential_gain_of_the_episode(env_id):
    pytest.importorskip("transformers")
    kwargs, potential, task_id = ENVS[env_id]
    actions, potentials = _expert_episode(env_id)
    venv, _ = make_vector_env(env_id, 1, 2, env_kwargs=kwargs, potential=potential)
    rollout = collect(_Replay(actions), venv, CollectConfig(max_turns=len(actions)), task_ids=[task_id])
    venv.close()
    for trajectory in rollout.trajectories:
        assert trajectory.length == len(actions) and trajectory.outcome > 0
        assert trajectory.process_progress == pytest.approx(max(potentials) - potentials[0], abs=1e-12)
        if env_id == "rspo/WebShop-v0":  # the potential ends at 0: every episode's process return is −Φ(start)
            assert potentials[-1] == 0.0 and trajectory.process_return == pytest.approx(-potentials[0], abs=1e-12)
            assert trajectory.process_progress == pytest.approx(trajectory.outcome, abs=1e-12)  # it bought its best item
        else:
            assert trajectory.process_progress == pytest.approx(trajectory.process_return, abs=1e-12)
