"""Adapters that let Stable-Baselines3 (and sb3-contrib's ``MaskablePPO``) train on our text envs.

- ``TaskSubset``: restricts random resets to a fixed list of task ids (e.g. one ALFWorld task type).
- ``AdmissibleActionIndex``: ``Discrete(K)`` actions, the k-th admissible command of the current state.
- ``TextFeaturizer``: text observations to a fixed ``Box(float32, (dim,))`` of hashed n-gram features.
- ``ActionSlotFeaturizer``: the state's features and one block per action index describing its
  command, for policies that score each (state, command) pair (``rspo_gym.sb3.drrn``).
- ``action_mask``: the valid-index mask for sb3-contrib's ``ActionMasker`` / ``MaskablePPO``.
- ``make_sb3_env``: the stack of the above (and ``ActionMasker``) for an env id.

Why: SB3's buffers need fixed-shape observations and ``Discrete``-like actions, and it cannot take
``Text`` spaces (``../shared/docs/reference/algorithms.md`` §5.3). These wrappers need only
gymnasium and numpy; ``sb3-contrib`` is imported by ``make_sb3_env`` alone (install the ``[sb3]``
extra: ``pip install 'rspo-gym[sb3]'``).

Truncation differs between SB3 and our LLM trainers. SB3's ``VecEnv`` reports the step limit as
``info["TimeLimit.truncated"]`` and PPO *bootstraps* the value of the last observation there, so a
truncated episode is "unfinished", not failed. Our LLM trainers (like verl-agent) give a truncated
episode outcome 0 with no bootstrap: hitting the limit *is* failure. Success is read from
``info["won"]`` in both, so the success rates are comparable; the returns they optimise are not
quite the same objective.

Features are deterministic across processes and Python hash seeds: tokens are hashed with
``zlib.crc32``, never ``hash()``.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = [
    "INVALID_ACTION",
    "TaskSubset",
    "AdmissibleActionIndex",
    "LAYOUTS",
    "TextFeaturizer",
    "ActionSlotFeaturizer",
    "action_mask",
    "make_sb3_env",
]

#: ``make_sb3_env`` observation layouts: one flat vector, or a state block and one block per action index
LAYOUTS = ("flat", "pairs")
#: the command an out-of-range index maps to: every env of the suite treats it as an invalid no-op
INVALID_ACTION = "<invalid action>"
#: WebShop's listed search action is a template; the index wrapper searches for the instruction instead
SEARCH_TEMPLATE = "search[<your query>]"

_TOKEN = re.compile(r"[a-z0-9]+")
_NAME = re.compile(r"\b([a-z]+) ([0-9]+)\b")
_ARGUMENT = re.compile(r"\[(.*)\]")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _buckets(features: Sequence[str], size: int) -> list[int]:
    return [zlib.crc32(f.encode()) % size for f in features]


def _hashed(features: Sequence[str], size: int) -> np.ndarray:
    """0/1 float32 vector with a one at ``crc32(feature) % size`` for each feature."""
    vector = np.zeros(size, dtype=np.float32)
    vector[_buckets(features, size)] = 1.0
    return vector


def _names(text: str) -> list[str]:
    """The numbered names in ``text`` ("desk 1", "pen 3"), ALFWorld's objects and receptacles, in order."""
    return [f"{kind} {number}" for kind, number in _NAME.findall(text.lower())]


def _words_and_bigrams(prefix: str, words: Sequence[str]) -> list[str]:
    return [f"{prefix}|{w}" for w in words] + [f"{prefix}|{a}_{b}" for a, b in zip(words, words[1:])]


class TaskSubset(gym.Wrapper):
    """Random resets draw from ``task_ids`` only (a task type, a fixed training set).

    ``reset(seed=s)`` picks ``task_ids[j]`` with ``j`` from the wrapper's seeded generator;
    ``reset(options={"task_id": k})`` still plays task ``k``.

    >>> import gymnasium as gym, rspo_gym
    >>> env = TaskSubset(gym.make("rspo/ALFWorld-v0", split="valid_seen"), [3, 5])
    >>> sorted({env.reset(seed=s)[1]["task_id"] for s in range(8)})
    [3, 5]
    """

    def __init__(self, env: gym.Env, task_ids: Sequence[int]) -> None:
        super().__init__(env)
        if len(task_ids) == 0:
            raise ValueError("task_ids must name at least one task")
        self.task_ids = [int(t) for t in task_ids]
        self._rng = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        options = dict(options or {})
        options.setdefault("task_id", self.task_ids[int(self._rng.integers(len(self.task_ids)))])
        return self.env.reset(seed=seed, options=options)


