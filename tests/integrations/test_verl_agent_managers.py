"""verl-agent's own ``AlfWorldEnvironmentManager`` / ``WebshopEnvironmentManager``, projections and
``success_evaluator`` over our builders, one whole episode per env with a scripted policy (the
env experts' actions in verl-agent's ``<think>``/``<action>`` reply format).

verl-agent is not on PyPI: point ``VERL_AGENT_SRC`` at a checkout (its ``agent_system`` package
needs torch, numpy and omegaconf for these modules); the test skips without it. The loop is
``TrajectoryCollector``'s (step every env, keep its active masks, stop when all are done), written
out here because the collector itself imports verl."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

SRC = os.environ.get("VERL_AGENT_SRC")
pytestmark = pytest.mark.skipif(not SRC or not (Path(SRC) / "agent_system").is_dir(), reason="VERL_AGENT_SRC not set to a verl-agent checkout")


@pytest.fixture(scope="module")
def verl_agent():
    pytest.importorskip("omegaconf")
    pytest.importorskip("torch")
    sys.path.insert(0, SRC)
    try:
        from agent_system.environments import env_manager
    finally:
        sys.path.remove(SRC)

    from rspo_gym.integrations import verl_agent as ours

    def projection(env):  # as the page's import gives it: verl-agent's own, its package __init__ (Ray workers, TextWorld) not run
        return getattr(ours, f"{env}_projection")

    return env_manager, projection


def collect(manager, experts, max_steps):
    """TrajectoryCollector's loop: every env stepped each turn, rows kept while active."""
    observations, infos = manager.reset({})
    n = len(observations["text"])
    active = [True] * n
    total_batch_list, total_infos, rewards = [[] for _ in range(n)], [[] for _ in range(n)], [0.0] * n
    for _ in range(max_steps):
        replies = [f"<think>scripted</think><action>{expert(i)}</action>" for i, expert in enumerate(experts)]
        observations, step_rewards, dones, infos = manager.step(replies)
        for i in range(n):
            total_batch_list[i].append({"active_masks": active[i]})
            total_infos[i].append(infos[i])
            rewards[i] += float(step_rewards[i]) if active[i] else 0.0
            active[i] = active[i] and not bool(dones[i])
        if not any(active):
            break
    return observations, rewards, manager.success_evaluator(total_infos=total_infos, total_batch_list=total_batch_list)


def test_alfworld_manager_runs_on_our_builder(verl_agent):
    from omegaconf import OmegaConf

    from rspo_gym.integrations.verl_agent import build_alfworld_envs

    env_manager, projection = verl_agent
    envs = build_alfworld_envs(None, 0, 1, 2, {"num_cpus": 0.1}, is_train=False, env_kwargs={"eval_dataset": "eval_in_distribution"})
    manager = env_manager.AlfWorldEnvironmentManager(envs, projection("alfworld"), OmegaConf.create({"env": {"history_length": 2}}))
    games = [slot.envs[0] for slot in envs.envs]
    experts = [lambda i: games[0].expert_action() if i == 0 else "look"] * 2
    observations, rewards, success = collect(manager, experts, 50)
    assert rewards == [10.0, 0.0] and list(success["success_rate"]) == [1.0, 0.0]
    assert "Prior to this step, you have already taken" in observations["text"][1]
    assert sum(len(v) for k, v in success.items() if k.endswith("_success_rate") and k != "success_rate") == 2


def test_webshop_manager_runs_on_our_builder(verl_agent):
    from omegaconf import OmegaConf

    from rspo_gym.envs.webshop.expert import ScriptedShopper
    from rspo_gym.integrations.verl_agent import build_webshop_envs

    env_manager, projection = verl_agent
    envs = build_webshop_envs(0, 1, 1, {"num_cpus": 0.1}, is_train=False, env_kwargs={"observation_mode": "text", "num_products": 200})
    manager = env_manager.WebshopEnvironmentManager(envs, projection("webshop"), OmegaConf.create({"env": {"history_length": 2}}))
    first, _ = manager.reset({})
    assert "'search[<your query>]',\n'click[search]'," in first["text"][0]  # verl-agent's listing of upstream's clickables
    shop = envs.envs[0]
    shopper = []

    def expert(i):
        if not shopper:
            shopper.append(ScriptedShopper(shop.get_instruction_text()))
        return shopper[0].act(shop.observation, shop.get_available_actions())

    observations, rewards, success = collect(manager, [expert], 15)
    assert success["success_rate"][0] == float(rewards[0] == 10.0)
    assert 0.0 < success["webshop_task_score (not success_rate)"][0] <= 1.0
