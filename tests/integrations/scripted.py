"""A scripted stand-in for a chat model: it keeps its own copy of the env, plays the env's expert in
it, and answers each chat call with the expert's next action (the envs are deterministic, so the
copy stays in step with the env the peer drives)."""

from __future__ import annotations

import gymnasium as gym

import rspo_gym  # noqa: F401


class ExpertReplies:
    def __init__(self, env_id: str, task_id: int, **env_kwargs):
        self.env = gym.make(env_id, **env_kwargs)
        self.env.reset(options={"task_id": task_id})
        self.calls = 0

    def next(self) -> str:
        action = self.env.unwrapped.expert_action()
        self.env.step(action)
        self.calls += 1
        return action
