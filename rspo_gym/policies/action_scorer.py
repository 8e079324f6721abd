"""A fast action-scoring policy (DRRN-style) that the LLM trainers train unchanged.

- ``HashingTokenizer``: words and word bigrams hashed (CRC-32) into a fixed number of ids; the
  collector renders its usual prompt (task, recent history, observation, admissible actions) and
  this tokenizer turns it into the "prompt ids" of a ``StepRow``.
- ``ActionScorer``: the network. One ``EmbeddingBag`` (mean of the hashed ids) shared by the state
  and the commands, an encoder per side, and one scorer over each (state, command) pair, as the
  Deep Reinforcement Relevance Network (He et al. 2016); a value head on the detached state code.
- ``ActionScorerPolicy``: the ``LLMPolicy`` interface the collector and trainers use (``generate``,
  ``forward``, ``logprobs``, parameters, ``copy`` for RSPO's explorer, ``state_dict``, ``save`` /
  ``load``).
- ``action_scorer_policy``: what ``Trainer`` builds for ``model="drrn"``, for a folder a drrn run
  saved its ``policy/`` to (``rspo-gym eval --model runs/<run>``), or for a policy given.

One action choice is one "response" of one "token": the response id is the chosen command's id in
a ``CommandRegistry`` (command text -> id, shared by a policy and its copies), and the row's
allowed ids (``StepRow.allowed_token_ids``, the field constrained decoding fills) are the ids of
every admissible command. ``to_batch`` then carries the whole choice set into the
``TrainingBatch``, so the trainer's log-prob of a row is the log-softmax of the chosen command's
score over its admissible set: the same restricted distribution it was sampled from. The policy
reads only what every policy reads: the rendered prompt and the admissible actions
(``constrained=True``, which the trainers default to).

Why: the 0.9M-parameter LLM makes a cell of the comparison cost 10-40 CPU minutes, so error bars
over seeds are out of reach; this scorer plays and trains over a thousand ALFWorld steps per second
on one core (``benchmarks/fast_policy_speed.py``), through the very estimators and losses.
"""

from __future__ import annotations

import copy as _copy
import json
import os
import re
import zlib
from dataclasses import asdict, dataclass
from itertools import chain
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np
import torch
from torch import nn

from rspo_gym.policies.hf_backend import inverse_cdf
from rspo_gym.policies.scorer_memory import FEATURES, MemoryEncoder, command_key, split_memory
from rspo_gym.rollout.generation import GenerationConfig, GenerationOutput
from rspo_gym.rollout.prompts import ALFWORLD, GENERIC, WEBSHOP, PromptBuilder

__all__ = [
    "ACTION_SCORER_MODELS",
    "ScorerConfig",
    "HashingTokenizer",
    "CommandRegistry",
    "ActionScorer",
    "ActionScorerPolicy",
    "action_scorer_policy",
    "is_saved_action_scorer",
]

#: Model names the trainers resolve to an ``ActionScorerPolicy``: the plain scorer, and the scorer
#: with an episode memory (``ScorerConfig.memory``, ``scorer_memory.py``).
ACTION_SCORER_MODELS = ("drrn", "drrn-memory")

_WORD_RE = re.compile(r"[a-z0-9]+")
_BIGRAM_MIX = 1_000_003  # a prime: (first * mix + second) spreads word-id pairs over the buckets
_TASK_MARK = "Your task is to: "
_STATE_MARK = "current observation is: "
_ACTIONS_MARK = "\nYour admissible actions"
_HISTORY_RE = re.compile(r"\[Observation \d+: '(.*?)', Action \d+: '(.*?)'\]", re.S)

#: Prompt sections (``HashingTokenizer``); commands are encoded in section 0.
TASK, OBSERVATION, PAST_OBSERVATIONS, PAST_ACTIONS = 1, 2, 3, 4
SECTIONS = 5
_FILE = "action_scorer.pt"
_CONFIG_FILE = "scorer_config.json"
#: Largest size field a saved scorer config may hold; the stored tensors must then match it.
_MAX_SIZE = 1 << 24
_PART_MEMO_SIZE = 200_000  # encoded prompt parts kept (HashingTokenizer.encoded_part)
_CHOICES_MEMO_SIZE = 50_000  # admissible lists whose ids are kept (CommandRegistry.ids)


@dataclass(frozen=True)
class ScorerConfig:
    """Sizes of the scorer (the defaults: 284,929 parameters, 65 more with a value head)."""

    buckets: int = 8192
    """Hashed ids (words and bigrams share them; id 0 is padding)."""
    embed_dim: int = 32
    """Width of the shared bag-of-ids embedding."""
    hidden: int = 64
    """Width of the state and command codes and of the scorer's hidden layer."""
    memory: bool = False
    """Give every (state, command) pair the episode memory's four facts (taken before, twice, what
    it revealed last time, the previous command; ``scorer_memory.py``): 256 more parameters,
    zero at the start, so an untrained memory scorer plays as the plain one of the same seed.
    ``model="drrn-memory"``."""


