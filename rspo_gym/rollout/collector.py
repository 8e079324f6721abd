"""The multi-turn rollout loop: one batched generation call per turn over every live env.

``collect(policy, venv, ...)`` resets a ``GroupedVectorEnv`` (by seed or per-group task ids),
then per turn renders each active env's prompt (``PromptBuilder``), generates all replies in one
call, parses them into actions, steps the active envs, and records a ``StepRow`` per active env.
It returns a ``Rollout`` (rows in trajectory order + one ``Trajectory`` summary per env).

Any object with ``generate(prompt_ids, config, allowed)`` and a ``tokenizer`` attribute can act
(``LLMPolicy``, or a scripted stand-in in tests). Rewards: ``reward`` is the env's outcome reward
per step, ``process_reward`` is read from ``info["process_reward"]`` (the ``ProcessReward`` wrapper
in ``mode="info"``), 0 without it. The loop ends when every env is done or after ``max_turns``
(default: the env's registered step limit). In the ``"conversation"`` prompt format each env's
prompt is a growing chat (``prompts.Conversation``) and the turns run inside the policy's
``generation_session()`` (when it has one), within which a backend may keep each prompt's KV cache
for the next turn. With ``max_prompt_length`` set, a prompt over the limit
loses history entries oldest-first (``PromptBuilder.fitted_ids``) and each ``Trajectory`` counts
its truncated prompts; a prompt over the limit even without history stops the rollout with a
``ValueError`` before that turn's generation call. ``on_turn`` hears how far the rollout is
after every turn (a ``RolloutCount``: episodes ended, turns, env steps, seconds), which is what a
progress display shows during a rollout that takes minutes.
"""

from __future__ import annotations

import time
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from rspo_gym.rollout.generation import GenerationConfig
from rspo_gym.rollout.prompts import PROMPT_FORMATS, Conversation, FittedPrompt, ParsedAction, PromptBuilder, parse_action, template_for
from rspo_gym.rollout.trajectory import Rollout, StepRow, Trajectory
from rspo_gym.rollout.vector import GroupedVectorEnv

__all__ = ["CollectConfig", "CollectionDeadline", "RolloutCount", "collect", "constrained_choices"]

_QUERY_PLACEHOLDER = "search[<your query>]"


def constrained_choices(admissible_actions: Sequence[str], task: str) -> list[str]:
    """The replies constrained decoding may produce: the admissible actions without ``help``.

    A prefix trie cannot hold free text, so WebShop's ``search[<your query>]`` template becomes one
    concrete query, the instruction itself (the closest free-text action a small model can make).
    """
    choices = list(filter("help".__ne__, admissible_actions))  # at every step of every env: filter runs in C
    if _QUERY_PLACEHOLDER in choices:
        query = f"search[{task.strip()}]"
        choices = [query if action == _QUERY_PLACEHOLDER else action for action in choices]
    return choices


@dataclass(frozen=True)
class CollectConfig:
    """How replies are sampled and turned into actions."""

    generation: GenerationConfig = field(default_factory=GenerationConfig)
    """Sampling settings for every turn."""
    history_length: int = 2
    """Past (observation, action) pairs shown in the prompt (verl-agent: 2)."""
    think: bool = False
    """Ask for ``<think>``/``<action>`` tags; False asks for a bare action (small models)."""
    constrained: bool = False
    """Restrict replies to the admissible actions (prefix-trie decoding, ``help`` excluded)."""
    max_turns: int | None = None
    """Turn limit; None uses the env's registered ``max_episode_steps`` (else 50)."""
    max_prompt_length: int | None = None
    """Token budget of a prompt (chat template included); longer prompts drop history entries
    oldest-first. None: no limit (verl-agent: 2048 for ALFWorld, 4096 for WebShop)."""
    prompt_format: str = "window"
    """``"window"``: verl-agent's prompt, rewritten every turn; ``"conversation"``: a growing chat
    (``prompts.Conversation``) whose KV cache the policy reuses across turns. A conversation lists
    the admissible actions in its messages only when replies are not constrained (constrained
    decoding offers them through the reply trie)."""
    deadline: float | None = None
    """A ``time.perf_counter()`` value after which no further turn starts: ``collect`` raises
    ``CollectionDeadline`` instead (a trainer's time budget ran out mid-rollout). None: no deadline."""

    def __post_init__(self):
        if self.prompt_format not in PROMPT_FORMATS:
            raise ValueError(f"prompt_format must be one of {PROMPT_FORMATS}, not {self.prompt_format!r}")

    def builder(self, env_id: str | None) -> PromptBuilder:
        return PromptBuilder(template_for(env_id), history_length=self.history_length, think=self.think)

    def conversation(self, env_id: str | None, tokenizer, end_id: int) -> Conversation:
        """An empty ``Conversation`` in this config's wording (see ``prompt_format``)."""
        return Conversation(self.builder(env_id), tokenizer, end_id, list_actions=not self.constrained)


