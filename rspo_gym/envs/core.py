"""The text-env contract shared by every environment of the suite (design §3).

- ``TEXT_CHARSET``: the characters our environments emit, for honest ``gymnasium.spaces.Text``.
- ``text_space(max_length)``: a ``Text`` space over that charset (a ``TextSpace``).
- ``TextSpace``: ``gymnasium.spaces.Text`` that also works in ``AsyncVectorEnv``'s shared memory.
- ``INFO_KEYS`` / ``STEP_INFO_KEYS``: the ``info`` keys every reset / step carries.
- ``check_task_id``: validates a task id against a task set's size, with a clear message.

Conventions the trainers rely on: ``obs`` is the raw env text (no prompt); the env reward is the
outcome reward; ``terminated`` means the episode really ended (won, or bought for WebShop);
``truncated`` is the step limit; success is read from ``info["won"]``, never from ``done``;
invalid actions never raise and leave the state unchanged with ``info["valid"] = False``.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import read_from_shared_memory

__all__ = ["TEXT_CHARSET", "TextSpace", "text_space", "INFO_KEYS", "STEP_INFO_KEYS", "check_task_id"]

# Letters, digits, whitespace the texts use, and the punctuation of ALFWorld and WebShop pages.
TEXT_CHARSET = frozenset(string.ascii_letters + string.digits + " \n\t" + ".,:;!?'\"-=()[]/&%$#+*<>_|~@")

INFO_KEYS = ("admissible_actions", "task", "task_id", "task_type", "won", "anchor")
STEP_INFO_KEYS = INFO_KEYS + ("valid",)


class TextSpace(spaces.Text):
    """``gymnasium.spaces.Text`` whose observations survive ``AsyncVectorEnv``'s shared memory.

    Gymnasium (1.x) reads a ``Text`` space's shared memory once, when the vector env is built, into
    a tuple of strings, so ``make_vec(..., vectorization_mode="async")`` returned that first
    read (``max_length`` copies of the charset's first character, a tab) on every reset and
    step. For this class the read is a :class:`SharedTexts` view that decodes the buffer when
    indexed, so async vector envs return the real observations, with or without shared memory.
    Everything else (sampling, ``contains``, flattening, equality) is ``Text``'s.
    """


class SharedTexts(Sequence):
    """The strings in a ``TextSpace``'s shared-memory buffer, decoded when read.

    ``AsyncVectorEnv`` hands out ``copy.deepcopy`` of it (the default ``copy=True``): a plain tuple
    of strings. With ``copy=False`` it hands out the view itself, which follows later steps, as
    the arrays of numeric spaces do.
    """

    def __init__(self, space: spaces.Text, shared_memory: Any, n: int) -> None:
        self._codes = np.frombuffer(shared_memory.get_obj(), dtype=np.int32).reshape((n, space.max_length))
        self._chars = np.array(space.character_list, dtype=object)
        self._padding = len(space.character_list)  # what gymnasium's flatten fills the tail with

    def __len__(self) -> int:
        return self._codes.shape[0]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        row = self._codes[index]
        ends = np.flatnonzero(row >= self._padding)
        return "".join(self._chars[row[: ends[0] if len(ends) else len(row)]])

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@read_from_shared_memory.register(TextSpace)
def _read_shared_texts(space: TextSpace, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(space, shared_memory, n)


def text_space(max_length: int) -> TextSpace:
    """A ``Text`` space (min length 0) over ``TEXT_CHARSET``."""
    return TextSpace(max_length=max_length, min_length=0, charset="".join(sorted(TEXT_CHARSET)))


def check_task_id(task_id: object, size: int | None) -> int:
    """``task_id`` as a plain int; TypeError for non-integers, ValueError when out of range.

    ``size=None`` means an unbounded task set (any non-negative id). numpy integers are accepted.
    """
    if isinstance(task_id, bool) or not hasattr(task_id, "__index__"):
        raise TypeError(f"task_id must be an integer, got {type(task_id).__name__}")
    task_id = task_id.__index__()
    if task_id < 0 or (size is not None and task_id >= size):
        bound = "a non-negative integer" if size is None else f"in [0, {size})"
        raise ValueError(f"task_id {task_id} out of range: expected {bound}")
    return task_id
