"""A run folder's files as ``rspo-gym compare`` reads them: anything, from anyone.

Compare reads folders it did not write (a colleague's runs, a download, a run still being
written), so every read here is bounded and every value it keeps is checked; what is not a
record rspo-gym writes is refused in one line (``UserError``) naming the file and the field,
never printed as a number or left to a traceback further on.

- ``read_bytes`` / ``read_json``: a regular file only (a FIFO would block the read forever, a link
  to ``/dev/zero`` would fill the memory), at most a size cap; JSON nested deeper than the
  interpreter's stack is refused, not a ``RecursionError`` (``NaN`` and ``Infinity`` parse, and
  the checks of the fields that hold them refuse them by name).
- ``read_config``: a run's ``config.json`` as such a file.
- ``metrics_rows``: ``metrics.jsonl``'s rows, read line by line under caps; ``last_iteration``: the highest ``iteration``;
  ``learner_env_steps``: the learner's env steps by iteration, from the same rows.
- ``check_env_steps``: the records' ``env_steps`` are steps the run took: growing with the
  iteration, and the sum of ``metrics.jsonl``'s ``env_steps`` up to each record's iteration.
- ``read_records``: the run's ``evaluations/<iteration>.json`` records, each checked field by field
  (``training/eval_records.py`` documents them): types, lengths, success in {0, 1}, scores finite
  (in [0, 1] on the suite's envs), the episode seeds the record's ``eval_seed`` gives.
- ``episode_seeds``: those seeds, as the trainer draws them (``GRPOTrainer.evaluation_seeds``).
- ``check_not_running``: a run whose writer holds its lock is refused: its ``policy/`` and its
  last record are not its final policy's.
"""

from __future__ import annotations

import bisect
import io
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from rspo_gym.errors import UserError
from rspo_gym.training.eval_records import COLUMNS, EVALUATIONS, FORMAT
from rspo_gym.training.runs import LOCK_FILE

try:
    import fcntl
except ImportError:  # Windows: no flock, so no writer's lock to see
    fcntl = None

__all__ = [
    "MAX_RECORD_BYTES", "MAX_CONFIG_BYTES", "MAX_METRICS_BYTES", "MAX_METRICS_LINE", "MAX_ITERATION", "SCORED_ENVS",
    "read_bytes", "read_json", "read_config", "metrics_rows", "last_iteration", "learner_env_steps", "episode_seeds", "check_record", "read_records",
    "check_env_steps", "check_not_running",
]

#: An evaluation record of the most tasks an evaluation allows (10,000) is ~300 kB.
MAX_RECORD_BYTES = 16 * 2**20
#: A trainer's ``config.json`` is a few kB.
MAX_CONFIG_BYTES = 16 * 2**20
#: ``metrics.jsonl`` grows by a row of a few kB per iteration: 1 GiB is over 100,000 iterations.
MAX_METRICS_BYTES = 2**30
MAX_METRICS_LINE = 2**20
#: Iterations and steps are counters; above this a value is damage, not a run.
MAX_ITERATION = 2**63 - 1
#: The suite's envs, whose score is a fraction in [0, 1] (ALFWorld: success; WebShop: the purchase's score).
SCORED_ENVS = ("rspo/ALFWorld-v0", "rspo/WebShop-v0", "rspo/WebShop-v1")
_NAME = re.compile(r"^(\d{6,})\.json$")
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _size(n: int) -> str:
    return f"{n // 2**30} GiB" if n >= 2**30 else f"{n // 2**20} MiB"