@dataclass(frozen=True)
class RolloutCount:
    """How far a rollout is: what ``collect`` tells its ``on_turn`` after every turn."""

    episodes_done: int
    """Episodes ended; all of them after the last turn (those the turn limit cut included)."""
    episodes: int
    """Episodes of the rollout (one per sub-env)."""
    turns: int
    """Turns played."""
    steps: int
    """Env steps taken: one per live episode per turn."""
    seconds: float
    """Since the rollout began (its reset included)."""


class CollectionDeadline(RuntimeError):
    """``CollectConfig.deadline`` passed before the rollout finished; the partial rollout is dropped."""


def _turn_generation(generation: GenerationConfig, turn: int, turn_seeds: Sequence[int] | None = None) -> GenerationConfig:
    """A distinct seed per turn, so that a seeded rollout does not reuse one random stream; with
    ``turn_seeds`` (this turn's ``turn_row_seeds``, one per prompt) a distinct stream per sub-env
    and turn."""
    if turn_seeds is not None:
        return replace(generation, row_seeds=tuple(turn_seeds))
    return generation if generation.seed is None else replace(generation, seed=generation.seed * 1009 + turn)


_MASK32 = 0xFFFFFFFF
# numpy.random.SeedSequence's hash constants (numpy/random/bit_generator.pyx)
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R = 0xCA01F9DD, 0x4973F715


def turn_row_seeds(row_seeds: Sequence[int], turns: int) -> np.ndarray:
    """``(len(row_seeds), turns)``: ``SeedSequence([seed, turn]).generate_state(1)[0]`` for every row
    seed and turn, the seed of a sub-env's sampling stream at a turn.

    One ``SeedSequence`` costs ~13 µs, once per env step, a tenth of a step of the fast policy;
    this runs its hash (a pool of four 32-bit words, the entropy ``[seed, turn]``) on whole arrays,
    for every turn at once. Seeds of 32 bits or more are several entropy words: those rows go
    through ``SeedSequence`` itself.
    """
    seeds = np.asarray([int(s) for s in row_seeds], dtype=object)
    out = np.empty((len(seeds), turns), dtype=np.uint64)
    small = np.asarray([0 <= s <= _MASK32 for s in seeds], dtype=bool)
    for i in np.flatnonzero(~small):
        out[i] = [np.random.SeedSequence([int(seeds[i]), t]).generate_state(1)[0] for t in range(turns)]
    if small.any():
        seed = np.asarray(seeds[small], dtype=np.uint64)[:, None]
        out[small] = _seed_sequence_word(seed, np.arange(turns, dtype=np.uint64)[None, :])
    return out


