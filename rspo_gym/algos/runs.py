"""Run folders: where ``learn()`` writes when no ``output_dir`` is given, and finding a run again.

- ``runs_dir``: the base folder, ``$RSPO_GYM_RUNS_DIR`` or ``runs`` (the test suite points it at a
  temporary folder).
- ``run_name``: ``<algo>-<env>-<timestamp>`` with a filesystem-safe env name.
- ``create_run_dir``: makes the folder, adding ``-1``, ``-2``, ... when the name is taken.
- ``find_run``: the ``policy/`` and ``config.json`` of a run folder (or of its ``policy/``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["RUNS_DIR_ENV", "runs_dir", "run_name", "create_run_dir", "find_run"]

RUNS_DIR_ENV = "RSPO_GYM_RUNS_DIR"


def runs_dir() -> Path:
    """Where default run folders go: ``$RSPO_GYM_RUNS_DIR``, else ``runs`` in the working directory."""
    return Path(os.environ.get(RUNS_DIR_ENV) or "runs")


def run_name(algo: str, env_id: str | None, stamp: str) -> str:
    """``<algo>-<env>-<stamp>``: the env id without its namespace, anything but ``[A-Za-z0-9._-]``
    replaced, so the name is one path component on every filesystem.

    >>> run_name("gigpo", "rspo/WebShop-v0", "20250101-120000")
    'gigpo-WebShop-v0-20250101-120000'
    """
    env = re.sub(r"[^A-Za-z0-9._-]", "_", (env_id or "env").rsplit("/", 1)[-1]) or "env"
    return f"{algo}-{env}-{stamp}"


def create_run_dir(base: str | Path, name: str) -> Path:
    """Make ``base/name`` (or ``name-1``, ``name-2``, ... if taken) and return it.

    ``mkdir`` without ``exist_ok`` is the test, so two runs started in the same second, even in
    two processes, never share a folder.
    """
    Path(base).mkdir(parents=True, exist_ok=True)
    suffix = 0
    while True:
        path = Path(base) / (name if suffix == 0 else f"{name}-{suffix}")
        try:
            path.mkdir()
        except FileExistsError:
            suffix += 1
        else:
            return path


def find_run(path: str | Path) -> tuple[Path, Path] | None:
    """``(policy dir, config.json)`` when ``path`` is a run folder or its ``policy/``, else None.

    A run folder holds the trainer's ``config.json`` beside ``policy/`` (whose own ``config.json`` is
    the model's, so the run's is looked for one level up).
    """
    path = Path(path).expanduser()
    if (path / "policy").is_dir() and (path / "config.json").is_file():
        return path / "policy", path / "config.json"
    if path.name == "policy" and path.is_dir() and (path.parent / "config.json").is_file():
        return path, path.parent / "config.json"
    return None
