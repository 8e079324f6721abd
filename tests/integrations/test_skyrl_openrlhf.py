"""SkyRL's registry and ``BaseTextEnv`` contract, and OpenRLHF's own ``MultiTurnAgentExecutor``
loading our agent file: a whole ALFWorld and WebShop episode each, with a scripted policy (the
envs' experts). Skipped where the peer is not installed."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from types import SimpleNamespace

import pytest

from rspo_gym.integrations.episode import EPISODE_OVER

SETTINGS = {"rspo/ALFWorld-v0": {"split": "valid_seen"}, "rspo/WebShop-v1": {"num_products": 200, "split": "test"}}
NAMES = {"rspo/ALFWorld-v0": "rspo_alfworld", "rspo/WebShop-v1": "rspo_webshop"}  # WebShop: the calibrated tasks


@pytest.mark.parametrize("env_id", list(SETTINGS))
def test_skyrl_episode_through_its_registry(env_id):
    skyrl_gym = pytest.importorskip("skyrl_gym")
    from rspo_gym.integrations.skyrl import register_skyrl_envs, skyrl_dataset_rows

    assert set(register_skyrl_envs()) == set(NAMES.values())
    row = skyrl_dataset_rows(NAMES[env_id], 2, env_kwargs=SETTINGS[env_id])[0]
    envs = [skyrl_gym.make(row["env_class"], env_config={"env_kwargs": SETTINGS[env_id]}, extras=row) for _ in range(2)]
    chats = [env.init(row["prompt"])[0] for env in envs]
    assert chats[0] == chats[1] and chats[0][-1]["role"] == "user" and chats[0][-1]["content"]  # one task per group
    env, chat = envs[0], chats[0]
    assert env.episode.env.spec.id == env_id
    while True:
        reply = env.episode.env.unwrapped.expert_action()  # the scripted policy
        out = env.step(f"{reply}")
        chat += out["observations"]
        if out["done"]:
            break
    assert out["reward"] == 10.0 and out["metadata"]["won"] and out["observations"] == []
    assert env.max_turns == {"rspo/ALFWorld-v0": 50, "rspo/WebShop-v1": 15}[env_id]
    metrics = env.get_metrics()
    assert metrics[f"{NAMES[env_id]}/won"] == 1.0 and all(key.startswith(NAMES[env_id] + "/") for key in metrics)


class ScriptedEngine:
    """A stand-in for OpenRLHF's vLLM engine: ``generate`` answers the expert's next action."""

    def __init__(self, executor_instances, tokenizer):
        self.instances, self.tokenizer = executor_instances, tokenizer

    async def generate(self, tokens, sampling_params, multi_modal_data=None):
        action = self.instances[-1].episode.env.unwrapped.expert_action()
        ids = self.tokenizer(action, add_special_tokens=False)["input_ids"]
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=action, finish_reason="stop")])


@pytest.mark.parametrize("env_id", list(SETTINGS))
def test_openrlhf_executor_runs_our_agent_file(env_id, tmp_path):
    pytest.importorskip("openrlhf.utils.agent")
    from openrlhf.utils.agent import AgentExecutorBase
    from rspo_gym.integrations import openrlhf as rspo_openrlhf
    from rspo_gym.policies.models import load_model

    tasks = rspo_openrlhf.export_tasks(tmp_path / "tasks.jsonl", env_id, 3, env_kwargs=SETTINGS[env_id])
    first = json.loads(tasks.read_text().splitlines()[0])
    agent = rspo_openrlhf.write_agent_file(tmp_path / "agent.py", env_id, env_kwargs=SETTINGS[env_id])
    spec = importlib.util.spec_from_file_location("agent_module", agent)  # as OpenRLHF's _load_agent_executor
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert issubclass(module.AgentExecutor, AgentExecutorBase)
    made = []

    class Recording(module.AgentInstance):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    executor = module.AgentExecutor()
    executor.agent_instance_cls = Recording
    _, tokenizer = load_model("tiny", device="cpu")
    params = SimpleNamespace(logprobs=None, max_tokens=None)
    result = asyncio.run(executor.execute(first["prompt"], first["label"], params, 8192, tokenizer, ScriptedEngine(made, tokenizer)))
    assert result["reward"] == 10.0 and result["extra_logs"]["won"] == 1.0
    assert made[0].episode.task_id == json.loads(first["label"])["task_id"]
    assert len(result["action_ranges"]) == made[0].episode.turns


def test_openrlhf_chat_markers_come_from_the_template():
    pytest.importorskip("openrlhf.utils.agent")
    from rspo_gym.integrations.openrlhf import agent_classes, chat_markers
    from rspo_gym.policies.models import load_model

    _, tokenizer = load_model("tiny", device="cpu")
    assert chat_markers(tokenizer) == ("<|im_end|>\n<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n")
    instance_cls, _ = agent_classes({"env_id": "rspo/WebShop-v1", "env_kwargs": SETTINGS["rspo/WebShop-v1"], "max_turns": 2}, tokenizer)
    agent = instance_cls()
    asyncio.run(agent.reset({"observation": "x", "label": json.dumps({"task_id": 0})}))
    step = asyncio.run(agent.step({"action_text": "search[shoes]<|im_end|>", "label": ""}))
    assert step["environment_feedback"].startswith("\n<|im_start|>user\n") and step["environment_feedback"].endswith("assistant\n")
    last = asyncio.run(agent.step({"action_text": "click[back to search]", "label": ""}))
    assert last["done"] and last["environment_feedback"] == "" and agent.episode.step("x").message == EPISODE_OVER
