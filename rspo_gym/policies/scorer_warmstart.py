"""Behaviour cloning of the envs' scripted experts into the fast action-scoring policy.

A from-scratch scorer almost never wins an ALFWorld task (all six types) in 50 steps, and tens of
thousands of RL steps do not change that, so, as the LLM comparison starts from its clone of the
expert, the fast comparison can start its ALFWorld cells from a *partial* clone: a few expert
episodes, a few epochs, so that the start wins some tasks and leaves room to learn.

- ``expert_choices``: expert episodes as ``StepRow`` s the way ``collect`` would record the
  scorer's own choices (same prompt, the admissible set as allowed ids, the expert's command as the
  response). WebShop's free-text search becomes the one search the scorer can make,
  ``search[<the task>]`` (``constrained_choices``).
- ``clone``: cross-entropy over the admissible set (the negative mean of ``forward``'s log-probs),
  Adam, seeded shuffling.
- ``partial_clone``: the benchmarks' start, a few expert episodes cloned for a few epochs, made
  once per seed and kept in a file (the comparisons' cells share it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import gymnasium as gym
import torch

import rspo_gym  # noqa: F401  (registers the environments)
from rspo_gym.errors import UserError
from rspo_gym.policies.action_scorer import ActionScorerPolicy
from rspo_gym.rollout.collector import constrained_choices
from rspo_gym.rollout.prompts import PromptBuilder, parse_action, template_for
from rspo_gym.safe_pickle import load_weights
from rspo_gym.rollout.trajectory import StepRow, to_batch

__all__ = ["expert_choices", "clone", "partial_clone"]


def expert_choices(policy: ActionScorerPolicy, env_id: str, episodes: int, *, history_length: int = 2,
                   seed: int = 0, env_kwargs: dict | None = None, task_ids: Sequence[int] | None = None) -> list[StepRow]:
    """Rows of ``episodes`` expert episodes (reset seeds ``seed``, ``seed + 1``, ...), prompts rendered
    by the collector's ``PromptBuilder`` with ``history_length``; steps whose expert command is not
    among the admissible choices are played but not recorded. ``task_ids``: the episodes play these
    tasks in turn (a task set of one type, say) instead of the tasks the reset seeds draw."""
    builder = PromptBuilder(template_for(env_id), history_length=history_length, think=False)
    env = gym.make(env_id, **(env_kwargs or {}))
    rows: list[StepRow] = []
    try:
        for episode in range(episodes):
            options = {"task_id": task_ids[episode % len(task_ids)]} if task_ids else None
            observation, info = env.reset(seed=seed + episode, options=options)
            history: list[tuple[str, str]] = []
            done = False
            while not done:
                task = info.get("task", "")
                choices = constrained_choices(info.get("admissible_actions", ()), task)
                action = parse_action(env.unwrapped.expert_action(), think=False).action
                chosen = f"search[{task.strip()}]" if action.startswith("search[") else action
                # as the collector makes a prompt: a memory scorer's ids then hold the whole episode's memory
                prompt = builder.fitted_ids(policy.tokenizer, task, observation, info.get("admissible_actions", ()), history).ids
                if chosen in choices:
                    ids = [policy.commands.id(c) for c in choices]
                    rows.append(StepRow(
                        prompt_ids=prompt, response_ids=[policy.commands.id(chosen)], logprobs=[0.0], reward=0.0,
                        process_reward=0.0, anchor=observation, valid=True, format_valid=True, group_id=episode,
                        traj_id=episode, step=len(history), action=chosen, source="expert", allowed_token_ids=[ids],
                    ))
                history.append((observation, chosen))
                observation, _, terminated, truncated, info = env.step(chosen)
                done = terminated or truncated
    finally:
        env.close()
    return rows


def clone(policy: ActionScorerPolicy, rows: list[StepRow], *, epochs: int = 2, batch_size: int = 64,
          learning_rate: float = 1e-3, seed: int = 0) -> list[float]:
    """Fit ``policy`` to the expert's choices; returns the mean loss (nats per choice) of each epoch."""
    if not rows:
        raise ValueError("no expert rows to clone")
    batch = to_batch(rows, policy.pad_token_id)
    optimizer = torch.optim.Adam(policy.policy_parameters(), lr=learning_rate)
    generator = torch.Generator().manual_seed(seed)
    losses = []
    policy.train(True)
    for _ in range(epochs):
        total = 0.0
        for part in torch.randperm(len(rows), generator=generator).split(batch_size):
            loss = -policy.forward(batch.index(part).trimmed())["logprobs"][:, 0].mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(part)
        losses.append(total / len(rows))
    policy.train(False)
    return losses


def partial_clone(policy: ActionScorerPolicy, env_id: str, episodes: int, epochs: int, *, seed: int,
                  history_length: int, cache: Path | None = None, expert_seed: int = 900_000,
                  task_ids: Sequence[int] | None = None) -> None:
    """Clone ``episodes`` expert episodes (reset seeds from ``expert_seed``, far from training
    draws; on ``task_ids`` in turn where given) into ``policy`` for ``epochs`` epochs, shuffled by
    ``seed``; with ``cache`` (a file), load it when it exists, else write it atomically (without
    the value head, which a PPO policy has and another lacks). A cache that cannot be loaded
    (damaged, refused by the safe reader, another policy's) is named in one line on stderr and
    made again: it is the same seeded clone, so a rebuild loses nothing but time."""
    if cache is not None and cache.exists():
        problem = _load_cache(policy, cache)
        if problem is None:
            return
        print(f"warning: the cached clone {cache} {problem}: cloning again", file=sys.stderr)
    rows = expert_choices(policy, env_id, episodes, history_length=history_length, seed=expert_seed, task_ids=task_ids)
    clone(policy, rows, epochs=epochs, learning_rate=3e-3, seed=seed)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        torch.save({k: v for k, v in policy.state_dict().items() if k != "value_head"}, tmp)
        os.replace(tmp, cache)


def _load_cache(policy: ActionScorerPolicy, cache: Path) -> str | None:
    """Load the cached clone into ``policy``; None when it loaded, else why not (a clause). The
    cache is checked whole before anything is loaded, so a rejected one leaves ``policy`` as it was."""
    try:
        state = load_weights(cache)
    except UserError as err:
        return str(err).removeprefix(f"{cache} ")
    own = policy.model.state_dict()
    model = state.get("model") if isinstance(state, dict) else None
    if not isinstance(model, dict) or set(model) != set(own) or any(
            not isinstance(model[k], torch.Tensor) or model[k].shape != own[k].shape for k in own):
        return "does not fit this policy (other weights)"
    commands, known = state.get("commands"), policy.commands.texts
    if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands) or commands[:len(known)] != known[:len(commands)]:
        return "does not fit this policy (other command ids)"
    policy.load_state_dict(state)
    return None