class HashingTokenizer:
    """Prompt text -> hashed word and bigram ids, tagged with the prompt section they come from.

    The collector renders its usual prompt (``rollout/prompts.py``: the task, the recent
    (observation, action) history, the current observation, the admissible actions); a bag of all
    its words would be mostly the admissible list and fixed wording, so the ids of the words that
    describe the state are drowned. This tokenizer reads the sections the templates share and
    keeps four: ``TASK``, ``OBSERVATION`` (the current one), ``PAST_OBSERVATIONS`` and
    ``PAST_ACTIONS``; the admissible actions are left to the command encoder and the fixed
    wording is dropped. A text without those markers is one ``OBSERVATION``.

    An id is ``section * buckets + hash``: the hash (CRC-32 of the word, or of a word pair mixed
    arithmetically, in ``[1, buckets)``) indexes one embedding table shared by every section and
    the commands, so "apple" in the task and in a command is one vector; the section says which
    mean it joins. CRC-32 rather than Python's ``hash``, so ids do not depend on the process.

    >>> tok = HashingTokenizer(64)
    >>> ids = tok("Go to fridge 1")["input_ids"]
    >>> len(ids), ids == tok("go to FRIDGE 1!")["input_ids"], all(ids[0] // 64 == OBSERVATION for _ in ids)
    (7, True, True)
    >>> prompt = "Your task is to: put a mug in the desk.\\nYour current observation is: You see a mug 1.\\nYour admissible actions of the current situation are: ['take mug 1']."
    >>> sorted({i // 64 for i in tok(prompt)["input_ids"]}) == [TASK, OBSERVATION]
    True
    """

    pad_token_id = 0
    chat_template = None  # the collector then tokenises the rendered prompt with __call__

    def __init__(self, buckets: int, memory: bool = False):
        if buckets < 2:
            raise ValueError(f"buckets must be at least 2 (0 is padding), got {buckets}")
        self.buckets = buckets
        self._memo: dict[str, int] = {}
        self._parts: dict[tuple[int, str], list[int]] = {}
        self.memory = MemoryEncoder(buckets, SECTIONS) if memory else None
        """With a memory, prompts end with the episode's memory ids (``scorer_memory.py``)."""

    def _id(self, key: str) -> int:
        found = self._memo.get(key)
        if found is None:
            found = 1 + zlib.crc32(key.encode()) % (self.buckets - 1)
            if len(self._memo) < 1_000_000:
                self._memo[key] = found
        return found

    def encode(self, text: str, section: int = 0) -> list[int]:
        """Hashes of the words of ``text`` (lower-cased alphanumeric runs) and of its word bigrams,
        offset by ``section * buckets``.

        A bigram's hash mixes its two word hashes arithmetically (no string per pair): this runs
        once per env step over hundreds of words.
        """
        memo = self._memo
        words = [memo.get(w) or self._id(w) for w in _WORD_RE.findall(text.lower())]
        if not words:
            words = [self._id("")]
        ids = np.asarray(words, dtype=np.int64)
        bigrams = 1 + (ids[:-1] * _BIGRAM_MIX + ids[1:]) % (self.buckets - 1)
        return (np.concatenate([ids, bigrams]) + section * self.buckets).tolist()

    def sections(self, text: str) -> list[tuple[int, str]]:
        """The ``(section, text)`` parts of a rendered prompt (see the class docstring).

        The current observation runs from ``current observation is: `` to the line break(s)
        before ``Your admissible actions``, the task from ``Your task is to: `` to the line's end
        (the first of each); ``str.find`` locates them at a fraction of a regular expression's
        cost over a prompt of a thousand characters, with the same result."""
        begin = text.find(_STATE_MARK)
        end = -1 if begin < 0 else text.find(_ACTIONS_MARK, begin + len(_STATE_MARK))
        if end < 0:
            return [(OBSERVATION, text)]
        start = begin + len(_STATE_MARK)
        while end > start and text[end - 1] == "\n":  # the observation ends where the breaks begin
            end -= 1
        parts = [(OBSERVATION, text[start:end])]
        task = text.find(_TASK_MARK)
        if task >= 0:
            task += len(_TASK_MARK)
            line_end = text.find("\n", task)
            parts.append((TASK, text[task:] if line_end < 0 else text[task:line_end]))
        for observation, action in _HISTORY_RE.findall(text, 0, begin):
            parts += [(PAST_OBSERVATIONS, observation), (PAST_ACTIONS, action)]
        return parts

    def encoded_part(self, text: str, section: int) -> list[int]:
        """``encode(text, section)``, remembered: a step's prompt repeats the task and the last
        steps' observations and actions, so most of its parts were encoded at earlier steps.
        The list returned is shared: callers copy it, never change it."""
        key = (section, text)
        found = self._parts.get(key)
        if found is None:
            if len(self._parts) >= _PART_MEMO_SIZE:  # a bound on memory; refilled by the next steps
                self._parts.clear()
            found = self._parts[key] = self.encode(text, section)
        return found

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        """The ids of a rendered prompt. With a memory, it is read from the history the prompt
        shows (its window): only ``prompt_ids`` sees the whole episode."""
        parts = self.sections(text)
        ids = self._joined(parts)
        if self.memory is not None:
            task = next((part for section, part in parts if section == TASK), "")
            past = [part for section, part in parts if section in (PAST_OBSERVATIONS, PAST_ACTIONS)]
            ids += self.memory.ids(task, list(zip(past[::2], past[1::2])), parts[0][1])
        return {"input_ids": ids}

    def prompt_ids(self, builder: PromptBuilder, task: str, observation: str, history: Sequence[tuple[str, str]]) -> list[int] | None:
        """``self(builder.build(task, observation, actions, history))["input_ids"]`` read from the
        fields, without rendering the prompt and parsing it back (``PromptBuilder.fitted_ids``
        asks for it): ``prompt_sections``, or None when that cannot tell. With a memory, its ids
        are read from the episode's whole ``history``, not only the window the prompt shows."""
        parts = prompt_sections(builder, task, observation, history)
        if parts is None:
            return None
        ids = self._joined(parts)
        if self.memory is not None:
            ids += self.memory.ids(task, history, observation)
        return ids

    def _joined(self, parts: list[tuple[int, str]]) -> list[int]:
        """The parts' ``encoded_part`` ids, concatenated; a part is its own memo key, so the
        common case (every part seen before) is one dictionary lookup per part."""
        memo = self._parts
        ids: list[int] = []
        for part in parts:
            found = memo.get(part)
            ids += found if found is not None else self.encoded_part(part[1], part[0])
        return ids


@dataclass(frozen=True)
class _Layout:
    """What a template puts right after its fields (see ``prompt_sections``)."""

    task_end: str
    observation_end: str
    first_has_task: bool


_LAYOUTS = {id(ALFWORLD): _Layout("", "", False), id(WEBSHOP): _Layout(".", ".", True), id(GENERIC): _Layout("", "", True)}


