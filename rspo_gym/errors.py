"""The error a user can fix: what the command line prints in one line (exit code 2), no traceback.

- ``UserError``: bad input (a config value, an env id, a model name, a run folder, a damaged or
  foreign checkpoint). It is a ``ValueError``, so Python callers catch it as they always did; its
  message says what was wrong and what to do.

Kept free of torch and of every other heavy import, so the command line can catch it before it
loads anything.
"""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(ValueError):
    """Bad input that the user can fix; the message is one line that says how.

    >>> str(UserError("iterations must be a positive integer, got -3"))
    'iterations must be a positive integer, got -3'
    """
