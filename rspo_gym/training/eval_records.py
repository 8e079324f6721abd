"""Per-episode records of every held-out evaluation, kept in the run folder.

A run's ``metrics.jsonl`` keeps the mean held-out success of each evaluation; a paired comparison
of two settings (``rspo-gym compare``) needs what is behind that mean: which task each episode
played, with which seed, and how it ended, so that two runs measured on the same tasks and seeds
can be compared task by task (a hard task is hard for both, and cancels).

Each evaluation ``learn()`` makes writes one file, ``evaluations/<iteration, 6 digits>.json``:

- ``format`` (1), ``iteration`` (the iterations trained before it), ``env_steps`` (the training
  env steps before it, explorer and dropped ones included, as ``metrics.jsonl`` counts them),
  ``split``, ``temperature`` and ``eval_seed``;
- one list per field, one entry per episode in the order played: ``task_id``, ``episode_seed``
  (null where a caller's own vector env chose the seeds), ``success`` (0 or 1), ``score`` and
  ``steps`` (env steps of the episode).

Columns rather than one object per episode keep a file at about 30 bytes per episode: a
140-task evaluation is ~4 kB (the most ``eval_tasks`` allows, 10,000, ~300 kB), and the
folder grows by one such file per evaluation, as
``metrics.jsonl`` grows by one row per iteration. A file is written whole to a temporary name
and renamed over its own (``write_evaluation``), so a kill leaves the previous files and either
all of this one or none of it. A resume removes the files of iterations after its checkpoint
(``trim_evaluations``): those iterations are trained and evaluated again with the same seeds, so
the resumed run's records are the uninterrupted run's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from rspo_gym.atomic import write_text_atomic

__all__ = ["EVALUATIONS", "FORMAT", "COLUMNS", "evaluation_record", "write_evaluation", "read_evaluations", "trim_evaluations",
           "remove_evaluations"]

#: The folder of a run that holds the records.
EVALUATIONS = "evaluations"
FORMAT = 1
#: The per-episode columns of a record.
COLUMNS = ("task_id", "episode_seed", "success", "score", "steps")
_NAME = re.compile(r"^(\d{6,})\.json$")
#: ``atomic_write``'s temporary name for a record: ``.<name>.<8 hex digits>.tmp``.
_TEMPORARY = re.compile(r"^\.\d{6,}\.json\.[0-9a-f]{8}\.tmp$")


def evaluation_record(trajectories: Sequence[Any], seeds: Sequence[int | None], *, iteration: int, env_steps: int,
                      split: str | None, temperature: float, eval_seed: int) -> dict[str, Any]:
    """The record of one evaluation: ``trajectories`` (``rollout.trajectory.Trajectory``, in the
    order the tasks were listed) and the episode seed each was played with."""
    if len(seeds) != len(trajectories):
        raise ValueError(f"{len(trajectories)} episodes but {len(seeds)} seeds")
    return {
        "format": FORMAT, "iteration": int(iteration), "env_steps": int(env_steps), "split": split,
        "temperature": float(temperature), "eval_seed": int(eval_seed),
        "task_id": [t.task_id for t in trajectories], "episode_seed": list(seeds),
        "success": [int(bool(t.won)) for t in trajectories], "score": [round(float(t.score), 6) for t in trajectories],
        "steps": [int(t.length) for t in trajectories],
    }


def write_evaluation(run: str | Path, record: dict[str, Any]) -> Path:
    """Write ``record`` as ``<run>/evaluations/<iteration>.json`` (atomically) and return the path."""
    folder = Path(run) / EVALUATIONS
    folder.mkdir(exist_ok=True)
    path = folder / f"{record['iteration']:06d}.json"
    write_text_atomic(path, json.dumps(record, separators=(",", ":")) + "\n")
    return path


def _valid(record: Any) -> bool:
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("iteration"), int):
        return False
    lengths = {len(record[c]) if isinstance(record.get(c), list) else -1 for c in COLUMNS}
    return len(lengths) == 1 and lengths != {-1}


def read_evaluations(run: str | Path) -> list[dict[str, Any]]:
    """The records of a run folder, by iteration; none for a folder written before records were
    kept. A file that is not a record (hand-edited, a stray temporary) is left out."""
    folder = Path(run) / EVALUATIONS
    if not folder.is_dir():
        return []
    records = []
    for path in sorted(folder.iterdir()):
        if not _NAME.match(path.name):
            continue
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if _valid(record):
            records.append(record)
    return sorted(records, key=lambda r: r["iteration"])


def trim_evaluations(run: str | Path, iteration: int) -> None:
    """Remove the records of iterations after ``iteration`` (a resume's checkpoint; -1: all of
    them, as ``--overwrite`` does), and any temporary file a kill left. Only the names rspo-gym
    writes are touched: a user's own files in ``evaluations/`` stay."""
    folder = Path(run) / EVALUATIONS
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        match = _NAME.match(path.name)
        if not path.is_dir() and (_TEMPORARY.match(path.name) or (match and int(match.group(1)) > iteration)):
            path.unlink()


def remove_evaluations(run: str | Path) -> None:
    """``--overwrite``: every record and temporary file rspo-gym wrote in ``evaluations/``, and the
    folder when nothing else is left in it (a user's notes or plots there are kept)."""
    trim_evaluations(run, -1)
    folder = Path(run) / EVALUATIONS
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
