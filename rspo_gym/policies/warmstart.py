"""Supervised warm start: behaviour cloning of the environments' scripted experts.

A randomly initialised policy (the ``tiny`` preset) almost never wins an ALFWorld task in 50
steps, so RL from scratch sees no reward. Cloning the expert first gives RL a policy that already
wins some tasks, cheaply: the experts are scripted and the clone trains in minutes on a CPU.

- ``expert_demonstrations``: plays ``env.unwrapped.expert_action()`` and records one ``StepRow``
  per step whose prompt is token-for-token the one ``rollout.collector.collect`` would build in
  the same state (same ``PromptBuilder``, same history of parsed actions) and whose response is
  the expert's reply followed by the end token, i.e. what constrained decoding emits.
- ``behaviour_clone``: cross-entropy on response tokens only (the negative token-mean of
  ``LLMPolicy.forward``'s teacher-forced log-probs), AdamW, seeded shuffling.
- ``WarmStartConfig`` / ``warm_start``: both in one call with documented defaults.

Results (the defaults: 600 pick_and_place_simple episodes = 4179 rows, history 6, 8 epochs of
batch 16 = 2096 AdamW steps, lr 3e-3 with 30 warm-up steps and cosine decay; ``tiny`` in float32;
constrained decoding, 50-step limit, all 140 generated ``valid_seen`` tasks). Weights cloned by
``benchmarks/warmstart.py --device cuda --splits valid_seen --temperature 0`` on an H200,
then evaluated again on the CPU (greedy: identical); T = 0.5 is seeded sampling (seed 0) on the CPU::

    task type                        greedy        T = 0.5
    pick_and_place_simple             6/35  17%    11/35  31%
    look_at_obj_in_light              0/13   0%     0/13   0%
    pick_clean_then_place_in_recep    0/27   0%     0/27   0%
    pick_heat_then_place_in_recep     0/16   0%     0/16   0%
    pick_cool_then_place_in_recep     0/25   0%     0/25   0%
    pick_two_obj_and_place            0/24   0%     0/24   0%
    overall                                4.3%           7.9%

On the 35 pick-and-place tasks alone (another batch, so other random draws) T = 0.5 won 12/35
with seeds 0 and 1 and 15/35 with seed 2: the issue's >= 30 % holds with low-temperature
sampling only; greedy decoding loops (episodes run to the limit) and wins 17 %. Only the
simplest type was cloned, so the other types fail. On ``valid_unseen`` (unseen rooms) the 24
pick-and-place tasks: 8/24 (33 %) at T = 0.5, 3/24 greedy.

Cost: cloning took 32 s on an H200 (plus 7 s of demonstrations); on one CPU thread a row-pass
costs ~0.07 s, so the same run is ~35-40 CPU minutes, not the ~10 hoped for. In a 16-config
sweep (GPU, 35 pick-and-place tasks each at temperatures 0 / 0.3 / 0.6) success tracked the
number of row-passes and the final loss (0.32 nats/token for 2000 steps of 16 rows, 8 / 6 / 9
wins; 0.5-0.9 elsewhere); ~1000 steps of 8 rows (~10 CPU minutes) won 0-1 of 35 greedy and 0-5
sampled at history 2, 4, 6 or 8; lr 1e-3 and 6e-3 did worse than 3e-3; the 4.2M-parameter
``small`` preset did no better than ``tiny`` at equal steps; cloning all six types (1000
episodes, 2000 steps of 8) won 2-6/35 pick-and-place and at most 3 other tasks.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Sequence

import gymnasium as gym
import torch

import rspo_gym  # noqa: F401  (registers the environments)
from rspo_gym.policies.hf_backend import allowed_token_ids, eos_token_ids
from rspo_gym.rollout.collector import constrained_choices
from rspo_gym.policies.llm import LLMPolicy
from rspo_gym.rollout.prompts import PROMPT_FORMATS, Conversation, PromptBuilder, parse_action, template_for
from rspo_gym.rollout.trajectory import StepRow, micro_batches, rows_by_key, to_batch

__all__ = ["WarmStartConfig", "expert_demonstrations", "behaviour_clone", "warm_start"]

#: batches per length-sorting pool in ``behaviour_clone`` (see ``_length_buckets``)
BUCKET_POOL = 16


def expert_demonstrations(
    env_id: str,
    episodes: int,
    tokenizer,
    end_token_id: int,
    *,
    builder: PromptBuilder | None = None,
    seed: int = 0,
    env_kwargs: dict | None = None,
    task_types: Sequence[str] | None = None,
    prompt_format: str = "window",
    constrained: bool = False,
    explore: float = 0.0,
) -> list[StepRow]:
    """Step rows of ``episodes`` expert episodes, rendered as the collector renders prompts.

    Episode ``e`` resets with ``seed + e`` (the train split picks its task from the seed); with
    ``task_types``, episodes of other types are skipped (not counted) until ``episodes`` are
    played. Every episode is kept, won or not (the ALFWorld expert always wins; WebShop's ~97 %).
    Rows carry ``source="expert"``, ``traj_id = group_id = e`` and zero behaviour log-probs.

    Args:
        env_id: a registered text env with an ``expert_action()`` (ALFWorld, WebShop).
        episodes: episodes to record.
        tokenizer: the policy's tokenizer (chat template included).
        end_token_id: the token that ends a reply (``eos_token_ids(model, tokenizer)[0]``).
        builder: the prompt builder; default ``PromptBuilder(template_for(env_id), 2, think=False)``,
            the collector's default. Must not ask for ``<think>`` tags (the expert gives none).
        seed: first reset seed.
        env_kwargs: ``gym.make`` keyword arguments (default: none, i.e. the train split).
        task_types: keep only episodes whose ``info["task_type"]`` is one of these.
        prompt_format: ``"window"`` (``builder``'s prompts) or ``"conversation"`` (a
            ``Conversation`` in ``builder``'s wording, without the action list, as the collector
            builds it for constrained replies).
        constrained: record each reply position's allowed ids among the admissible actions
            (``StepRow.allowed_token_ids``), so that cloning fits the distribution constrained
            decoding samples (``restricted_logprobs``) rather than the whole vocabulary's. An expert
            reply outside the admissible actions keeps the whole vocabulary.
        explore: the chance that a step plays a random admissible action instead of the expert's
            (seeded by the episode's reset seed). The expert replans from wherever that leaves it,
            so the clone also learns to recover from states the expert alone never visits, which
            a sampling policy reaches at once. The detour's own step is not a row: its reply is
            not the one played, so in a conversation it would break the episode's nesting (one
            packed pass per episode).
    """
    if prompt_format not in PROMPT_FORMATS:
        raise ValueError(f"prompt_format must be one of {PROMPT_FORMATS}, not {prompt_format!r}")
    builder = builder if builder is not None else PromptBuilder(template_for(env_id), history_length=2, think=False)
    if builder.think:
        raise ValueError("expert replies are bare actions: use a PromptBuilder with think=False")
    wanted = set(task_types) if task_types is not None else None
    env = gym.make(env_id, **(env_kwargs or {}))
    rows: list[StepRow] = []
    played, reset_seed = 0, seed
    try:
        while played < episodes:
            observation, info = env.reset(seed=reset_seed)
            reset_seed += 1
            if wanted is not None and info.get("task_type") not in wanted:
                continue
            history: list[tuple[str, str]] = []
            detours = random.Random(reset_seed - 1)
            chat = None
            if prompt_format == "conversation":
                chat = Conversation(builder, tokenizer, end_token_id)
                chat.open(info.get("task", ""), observation, info.get("admissible_actions", ()))
            done = False
            while not done:
                reply = env.unwrapped.expert_action()
                action = parse_action(reply, think=False, tail_chars=builder.template.tail_chars).action
                if chat is not None:
                    prompt_ids = chat.prompt().ids
                else:
                    prompt = builder.build(info.get("task", ""), observation, info.get("admissible_actions", ()), history)
                    prompt_ids = builder.chat_ids(tokenizer, prompt)
                response_ids = tokenizer(reply, add_special_tokens=False)["input_ids"] + [end_token_id]
                allowed = None
                choices = constrained_choices(info.get("admissible_actions", ()), info.get("task", "")) if constrained or explore > 0 else []
                if constrained and reply in choices:
                    allowed = allowed_token_ids(tokenizer, choices, response_ids, end_token_id)
                anchor = info.get("anchor", observation)
                played_ids = response_ids
                detour = explore > 0 and bool(choices) and detours.random() < explore
                if detour:
                    action = detours.choice(choices)
                    played_ids = tokenizer(action, add_special_tokens=False)["input_ids"] + [end_token_id]
                next_observation, reward, terminated, truncated, info = env.step(action)
                if not detour:
                    rows.append(
                        StepRow(
                            prompt_ids=list(prompt_ids),
                            response_ids=response_ids,
                            logprobs=[0.0] * len(response_ids),
                            reward=float(reward),
                            process_reward=float(info.get("process_reward", 0.0)),
                            anchor=anchor,
                            valid=bool(info.get("valid", True)),
                            format_valid=True,
                            group_id=played,
                            traj_id=played,
                            step=len(history),
                            action=action,
                            source="expert",
                            allowed_token_ids=allowed,
                        )
                    )
                history.append((observation, action))
                observation = next_observation
                done = terminated or truncated
                if chat is not None and not done:
                    chat.append(played_ids, observation, info.get("admissible_actions", ()))
            played += 1
    finally:
        env.close()
    return rows


def _length_buckets(rows: Sequence[StepRow], batch_size: int, generator: torch.Generator) -> list[list[int]]:
    """Shuffled mini-batches of row indices, each drawn from rows of similar length.

    A random permutation is cut into pools of ``BUCKET_POOL`` batches; each pool is sorted by
    prompt + response length and cut into batches, and the batches are shuffled again. Prompts
    range from ~300 to ~1100 tokens, so this roughly halves the padding the model runs on.
    """
    order = torch.randperm(len(rows), generator=generator).tolist()
    pool = batch_size * BUCKET_POOL
    batches: list[list[int]] = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start:start + pool], key=lambda i: len(rows[i].prompt_ids) + len(rows[i].response_ids))
        batches += [chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size)]
    return [batches[k] for k in torch.randperm(len(batches), generator=generator).tolist()]


def _episode_batches(rows: Sequence[StepRow], batch_size: int, generator: torch.Generator) -> list[list[int]]:
    """Shuffled mini-batches of whole episodes (``traj_id``), each filled to at least ``batch_size``
    rows: a conversation's rows nest, so a batch that holds its episodes whole runs one packed
    sequence per episode (``LLMPolicy.forward``) instead of one per row."""
    episodes = rows_by_key([row.traj_id for row in rows])
    order = [episodes[k] for k in torch.randperm(len(episodes), generator=generator).tolist()]
    batches: list[list[int]] = [[]]
    for episode in order:
        if len(batches[-1]) >= batch_size:
            batches.append([])
        batches[-1] += episode
    return batches


def behaviour_clone(
    policy: LLMPolicy,
    demos: Sequence[StepRow],
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
    max_grad_norm: float = 1.0,
    weight_decay: float = 0.0,
    warmup_steps: int = 0,
    schedule: str = "constant",
    whole_episodes: bool = False,
) -> list[dict]:
    """Fit the policy to the demonstrations' responses; returns one summary dict per epoch.

    Each epoch visits every row once, in mini-batches of ``batch_size`` rows of similar length
    (``_length_buckets``, shuffled by a ``torch.Generator(seed)``); a mini-batch's loss is the
    mean negative log-prob of its response tokens (prompt tokens are context only), accumulated
    over ``policy.micro_batch_size`` chunks (a chain of nested rows counting as one, ``micro_batches``)
    so that long prompts fit in memory, then one clipped
    AdamW step. The learning rate ramps up linearly over ``warmup_steps`` optimizer steps, then
    stays at ``lr`` (``schedule="constant"``) or follows a cosine decay to zero at the last step
    (``"cosine"``). Summary keys: ``epoch``, ``loss`` (the epoch's token-weighted mean, each batch
    measured before its update), ``seconds`` and ``lr`` (at the epoch's end). ``whole_episodes``
    batches whole episodes instead (``_episode_batches``: conversation demonstrations, whose rows
    pack); the step count then follows the episodes, and ``batch_size`` is a batch's fewest rows.
    """
    if not demos:
        raise ValueError("behaviour_clone needs at least one demonstration row")
    if schedule not in ("constant", "cosine"):
        raise ValueError(f"schedule must be 'constant' or 'cosine', not {schedule!r}")
    params = policy.parameters()
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    batches = _episode_batches if whole_episodes else _length_buckets
    total_steps = epochs * len(batches(demos, batch_size, torch.Generator().manual_seed(seed)))

    def factor(step: int) -> float:
        ramp = min(1.0, (step + 1) / warmup_steps) if warmup_steps > 0 else 1.0
        if schedule == "cosine":
            ramp *= 0.5 * (1.0 + math.cos(math.pi * min(step, total_steps) / total_steps))
        return ramp

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    generator = torch.Generator().manual_seed(seed)
    device = policy.device
    history: list[dict] = []
    policy.train(True)
    try:
        for epoch in range(epochs):
            start = time.perf_counter()
            total_loss, total_tokens = 0.0, 0.0
            for batch_rows in batches(demos, batch_size, generator):
                rows = [demos[i] for i in batch_rows]
                tokens = float(sum(len(r.response_ids) for r in rows))
                optimizer.zero_grad(set_to_none=True)
                whole = to_batch(rows, policy.pad_token_id, device)
                for group in micro_batches(whole.lengths(), policy.micro_batch_size, chains=policy.chains(whole)):
                    batch = whole.index(group).trimmed()
                    logprobs = policy.forward(batch)["logprobs"]
                    nll = -(logprobs * batch.response_mask).sum()
                    (nll / tokens).backward()
                    total_loss += float(nll.detach())
                torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
                optimizer.step()
                scheduler.step()
                total_tokens += tokens
            history.append(
                {
                    "epoch": epoch,
                    "loss": total_loss / total_tokens,
                    "seconds": time.perf_counter() - start,
                    "lr": optimizer.param_groups[0]["lr"],
                }
            )
    finally:
        policy.train(False)
        policy.sync_weights()
    return history


@dataclass(frozen=True)
class WarmStartConfig:
    """Behaviour-cloning settings: the best found for ``tiny`` on pick-and-place (module docstring);
    they take ~35-40 min on one CPU thread (~30 s on a GPU)."""

    episodes: int = 600
    """Expert episodes recorded (ALFWorld pick-and-place: ~7 steps of ~540 prompt tokens each)."""
    epochs: int = 8
    """Passes over the demonstrations (~2100 optimizer steps at the defaults)."""
    lr: float = 3e-3
    """AdamW peak learning rate (suits a small randomly initialised model; use ~1e-5 for pretrained)."""
    batch_size: int = 16
    """Rows per optimizer step."""
    seed: int = 0
    """First reset seed of the demonstrations and seed of the shuffling."""
    history_length: int = 6
    """Past (observation, action) pairs in the prompt (enough to see which receptacles were just
    searched); evaluate with the same ``CollectConfig`` value."""
    task_types: tuple[str, ...] | None = ("pick_and_place_simple",)
    """Only clone episodes of these task types (None: all); default: the simplest type."""
    env_kwargs: tuple[tuple[str, object], ...] = ()
    """``gym.make`` keyword arguments as pairs (hashable); empty means the train split."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip per step."""
    warmup_steps: int = 30
    """Optimizer steps of linear learning-rate warm-up."""
    schedule: str = "cosine"
    """Learning rate after the warm-up: ``"cosine"`` decay to zero, or ``"constant"``."""
    prompt_format: str = "window"
    """The prompts cloned: ``"window"`` (verl-agent's, ``history_length`` steps) or
    ``"conversation"`` (the growing chat; batches then hold whole episodes)."""
    explore: float = 0.0
    """The chance that a demonstration step plays a random admissible action (``expert_demonstrations``)."""
    constrained_loss: bool = False
    """Fit the expert's replies among the admissible actions only (the distribution constrained
    decoding samples) instead of over the whole vocabulary. A conversation prompt does not list the
    actions, so over the whole vocabulary the model must spell them from memory; among them it only
    has to rank them."""


def warm_start(policy: LLMPolicy, env_id: str, config: WarmStartConfig = WarmStartConfig()) -> list[dict]:
    """Record the expert's demonstrations and clone them into ``policy`` (trained in place).

    Returns ``behaviour_clone``'s per-epoch history; each entry also has ``rows`` (demonstration
    steps) and ``demo_seconds`` (time to record them).
    """
    start = time.perf_counter()
    builder = PromptBuilder(template_for(env_id), history_length=config.history_length, think=False)
    demos = expert_demonstrations(
        env_id,
        config.episodes,
        policy.tokenizer,
        eos_token_ids(policy.model, policy.tokenizer)[0],
        builder=builder,
        seed=config.seed,
        env_kwargs=dict(config.env_kwargs),
        task_types=config.task_types,
        prompt_format=config.prompt_format,
        constrained=config.constrained_loss,
        explore=config.explore,
    )
    demo_seconds = time.perf_counter() - start
    history = behaviour_clone(
        policy,
        demos,
        epochs=config.epochs,
        lr=config.lr,
        batch_size=config.batch_size,
        seed=config.seed,
        max_grad_norm=config.max_grad_norm,
        warmup_steps=config.warmup_steps,
        schedule=config.schedule,
        whole_episodes=config.prompt_format == "conversation",
    )
    return [dict(entry, rows=len(demos), demo_seconds=demo_seconds) for entry in history]
