"""verifiers (``verifiers.v1``): our envs as a taskset and an env, in the shape of verifiers' own
TextArena taskset (the game steps host-side, between ``interaction.turn()`` calls).

- ``RspoTaskset``: ``load()`` yields one ``RspoTask`` per task id (``TasksetConfig`` fields
  ``env_id``, ``env_kwargs``, ``num_tasks``, ``seed``); its prompt is the task's first prompt
  and ``data.info`` carries the task id and the episode's settings, so every rollout of a task
  (a group) plays that task. An unbounded split (ALFWorld ``train``) gives an infinite taskset
  (``INFINITE``), its ids drawn without ever listing the split.
- ``RspoEnv.run(task, agents)``: resets the env to the task, then sends each reply of the
  ``player`` agent to the env and the env's next message back as the next turn, until the
  episode ends; ``trace.record_reward("episode_reward", ...)`` (verl-agent's 10 × won by default)
  and ``trace.info`` (``won``, ``task_score``, ``turns``, ``task_id``).
- ``load_taskset(**fields)`` / ``load_environment(**fields)``: the two objects from keyword fields.
- ``TASKSET_ID`` (``rspo_gym_taskset``): the id verifiers resolves the package by. verifiers
  imports a taskset id as a top-level module, so importing this module also registers it under
  that name (its ``__all__`` exports one ``Taskset`` and one ``Env`` subclass, as verifiers'
  loader requires). For verifiers' command line, which starts a fresh process, put a one-line
  ``rspo_gym_taskset.py`` (``from rspo_gym.integrations.verifiers_taskset import *``) on the path.

Needs ``pip install verifiers`` (Python >= 3.11). verifiers' default harness runs the model in a
remote runtime that needs a Prime login; run locally with
``--env.player.harness.id null --env.player.runtime.type subprocess``.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf

from rspo_gym.integrations.episode import Episode, EpisodeConfig, first_prompts, task_ids
from rspo_gym.rollout.prompts import parse_action

__all__ = ["RspoTasksetConfig", "RspoData", "RspoTask", "RspoTaskset", "RspoEnvConfig", "RspoEnv", "load_taskset",
           "load_environment", "TASKSET_ID"]

TASKSET_ID = "rspo_gym_taskset"
sys.modules.setdefault(TASKSET_ID, sys.modules[__name__])


class RspoTasksetConfig(vf.TasksetConfig):
    env_id: str = "rspo/ALFWorld-v0"
    env_kwargs: dict = {}
    num_tasks: int | None = None
    """Tasks to yield; None: every task of a bounded split, endlessly drawn ids for an unbounded one."""
    seed: int = 0
    reward: str = "verl-agent"
    process_reward: str | None = None
    history: str = "append"
    history_length: int = 2
    think: bool = False
    max_turns: int | None = None


class RspoData(vf.TaskData):
    info: dict
    """The task id and the episode's settings (``EpisodeConfig`` fields)."""


class RspoTask(vf.Task[RspoData, vf.State, vf.TaskConfig]):
    pass


class RspoEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class RspoEnv(vf.Env[RspoEnvConfig]):
    async def run(self, task: RspoTask, agents: Any) -> None:
        episode = Episode(EpisodeConfig(**task.data.info["episode"]))
        episode.reset(task.data.info["task_id"])
        tail = episode.builder.template.tail_chars
        try:
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()  # the task prompt is the first prompt
                while not segment.terminated:
                    reply = parse_action(segment.last_reply or "", think=episode.config.think, tail_chars=tail)
                    turn = episode.step(reply.action)
                    if turn.done:
                        break
                    segment = await interaction.turn(turn.message)
            trace = interaction.trace
            result = episode.result()
            trace.record_reward("episode_reward", result["reward"], 1.0)
            trace.info.update(won=result["won"], task_score=result["task_score"], turns=result["turns"], task_id=result["task_id"])
        finally:
            episode.close()


class RspoTaskset(vf.Taskset[RspoTask, RspoTasksetConfig]):
    def __init__(self, config: RspoTasksetConfig) -> None:
        super().__init__(config)
        self.episode = {"env_id": config.env_id, "env_kwargs": dict(config.env_kwargs), "reward": config.reward,
                        "process_reward": config.process_reward, "history": config.history,
                        "history_length": config.history_length, "think": config.think, "max_turns": config.max_turns}
        probe = Episode(EpisodeConfig(**self.episode))
        self.size = probe.num_tasks
        probe.close()
        self.INFINITE = config.num_tasks is None and self.size is None

    def _ids(self) -> Iterator[int]:
        if self.config.num_tasks is not None:
            yield from task_ids(self.size, self.config.num_tasks, self.config.seed)
        elif self.size is not None:
            yield from range(self.size)
        else:
            for block in itertools.count():  # unbounded: draw ids in blocks, never enumerate the split
                yield from task_ids(None, 256, self.config.seed + block)

    def load(self) -> Iterator[RspoTask]:
        config = EpisodeConfig(**self.episode)
        for task_id in self._ids():
            (prompt,) = first_prompts(config, [task_id])
            yield RspoTask(RspoData(name=f"{self.config.env_id}#{task_id}", prompt=prompt,
                                    info={"task_id": task_id, "episode": self.episode}), self.config.task)


def load_taskset(**fields: Any) -> RspoTaskset:
    """The taskset from ``RspoTasksetConfig`` fields (``env_id``, ``env_kwargs``, ``num_tasks``, ...)."""
    return RspoTaskset(RspoTasksetConfig(**{"id": TASKSET_ID, **fields}))


def load_environment(**fields: Any) -> RspoEnv:
    """The env over ``load_taskset(**fields)``'s tasks, its ``player`` agent at verifiers' defaults."""
    return RspoEnv(RspoEnvConfig(taskset=RspoTasksetConfig(**{"id": TASKSET_ID, **fields})))