def prompt_sections(builder: PromptBuilder, task: str, observation: str, history: Sequence[tuple[str, str]]) -> list[tuple[int, str]] | None:
    """``HashingTokenizer.sections`` of ``builder.build(task, observation, actions, history)``, from
    the fields, for the suite's templates; None for another template or when a field holds text
    that would move what the parse finds (a section marker, a history entry's quote-and-comma).

    Rendering a step's prompt (its thousand characters, most of them the admissible actions this
    tokenizer drops) and finding the sections again cost more than the env step. Where no field
    holds the markers, the parse finds each field where the template put it: the current
    observation (its line breaks at the end dropped) and the task line, each with the template's
    punctuation after it, and the window's (observation, action) pairs. ALFWorld's first prompt
    shows no task, and the parse finds it in the observation, which the game's intro ends with.
    """
    layout = _LAYOUTS.get(id(builder.template))
    if layout is None:
        return None
    shown = builder.observation_text
    current = shown(observation) + layout.observation_end
    if _ACTIONS_MARK in current:
        return None
    parts = [(OBSERVATION, current.rstrip("\n"))]
    length = builder.history_length
    if not history or length <= 0:
        recent: Sequence[tuple[str, str]] = ()
    else:  # a list's tail, without copying a long episode's whole history at every step
        recent = history[-length:] if isinstance(history, (list, tuple)) else list(history)[-length:]
    if history or layout.first_has_task:
        if _STATE_MARK in task or "[Observation " in task:
            return None
        parts.append((TASK, (task + layout.task_end).partition("\n")[0]))
    else:  # ALFWorld's first step: the task is the observation's "Your task is to: ..." line
        found = current.find(_TASK_MARK)
        if found < 0:
            return None
        parts.append((TASK, current[found + len(_TASK_MARK):].partition("\n")[0]))
    for past, action in recent:
        past = shown(past)
        if _STATE_MARK in past or _STATE_MARK in action or "', Action " in past or "']" in action:
            return None
        parts += [(PAST_OBSERVATIONS, past), (PAST_ACTIONS, action)]
    return parts


class CommandRegistry:
    """Command text <-> a stable id and its hashed ids; shared by a policy and its copies, so
    their rows can be merged into one batch (RSPO's replay) and mean the same commands."""

    def __init__(self, tokenizer: HashingTokenizer, texts: Sequence[str] = ()):
        self.tokenizer = tokenizer
        self.texts: list[str] = []
        self.tokens: list[list[int]] = []
        self._ids: dict[str, int] = {}
        self._lists: dict[tuple[str, ...], list[int]] = {}  # ids of the admissible lists met (``ids``)
        # every command's hashed ids as rows of one 0-padded array (grown by doubling) and their
        # lengths: ``bags`` then indexes instead of building arrays from lists at every call
        self._table = np.zeros((64, 16), dtype=np.int64)
        self._lengths = np.zeros(64, dtype=np.int64)
        self._keys = np.zeros(64, dtype=np.int64)  # each command's ``command_key`` (the memory's)
        for text in texts:
            self.id(text)

    def id(self, text: str) -> int:
        found = self._ids.get(text)
        if found is None:
            found = self._ids[text] = len(self.texts)
            self.texts.append(text)
            tokens = self.tokenizer.encode(text)
            self.tokens.append(tokens)
            self._store(found, tokens)
        return found

    def ids(self, texts: Sequence[str]) -> list[int]:
        """``[id(t) for t in texts]`` (a new list), remembered per list of texts: a game state's
        admissible list recurs at most steps (group members, revisited places, commands that
        change nothing; ~95% of an ALFWorld rollout's rows), and one lookup of the whole list
        replaces one per command. A text's id never changes, so what is remembered stays true."""
        key = tuple(texts)
        found = self._lists.get(key)
        if found is None:
            found = list(map(self._ids.get, texts))
            if None in found:
                found = [self.id(text) for text in texts]
            if len(self._lists) >= _CHOICES_MEMO_SIZE:  # a bound on memory; refilled by the next steps
                self._lists.clear()
            self._lists[key] = found
        return list(found)

    def _store(self, index: int, tokens: list[int]) -> None:
        rows, width = self._table.shape
        if index >= rows or len(tokens) > width:
            grown = np.zeros((max(rows, 2 * index), max(width, len(tokens))), dtype=np.int64)
            grown[:rows, :width] = self._table
            self._table = grown
            self._lengths = np.concatenate([self._lengths, np.zeros(grown.shape[0] - rows, dtype=np.int64)])
            self._keys = np.concatenate([self._keys, np.zeros(grown.shape[0] - rows, dtype=np.int64)])
        self._table[index, :len(tokens)] = tokens
        self._lengths[index] = len(tokens)
        self._keys[index] = command_key(self.texts[index])

    def keys(self, ids: np.ndarray) -> np.ndarray:
        """These commands' ``command_key`` s (what the memory ids name them by)."""
        return self._keys[ids]

    def bags(self, ids: np.ndarray) -> "Bags":
        """These commands' hashed ids, one bag a command (``ActionScorer.scores`` pools them)."""
        counts = self._lengths[ids]
        table = self._table[ids, :counts.max()]
        return _bags(table[table > 0], np.repeat(np.arange(len(ids)), counts), counts)


class Bags(NamedTuple):
    """Groups of embedding rows to average (what ``ActionScorer.scores`` pools): ``ids`` grouped by
    bag, in their order within each bag; ``bags`` the bag of each id; ``offsets`` where each bag
    starts in ``ids``; ``counts`` its size (0: an empty bag, pooled as 0). NumPy arrays: they are
    built from a few thousand integers, where torch's per-call overhead costs more than the work."""

    ids: np.ndarray
    bags: np.ndarray
    offsets: np.ndarray
    counts: np.ndarray

    def join(self, other: "Bags") -> "Bags":
        """These bags, then ``other``'s, as one set: one pooling pass, one embedding gradient."""
        return Bags(
            np.concatenate([self.ids, other.ids]), np.concatenate([self.bags, other.bags + len(self.counts)]),
            np.concatenate([self.offsets, other.offsets + len(self.ids)]), np.concatenate([self.counts, other.counts]),
        )


