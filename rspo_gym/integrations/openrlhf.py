"""OpenRLHF (``--agent_func_path``): an agent file and a task exporter for our envs.

OpenRLHF's multi-turn path loads a Python file that defines ``AgentExecutor`` (a
``MultiTurnAgentExecutor`` over an ``AgentInstance`` class) and runs, per prompt of its dataset,
``reset({"observation": prompt, "label": label})`` then ``step(...)`` until ``done``, appending each
``environment_feedback`` text to the sequence. Two calls prepare a run::

    from rspo_gym.integrations import openrlhf as rspo_openrlhf
    rspo_openrlhf.export_tasks("alfworld_tasks.jsonl", "rspo/ALFWorld-v0", num_tasks=512)
    rspo_openrlhf.write_agent_file("alfworld_agent.py", "rspo/ALFWorld-v0", tokenizer="Qwen/Qwen2.5-1.5B-Instruct")
    # openrlhf.cli.train_ppo_ray ... --prompt_data alfworld_tasks.jsonl --input_key prompt --label_key label \
    #     --apply_chat_template --agent_func_path alfworld_agent.py

- The task id travels in ``label`` (OpenRLHF's one per-sample field besides the prompt): a JSON
  object ``{"task_id": k}``, so the ``n_samples_per_prompt`` copies of a prompt play one task.
- OpenRLHF concatenates raw text, so each feedback carries the chat markers around a user turn;
  they are read from the tokenizer's chat template (``chat_markers``), not hard-coded.
- ``rewards`` is verl-agent's (10 × won by default) and ``scores`` the same; ``extra_logs`` has
  ``won``, ``task_score`` and ``turns``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from rspo_gym.integrations.episode import Episode, EpisodeConfig, first_prompts, task_ids
from rspo_gym.rollout.prompts import parse_action

__all__ = ["chat_markers", "agent_classes", "export_tasks", "write_agent_file"]


def chat_markers(tokenizer: Any) -> tuple[str, str]:
    """``(between, after)``: the text a chat template puts between an assistant reply and the next
    user message's content, and after that content up to the next assistant reply."""
    messages = [{"role": "user", "content": "\x00U\x00"}, {"role": "assistant", "content": "\x00A\x00"},
                {"role": "user", "content": "\x00F\x00"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    between = text[text.index("\x00A\x00") + 3: text.index("\x00F\x00")]
    after = text[text.index("\x00F\x00") + 3:]
    return between, after


def agent_classes(config: Mapping[str, Any], tokenizer: Any = None) -> tuple[type, type]:
    """``(AgentInstance, AgentExecutor)`` for OpenRLHF, from ``EpisodeConfig`` fields (``config``)
    and the tokenizer whose chat markers frame the feedback (a name/path, or a tokenizer)."""
    try:
        from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor
    except ImportError as error:
        raise ImportError("rspo_gym.integrations.openrlhf needs OpenRLHF (pip install openrlhf)") from error
    if isinstance(tokenizer, (str, os.PathLike)):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tokenizer)
    between, after = chat_markers(tokenizer) if tokenizer is not None else ("\n", "\n")
    episode_config = EpisodeConfig(**dict(config))

    class AgentInstance(AgentInstanceBase):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.episode = Episode(episode_config)
            self._tail = self.episode.builder.template.tail_chars

        async def reset(self, states: dict, **kwargs: Any) -> dict:
            self.episode.reset(json.loads(states["label"])["task_id"])
            return {"observation": states["observation"]}

        async def step(self, states: dict, **kwargs: Any) -> dict:
            import torch

            reply = states["action_text"]
            parsed = parse_action(reply, think=episode_config.think, tail_chars=self._tail)
            turn = self.episode.step(parsed.action)
            lead = between
            end = getattr(tokenizer, "eos_token", None)
            if end and reply.endswith(end) and lead.startswith(end):
                lead = lead[len(end):]  # the reply already closed its turn
            feedback = "" if turn.done else f"{lead}{turn.message}{after}"
            result = self.episode.result()
            return {
                "rewards": torch.tensor(turn.reward),
                "scores": torch.tensor(result["reward"]),
                "environment_feedback": feedback,
                "done": turn.done,
                "extra_logs": {"won": float(result["won"]), "task_score": result["task_score"], "turns": result["turns"]},
            }

    class AgentExecutor(MultiTurnAgentExecutor):
        def __init__(self) -> None:
            super().__init__(AgentInstance)

    return AgentInstance, AgentExecutor


def export_tasks(path: str | os.PathLike, env_id: str = "rspo/ALFWorld-v0", num_tasks: int = 256, *, seed: int = 0,
                 env_kwargs: Mapping[str, Any] | None = None) -> Path:
    """A JSONL prompt file: ``{"prompt": first prompt, "label": "{\\"task_id\\": k}"}`` per task."""
    config = EpisodeConfig(env_id=env_id, env_kwargs=dict(env_kwargs or {}))
    probe = Episode(config)
    ids = task_ids(probe.num_tasks, num_tasks, seed)
    probe.close()
    path = Path(path)
    with path.open("w", encoding="utf-8") as out:
        for task_id, prompt in zip(ids, first_prompts(config, ids)):
            out.write(json.dumps({"prompt": prompt, "label": json.dumps({"task_id": task_id})}) + "\n")
    return path


_AGENT_FILE = '''"""OpenRLHF agent file for {env_id}, written by rspo_gym.integrations.openrlhf.write_agent_file."""
import json

from rspo_gym.integrations.openrlhf import agent_classes

CONFIG = json.loads({config!r})
AgentInstance, AgentExecutor = agent_classes(CONFIG, tokenizer={tokenizer!r})
'''


def write_agent_file(path: str | os.PathLike, env_id: str = "rspo/ALFWorld-v0", *, tokenizer: str | None = None,
                     **options: Any) -> Path:
    """Write the ``--agent_func_path`` file: ``AgentExecutor`` for ``env_id`` (``options`` are
    ``EpisodeConfig`` fields; ``tokenizer`` the model's name or path, for its chat markers)."""
    config = {"env_id": env_id, **options}
    EpisodeConfig(**config)  # refuse a bad option now, not inside a Ray actor later
    path = Path(path)
    path.write_text(_AGENT_FILE.format(env_id=env_id, config=json.dumps(config), tokenizer=tokenizer), encoding="utf-8")
    return path
