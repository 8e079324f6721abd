"""The episode memory of the ``drrn-memory`` scorer: what was done so far, and what it revealed.

The plain scorer reads the last ``history_length`` (observation, action) pairs. On ALFWorld that
is not enough to search: it cannot tell which receptacles it has already looked in, nor recall
where it saw the task's object ten steps ago, so its wins are lucky walks and RL has little to
sharpen. The memory gives every (state, command) pair four facts about the whole episode:

- ``taken``: the command was chosen before in this episode;
- ``taken_twice``: at least twice (loops: open/close, go back and forth);
- ``found``: the last time it was chosen, the observation that followed mentioned a word of the
  task that the command itself does not contain ("go to countertop 2" -> "On the countertop 2,
  you see a apple 1" for a task about an apple; "open cabinet 3" -> "... In it, you see a pot 1");
- ``last``: it was the previous command.

They are generic (text only: any env whose task and observations are text), and enter the
scorer's pair layer beside the state and command codes, so their effect depends on the state
(going back to where the apple was is good once the apple is not yet in hand).

How the facts travel: the tokenizer appends *memory ids* to a prompt's ids, one per past command
(its kind and a CRC-32 of its text), so the memory is part of the row's prompt. The update then
recomputes exactly the distribution the row was sampled from (the contract every policy keeps),
the memory is per sub-env and starts empty with each episode (it is read from the episode's own
history), and rows of different episodes mix freely in a batch. A memory id is
``offset + kind * 2**32 + crc32(command)`` with ``offset = SECTIONS * buckets``: above every
section id, so the section bags ignore them, and keyed by the full 32-bit hash, so two commands
collide only if their CRC-32s do.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["FEATURES", "command_key", "task_words", "memory_ids", "split_memory"]

#: The pair features, in column order.
FEATURES = ("taken", "taken_twice", "found", "last")
TAKEN, FOUND, LAST = 0, 1, 2
KINDS = 3
_KIND_STRIDE = 1 << 32
_WORD_RE = re.compile(r"[a-z]+")
_STOPWORDS = frozenset(
    "a an the and or of to in on at for with from into onto some any it its is are be then put place find look "
    "examine i need want buy get me my you your than lower price dollars under over".split()
)
_MEMO_SIZE = 200_000


def command_key(text: str) -> int:
    """The 32-bit key of a command's text in memory ids (``CommandRegistry`` keeps one per id)."""
    return zlib.crc32(text.encode())


def task_words(task: str) -> frozenset[str]:
    """The task's content words: alphabetic words of three letters or more, stop words removed.

    >>> sorted(task_words("put a cool pot in cabinet."))
    ['cabinet', 'cool', 'pot']
    """
    return frozenset(w for w in _WORD_RE.findall(task.lower()) if len(w) > 2 and w not in _STOPWORDS)


class MemoryEncoder:
    """``memory_ids`` with its per-entry work remembered: a step's prompt re-reads the whole
    episode's history, so each (task, command, what followed) is looked at once, not once a step."""

    def __init__(self, buckets: int, sections: int):
        self.offset = sections * buckets
        self._found: dict[tuple[str, str, str], bool] = {}
        self._tasks: dict[str, frozenset[str]] = {}

    def found(self, task: str, command: str, after: str) -> bool:
        """Whether ``after`` mentions a content word of ``task`` that ``command`` does not."""
        key = (task, command, after)
        hit = self._found.get(key)
        if hit is None:
            words = self._tasks.get(task)
            if words is None:
                words = self._tasks[task] = task_words(task)
            new = words - set(_WORD_RE.findall(command.lower()))
            hit = bool(new) and not new.isdisjoint(_WORD_RE.findall(after.lower()))
            if len(self._found) >= _MEMO_SIZE:  # a bound on memory; refilled by the next steps
                self._found.clear()
                self._tasks.clear()
            self._found[key] = hit
        return hit

    def ids(self, task: str, history: Sequence[tuple[str, str]], observation: str) -> list[int]:
        """The memory ids of a step: ``history`` is the episode's (observation, command) pairs so
        far, each observation the one the command answered, and ``observation`` the current one
        (what the last command led to)."""
        if not history:
            return []
        offset = self.offset
        taken = [offset + TAKEN * _KIND_STRIDE + command_key(command) for _, command in history]
        followed: dict[str, str] = {}  # command -> the observation after its latest use
        for k, (_, command) in enumerate(history):
            followed[command] = history[k + 1][0] if k + 1 < len(history) else observation
        found = [offset + FOUND * _KIND_STRIDE + command_key(c) for c, after in followed.items() if self.found(task, c, after)]
        return taken + found + [offset + LAST * _KIND_STRIDE + command_key(history[-1][1])]


def memory_ids(task: str, history: Sequence[tuple[str, str]], observation: str, buckets: int, sections: int) -> list[int]:
    """``MemoryEncoder(buckets, sections).ids(...)`` (see the module docstring).

    >>> ids = memory_ids("put a pot in cabinet.", [("You are in the room.", "go to cabinet 1"),
    ...                  ("You arrive at cabinet 1. The cabinet 1 is closed.", "open cabinet 1")],
    ...                  "You open the cabinet 1. In it, you see a pot 1.", 8, 5)
    >>> [(i - 40) >> 32 for i in ids]  # two taken, one found (the pot, after opening), one last
    [0, 0, 1, 2]
    """
    return MemoryEncoder(buckets, sections).ids(task, history, observation)


def split_memory(rows: np.ndarray, ids: np.ndarray, offset: int, pair_rows: np.ndarray,
                 pair_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """The prompt ids below ``offset`` (with their rows), and the ``(pairs, len(FEATURES))`` float32
    features of the pairs (``pair_rows``: each pair's prompt row; ``pair_keys``: its command's
    ``command_key``) read from the memory ids at or above ``offset``.

    Each memory id becomes one sorted key ``(row * KINDS + kind) * 2**32 + crc``; a pair's count
    of a kind is the width of its key's run, two binary searches: no Python loop over rows."""
    memory = ids >= offset
    keys = np.sort(rows[memory] * (KINDS * _KIND_STRIDE) + (ids[memory] - offset))
    counts = []
    for kind in (TAKEN, FOUND, LAST):
        wanted = pair_rows * (KINDS * _KIND_STRIDE) + kind * _KIND_STRIDE + pair_keys
        counts.append(np.searchsorted(keys, wanted, "right") - np.searchsorted(keys, wanted, "left"))
    taken, found, last = counts
    features = np.stack([taken >= 1, taken >= 2, found >= 1, last >= 1], axis=1).astype(np.float32)
    kept = ~memory
    return rows[kept], ids[kept], torch.from_numpy(features)