def _open_regular(path: Path) -> int:
    """A descriptor on ``path``, a regular file (a link to one is followed): opened without
    blocking, so a FIFO is seen for what it is instead of waiting for a writer."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror or err}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise UserError(f"{path} is {kind}, not a file rspo-gym wrote: replace it with the run's own file, or leave the run out")
    return fd


def read_bytes(path: str | Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``; refused when it holds more than ``limit``."""
    path = Path(path)
    with io.FileIO(_open_regular(path), "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UserError(f"{path} holds over {_size(limit)}, far more than rspo-gym writes there: it is not a run's file")
    return data


def _parse(text: str | bytes, where: str) -> Any:
    """JSON of ``text``; ``where`` says what it is in the one-line refusal."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return json.loads(text)  # NaN and Infinity parse, so that the field holding one is named (check_record)
    except UnicodeDecodeError as err:
        raise UserError(f"{where} is not UTF-8 text (byte {err.start}): it is not a file rspo-gym wrote") from None
    except RecursionError:
        raise UserError(f"{where} is nested too deep to be a file rspo-gym wrote") from None
    except ValueError as err:  # JSONDecodeError, an integer of thousands of digits
        raise UserError(f"{where} is not JSON rspo-gym wrote: {str(err).splitlines()[0]}") from None


def read_json(path: str | Path, limit: int) -> Any:
    """The JSON of the regular file ``path`` (at most ``limit`` bytes), refused in one line otherwise."""
    return _parse(read_bytes(path, limit), str(path))


def read_config(path: str | Path) -> dict[str, Any]:
    """A run's ``config.json`` as its JSON object (``training.config.load_config`` checks its fields)."""
    data = read_json(path, MAX_CONFIG_BYTES)
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a trainer config: a JSON object was expected")
    return data


def _is_int(value: Any, low: int = 0, high: int = MAX_ITERATION) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def metrics_rows(folder: str | Path) -> Iterator[dict[str, Any]]:
    """The rows of ``folder``'s ``metrics.jsonl`` (none without one), read line by line under
    caps. The file is rewritten whole by the trainer, so a line that is not a row with a counter
    for an iteration is damage, refused with its line number (a row's other values may be
    anything, NaN included: each reader checks the ones it uses)."""
    path = Path(folder) / "metrics.jsonl"
    if not os.path.lexists(path):
        return
    total = 0
    with io.BufferedReader(io.FileIO(_open_regular(path), "rb")) as f:
        for number, line in enumerate(iter(lambda: f.readline(MAX_METRICS_LINE + 1), b""), 1):
            total += len(line)
            if len(line) > MAX_METRICS_LINE:
                raise UserError(f"{path}: line {number} is over {_size(MAX_METRICS_LINE)}, not a row rspo-gym wrote")
            if total > MAX_METRICS_BYTES:
                raise UserError(f"{path} holds over {_size(MAX_METRICS_BYTES)}, more than rspo-gym writes there")
            if not line.strip():
                continue
            try:
                row = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError:
                raise UserError(f"{path}: line {number} is not UTF-8 text, not a row rspo-gym wrote") from None
            except RecursionError:
                raise UserError(f"{path}: line {number} is nested too deep to be a row rspo-gym wrote") from None
            except ValueError as err:
                raise UserError(f"{path}: line {number} is not JSON ({str(err).splitlines()[0]}), not a row rspo-gym wrote") from None
            iteration = row.get("iteration") if isinstance(row, dict) else None
            if not _is_int(iteration):
                raise UserError(f"{path}: line {number} has no iteration count (got {_show(iteration)}), not a row rspo-gym wrote")
            yield row


def last_iteration(folder: str | Path) -> int:
    """The highest ``iteration`` in ``folder``'s ``metrics.jsonl`` (0 without one)."""
    return max((row["iteration"] for row in metrics_rows(folder)), default=0)


def learner_env_steps(folder: str | Path) -> dict[int, int] | None:
    """Iteration -> the env steps the learner took up to and including it (0 -> 0), from
    ``metrics.jsonl``: each row's ``env_steps`` less an RSPO explorer's (``explorer/env_steps``,
    its warm-up's included). None where a row lacks a count or its counts are not ones the trainer
    writes: such a run cannot be paired at equal learner steps, and compare says so when asked."""
    out, done = {0: 0}, 0
    for row in sorted(metrics_rows(folder), key=lambda r: r["iteration"]):
        steps, explorer = row.get("env_steps"), row.get("explorer/env_steps", 0)
        if not _is_int(steps) or not _is_int(explorer, high=steps):
            return None
        done += steps - explorer
        out[row["iteration"]] = done
    return out


def _show(value: Any) -> str:
    """``value`` for a one-line message: its JSON (``NaN``, ``Infinity`` as JSON spells them), cut short."""
    try:
        text = json.dumps(value)
    except (RecursionError, ValueError):  # a value nested near the stack's limit
        text = f"a {type(value).__name__} nested too deep"
    return text if len(text) <= 40 else text[:37] + "..."


def episode_seeds(eval_seed: int, count: int) -> list[int]:
    """The episode seed of each of ``count`` evaluation positions under ``eval_seed``: the
    trainer's ``_seed(eval_seed, position, 0)``, so two runs with one ``eval_seed`` play the same
    episode at each position."""
    return [int(np.random.SeedSequence([eval_seed, i, 0]).generate_state(1)[0]) for i in range(count)]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_record(record: Any, path: Path, *, env_id: str | None) -> dict[str, Any]:
    """``record`` (the JSON of ``path``) as ``training/eval_records.py`` writes it, refused in one
    line naming the field otherwise: a number that is not one, a success that is not 0 or 1, a
    score outside [0, 1] or no split on the suite's envs, columns of different lengths, episode
    seeds that are not the ones the record's ``eval_seed`` gives (all null, or a null split, is a
    caller's own env, which chose them)."""
    def bad(field: str, why: str) -> UserError:
        return UserError(f"{path}: {field} {why}: not a record rspo-gym wrote; restore the file, or remove it and compare "
                         f"with --evaluate")

    if not isinstance(record, dict):
        raise bad("the file", "is not a JSON object")
    if record.get("format") != FORMAT:
        raise bad("format", f"is {_show(record.get('format'))}, not {FORMAT}")
    match = _NAME.match(path.name)
    if not _is_int(record.get("iteration")) or (match and path.name != f"{record['iteration']:06d}.json"):
        raise bad("iteration", f"is {_show(record.get('iteration'))}, which is not the iteration the file's name gives")
    if not _is_int(record.get("env_steps")):
        raise bad("env_steps", f"is {_show(record.get('env_steps'))}, not a count of steps")
    scored = env_id in SCORED_ENVS
    if "split" not in record or not (isinstance(record["split"], str) or (record["split"] is None and not scored)):
        raise bad("split", f"is {_show(record.get('split'))}, not a split's name")
    if not _number(record.get("temperature")) or record["temperature"] < 0:
        raise bad("temperature", f"is {_show(record.get('temperature'))}, not a temperature")
    if not _is_int(record.get("eval_seed"), 0, 2**63 - 1):
        raise bad("eval_seed", f"is {_show(record.get('eval_seed'))}, not a seed")
    for column in COLUMNS:
        if not isinstance(record.get(column), list):
            raise bad(column, f"is {_show(record.get(column))}, not a list of one entry per episode")
    count = len(record["task_id"])
    if count == 0:
        raise bad("task_id", "is empty: an evaluation plays one episode or more")
    for column in COLUMNS:
        if len(record[column]) != count:
            raise bad(column, f"has {len(record[column])} entries for {count} episodes")
    checks = {
        "task_id": (lambda v: _is_int(v, 0, 2**31 - 1), "a task id"),
        "episode_seed": (lambda v: v is None or _is_int(v, 0, 2**64 - 1), "a seed"),
        "success": (lambda v: _number(v) and v in (0, 1), "0 or 1"),
        "score": (lambda v: _number(v) and (not scored or 0 <= v <= 1), "a score in [0, 1]" if scored else "a finite score"),
        "steps": (lambda v: _is_int(v), "a count of steps"),
    }
    for column, (valid, what) in checks.items():
        for position, value in enumerate(record[column]):
            if not valid(value):
                raise bad(f"{column}[{position}]", f"is {_show(value)}, not {what}")
    seeds = record["episode_seed"]
    if any(s is not None for s in seeds) and seeds != episode_seeds(record["eval_seed"], count):
        raise bad("episode_seed", f"is not the list of seeds its eval_seed {record['eval_seed']} gives these {count} episodes")
    return record


def read_records(folder: str | Path, *, env_id: str | None) -> list[dict[str, Any]]:
    """The evaluation records of run ``folder``, by iteration (none for a run written before
    records were kept), every file named as a record checked (``check_record``); a temporary file
    a kill left (``.<name>.tmp``) is not one."""
    records = Path(folder) / EVALUATIONS
    if not records.is_dir():
        return []
    out = []
    for path in sorted(records.iterdir()):
        if _NAME.match(path.name):
            out.append(check_record(read_json(path, MAX_RECORD_BYTES), path, env_id=env_id))
    return sorted(out, key=lambda r: r["iteration"])


def _trained_steps(folder: Path) -> list[tuple[int, int]] | None:
    """``(iteration, env steps trained up to and including it)`` of each ``metrics.jsonl`` row,
    by iteration; None where a row has no count of its steps (nothing to check a record against)."""
    rows = sorted(((row["iteration"], row.get("env_steps")) for row in metrics_rows(folder)), key=lambda pair: pair[0])
    if not all(_is_int(steps) for _, steps in rows):
        return None
    out, done = [], 0
    for iteration, steps in rows:
        done += steps
        out.append((iteration, done))
    return out


def check_env_steps(folder: str | Path, records: Sequence[dict[str, Any]]) -> None:
    """Refuse, in one line naming the record and the values, ``env_steps`` that the run did not
    take. Every iteration plays at least one step, so a record's count is more than the record's
    before; and the trainer writes it as the sum of ``metrics.jsonl``'s ``env_steps`` of the
    iterations before it, which is checked where every row counts its steps. A count of 0 or
    10^9 in an edited file would otherwise place the run anywhere on a steps axis, its curve
    quietly re-sorted. ``records``: the run's, by iteration (``read_records``)."""
    folder = Path(folder)

    def bad(record: dict[str, Any], why: str) -> UserError:
        path = folder / EVALUATIONS / f"{record['iteration']:06d}.json"
        return UserError(f"{path}: env_steps is {record['env_steps']:,}{why}: not a record rspo-gym wrote; restore the file, "
                         f"or remove it and compare with --evaluate")

    for before, record in zip(records, records[1:]):
        if record["env_steps"] <= before["env_steps"]:
            raise bad(record, f" at iteration {record['iteration']}, not more than the {before['env_steps']:,} of iteration "
                              f"{before['iteration']}'s record (steps only grow along training)")
    trained = _trained_steps(folder) if records else None
    if trained is None:
        return
    iterations = [iteration for iteration, _ in trained]
    for record in records:
        at = bisect.bisect_right(iterations, record["iteration"])
        steps = trained[at - 1][1] if at else 0
        if record["env_steps"] != steps:
            raise bad(record, f", but metrics.jsonl counts {steps:,} env steps up to iteration {record['iteration']}")


def check_not_running(folder: str | Path) -> None:
    """Refuse a run whose writer still holds its lock (``training.runs.lock_run_dir``): its
    records stop where the writer is, and its ``policy/`` is whatever the last save left, not its
    final policy. The lock is tested with a shared ``flock`` taken and dropped at once, on the
    lock file only where it is a regular file (nothing is created: compare writes nothing into a
    run folder)."""
    if fcntl is None:
        return
    path = Path(folder) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # none (a run from before the lock, or never locked), or not a plain file: no writer holds it
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode(errors="replace").strip()
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise UserError(f"{folder} is being written by another rspo-gym process{who}: its records and policy/ are not its "
                            f"final policy's yet; wait for the run to end (or stop it), then compare") from None
    finally:
        os.close(fd)  # drops the shared lock with the descriptor
