"""Run folders: where ``learn()`` writes when no ``output_dir`` is given, and finding a run again.

- ``runs_dir``: the base folder, ``$RSPO_GYM_RUNS_DIR`` or ``runs`` (the test suite points it at a
  temporary folder).
- ``run_name``: ``<algo>-<env>-<timestamp>`` with a filesystem-safe env name.
- ``create_run_dir``: makes the folder, adding ``-1``, ``-2``, ... when the name is taken.
- ``find_run``: the ``policy/`` and ``config.json`` of a run folder (or of its ``policy/``).
- ``check_run_folder``: before any model or env work, that a run can be written where it is asked
  to be, and that a resume names a run it can continue without losing its record.
- ``lock_run_dir`` / ``unlock_run_dir``: one writer per run folder. An exclusive ``flock`` on
  ``rspo-gym.lock`` in the folder, held by the process that writes the run until the trainer is
  closed or the process ends (the kernel drops it on ``kill -9``); a second writer is refused in
  one line instead of interleaving rows and deleting the first one's checkpoint shards.
"""

from __future__ import annotations

import csv
import json
import os
import re
import stat
import tempfile
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; one writer per folder is then the user's to keep
    fcntl = None

from rspo_gym.errors import UserError

__all__ = [
    "RUNS_DIR_ENV", "LOCK_FILE", "runs_dir", "run_name", "create_run_dir", "find_run", "check_run_folder", "recorded_iterations",
    "lock_run_dir", "unlock_run_dir",
]

RUNS_DIR_ENV = "RSPO_GYM_RUNS_DIR"
#: The file in a run folder whose ``flock`` its writer holds (it is no part of the run's record).
LOCK_FILE = "rspo-gym.lock"
_HELD: dict[str, int] = {}  # real path of a locked folder -> the descriptor holding its lock


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


def check_run_folder(output_dir: str | Path | None, *, resume: bool, iterations: int | None = None, need_run: bool = True) -> None:
    """Refuse in one line (``UserError``) a run folder that cannot be written, and a resume that
    would not continue the run it names: a folder with no run when ``need_run`` (the command
    line's ``--resume``: a mistyped path would quietly start a new run; ``learn(resume=True)``
    starts one, so that a launcher can always pass it); ``iterations`` fewer than the rows the run
    has logged; a checkpoint gone while the record goes beyond the run's first checkpoint (a
    restart would replace those rows). That first checkpoint is the run's own ``checkpoint_every``,
    read from its ``config.json``, never the new settings', so no flag can make a resume cut the
    record. Nothing is created."""
    if output_dir is None:
        return
    out = Path(output_dir).expanduser()
    _check_writable(out)
    if not resume:
        return
    if need_run and not (out / "config.json").is_file() and not (out / "checkpoint.pt").exists():
        raise UserError(f"--resume: {out} holds no run (no config.json): check the path, or drop --resume to start one there")
    last = recorded_iterations(out)
    every = _run_checkpoint_every(out)
    if not (out / "checkpoint.pt").exists() and (last > max(every, 0) or (every == 0 and last > 0)):
        raise UserError(
            f"--resume: {out} has no checkpoint.pt but its metrics reach iteration {last}: restarting would replace "
            f"that record; restore checkpoint.pt from a copy, or start over with --overwrite"
        )
    if iterations is not None and iterations < last:
        raise UserError(
            f"--resume: the run in {out} has logged {last} iterations; iterations count from the run's start: "
            f"ask for at least {last}, not {iterations} (or start over with --overwrite)"
        )


def recorded_iterations(out: Path) -> int:
    """The highest ``iteration`` logged in ``out``'s ``metrics.jsonl`` or ``metrics.csv`` (0 without
    either; unreadable lines are skipped): what a resume must not cut."""
    last = 0
    metrics = out / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                last = max(last, int(json.loads(line).get("iteration", 0)))
            except (ValueError, TypeError, AttributeError, RecursionError):
                continue
    table = out / "metrics.csv"
    if table.is_file():
        try:
            with open(table, newline="", encoding="utf-8", errors="replace") as f:
                for row in csv.DictReader(f):
                    try:
                        last = max(last, int(float(row.get("iteration") or 0)))
                    except (ValueError, TypeError, OverflowError):
                        continue
        except csv.Error:
            pass
    return last


def _run_checkpoint_every(out: Path) -> int:
    """The ``checkpoint_every`` the run in ``out`` was written with; 0 (a checkpoint only at the
    end: the strictest reading) when its ``config.json`` cannot say."""
    try:
        every = json.loads((out / "config.json").read_text(encoding="utf-8")).get("checkpoint_every", 1)
    except (OSError, ValueError, AttributeError, RecursionError):
        return 0
    return every if isinstance(every, int) and not isinstance(every, bool) else 0


def lock_run_dir(out: str | Path) -> None:
    """Hold the run folder ``out`` (which exists) for this process: an exclusive ``flock`` on its
    ``rspo-gym.lock``, or a one-line ``UserError`` when another process holds it. Taking it again
    in the same process is a no-op.

    The lock file is written (emptied, then given this process's pid), so it must be the run's
    own: it is opened without following a symbolic link and without blocking, and anything but a
    plain file with one name (a link to a file elsewhere, a FIFO, a device) is refused in one line
    before a byte is written. It is emptied only once the lock is held, so a refused second writer
    leaves the first one's pid."""
    out = Path(out).expanduser()
    key = os.path.realpath(out)
    if fcntl is None or key in _HELD:
        return
    path = out / LOCK_FILE
    not_plain = UserError(f"{path} is not a plain file (a link, a FIFO or a device): rspo-gym writes its lock there; "
                          f"remove it and run again")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    except OSError as err:
        if os.path.islink(path):
            raise not_plain from None
        raise UserError(f"cannot lock the run folder {out}: {err.strerror or err}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise not_plain
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 32).decode(errors="replace").strip()
        os.close(fd)
        who = f" (pid {holder})" if holder.isdigit() else ""
        raise UserError(f"{out} is in use by another rspo-gym process{who}: one process writes a run folder at a time; "
                        f"wait for it to end, or pick another --output-dir") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _HELD[key] = fd


def unlock_run_dir(out: str | Path) -> None:
    """Release this process's lock on ``out`` (nothing when it holds none)."""
    fd = _HELD.pop(os.path.realpath(Path(out).expanduser()), None)
    if fd is not None:
        os.close(fd)  # closing the last descriptor of the open file releases its flock


def _check_writable(out: Path) -> None:
    """That ``out`` is, or can be made as, a writable folder: its nearest existing folder takes a
    probe folder (made and removed), which is the only test that holds for root, read-only
    mounts and pseudo filesystems alike."""
    existing = out
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():  # a dangling link: mkdir would fail on it after the model loads
            raise UserError(f"output_dir {str(out)!r} cannot be made: {existing} is a link to {os.readlink(existing)!r}, "
                            f"which does not exist")
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"output_dir {str(out)!r} cannot be made: {existing} is a file, not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".rspo-gym-probe-", dir=existing))
    except OSError as err:
        raise UserError(f"output_dir {str(out)!r} is not writable ({existing}: {err.strerror or err}): pick another --output-dir") from None