def _bags(ids: np.ndarray, bags: np.ndarray, counts: np.ndarray) -> Bags:
    """``Bags`` of ids already grouped by bag (``bags`` ascending) with the bags' sizes."""
    return Bags(ids, bags, np.cumsum(counts) - counts, counts)


def section_bags(rows: np.ndarray, ids: np.ndarray, num_rows: int, buckets: int) -> Bags:
    """The ``num_rows * SECTIONS`` bags of prompts given as ``ids`` (sectioned hashed ids, see
    ``HashingTokenizer``) with the prompt row of each (rows ascending, each row's ids in order):
    bag ``row * SECTIONS + section``. A stable sort keeps each bag's ids in prompt order, so a
    prompt's means come out the same in any batch (its rollout and its update)."""
    section, hashed = np.divmod(ids, buckets)
    bags = rows * SECTIONS + section
    order = np.argsort(bags, kind="stable")
    return _bags(hashed[order], bags[order], np.bincount(bags, minlength=num_rows * SECTIONS))


def padded_prompt_ids(prompts: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, ids)``: the real ids of 0-padded ``(B, P)`` prompt ids (a training batch's), those
    where ``mask`` (the attention mask) is non-zero if given, and the row of each.

    Each id's row comes from the rows' counts (``numpy.repeat``), which orders them as
    ``numpy.nonzero`` would, at a fraction of a 2-D ``nonzero``'s cost."""
    ids = prompts.numpy()
    real = ids > 0
    if mask is not None:
        real &= mask.numpy() > 0
    return np.repeat(np.arange(len(ids)), real.sum(1)), ids[real]


def listed_prompt_ids(prompts: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, ids)`` of prompts as lists of ids (a rollout turn's), without padding them first."""
    lengths = np.fromiter(map(len, prompts), dtype=np.int64, count=len(prompts))
    ids = np.fromiter(chain.from_iterable(prompts), dtype=np.int64, count=int(lengths.sum()))
    return np.repeat(np.arange(len(prompts)), lengths), ids


def padded_section_bags(prompts: torch.Tensor, buckets: int, mask: torch.Tensor | None = None) -> Bags:
    """``section_bags`` of 0-padded ``(B, P)`` prompt ids (``padded_prompt_ids``)."""
    return section_bags(*padded_prompt_ids(prompts, mask), len(prompts), buckets)


def listed_section_bags(prompts: Sequence[Sequence[int]], buckets: int) -> Bags:
    """``section_bags`` of prompts as lists of ids (``listed_prompt_ids``)."""
    return section_bags(*listed_prompt_ids(prompts), len(prompts), buckets)


class Choices(NamedTuple):
    """The (state, command) pairs to score: pair ``i`` is command ``distinct[commands[i]]`` (a
    registry id) for state ``rows[i]``, shown at cell ``cells[i]`` (row-major) of the ``shape``
    score table (-inf elsewhere). Each distinct command is encoded once."""

    rows: torch.Tensor
    commands: torch.Tensor
    cells: torch.Tensor
    distinct: np.ndarray
    shape: tuple[int, int]


def choices_of(rows: np.ndarray, columns: np.ndarray, command_ids: np.ndarray, shape: tuple[int, int]) -> Choices:
    """``Choices`` of pairs given row by row (``rows`` ascending) with their registry command ids."""
    distinct, local = distinct_ids(command_ids)
    cells = rows * shape[1] + columns
    return Choices(torch.from_numpy(rows), torch.from_numpy(local), torch.from_numpy(cells), distinct, shape)


def distinct_ids(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``numpy.unique(ids, return_inverse=True)`` of non-negative ids (registry ids), flattened.

    Registry ids are small dense integers, so marking the ids present in a table as long as the
    largest id and ranking them with a running count gives the same answer without sorting:
    ~4x faster on a turn's or a micro-batch's choices, where sorting them was a tenth of the
    bag building. Ids spread far beyond their count go through ``numpy.unique``."""
    top = int(ids.max()) + 1 if len(ids) else 0
    if top > 16 * len(ids) + 65_536:
        distinct, local = np.unique(ids, return_inverse=True)
        return distinct, local.reshape(-1)
    present = np.zeros(top, dtype=bool)
    present[ids] = True
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present), rank[ids]


def padded_choices(choices: torch.Tensor) -> Choices:
    """``Choices`` of a ``(B, K)`` table of registry ids, -1 pads (a training batch's allowed ids)."""
    ids = choices.numpy()
    rows, columns = np.nonzero(ids >= 0)
    return choices_of(rows, columns, ids[rows, columns], ids.shape)


def listed_choices(ids: Sequence[Sequence[int]]) -> Choices:
    """``Choices`` of each prompt's list of registry ids (a rollout turn's)."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
    rows = np.repeat(np.arange(len(ids)), lengths)
    columns = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return choices_of(rows, columns, flat, (len(ids), int(lengths.max())))


def _tanh_addmm(bias: torch.Tensor, x: torch.Tensor, weight_t: torch.Tensor) -> torch.Tensor:
    """``tanh(torch.addmm(bias, x, weight_t))`` as ``2 sigmoid(2 y) - 1`` (equal to float32
    rounding, within 2e-7): torch's CPU tanh kernel runs ~3x slower than its sigmoid, and the
    scorer's hidden layer over every (state, command) pair was a large share of a training step.
    The doubling is ``addmm``'s own ``alpha = beta = 2``: scaling by a power of two is exact, so
    ``2 y`` comes out of the product bit for bit, without a pass of its own."""
    return torch.addmm(bias, x, weight_t, beta=2, alpha=2).sigmoid_().mul_(2).sub_(1)  # in place: no second (pairs, h) buffer


_MEAN = 1  # torch.embedding_bag's mode code of "mean"


def _blocks(first_w: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``W_s``, ``W_a``, ``W_sa`` column blocks of the first scorer layer, as views (slicing is
    a fraction of ``Tensor.split``'s Python-side cost)."""
    return first_w[:, :width], first_w[:, width:2 * width], first_w[:, 2 * width:]


def _scores_forward(embed, state_w, state_b, command_w, command_b, first_w, first_b, last_w, last_b, bags: Bags, split: int,
                    choices: Choices, memory_w: torch.Tensor | None = None, features: torch.Tensor | None = None,
                    ) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, ...], tuple[Choices, tuple]]:
    """``_Scores``' forward pass: ``(scores table, state codes)``, what its backward reads, and the
    choices and shapes it needs; called directly where no gradient is wanted (a rollout's turns),
    without the autograd node's bookkeeping.

    The bags' mean embeddings (one ``embedding_bag``); the state code ``s = tanh(W_1 x_s + b_1)``
    of each prompt's section means side by side and the code ``a = tanh(W_2 x_a + b_2)`` of each
    distinct command; per (state, command) pair ``w · tanh(W_s s + W_a a + W_sa (s ⊙ a) + b) + c``
    (``+ W_m m`` inside the tanh with the pairs' memory ``features`` m), placed in the
    ``choices.shape`` table (-inf elsewhere)."""
    ids, bag, counts = torch.from_numpy(bags.ids), torch.from_numpy(bags.bags), torch.from_numpy(bags.counts)
    means = torch.embedding_bag(embed, ids, torch.from_numpy(bags.offsets), False, _MEAN)[0]  # F.embedding_bag's checks cost more
    dim, hidden_size = embed.shape[1], state_w.shape[0]
    x_state = means[:split].view(-1, SECTIONS * dim)[:, dim:]  # sections 1.. side by side
    x_command = means[split:]
    state = _tanh_addmm(state_b, x_state, state_w.t())
    codes = _tanh_addmm(command_b, x_command, command_w.t())
    w_state, w_command, w_product = _blocks(first_w, hidden_size)
    rows, commands = choices.rows, choices.commands
    s, a = state.index_select(0, rows), codes.index_select(0, commands)
    product = s * a
    per_pair = torch.addmm(first_b, state, w_state.t()).index_select(0, rows)
    per_pair += (codes @ w_command.t()).index_select(0, commands)
    if features is not None:
        per_pair.addmm_(features, memory_w.t())
    hidden = _tanh_addmm(per_pair, product, w_product.t())
    raw = torch.addmv(last_b, hidden, last_w[0])
    table = torch.full((choices.shape[0] * choices.shape[1],), float("-inf"), dtype=raw.dtype)
    saved = (ids, bag, counts, state_w, command_w, first_w, last_w, x_state, x_command, state, codes, s, a, product, hidden)
    return (table.index_copy_(0, choices.cells, raw).view(choices.shape), state), saved, (choices, (embed.shape, means.shape, split))


class _Scores(torch.autograd.Function):
    """``ActionScorer.scores`` as one autograd node, its backward the chain rule written out
    (forward: ``_scores_forward``).

    Why by hand: at these sizes (a few thousand ids and pairs, width 64) the arithmetic is cheap
    and autograd's graph was not: ~30 nodes of gathers, slices, splits of ``W`` and scatters, each
    with bookkeeping and zero-filled buffers, and torch's backward of mean bags sorts the ids. Here
    each gradient is one pass: a mean's is its bag's gradient over its size, added to the rows of
    its ids by one ``index_add_``.
    """

    @staticmethod
    def forward(ctx, *inputs):  # type: ignore[override]
        (table, state), saved, (choices, shapes) = _scores_forward(*inputs)
        ctx.save_for_backward(*saved)
        ctx.choices, ctx.shape = choices, shapes
        ctx.features = inputs[13] if len(inputs) > 13 else None  # a memory scorer's (memory_w, features)
        return table, state

    @staticmethod
    def backward(ctx, g_table, g_state_out):  # type: ignore[override]
        (ids, bag, counts, state_w, command_w, first_w, last_w, x_state, x_command, state, codes,
         s, a, product, hidden) = ctx.saved_tensors
        choices, (embed_shape, means_shape, split) = ctx.choices, ctx.shape
        rows, commands = choices.rows, choices.commands
        w_state, w_command, w_product = _blocks(first_w, state.shape[1])
        g_raw = g_table.reshape(-1).index_select(0, choices.cells)
        g_hidden = torch.outer(g_raw, last_w[0])  # (pairs, h) buffers are reused in place below: fewer fresh pages per step
        torch.ops.aten.tanh_backward.grad_input(g_hidden, hidden, grad_input=g_hidden)
        g_product = g_hidden @ w_product
        g_per_state = state.new_zeros(state.shape).index_add_(0, rows, g_hidden)
        g_per_command = codes.new_zeros(codes.shape).index_add_(0, commands, g_hidden)
        g_codes_pairs = g_product * s
        g_state = torch.addmm(state.new_zeros(state.shape).index_add_(0, rows, g_product.mul_(a)), g_per_state, w_state)
        if g_state_out is not None:
            g_state += g_state_out
        g_codes = torch.addmm(codes.new_zeros(codes.shape).index_add_(0, commands, g_codes_pairs), g_per_command, w_command)
        g_first_w = torch.cat([g_per_state.t() @ state, g_per_command.t() @ codes, g_hidden.t() @ product], dim=1)
        g_state_in = torch.ops.aten.tanh_backward(g_state, state)
        g_command_in = torch.ops.aten.tanh_backward(g_codes, codes)
        g_means = state.new_zeros(means_shape)
        dim = means_shape[1]
        g_means[:split].view(-1, SECTIONS * dim)[:, dim:] = g_state_in @ state_w
        g_means[split:] = g_command_in @ command_w
        per_id = (g_means / counts.clamp(min=1).unsqueeze(1)).index_select(0, bag)
        g_embed = state.new_zeros(embed_shape).index_add_(0, ids, per_id)
        g_memory_w = None if ctx.features is None else g_hidden.t() @ ctx.features
        return (g_embed, g_state_in.t() @ x_state, g_state_in.sum(0), g_command_in.t() @ x_command, g_command_in.sum(0),
                g_first_w, g_per_state.sum(0), (g_raw @ hidden).unsqueeze(0), g_raw.sum().view(1), None, None, None, g_memory_w, None)


class ActionScorer(nn.Module):
    """``score(s, a) = w · tanh(W [s; a; s ⊙ a])`` with ``s``, ``a`` the state and command codes.

    The state code reads the mean word embedding of each prompt section (task, current
    observation, past observations, past actions) side by side; the command code the mean
    embedding of the command's words. One embedding table serves both sides. With
    ``config.memory`` the pair layer also reads each pair's memory features ``m``:
    ``w · tanh(W [s; a; s ⊙ a] + W_m m)``, ``W_m`` zero at the start.
    """

    def __init__(self, config: ScorerConfig):
        super().__init__()
        self.buckets = config.buckets
        self.embed = nn.Embedding(config.buckets, config.embed_dim, padding_idx=0)
        self.state = nn.Sequential(nn.Linear((SECTIONS - 1) * config.embed_dim, config.hidden), nn.Tanh())
        self.command = nn.Sequential(nn.Linear(config.embed_dim, config.hidden), nn.Tanh())
        self.scorer = nn.Sequential(nn.Linear(3 * config.hidden, config.hidden), nn.Tanh(), nn.Linear(config.hidden, 1))
        self.memory: nn.Linear | None = None
        if config.memory:  # made last, so the other layers draw the same initial weights as the plain scorer's
            self.memory = nn.Linear(len(FEATURES), config.hidden, bias=False)
            nn.init.zeros_(self.memory.weight)

    def scores(self, prompts: Bags, commands: Bags, choices: Choices,
               features: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``choices.shape`` scores of ``choices`` (-inf where there is none), whose commands'
        bags are ``commands`` (one per distinct command), and the ``(B, h)`` state codes of
        ``prompts`` (``SECTIONS`` bags a row); the modules' forward passes, computed by ``_Scores``.

        The prompts' and the commands' means are one pooling pass over the real ids only (padding
        is most of a batch of prompts of unequal length). The first scorer layer ``W [s; a; s ⊙ a]``
        is applied as ``W_s s + W_a a + W_sa (s ⊙ a)``: ``W_s s`` once per state and ``W_a a`` once
        per distinct command rather than once per (state, command) pair, and only real pairs are
        scored. ``features``: the pairs' ``(pairs, len(FEATURES))`` memory features (a memory
        scorer's, which needs them).
        """
        (state, _), (command, _), (first, _, last) = self.state, self.command, self.scorer
        inputs = (self.embed.weight, state.weight, state.bias, command.weight, command.bias, first.weight, first.bias,
                  last.weight, last.bias, prompts.join(commands), len(prompts.counts), choices)
        if self.memory is not None:
            if features is None:
                raise ValueError("a memory scorer needs the pairs' memory features")
            inputs += (self.memory.weight, features)
        if not torch.is_grad_enabled():  # a rollout turn, old log-probs: no graph to record
            return _scores_forward(*inputs)[0]
        return _Scores.apply(*inputs)


_MASK64 = (1 << 64) - 1


def row_uniforms(seeds: Sequence[int]) -> torch.Tensor:
    """One uniform in [0, 1) per seed (float64): splitmix64's output function of the seed (Steele,
    Lea and Flood 2014), so a row's draw depends on its seed alone, not on the batch it shares.
    A vectorised mix of all the rows costs microseconds; a seeded generator per row, ~4 µs each."""
    z = np.fromiter((s & _MASK64 for s in seeds), dtype=np.uint64, count=len(seeds))
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return torch.from_numpy((z >> np.uint64(11)).astype(np.float64) * 2.0**-53)


def _tempered(scores: torch.Tensor, temperature: float) -> torch.Tensor:
    return scores / temperature if temperature > 0 and temperature != 1 else scores  # x / 1 is x


class ActionScorerPolicy:
    """A DRRN that acts and learns through the ``LLMPolicy`` interface (see the module docstring).

    Args:
        config: the network's sizes.
        value_head: attach PPO's critic (a linear read-out of the detached state code).
        seed: initialisation and the default sampling stream.
        registry: share another policy's commands (``copy`` does); None starts an empty one.
    """

    adapter = None  # no LoRA: the trainers' adapter paths never apply
    autocast_dtype = None
    fused_optimizer = True  # the trainers' AdamW runs fused: its unfused steps over the dense
    # embedding gradient (most of the parameters) cost as much as a forward and backward pass

    def __init__(self, config: ScorerConfig = ScorerConfig(), *, value_head: bool = False, seed: int = 0,
                 micro_batch_size: int = 16, registry: CommandRegistry | None = None):
        self.config = config
        self.tokenizer = registry.tokenizer if registry is not None else HashingTokenizer(config.buckets, memory=config.memory)
        self.commands = registry if registry is not None else CommandRegistry(self.tokenizer)
        self.micro_batch_size = micro_batch_size  # read by the trainers; every pass here takes the whole batch
        torch.manual_seed(seed)
        self.model = ActionScorer(config)
        self.value_head: nn.Linear | None = nn.Linear(config.hidden, 1) if value_head else None
        self._generator = torch.Generator().manual_seed(seed)

    # -- acting ------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    @property
    def pad_token_id(self) -> int:
        return HashingTokenizer.pad_token_id

    @torch.inference_mode()
    def generate(self, prompt_ids: Sequence[Sequence[int]], config: GenerationConfig = GenerationConfig(),
                 allowed: Sequence[Sequence[str]] | None = None) -> GenerationOutput:
        """One admissible command per prompt, sampled from ``softmax(scores / temperature)``
        (greedy at temperature 0); its log-prob is that of the tempered softmax, as the trainer
        recomputes it."""
        if allowed is None:
            raise ValueError("the drrn policy chooses among the admissible actions: use constrained=True")
        if any(len(choices) == 0 for choices in allowed):
            raise ValueError("a prompt came with no admissible action to choose from")
        ids = [self.commands.ids(choices) for choices in allowed]
        scores = self._scores(listed_prompt_ids(prompt_ids), len(prompt_ids), listed_choices(ids))[0]
        logits = _tempered(scores, config.temperature)
        if config.temperature > 0:
            picks = inverse_cdf(torch.softmax(logits, -1).double(), self._uniforms(config, len(ids)))
        else:
            picks = logits.argmax(-1)
        logprobs = torch.log_softmax(logits, -1).gather(-1, picks[:, None]).squeeze(-1)
        chosen = [row[k] for row, k in zip(ids, picks.tolist())]
        return GenerationOutput(
            texts=[self.commands.texts[c] for c in chosen],
            response_ids=[[c] for c in chosen],
            logprobs=[[lp] for lp in logprobs.tolist()],  # tolist gives Python floats
            allowed_token_ids=[[row] for row in ids],
        )

    def _uniforms(self, config: GenerationConfig, rows: int) -> torch.Tensor:
        """One uniform in [0, 1) per row: from the row's own seed where ``row_seeds`` are given (the
        collector's, one per sub-env and turn, while ``seed`` stays the iteration's), else from
        ``seed``'s generator (or the policy's own)."""
        row_seeds = config.checked_row_seeds(rows)
        if row_seeds is not None:
            return row_uniforms(row_seeds)
        generator = torch.Generator().manual_seed(config.seed) if config.seed is not None else self._generator
        return torch.rand(rows, generator=generator, dtype=torch.float64)

    def _scores(self, prompts: tuple[np.ndarray, np.ndarray], count: int, choices: Choices) -> tuple[torch.Tensor, torch.Tensor]:
        """The scores of ``choices`` and the state codes of the ``count`` prompts given as
        ``(rows, ids)`` (``ActionScorer.scores``); a memory scorer's memory ids become the pairs'
        features (``split_memory``), the rest the section bags."""
        rows, ids = prompts
        features = None
        if self.config.memory:
            rows, ids, features = split_memory(rows, ids, SECTIONS * self.config.buckets, choices.rows.numpy(),
                                               self.commands.keys(choices.distinct)[choices.commands.numpy()])
        bags = section_bags(rows, ids, count, self.config.buckets)
        return self.model.scores(bags, self.commands.bags(choices.distinct), choices, features)

    def sync_weights(self) -> None:
        """Nothing to push: acting and learning share the weights."""

    def release_generation_memory(self) -> None:
        """Nothing to release: no generation engine."""

    def enable_gradient_checkpointing(self) -> None:
        """A documented no-op: the scorer keeps no per-layer activations worth recomputing."""

    # -- learning ----------------------------------------------------------------------------
    def forward(self, batch, *, temperature: float = 1.0, entropy: bool = False, values: bool = False) -> dict[str, torch.Tensor]:
        """``(rows, R)`` log-probs (and entropies, values) of a ``TrainingBatch`` of this policy's
        rows; column 0 holds the choice, wider columns (padding from other rows) are 0."""
        if values and self.value_head is None:
            raise ValueError("this policy has no value head: build it with value_head=True")
        if batch.allowed is None:
            raise ValueError("the batch has no allowed ids: its rows were not chosen by an action-scoring policy")
        P = batch.prompt_length
        width = batch.response_mask.shape[1]
        choices = batch.allowed[:, 0, :]
        prompts = padded_prompt_ids(batch.input_ids[:, :P], batch.attention_mask[:, :P])
        scores, state = self._scores(prompts, len(choices), padded_choices(choices))
        logp = torch.log_softmax(_tempered(scores, temperature), -1)
        position = (choices == batch.input_ids[:, P:P + 1]).float().argmax(-1, keepdim=True)
        result = {"logprobs": _widen(logp.gather(-1, position).squeeze(-1), width)}
        if entropy:
            p = logp.exp()
            result["entropy"] = _widen(-(p * logp.masked_fill(choices < 0, 0.0)).sum(-1), width)
        if values:
            result["values"] = _widen(self.value_head(state.detach()).squeeze(-1), width)
        return result

    @torch.no_grad()
    def logprobs(self, batch, *, temperature: float = 1.0, values: bool = False, max_tokens: int | None = None) -> dict[str, torch.Tensor]:
        """``forward`` without gradients, in eval mode (the whole batch at once: it is small)."""
        was_training = self.model.training
        self.train(False)
        try:
            return self.forward(batch, temperature=temperature, values=values)
        finally:
            self.train(was_training)

    def policy_parameters(self) -> list[nn.Parameter]:
        return list(self.model.parameters())

    def critic_parameters(self) -> list[nn.Parameter]:
        return [] if self.value_head is None else list(self.value_head.parameters())

    def parameters(self) -> list[nn.Parameter]:
        return self.policy_parameters() + self.critic_parameters()

    def train(self, mode: bool = True) -> "ActionScorerPolicy":
        self.model.train(mode)
        if self.value_head is not None:
            self.value_head.train(mode)
        return self

    # -- copies and persistence --------------------------------------------------------------
    def copy(self, *, value_head: bool | None = None, seed: int = 0) -> "ActionScorerPolicy":
        """A policy with a copy of these weights (and value head), sharing the command registry;
        ``seed`` starts its own sampling stream (RSPO's explorer)."""
        other = ActionScorerPolicy(self.config, value_head=False, seed=seed, micro_batch_size=self.micro_batch_size, registry=self.commands)
        other.model = _copy.deepcopy(self.model)
        wants_head = self.value_head is not None if value_head is None else value_head
        if wants_head:
            other.value_head = _copy.deepcopy(self.value_head) if self.value_head is not None else nn.Linear(self.config.hidden, 1)
        return other

    def frozen_copy(self) -> "ActionScorerPolicy":
        """A copy that never trains (a KL reference)."""
        frozen = self.copy(value_head=False)
        for parameter in frozen.parameters():
            parameter.requires_grad_(False)
        return frozen

    def state_dict(self) -> dict[str, Any]:
        state = {"model": self.model.state_dict(), "commands": list(self.commands.texts)}
        if self.value_head is not None:
            state["value_head"] = self.value_head.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Weights, value head and commands; the commands saved must extend this registry's."""
        known = self.commands.texts
        saved = state["commands"]
        if saved[:len(known)] != known[:len(saved)]:
            raise ValueError("the checkpoint's command ids disagree with this policy's: load into a fresh policy")
        for text in saved[len(known):]:
            self.commands.id(text)
        self.model.load_state_dict(state["model"])
        if self.value_head is not None and "value_head" in state:
            self.value_head.load_state_dict(state["value_head"])

    def save(self, path: str | Path, *, merged: bool = False) -> None:
        """``action_scorer.pt`` (weights, commands) and ``scorer_config.json`` in folder ``path``
        (``merged`` is accepted for the trainers' call; there is no adapter to merge)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), path / _FILE)
        (path / _CONFIG_FILE).write_text(json.dumps(asdict(self.config), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path, *, value_head: bool | None = None, seed: int = 0, micro_batch_size: int = 16) -> "ActionScorerPolicy":
        """The policy ``save`` wrote to ``path``. ``value_head``: None keeps what was saved; True
        adds a fresh head where none was (PPO continuing a GRPO run), False leaves it out."""
        path = Path(path)
        config, state = _read_saved(path)
        head = "value_head" in state if value_head is None else value_head
        policy = cls(config, value_head=head, seed=seed, micro_batch_size=micro_batch_size)
        policy.load_state_dict(state)
        return policy


def _read_saved(path: Path) -> tuple[ScorerConfig, dict[str, Any]]:
    """The config and state ``save`` wrote to ``path``, refused in one line (``UserError``) when
    unreadable, when the weights hold more than data, or when the config's sizes are not those of
    the stored tensors: sizes come from the file, so they are checked against the tensors (on the
    ``meta`` device, where nothing is allocated) before a policy of that size is built."""
    import pickle

    from rspo_gym.errors import UserError
    from rspo_gym.safe_pickle import check_torch_file, is_refusal, refusal_reason

    file = path / _CONFIG_FILE
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        config = ScorerConfig(**data)
    except (OSError, UnicodeDecodeError, ValueError, TypeError, RecursionError) as err:
        raise UserError(f"{file} is not a scorer config ({type(err).__name__}): pass a folder rspo-gym wrote") from None
    fields = asdict(config)
    if not all(type(fields[k]) is int and 0 < fields[k] <= _MAX_SIZE for k in ("buckets", "embed_dim", "hidden")) or type(config.memory) is not bool:
        raise UserError(f"{file}: buckets, embed_dim and hidden must be integers from 1 to {_MAX_SIZE} and memory a boolean, got {data}")
    try:
        check_torch_file(str(path / _FILE))
        state = torch.load(path / _FILE, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if not is_refusal(err):  # not torch's format at all: damaged, not hostile
            raise UserError(f"{path / _FILE} is unreadable ({str(err).splitlines()[0]}): pass an intact policy folder") from None
        raise UserError(f"{path / _FILE} is refused: {refusal_reason(err)}; nothing in it was run: use a policy folder you trust") from None
    except (OSError, RuntimeError, EOFError) as err:
        raise UserError(f"{path / _FILE} is unreadable ({str(err).splitlines()[0] if str(err) else type(err).__name__}): "
                        f"pass an intact policy folder") from None
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict) or not isinstance(state.get("commands"), list):
        raise UserError(f"{path / _FILE} is not a saved action scorer (no model weights and commands)")
    with torch.device("meta"):
        expected = {name: tuple(t.shape) for name, t in ActionScorer(config).state_dict().items()}
    stored = {name: tuple(t.shape) if isinstance(t, torch.Tensor) else None for name, t in state["model"].items()}
    if isinstance(state.get("value_head"), dict):
        expected.update({"value_head.weight": (1, config.hidden), "value_head.bias": (1,)})
        stored.update({f"value_head.{name}": tuple(t.shape) if isinstance(t, torch.Tensor) else None
                       for name, t in state["value_head"].items()})
    if stored != expected:
        wrong = sorted(name for name in expected.keys() | stored.keys() if expected.get(name) != stored.get(name))
        raise UserError(f"{file} does not match the tensors of {_FILE} ({', '.join(wrong[:3])}: "
                        f"{[stored.get(n) for n in wrong[:3]]} stored, {[expected.get(n) for n in wrong[:3]]} by the config)")
    return config, state


def _widen(column: torch.Tensor, width: int) -> torch.Tensor:
    """A ``(B,)`` per-row value as the ``(B, width)`` per-token layout (0 past the one "token")."""
    if width == 1:
        return column[:, None]
    return torch.cat([column[:, None], column.new_zeros(len(column), width - 1)], dim=1)


def is_saved_action_scorer(path: Any) -> bool:
    """Whether ``path`` is a folder ``ActionScorerPolicy.save`` wrote: a drrn run's ``policy/``,
    which holds no transformers model, so it must be recognised before one is looked for."""
    return isinstance(path, (str, os.PathLike)) and (Path(path).expanduser() / _CONFIG_FILE).is_file()


def action_scorer_policy(model: Any, config, *, value_head: bool) -> ActionScorerPolicy | None:
    """The action-scoring policy a trainer uses for ``model`` (``"drrn"``, a folder it was saved
    to, or a policy given), else None. Checks the settings it needs: ``constrained=True`` (it
    chooses among the admissible actions) and the transformers backend (there is no text to
    generate with vLLM)."""
    if isinstance(model, str) and model in ACTION_SCORER_MODELS:
        model = ActionScorerPolicy(ScorerConfig(memory=model == "drrn-memory"), value_head=value_head, seed=config.seed,
                                   micro_batch_size=config.micro_batch_size)
    elif is_saved_action_scorer(model):
        model = ActionScorerPolicy.load(Path(model).expanduser(), value_head=value_head, seed=config.seed,
                                        micro_batch_size=config.micro_batch_size)
    if not isinstance(model, ActionScorerPolicy):
        return None
    if not config.constrained:
        raise ValueError("the drrn policy chooses among the admissible actions: set constrained=True")
    if config.generation_backend != "hf":
        raise ValueError("the drrn policy generates no text: use generation_backend='hf'")
    if value_head and model.value_head is None:
        raise ValueError("this trainer needs a policy built with value_head=True")
    return model
