"""verifiers' own loader resolves our taskset package by id, its views select tasks, and
``RspoEnv.run`` plays whole episodes between ``interaction.turn()`` calls. The agent side is a
scripted stand-in for verifiers' harness (which launches a chat program through ``uv`` and needs
the network), answering the env experts' actions."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from types import SimpleNamespace

import pytest

pytest.importorskip("verifiers.v1")
from verifiers.v1.utils.loaders import environment_class, taskset_class  # noqa: E402

from rspo_gym.integrations import verifiers_taskset as rspo_vf  # noqa: E402
from tests.integrations.scripted import ExpertReplies  # noqa: E402

SETTINGS = {"rspo/ALFWorld-v0": {"split": "valid_seen"}, "rspo/WebShop-v0": {"num_products": 200, "split": "test"}}


class Trace:
    def __init__(self):
        self.rewards, self.info = {}, {}

    def record_reward(self, name, value, weight):
        self.rewards[name] = (value, weight)


class ScriptedPlayer:
    """``agents.player``: ``interaction(task)`` whose ``turn(message)`` returns the expert's reply."""

    def __init__(self, replies: ExpertReplies):
        self.replies, self.messages = replies, []

    @asynccontextmanager
    async def interaction(self, task):
        self.messages.append(task.data.prompt)
        player = self

        class Interaction:
            trace = Trace()

            async def turn(self, message=None):
                if message is not None:
                    player.messages.append(message)
                return SimpleNamespace(terminated=False, last_reply=player.replies.next())

        yield Interaction()


def test_verifiers_resolves_the_package_by_id():
    assert taskset_class(rspo_vf.TASKSET_ID) is rspo_vf.RspoTaskset
    assert environment_class(rspo_vf.TASKSET_ID) is rspo_vf.RspoEnv


@pytest.mark.parametrize("env_id", list(SETTINGS))
def test_env_run_plays_a_whole_episode(env_id):
    env = rspo_vf.load_environment(env_id=env_id, env_kwargs=SETTINGS[env_id], num_tasks=3)
    tasks = list(env.taskset)
    assert len(tasks) == 3 and len({t.data.info["task_id"] for t in tasks}) == 3
    task = next(iter(env.taskset.include(idx=["1:2"])))  # verifiers' own view picks the task
    player = ScriptedPlayer(ExpertReplies(env_id, task.data.info["task_id"], **SETTINGS[env_id]))
    traces = []
    original = player.interaction

    @asynccontextmanager
    async def recording(task):
        async with original(task) as interaction:
            traces.append(interaction.trace)
            yield interaction

    player.interaction = recording
    asyncio.run(env.run(task, SimpleNamespace(player=player)))
    trace = traces[0]
    assert trace.rewards["episode_reward"] == (10.0, 1.0) and trace.info["won"] and trace.info["task_id"] == task.data.info["task_id"]
    assert player.messages[0] == task.data.prompt and len(player.messages) == trace.info["turns"]


def test_unbounded_split_is_an_infinite_taskset():
    taskset = rspo_vf.load_taskset(env_id="rspo/ALFWorld-v0")  # generated train: num_tasks None
    assert taskset.INFINITE and not taskset.bounded
    assert len(list(taskset.take(3))) == 3
