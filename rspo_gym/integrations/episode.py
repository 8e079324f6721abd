"""One text-env episode as every peer trainer needs it: a task id in, prompt text out, rewards in
verl-agent's convention. Each peer module (``trl``, ``skyrl``, ...) wraps an :class:`Episode`.

- ``EpisodeConfig``: which env, which reward convention, which process reward, how much history the
  env's messages carry, the turn limit.
- ``Episode``: ``reset(task_id)`` → the first prompt; ``step(action)`` → a :class:`Turn` (the next
  message, reward, done, info); totals in ``result()``.
- ``task_ids``: task ids to put in a peer's dataset, bounded or not (ALFWorld's generated ``train``
  split has ``num_tasks = None``: ids are drawn, never enumerated).
- ``outcome_reward``: the reward convention as a pure function.

Conventions (the same for every peer):

- **Task identity.** A task id is an argument of ``reset``; each peer carries it in its own
  per-sample field (TRL's dataset column, SkyRL's ``extras``, OpenRLHF's ``label``, ...) so the
  members of a group play the same task.
- **Reward.** ``reward="verl-agent"`` (default): ``success_reward`` (10) on the step an episode is
  won, else 0; WebShop's purchase score is reported apart as ``task_score`` (never the reward).
  ``reward="env"``: the env's own reward (ALFWorld 1 per win, WebShop the purchase score). With
  ``process_reward=<name>`` the env runs under ``ProcessReward`` and each step's process reward is
  added (``info["process_reward"]``).
- **Messages.** The first message is our verl-agent prompt (``rspo_gym.rollout.prompts``: task,
  observation, admissible actions, ``help`` left out). Later messages depend on ``history``:
  ``"append"`` gives only the new observation and the admissible actions, for loops that append
  every message to one growing conversation (the conversation is the history);
  ``"window"`` gives the full windowed prompt (the last ``history_length`` observations and
  actions), so each message stands alone and a peer that keeps only the latest message (or cuts
  the conversation) loses nothing.
- **ALFWorld's banner.** Prompts drop the ``-= Welcome to TextWorld, ALFRED! =-`` line (our
  templates' ``strip_pattern``: it carries no information); ``info["anchor"]`` and the verl-agent
  builders keep the raw observation with it, as upstream prints it.
- **Done.** ``done`` is True once the env terminates (won; WebShop: bought) or at the turn limit
  (the env's registered step limit by default); later actions are refused with
  ``EPISODE_OVER`` and change nothing.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np

import rspo_gym  # noqa: F401  (registers the envs)
from rspo_gym.errors import UserError
from rspo_gym.envs.core import check_task_id
from rspo_gym.envs.wrappers import ProcessReward
from rspo_gym.rollout.prompts import PromptBuilder, template_for

__all__ = ["EpisodeConfig", "Episode", "Turn", "task_ids", "outcome_reward", "EPISODE_OVER", "REWARDS", "HISTORIES"]

REWARDS = ("verl-agent", "env")
HISTORIES = ("append", "window")
#: what a step after the end answers
EPISODE_OVER = "The episode is over; no further actions are taken."
#: Most ids one ``task_ids`` call gives: a peer's dataset of task ids (verl-agent's runs use thousands).
MAX_TASK_IDS = 100_000
#: Largest task set ``task_ids`` shuffles whole (a 128 MB permutation); larger ones are sampled.
SHUFFLE_LIMIT = 2**24


def _is_integer(value: Any) -> bool:
    """An integer (numpy's included), not a ``bool``, a float or a string that looks like one."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True)
class EpisodeConfig:
    """How an env is played through a peer."""

    env_id: str = "rspo/ALFWorld-v0"
    """A registered text env (ours, or any env with the text-env ``info`` keys)."""
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``gym.make`` (``split=...``, ``num_products=...``)."""
    reward: str = "verl-agent"
    """``"verl-agent"``: ``success_reward`` × won; ``"env"``: the env's own reward."""
    success_reward: float = 10.0
    """The reward of a win under ``reward="verl-agent"``."""
    process_reward: str | None = None
    """A process reward of the env (``rspo_gym.envs.process_rewards(env_id)``), added to each step's reward."""
    history: str = "append"
    """What later messages carry: ``"append"`` (the new observation) or ``"window"`` (the windowed prompt)."""
    history_length: int = 2
    """Past (observation, action) pairs in a windowed prompt (verl-agent: 2)."""
    think: bool = False
    """Ask for ``<think>``/``<action>`` replies (verl-agent) instead of a bare action."""
    max_turns: int | None = None
    """Turn limit; None: the env's registered step limit (ALFWorld 50, WebShop 15; else 50)."""

    def __post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {self.reward!r}")
        if self.history not in HISTORIES:
            raise ValueError(f"history must be one of {HISTORIES}, got {self.history!r}")
        if self.history_length < 0:
            raise ValueError(f"history_length must be >= 0, got {self.history_length}")

    def builder(self) -> PromptBuilder:
        return PromptBuilder(template_for(self.env_id), history_length=self.history_length, think=self.think)

    def make_env(self) -> gym.Env:
        env = gym.make(self.env_id, **dict(self.env_kwargs))
        return ProcessReward(env, self.process_reward) if self.process_reward else env


def outcome_reward(convention: str, env_reward: float, won: bool, was_won: bool, success_reward: float = 10.0) -> float:
    """A step's outcome reward: verl-agent's ``success_reward`` on the step the episode is won (ALFWorld
    ``won``; WebShop a purchase scoring 1.0, which is when its ``won`` turns True), or the env's own."""
    if convention == "env":
        return float(env_reward)
    return success_reward if won and not was_won else 0.0


def task_ids(num_tasks: int | None, count: int, seed: int = 0) -> list[int]:
    """``count`` task ids of a task set with ``num_tasks`` tasks, without repeats while they last.

    ``num_tasks=None`` (an unbounded set: ALFWorld's generated ``train``) draws ids in
    ``[0, 2**31 - 1)``; nothing is enumerated, so the cost is ``count`` draws whatever the set.

    Both sizes are bounded before anything is allocated (``UserError``): ``count`` by
    ``MAX_TASK_IDS`` (the list is built whole), ``num_tasks`` by ``2**31`` (task ids are below it).
    A set above ``SHUFFLE_LIMIT`` tasks is sampled without repeats instead of shuffled whole (a
    permutation of 2**31 ids is 16 GB); smaller ones keep the whole-permutation order.
    """
    if not _is_integer(count) or not 0 <= count <= MAX_TASK_IDS:
        raise UserError(f"count must be an integer from 0 to {MAX_TASK_IDS}, got {count!r}")
    if num_tasks is not None and (not _is_integer(num_tasks) or not 1 <= num_tasks <= 2**31):
        raise UserError(f"num_tasks must be None or an integer from 1 to {2**31}, got {num_tasks!r}")
    rng = np.random.default_rng(seed)
    if num_tasks is None:
        return [int(k) for k in rng.integers(0, 2**31 - 1, size=count)]
    if num_tasks > SHUFFLE_LIMIT:  # count <= MAX_TASK_IDS < num_tasks / 50: numpy samples in O(count) memory
        return [int(k) for k in rng.choice(num_tasks, size=count, replace=False)]
    ids: list[int] = []
    while len(ids) < count:  # whole permutations: every task once before any repeats
        ids.extend(int(k) for k in rng.permutation(num_tasks)[: count - len(ids)])
    return ids


@dataclass
class Turn:
    """What a step gives a peer."""

    message: str
    """The env's next message (see ``EpisodeConfig.history``); ``EPISODE_OVER`` after the end."""
    reward: float
    done: bool
    info: dict


class Episode:
    """One env, played one episode at a time from a task id (a peer makes one per rollout slot)."""

    def __init__(self, config: EpisodeConfig | None = None, env: gym.Env | None = None, **options: Any) -> None:
        self.config = config if config is not None else EpisodeConfig(**options)
        if config is not None and options:
            raise TypeError("pass either config or keyword options, not both")
        self.env = env if env is not None else self.config.make_env()
        self.builder = self.config.builder()
        spec_limit = getattr(self.env.spec, "max_episode_steps", None) if self.env.spec is not None else None
        self.max_turns = self.config.max_turns or spec_limit or 50
        self.task_id: int | None = None
        self.task = ""
        self.history: list[tuple[str, str]] = []
        self._obs = ""
        self._actions: list[str] = []
        self._started = False
        self.done = True
        self.won = False
        self.total_reward = 0.0
        self.task_score = 0.0
        self.turns = 0

    @property
    def num_tasks(self) -> int | None:
        return getattr(self.env.unwrapped, "num_tasks", None)

    @property
    def admissible_actions(self) -> list[str]:
        return list(self._actions)

    def reset(self, task_id: int | None = None, seed: int | None = None) -> str:
        """Start task ``task_id`` (or one drawn from ``seed``); the first prompt.

        A task id that is no integer (``1.9``, ``True``, ``"3"``) is a ``TypeError``, as in our
        envs' own ``reset``: ``int()`` here used to turn them into tasks 1, 1 and 3 before any env
        could refuse them, and a peer's dataset column of the wrong type played the wrong tasks."""
        options = None if task_id is None else {"task_id": check_task_id(task_id, None)}
        obs, info = self.env.reset(seed=seed, options=options)
        self.task_id = info.get("task_id", task_id)
        self.task = info.get("task", "")
        self.history = []
        self._obs, self._actions = obs, list(info.get("admissible_actions", []))
        self.done, self.won = False, bool(info.get("won", False))
        self.total_reward = self.task_score = 0.0
        self.turns = 0
        self._started = True
        return self.prompt()

    def prompt(self) -> str:
        """The windowed prompt of the current state (verl-agent's wording)."""
        return self.builder.build(self.task, self._obs, self._actions, self.history)

    def feedback(self) -> str:
        """The message after a step: see ``EpisodeConfig.history``."""
        if self.config.history == "window":
            return self.prompt()
        actions = "\n".join(a for a in self._actions if a != "help")
        return f"{self.builder.observation_text(self._obs)}\nAdmissible actions:\n{actions}"

    def step(self, action: str) -> Turn:
        if not self._started:
            raise RuntimeError("Call reset() before step().")
        if self.done:
            return Turn(EPISODE_OVER, 0.0, True, {"won": self.won, "task_score": self.task_score, "valid": False})
        previous = self._obs
        obs, env_reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        won = bool(info.get("won", False))
        reward = outcome_reward(self.config.reward, env_reward, won, self.won, self.config.success_reward)
        reward += float(info.get("process_reward", 0.0)) if self.config.process_reward else 0.0
        if "score" in info:
            self.task_score = max(self.task_score, float(info["score"]))
            info["task_score"] = self.task_score
        self.history.append((previous, action))
        self._obs, self._actions = obs, list(info.get("admissible_actions", []))
        self.won = self.won or won
        self.total_reward += reward
        self.done = bool(terminated or truncated) or self.turns >= self.max_turns
        return Turn(self.feedback(), reward, self.done, info)

    def result(self) -> dict[str, Any]:
        """The episode's totals: what a peer logs per rollout (``task_score`` is WebShop's score)."""
        return {"task_id": self.task_id, "reward": self.total_reward, "won": self.won,
                "task_score": self.task_score, "turns": self.turns, "done": self.done}

    def close(self) -> None:
        self.env.close()


def first_prompts(config: EpisodeConfig, ids: Sequence[int]) -> list[str]:
    """The first prompt of each task (one env, reset in turn)."""
    episode = Episode(config)
    try:
        return [episode.reset(task_id) for task_id in ids]
    finally:
        episode.close()