def _seed_sequence_word(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """``SeedSequence([first, second]).generate_state(1)[0]`` elementwise (broadcast) for 32-bit
    ``first`` and ``second``, in uint64 arrays masked to 32 bits (numpy's uint32 wrap-around)."""
    const = _INIT_A

    def hashmix(value):
        nonlocal const
        value = value ^ const
        const = (const * _MULT_A) & _MASK32
        value = (value * const) & _MASK32
        return value ^ (value >> 16)

    def mix(x, y):
        result = (_MIX_MULT_L * x - _MIX_MULT_R * y) & _MASK32
        return result ^ (result >> 16)

    zero = np.zeros(np.broadcast_shapes(first.shape, second.shape), dtype=np.uint64)
    pool = [hashmix(first + zero), hashmix(second + zero), hashmix(zero), hashmix(zero)]
    for source in range(4):
        for target in range(4):
            if source != target:
                pool[target] = mix(pool[target], hashmix(pool[source]))
    word = (pool[0] ^ _INIT_B) * ((_INIT_B * _MULT_B) & _MASK32) & _MASK32
    return word ^ (word >> 16)


def _checked(env_index: int, prompt: FittedPrompt, max_length: int | None) -> FittedPrompt:
    """``prompt`` if it fits; else the error that says which env overflowed and what to change."""
    if max_length is not None and len(prompt.ids) > max_length:
        raise ValueError(
            f"env {env_index}: the prompt is {len(prompt.ids)} tokens without any history, over "
            f"max_prompt_length={max_length}; raise max_prompt_length or shorten the observation"
        )
    return prompt


def collect(
    policy: Any,
    venv: GroupedVectorEnv,
    config: CollectConfig = CollectConfig(),
    *,
    seed: int | Sequence[int] | None = None,
    task_ids: Sequence[Any] | None = None,
    source: str = "learner",
    traj_offset: int = 0,
    row_seeds: Sequence[int] | None = None,
    on_turn: Callable[[RolloutCount], None] | None = None,
) -> Rollout:
    """Play one episode in every sub-env of ``venv`` and return the rollout.

    Args:
        policy: acts; needs ``generate`` and ``tokenizer``.
        venv: the grouped vector env (reset here).
        config: sampling, prompt and parsing settings.
        seed: group seeds (``seed + g``), see ``GroupedVectorEnv.reset``.
        task_ids: one task id per group instead of seeds.
        source: tag of the rows (``"learner"``, ``"explorer"``).
        traj_offset: added to trajectory ids (sub-env ``i`` gets ``traj_offset + i``), so that
            rollouts of several policies can be merged.
        row_seeds: one sampling seed per sub-env; each sub-env then samples from its own stream
            (per turn), so a trajectory does not depend on which sub-envs share a generation call.
            None: one stream per turn for the whole batch (``config.generation.seed``).
        on_turn: called with a ``RolloutCount`` after every turn and once when the rollout ends
            (a progress display); None: nothing is counted.
    """
    if row_seeds is not None and len(row_seeds) != venv.num_envs:
        raise ValueError(f"row_seeds needs one seed per sub-env ({venv.num_envs}), got {len(row_seeds)}")
    started = time.perf_counter()
    options = {"task_ids": list(task_ids)} if task_ids is not None else None
    observations, _ = venv.reset(seed=seed, options=options)
    observations = list(observations)
    infos = list(venv.infos)
    n = venv.num_envs
    env_id = venv.spec.id if venv.spec is not None else None
    builder = config.builder(env_id)
    max_turns = config.max_turns or venv.max_episode_steps or 50
    tokenizer = policy.tokenizer
    first_infos = list(infos)
    histories: list[list[tuple[str, str]]] = [[] for _ in range(n)]
    rows: list[list[StepRow]] = [[] for _ in range(n)]
    truncated, dropped = [0] * n, [0] * n
    events: list[Counter] = [Counter() for _ in range(n)]  # process-reward events paid, per trajectory
    turn_seeds = None if row_seeds is None else turn_row_seeds(row_seeds, max_turns)
    group_ids = venv.group_ids.tolist()
    parses: dict[str, ParsedAction] = {}  # replies repeat (a policy choosing among commands): each is parsed once
    conversations: list[Conversation] | None = None
    if config.prompt_format == "conversation":
        end_id = getattr(policy, "end_token_id", None)
        if end_id is None:
            raise ValueError("the conversation prompt format needs a policy with an end_token_id (an LLMPolicy)")
        conversations = [config.conversation(env_id, tokenizer, end_id) for _ in range(n)]
        for i, chat in enumerate(conversations):
            chat.open(infos[i].get("task", ""), observations[i], infos[i].get("admissible_actions", ()))
    # the window format's prompts never extend one another: a session would only keep what is never reused
    session = getattr(policy, "generation_session", None) if conversations is not None else None
    turns = steps = 0
    with session() if session is not None else nullcontext():
        for turn in range(max_turns):
            active = np.flatnonzero(venv.active).tolist()
            if not active:
                break
            if config.deadline is not None and time.perf_counter() > config.deadline:
                raise CollectionDeadline(f"the deadline passed before turn {turn + 1} of the rollout")
            fitted = [
                _checked(
                    i,
                    conversations[i].prompt(config.max_prompt_length) if conversations is not None else builder.fitted_ids(
                        tokenizer,
                        infos[i].get("task", ""),
                        observations[i],
                        infos[i].get("admissible_actions", ()),
                        histories[i],
                        config.max_prompt_length,
                    ),
                    config.max_prompt_length,
                )
                for i in active
            ]
            prompt_ids = [prompt.ids for prompt in fitted]
            for i, prompt in zip(active, fitted):
                truncated[i] += prompt.dropped > 0
                dropped[i] += prompt.dropped
            allowed = None
            if config.constrained:
                allowed = [constrained_choices(infos[i]["admissible_actions"], infos[i].get("task", "")) for i in active]
            seeds = None if turn_seeds is None else turn_seeds[active, turn].tolist()
            out = policy.generate(prompt_ids, _turn_generation(config.generation, turn, seeds), allowed)
            parsed = []
            for text in out.texts:
                found = parses.get(text)
                if found is None:
                    found = parses[text] = parse_action(text, think=config.think, tail_chars=builder.template.tail_chars)
                parsed.append(found)
            actions: list[Any] = [None] * n
            for k, i in enumerate(active):
                actions[i] = parsed[k].action
            anchors = [infos[i].get("anchor", observations[i]) for i in active]
            rewards = venv.advance(actions).tolist()
            next_obs = venv.observations
            for k, i in enumerate(active):
                info = venv.infos[i]
                rows[i].append(
                    StepRow(
                        prompt_ids=prompt_ids[k],
                        response_ids=list(out.response_ids[k]),
                        logprobs=list(out.logprobs[k]),
                        reward=float(rewards[i]),
                        process_reward=float(info.get("process_reward", 0.0)),
                        anchor=anchors[k],
                        valid=bool(info.get("valid", True)),
                        format_valid=parsed[k].format_valid,
                        group_id=group_ids[i],
                        traj_id=traj_offset + i,
                        step=turn,
                        action=parsed[k].action,
                        source=source,
                        allowed_token_ids=None if out.allowed_token_ids is None else out.allowed_token_ids[k],
                    )
                )
                histories[i].append((observations[i], parsed[k].action))
                if conversations is not None and venv.active[i]:
                    conversations[i].append(out.response_ids[k], next_obs[i], info.get("admissible_actions", ()))
                paid = info.get("process_events")
                if paid:  # most steps pay no event: Counter.update costs as much as a StepRow
                    events[i].update(paid)
                observations[i], infos[i] = next_obs[i], info
            turns, steps = turn + 1, steps + len(active)
            if on_turn is not None:
                on_turn(RolloutCount(n - int(venv.active.sum()), n, turns, steps, time.perf_counter() - started))
    if on_turn is not None:
        on_turn(RolloutCount(n, n, turns, steps, time.perf_counter() - started))
    trajectories = []
    for i in range(n):
        info, won = infos[i], bool(infos[i].get("won", False))
        process_return = sum(r.process_reward for r in rows[i])
        potentials = (first_infos[i].get("potential"), info.get("potential"))
        trajectories.append(
            Trajectory(
                traj_id=traj_offset + i,
                group_id=group_ids[i],
                task_id=first_infos[i].get("task_id"),
                task=first_infos[i].get("task", ""),
                outcome=sum(r.reward for r in rows[i]),
                process_return=process_return,
                process_progress=process_return if None in potentials else potentials[1] - potentials[0],
                process_events=dict(events[i]),
                won=won,
                score=float(info.get("score", float(won))),
                length=len(rows[i]),
                invalid=sum(not (r.valid and r.format_valid) for r in rows[i]),
                source=source,
                task_type=first_infos[i].get("task_type"),
                truncated_prompts=truncated[i],
                dropped_history=dropped[i],
            )
        )
    return Rollout([row for per_env in rows for row in per_env], trajectories)