class AdmissibleActionIndex(gym.ActionWrapper):
    """``Discrete(num_actions)``: action ``k`` plays the k-th admissible command of the current state.

    The command list (:attr:`actions`) is ``info["admissible_actions"]``, sorted when ``sort=True``
    (ALFWorld lists are already sorted; WebShop's order is the page order, where the position of a
    product is its search rank, so keep ``sort=False`` there). WebShop's template
    ``search[<your query>]`` becomes ``search[<the instruction>]``, since an index cannot write a
    query. An index beyond the list plays :data:`INVALID_ACTION`, which the env treats as an invalid
    no-op (state unchanged, ``info["valid"] = False``, reward 0); ``invalid_penalty=0.1`` subtracts
    verl-agent's penalty from the reward of such steps. Lists longer than ``num_actions`` are cut.
    ``info["action"]`` carries the command played.

    >>> import gymnasium as gym, rspo_gym
    >>> env = AdmissibleActionIndex(gym.make("rspo/ALFWorld-v0", split="valid_seen"), num_actions=128)
    >>> _, info = env.reset(options={"task_id": 0})
    >>> env.action(0) == env.actions[0], env.action(127)
    (True, '<invalid action>')
    >>> _, reward, _, _, info = env.step(127)
    >>> reward, info["valid"]
    (0.0, False)
    """

    def __init__(self, env: gym.Env, num_actions: int = 128, *, sort: bool = True, invalid_penalty: float = 0.0) -> None:
        super().__init__(env)
        if isinstance(num_actions, bool) or not isinstance(num_actions, (int, np.integer)) or num_actions < 1:
            raise ValueError(f"num_actions must be a positive integer, got {num_actions!r}")
        if invalid_penalty < 0:
            raise ValueError(f"invalid_penalty is subtracted, so it must be >= 0, got {invalid_penalty}")
        self.action_space = spaces.Discrete(int(num_actions))
        self.sort = sort
        self.invalid_penalty = float(invalid_penalty)
        self.actions: list[str] = []

    def _update(self, info: dict) -> None:
        actions = list(info.get("admissible_actions", ()))
        if self.sort:
            actions.sort()
        task = info.get("task", "")
        self.actions = [f"search[{task}]" if a == SEARCH_TEMPLATE else a for a in actions][: self.action_space.n]

    def action(self, action: int) -> str:
        k = int(action)
        return self.actions[k] if 0 <= k < len(self.actions) else INVALID_ACTION

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self._update(info)
        return obs, info

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict]:
        command = self.action(action)
        obs, reward, terminated, truncated, info = self.env.step(command)
        if not info.get("valid", True):
            reward = float(reward) - self.invalid_penalty
        info["action"] = command
        self._update(info)
        return obs, reward, terminated, truncated, info


def action_mask(env: gym.Env) -> np.ndarray:
    """Bool mask over ``Discrete(K)``: True for the indices of current admissible commands.

    Reads :attr:`AdmissibleActionIndex.actions` through the wrapper stack. When the list is empty
    index 0 stays allowed (it plays the invalid no-op), since a mask must allow some action.

    >>> import gymnasium as gym, rspo_gym
    >>> env = AdmissibleActionIndex(gym.make("rspo/ALFWorld-v0", split="valid_seen"), num_actions=128)
    >>> _, info = env.reset(options={"task_id": 0})
    >>> int(action_mask(env).sum()) == len(info["admissible_actions"])
    True
    """
    actions = env.get_wrapper_attr("actions")
    mask = np.arange(env.action_space.n) < len(actions)
    mask[0] = True
    return mask


