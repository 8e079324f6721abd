"""Recorded ``rspo/WebShop-v0`` episodes: the fixture that keeps v0 bit-identical.

``record()`` plays a few episodes (the scripted expert and the seeded random policy, on test and
train goals of two catalog sizes) and returns every observation, action and reward;
``tests/envs/webshop/data/v0_episodes.json`` holds what it returned before ``rspo/WebShop-v1``
existed. Re-record (``python tests/envs/webshop/v0_episodes.py``) only for a deliberate change of
v0, which old results would then no longer reproduce.
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym

import rspo_gym  # noqa: F401

FIXTURE = Path(__file__).resolve().parent / "data" / "v0_episodes.json"
#: (num_products, split, task_id, policy)
EPISODES = (
    (300, "test", 0, "expert"), (300, "test", 7, "expert"), (300, "train", 11, "random"),
    (1000, "test", 3, "expert"), (1000, "valid", 5, "random"), (1000, "test", 42, "rule"),
)


def play(num_products: int, split: str, task_id: int, policy: str) -> dict:
    env = gym.make("rspo/WebShop-v0", num_products=num_products, split=split)
    obs, info = env.reset(seed=task_id, options={"task_id": task_id})
    steps = [{"obs": obs, "action": None, "reward": 0.0}]
    done = trunc = False
    while not (done or trunc):
        if policy == "expert":
            action = env.unwrapped.expert_action()
        elif policy == "random":
            action = env.unwrapped.sample_admissible()
        else:  # the rule: search the instruction, first result, buy
            action = (f"search[{info['task']}]" if len(steps) == 1
                      else next(a for a in info["admissible_actions"] if a.startswith("click[b0"))
                      if len(steps) == 2 else "click[buy now]")
        obs, reward, done, trunc, info = env.step(action)
        steps.append({"obs": obs, "action": action, "reward": reward})
    env.close()
    return {"num_products": num_products, "split": split, "task_id": task_id, "policy": policy,
            "steps": steps}


def record() -> list[dict]:
    return [play(*e) for e in EPISODES]


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(record(), indent=0) + "\n", encoding="utf-8")
