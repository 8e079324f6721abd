"""The text-env contract shared by every environment of the suite (design §3).

- ``TEXT_CHARSET``: the characters our environments emit, for honest ``gymnasium.spaces.Text``.
- ``text_space(max_length)``: a ``Text`` space over that charset.
- ``INFO_KEYS`` / ``STEP_INFO_KEYS``: the ``info`` keys every reset / step carries.
- ``check_task_id``: validates a task id against a task set's size, with a clear message.

Conventions the trainers rely on: ``obs`` is the raw env text (no prompt); the env reward is the
outcome reward; ``terminated`` means the episode really ended (won, or bought for WebShop);
``truncated`` is the step limit; success is read from ``info["won"]``, never from ``done``;
invalid actions never raise and leave the state unchanged with ``info["valid"] = False``.
"""

from __future__ import annotations

import string

from gymnasium import spaces

__all__ = ["TEXT_CHARSET", "text_space", "INFO_KEYS", "STEP_INFO_KEYS", "check_task_id"]

# Letters, digits, whitespace the texts use, and the punctuation of ALFWorld and WebShop pages.
TEXT_CHARSET = frozenset(string.ascii_letters + string.digits + " \n\t" + ".,:;!?'\"-=()[]/&%$#+*<>_|~@")

INFO_KEYS = ("admissible_actions", "task", "task_id", "task_type", "won", "anchor")
STEP_INFO_KEYS = INFO_KEYS + ("valid",)


def text_space(max_length: int) -> spaces.Text:
    """A ``Text`` space (min length 0) over ``TEXT_CHARSET``."""
    return spaces.Text(max_length=max_length, min_length=0, charset="".join(sorted(TEXT_CHARSET)))


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