class TextFeaturizer(gym.ObservationWrapper):
    """Hashed bag of words and word bigrams over task + observation + last actions, as ``Box``.

    Each field has its own namespace (``task``, ``obs``, ``act1`` = the last command, ... up to
    ``history``), and each feature is a 0/1 indicator at ``crc32(feature) % dim``. With
    ``slots > 0`` (an :class:`AdmissibleActionIndex` must be inside), slot ``k`` also gets the first
    word of its command and how many of its words occur in the task (0..3+): a policy over indices
    then sees what each index means, which the raw observation does not say.

    >>> import gymnasium as gym, rspo_gym
    >>> env = TextFeaturizer(gym.make("rspo/ALFWorld-v0", split="valid_seen"), dim=512)
    >>> obs, _ = env.reset(options={"task_id": 0})
    >>> obs.shape, obs.dtype, env.observation_space.contains(obs)
    ((512,), dtype('float32'), True)
    >>> bool((env.featurize("go to desk 1", task="put a mug in desk") == env.featurize("go to desk 1", task="put a mug in desk")).all())
    True
    """

    def __init__(self, env: gym.Env, dim: int = 4096, *, history: int = 2, slots: int = 0) -> None:
        super().__init__(env)
        for name, value in (("dim", dim), ("history", history), ("slots", slots)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (1 if name == "dim" else 0):
                raise ValueError(f"{name} must be a {'positive' if name == 'dim' else 'non-negative'} integer, got {value!r}")
        if slots:
            try:
                env.get_wrapper_attr("actions")
            except AttributeError:
                raise TypeError("slots > 0 needs an AdmissibleActionIndex inside the TextFeaturizer") from None
        self.dim, self.history, self.slots = int(dim), int(history), int(slots)
        self.observation_space = spaces.Box(0.0, 1.0, (self.dim,), np.float32)
        self._task = ""
        self._last_actions: list[str] = []

    def featurize(self, observation: str, *, task: str = "", actions: Sequence[str] = (), slot_actions: Sequence[str] = ()) -> np.ndarray:
        """The feature vector of these texts (``actions``: most recent first)."""
        features: list[str] = []
        fields = [("task", task), ("obs", observation)]
        fields += [(f"act{j + 1}", a) for j, a in enumerate(actions[: self.history])]
        for name, text in fields:
            features += _words_and_bigrams(name, _tokens(text))
        task_words = set(_tokens(task))
        for k, command in enumerate(slot_actions[: self.slots]):
            words = _tokens(command)
            overlap = min(len(task_words.intersection(words)), 3)
            features += [f"slot{k}|{words[0] if words else ''}", f"slot{k}|hit{overlap}"]
        return _hashed(features, self.dim)

    def observation(self, observation: str) -> np.ndarray:
        slot_actions = self.env.get_wrapper_attr("actions") if self.slots else ()
        return self.featurize(observation, task=self._task, actions=self._last_actions, slot_actions=slot_actions)

    def _start(self, info: dict) -> None:
        """Forget the last episode; subclasses with more episode memory extend this."""
        self._task = info.get("task", "")
        self._last_actions = []

    def _record(self, command: str, observation: str) -> None:
        """Remember the command just played and what it showed, before featurizing ``observation``."""
        self._last_actions = [command, *self._last_actions][: self.history]

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict]:
        obs, info = self.env.reset(**kwargs)
        self._start(info)
        return self.observation(obs), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._record(info.get("action", action if isinstance(action, str) else ""), obs)
        return self.observation(obs), reward, terminated, truncated, info


