"""ART's own ``Trajectory``, ``TrajectoryGroup`` and ``gather_trajectory_groups`` over our rollout,
with a scripted chat client answering the env experts' actions (no model, no server)."""

from __future__ import annotations

import asyncio
import time

import pytest

art = pytest.importorskip("art")
from openai.types.chat import ChatCompletion  # noqa: E402

from rspo_gym.integrations.art import groups, rollout  # noqa: E402
from tests.integrations.scripted import ExpertReplies  # noqa: E402

SETTINGS = {"rspo/ALFWorld-v0": {"split": "valid_seen"}, "rspo/WebShop-v0": {"num_products": 200, "split": "test"}}


class ScriptedClient:
    """``client.chat.completions.create`` answering ``ExpertReplies``' actions as real ChatCompletions."""

    def __init__(self, replies: ExpertReplies):
        self.replies, self.prompts = replies, []
        self.chat = self.completions = self

    async def create(self, *, model, messages, **kwargs):
        self.prompts.append(messages)
        return ChatCompletion.model_validate({
            "id": "x", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": self.replies.next()}}],
        })


class Model:
    name = "scripted"


@pytest.mark.parametrize("history", ["append", "window"])
@pytest.mark.parametrize("env_id", list(SETTINGS))
def test_rollout_plays_a_whole_episode(env_id, history):
    client = ScriptedClient(ExpertReplies(env_id, 1, **SETTINGS[env_id]))
    trajectory = asyncio.run(rollout(Model(), 1, env_id=env_id, client=client, env_kwargs=SETTINGS[env_id], history=history))
    assert isinstance(trajectory, art.Trajectory) and trajectory.reward == 10.0 and trajectory.metrics["won"]
    assert trajectory.metadata["task_id"] == 1
    turns = trajectory.metrics["turns"]
    if history == "append":
        assert not trajectory.additional_histories and len(client.prompts[-1]) == 2 * turns - 1
    else:  # every prompt is one windowed message
        assert len(trajectory.additional_histories) == turns - 1 and {len(p) for p in client.prompts} == {1}


def test_groups_share_a_task_through_gather():
    env_id = "rspo/WebShop-v0"

    class GroupModel(Model):
        def openai_client(self):
            return ScriptedClient(ExpertReplies(env_id, self.task, **SETTINGS[env_id]))

    model = GroupModel()
    model.task = 2
    result = asyncio.run(groups(model, env_id, task_ids=[2], group_size=3, env_kwargs=SETTINGS[env_id]))
    assert len(result) == 1 and isinstance(result[0], art.TrajectoryGroup)
    assert [t.metadata["task_id"] for t in result[0].trajectories] == [2, 2, 2]
    assert [t.reward for t in result[0].trajectories] == [10.0] * 3


def test_importing_art_leaves_transformers_models_working():
    """``import art`` swaps transformers' mask helper for a wrapper written for transformers 5.2; with
    a later transformers every model's forward in the process then failed (missing 'layer_idx')."""
    import rspo_gym.integrations.art  # noqa: F401  (what a script using our rollouts imports)
    from rspo_gym.policies.models import load_model

    model, tokenizer = load_model("tiny", device="cpu")
    logits = model(**tokenizer(["go to countertop 1"], return_tensors="pt")).logits
    assert logits.shape[:2] == (1, len(tokenizer("go to countertop 1")["input_ids"]))
