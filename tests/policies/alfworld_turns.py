"""ALFWorld turns as the collector prompts them: what the constrained-generation tests feed a policy."""

from __future__ import annotations

from typing import Callable

import gymnasium as gym

import rspo_gym  # noqa: F401  (registers the environments)
from rspo_gym.rollout.collector import CollectConfig, constrained_choices

ALFWORLD = "rspo/ALFWorld-v0"


def alfworld_turns(tokenizer, action_at: Callable[[int], int] = lambda step: 0) -> list[tuple[list[int], list[str]]]:
    """(prompt ids, allowed replies) of the first two turns of ALFWorld seeds 0-2, taking admissible
    action ``action_at(step)`` at each step, so prompts differ in length and history."""
    builder = CollectConfig().builder(ALFWORLD)
    env = gym.make(ALFWORLD)
    out = []
    for seed in (0, 1, 2):
        obs, info = env.reset(seed=seed)
        history: list[tuple[str, str]] = []
        for step in range(2):
            prompt = builder.build(info["task"], obs, info["admissible_actions"], history)
            out.append((builder.chat_ids(tokenizer, prompt), constrained_choices(info["admissible_actions"], info["task"])))
            action = info["admissible_actions"][action_at(step)]
            history.append((obs, action))
            obs, _, _, _, info = env.step(action)
    env.close()
    return out
