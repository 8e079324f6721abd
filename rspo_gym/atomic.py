"""Record files written whole or not at all: a kill, a full disk or ``ulimit -f`` leaves the
previous file, never a truncated one.

- ``atomic_write``: a context manager yielding a file object on a temporary file in the target's
  folder; on a clean exit the file is flushed to disk and renamed over the target (``os.replace``,
  atomic on POSIX and Windows), and the rename is flushed too. On any error the temporary file is
  removed and the target is untouched.
- ``write_text_atomic`` / ``write_bytes_atomic``: the same for a string or bytes.
- ``atomic_folder``: the same for a folder (a saved ``policy/``): built in a staging folder beside
  it, flushed, then swapped in by two renames; ``restore_swapped_folders`` puts the previous folder
  back when a kill fell between them.
- ``remove_stale_temporaries``: a dead writer's leftovers of those temporary files
  (``.<name>.<8 hex digits>.tmp``, a file or a staging folder), removed by the next writer.
- ``DISK_FULL``: the ``errno`` values of a write refused for want of room (``ENOSPC``, ``EFBIG``
  from ``ulimit -f``, ``EDQUOT``), which the command line reports in one line.

Every file of a run's record that is rewritten (``config.json``, ``metrics.jsonl``,
``metrics.csv``, ``learning_curve.png``) goes through here; checkpoints follow the same order of
steps in ``training/checkpoints.py``. Anything else that writes into a run folder should use it.
Stdlib only: the torch-free config path imports it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import IO, Iterable, Iterator

__all__ = [
    "DISK_FULL", "atomic_write", "write_text_atomic", "write_bytes_atomic", "atomic_folder", "fsync_dir",
    "remove_stale_temporaries", "restore_swapped_folders",
]

DISK_FULL = frozenset(code for code in (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", None)) if code is not None)


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", *, encoding: str | None = "utf-8", newline: str | None = None) -> Iterator[IO]:
    """Write ``path`` through a temporary file in its folder (``mode``: ``"w"`` or ``"wb"``),
    renamed over it once whole and on disk."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes a file whole: mode 'w' or 'wb', got {mode!r}")
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")  # remove_stale_temporaries' pattern
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask's permissions, as open() gives
    try:
        text = {} if mode == "wb" else {"encoding": encoding, "newline": newline}
        with os.fdopen(fd, mode, **text) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError) and err.filename is None:
            err.filename = str(path)  # a write through the descriptor names no file: say which
        raise
    fsync_dir(path.parent)


def write_text_atomic(path: str | Path, text: str, *, encoding: str = "utf-8") -> None:
    """``path`` holds ``text``, or (on any error) what it held before."""
    with atomic_write(path, "w", encoding=encoding) as f:
        f.write(text)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """``path`` holds ``data``, or (on any error) what it held before."""
    with atomic_write(path, "wb") as f:
        f.write(data)


@contextlib.contextmanager
def atomic_folder(path: str | Path) -> Iterator[Path]:
    """Yield a staging folder to build ``path`` in; once whole and on disk, it replaces ``path``.

    A folder cannot be renamed over another, so the old one steps aside first (to
    ``.<name>.<8 hex>.old``), the new one takes its name, and the old is removed. An error or
    Ctrl-C before the swap removes the staging folder and leaves ``path`` as it was; one between
    the two renames puts the old folder back. A kill there leaves ``path`` missing beside its
    ``.old``, which ``restore_swapped_folders`` (the next writer) renames back.
    """
    path = Path(path)
    staging = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")  # remove_stale_temporaries' pattern
    staging.mkdir()
    old = path.with_name(f".{path.name}.{secrets.token_hex(4)}.old")
    try:
        yield staging
        _fsync_tree(staging)
        if path.exists():
            os.rename(path, old)
        os.rename(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if old.exists() and not path.exists():
            os.rename(old, path)
        raise
    fsync_dir(path.parent)
    shutil.rmtree(old, ignore_errors=True)


def restore_swapped_folders(folder: str | Path, names: Iterable[str]) -> list[Path]:
    """Each of ``folder``'s ``names`` that a killed ``atomic_folder`` left missing gets its previous
    folder back from ``.<name>.<8 hex>.old``; an ``.old`` whose folder is in place is removed. For
    the folder's one writer, as ``remove_stale_temporaries``; the folders restored."""
    restored = []
    for name in names:
        pattern = re.compile(r"\.%s\.[0-9a-f]{8}\.old" % re.escape(name))
        with contextlib.suppress(OSError):
            for entry in sorted(Path(folder).iterdir()):
                if not pattern.fullmatch(entry.name) or entry.is_symlink():
                    continue
                target = Path(folder) / name
                if not target.exists():
                    os.rename(entry, target)
                    restored.append(target)
                else:
                    shutil.rmtree(entry, ignore_errors=True)
    return restored


def _fsync_tree(folder: Path) -> None:
    """Flush every file under ``folder`` (written by a library's ``save``) and the folders' entries."""
    for root, _, files in os.walk(folder):
        for name in files:
            _fsync_read_only(os.path.join(root, name))
        fsync_dir(root)


def fsync_dir(folder: str | Path) -> None:
    """Flush ``folder``'s entries (a file made or renamed in it) to disk; POSIX only."""
    _fsync_read_only(folder)


def _fsync_read_only(path: str | Path) -> None:
    """``fsync`` through a read-only descriptor, which flushes a file's data or a folder's entries on
    POSIX; elsewhere nothing (Windows refuses to flush a read-only handle)."""
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale_temporaries(folder: str | Path, names: Iterable[str]) -> list[Path]:
    """Remove ``folder``'s temporary files (or staging folders) of the targets ``names``, as
    ``atomic_write`` names them: ``.<name>.<8 hex digits>.tmp``; the paths removed, sorted.

    Such a temporary lives from its creation to its rename, so one that is still there belongs to
    a writer that was killed in between (``kill -9``, a lost machine), or to one still writing.
    Call this only as the folder's one writer (a run folder's lock held: ``runs.lock_run_dir``),
    where the second cannot be; each is then a dead writer's, and nothing reads it. A link is
    removed, never followed; what cannot be removed now is left for the next writer.
    """
    names = list(names)
    if not names:
        return []
    pattern = re.compile(r"\.(%s)\.[0-9a-f]{8}\.tmp" % "|".join(map(re.escape, names)))
    removed = []
    with contextlib.suppress(OSError):  # a folder that cannot be listed holds nothing to remove
        for entry in sorted(Path(folder).iterdir()):
            if not pattern.fullmatch(entry.name):
                continue
            try:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            except OSError:
                continue
            removed.append(entry)
    return removed