class ActionSlotFeaturizer(TextFeaturizer):
    """Observations for pair scoring: ``[state (dim) | slot 0 (slot_dim) | ... | slot K-1 (slot_dim)]``.

    A flat MLP over one vector of features must learn what *index* k is worth, yet the command at
    index k changes every step. Here each of the ``K`` indices of the :class:`AdmissibleActionIndex`
    inside gets its own block describing its command, so a policy that scores every (state, slot)
    pair with shared weights (``rspo_gym.sb3.drrn.DRRNPolicy``, after DRRN, He et al. 2016)
    learns what a *command* is worth, wherever it is listed. The state block is
    :class:`TextFeaturizer`'s (task, observation, last commands) plus what is held; a slot without
    a command is all zeros. Slot ``k`` holds 0/1 features of its command at ``crc32 % slot_dim``,
    from text only (``v`` is the command's first word, its verb):

    - its words and word bigrams, and ``v``;
    - how many of its words are in the task (0..3), crossed with ``v`` and what is held: ``none``,
      ``task`` (an object whose type word the task names) or ``other``;
    - for its first two numbered names (``desk 1``, ``pen 3``): whether the type word is in the task
      and whether a task-typed object was shown along with it (``go to desk 1`` answered "... you
      see a pen 3"), crossed with ``v`` and what is held;
    - how often this exact command was played this episode (0, 1, 2+), and whether it was the last;
    - for a bracketed argument (WebShop's ``click[b0...]``), the words of the page segment after the
      one the argument names (a product's title after its id) and how many are in the task (0..6+);
    - with ``positions=True``, its index: for lists whose order means something (WebShop's search
      ranks); off for sorted lists (ALFWorld), where the index of a command says nothing.

    What is held follows ALFWorld's verbs: ``take X from R`` holds X, ``move X to R`` puts it down.

    >>> import gymnasium as gym, rspo_gym
    >>> env = ActionSlotFeaturizer(AdmissibleActionIndex(gym.make("rspo/ALFWorld-v0", split="valid_seen"), 64), dim=512, slot_dim=128)
    >>> obs, info = env.reset(options={"task_id": 0})
    >>> obs.shape, env.observation_space.contains(obs)
    ((8704,), True)
    >>> slots = obs[512:].reshape(64, 128)
    >>> bool(slots[: len(info["admissible_actions"])].any(axis=1).all()), bool(slots[len(info["admissible_actions"]) :].any())
    (True, False)
    """

    def __init__(self, env: gym.Env, dim: int = 4096, *, history: int = 2, slot_dim: int = 256, positions: bool = False) -> None:
        super().__init__(env, dim, history=history)
        if isinstance(slot_dim, bool) or not isinstance(slot_dim, (int, np.integer)) or slot_dim < 1:
            raise ValueError(f"slot_dim must be a positive integer, got {slot_dim!r}")
        try:
            env.get_wrapper_attr("actions")
        except AttributeError:
            raise TypeError("ActionSlotFeaturizer needs an AdmissibleActionIndex inside it") from None
        self.num_slots, self.slot_dim, self.positions = int(env.action_space.n), int(slot_dim), positions
        self.observation_space = spaces.Box(0.0, 1.0, (self.dim + self.num_slots * self.slot_dim,), np.float32)
        self._task_words: set[str] = set()
        self._played: dict[str, int] = {}
        self._found: set[str] = set()
        self._held = ""

    def _start(self, info: dict) -> None:
        super()._start(info)
        self._task_words = set(_tokens(self._task))
        self._played, self._found, self._held = {}, set(), ""

    def _record(self, command: str, observation: str) -> None:
        super()._record(command, observation)
        self._played[command] = self._played.get(command, 0) + 1
        named = _names(command)
        if named and command.startswith("take "):
            self._held = named[0]
        elif named and self._held == named[0] and command.startswith("move "):
            self._held = ""
        if any(self._typed_in_task(n) for n in _names(observation) if n not in named):
            self._found.update(named)

    def _typed_in_task(self, name: str) -> bool:
        return name.split()[0] in self._task_words

    def _holding(self) -> str:
        return "none" if not self._held else "task" if self._typed_in_task(self._held) else "other"

    def slot_features(self, command: str, k: int, next_segment: dict[str, str]) -> list[str]:
        """The feature names of ``command`` at index ``k`` (``next_segment``: page segment → the one after)."""
        words = _tokens(command)
        verb, hold = (words[0] if words else ""), self._holding()
        hits = min(len(self._task_words.intersection(words)), 3)
        played = min(self._played.get(command, 0), 2)
        features = _words_and_bigrams("w", words)
        features += [f"v|{verb}", f"{verb}|hit{hits}|{hold}", f"{verb}|played{played}"]
        if self._last_actions and command == self._last_actions[0]:
            features.append(f"{verb}|last")
        for j, name in enumerate(_names(command)[:2]):
            typed, found = int(self._typed_in_task(name)), int(name in self._found)
            features += [f"{verb}|n{j}|typed{typed}|{hold}", f"{verb}|n{j}|found{found}|{hold}"]
        argument = _ARGUMENT.search(command.lower())
        context = _tokens(next_segment.get(argument.group(1).strip(), "")) if argument else []
        if context:
            overlap = min(len(self._task_words.intersection(context)), 6)
            features += _words_and_bigrams("ctx", context) + [f"{verb}|ctx{overlap}"]
        if self.positions:
            features.append(f"pos|{k}")
        return features

    def observation(self, observation: str) -> np.ndarray:
        state = self.featurize(observation, task=self._task, actions=self._last_actions)
        state[_buckets([f"held|{self._holding()}", f"held|{self._held.split(' ')[0]}"], self.dim)] = 1.0
        segments = [segment.strip().lower() for segment in observation.split("[SEP]")]
        next_segment = dict(zip(reversed(segments[:-1]), reversed(segments[1:])))
        vector = np.zeros(self.observation_space.shape, dtype=np.float32)
        vector[: self.dim] = state
        for k, command in enumerate(self.env.get_wrapper_attr("actions")[: self.num_slots]):
            offset = self.dim + k * self.slot_dim
            vector[[offset + b for b in _buckets(self.slot_features(command, k, next_segment), self.slot_dim)]] = 1.0
        return vector


