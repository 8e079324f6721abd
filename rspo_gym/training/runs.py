"""Run folders: where ``learn()`` writes when no ``output_dir`` is given, and finding a run again.

- ``runs_dir``: the base folder, ``$RSPO_GYM_RUNS_DIR`` or ``runs`` (the test suite points it at a
  temporary folder).
- ``run_name``: ``<algo>-<env>-<timestamp>`` with a filesystem-safe env name.
- ``create_run_dir``: makes the folder, adding ``-1``, ``-2``, ... when the name is taken.
- ``find_run``: the ``policy/`` and ``config.json`` of a run folder (or of its ``policy/``).
- ``check_run_folder``: before any model or env work, that a run can be written where it is asked
  to be, and that a resume names a run it can continue without losing its record.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from rspo_gym.errors import UserError

__all__ = ["RUNS_DIR_ENV", "runs_dir", "run_name", "create_run_dir", "find_run", "check_run_folder"]

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


def check_run_folder(output_dir: str | Path | None, *, resume: bool, checkpoint_every: int, need_run: bool = True) -> None:
    """Refuse in one line (``UserError``) a run folder that cannot be written, and a resume that
    would not continue the run it names: a folder with no run when ``need_run`` (the command
    line's ``--resume``: a mistyped path would quietly start a new run; ``learn(resume=True)``
    starts one, so that a launcher can always pass it), or one whose checkpoint is gone while its
    record goes beyond the first checkpoint (a restart would replace those rows). Nothing is
    created."""
    if output_dir is None:
        return
    out = Path(output_dir).expanduser()
    _check_writable(out)
    if not resume:
        return
    if (out / "checkpoint.pt").exists():
        return
    if need_run and not (out / "config.json").is_file():
        raise UserError(f"--resume: {out} holds no run (no config.json): check the path, or drop --resume to start one there")
    last = _last_iteration(out / "metrics.jsonl")
    if last > max(checkpoint_every, 0) or (checkpoint_every == 0 and last > 0):
        raise UserError(
            f"--resume: {out} has no checkpoint.pt but its metrics reach iteration {last}: restarting would replace "
            f"that record; restore checkpoint.pt from a copy, or start over with --overwrite"
        )


def _last_iteration(metrics: Path) -> int:
    """The highest ``iteration`` of ``metrics.jsonl`` (0 without one; a torn last line is skipped)."""
    last = 0
    if metrics.is_file():
        for line in metrics.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                last = max(last, int(json.loads(line).get("iteration", 0)))
            except (ValueError, TypeError, AttributeError):
                continue
    return last


def _check_writable(out: Path) -> None:
    """That ``out`` is, or can be made as, a writable folder: its nearest existing folder takes a
    probe folder (made and removed), which is the only test that holds for root, read-only
    mounts and pseudo filesystems alike."""
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"output_dir {str(out)!r} cannot be made: {existing} is a file, not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".rspo-gym-probe-", dir=existing))
    except OSError as err:
        raise UserError(f"output_dir {str(out)!r} is not writable ({existing}: {err.strerror or err}): pick another --output-dir") from None