def make_sb3_env(
    env_id: str | gym.Env,
    *,
    num_actions: int = 128,
    dim: int = 4096,
    history: int = 2,
    slot_features: bool = True,
    layout: str = "flat",
    slot_dim: int = 256,
    sort: bool = True,
    invalid_penalty: float = 0.0,
    task_ids: Sequence[int] | None = None,
    **kwargs: Any,
) -> gym.Env:
    """An env id (or env) stacked for ``MaskablePPO``: featurized ``Box`` obs, masked ``Discrete`` actions.

    Stack: env → ``TaskSubset`` (when ``task_ids``) → ``AdmissibleActionIndex`` → featurizer →
    sb3-contrib ``ActionMasker(action_mask)``. ``kwargs`` go to ``gym.make``. The featurizer is
    ``TextFeaturizer(dim, history, slots)`` for ``layout="flat"`` (one vector, for an MLP policy) or
    ``ActionSlotFeaturizer(dim, history, slot_dim, positions=not sort)`` for ``layout="pairs"``
    (a state block and one block per index, for ``rspo_gym.sb3.drrn.DRRNPolicy``, whose
    ``state_dim`` is ``dim``; ``slot_features`` is a flat-layout option).

    >>> import pytest, rspo_gym
    >>> _ = pytest.importorskip("sb3_contrib")
    >>> env = make_sb3_env("rspo/ALFWorld-v0", split="valid_seen", dim=1024)
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, int(env.action_masks().sum()) == len(info["admissible_actions"])
    ((1024,), True)
    >>> make_sb3_env("rspo/ALFWorld-v0", split="valid_seen", dim=1024, layout="pairs", num_actions=64, slot_dim=128).observation_space.shape
    (9216,)
    """
    if layout not in LAYOUTS:
        raise ValueError(f"Unknown layout {layout!r}; expected one of {LAYOUTS}")
    try:
        from sb3_contrib.common.wrappers import ActionMasker
    except ImportError as error:
        raise ImportError("make_sb3_env needs sb3-contrib: install the [sb3] extra, pip install 'rspo-gym[sb3]'") from error
    env = gym.make(env_id, **kwargs) if isinstance(env_id, str) else env_id
    if task_ids is not None:
        env = TaskSubset(env, task_ids)
    env = AdmissibleActionIndex(env, num_actions, sort=sort, invalid_penalty=invalid_penalty)
    if layout == "pairs":
        env = ActionSlotFeaturizer(env, dim, history=history, slot_dim=slot_dim, positions=not sort)
    else:
        env = TextFeaturizer(env, dim, history=history, slots=num_actions if slot_features else 0)
    return ActionMasker(env, action_mask)
