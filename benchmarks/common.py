"""Helpers shared by the benchmark scripts: memory readings, real instructions, JSON output, a
pool of fresh processes."""

from __future__ import annotations

import json
import multiprocessing
import resource
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

__all__ = ["BASE_LABELS", "peak_rss_mb", "load_instructions", "write_json", "saved_bytes", "run_fresh"]

#: How pages and figures spell each base algorithm (``base.upper()`` would write "GIGPO").
BASE_LABELS = {"grpo": "GRPO", "ppo": "PPO", "gigpo": "GiGPO"}


def peak_rss_mb() -> float:
    """Process peak resident set size in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_instructions(path: Path) -> list[str] | None:
    """The non-empty instruction strings of a ``human_goals.json``-style file; None if absent."""
    if not path.is_file():
        return None
    goals = json.loads(path.read_text(encoding="utf-8"))
    return [g for g in goals if isinstance(g, str) and g.strip()]


def write_json(path: Path, result: dict) -> None:
    """Write ``result`` whole or not at all: a kill mid-write leaves the previous file (or none), never
    a truncated cell that a resumed matrix would have to detect."""
    from rspo_gym.atomic import write_text_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")


def saved_bytes(run, exclude: set[int] = frozenset()) -> int:
    """Bytes of the distinct storages autograd saves for backward while ``run()`` builds its graph.

    ``exclude``: storage addresses not to count (a model's parameters, which matmuls save too).
    """
    import torch

    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in exclude:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = run()
    del out
    return sum(storages.values())


def run_fresh(jobs: Iterable[tuple[Any, Callable, tuple]], workers: int, on_result: Callable[[Any, Any, int, int], None],
              stop: Callable[[], bool] = lambda: False) -> int:
    """Run each ``(key, fn, args)`` in a fresh spawned process, ``workers`` at a time, and hand
    ``on_result(key, result, done, total)`` each result as it finishes (so an interrupted run keeps
    what finished). A job that raises is reported on stderr and the others go on; returns how
    many failed. A fresh process per job: its peak RSS is its own, and nothing leaks between jobs.

    Jobs are handed out as workers free up, and none is once ``stop()`` is true: the running ones
    finish and are kept, so a run of hours can be ended between jobs without losing one.
    """
    pending = list(jobs)[::-1]
    total, done, failed = len(pending), 0, 0
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, workers), mp_context=context, max_tasks_per_child=1) as pool:
        running: dict = {}
        while pending or running:
            while pending and len(running) < max(1, workers) and not stop():
                key, fn, args = pending.pop()
                running[pool.submit(fn, *args)] = key
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                key = running.pop(future)
                done += 1
                try:
                    result = future.result()
                except Exception as error:  # report and go on: the other jobs are still worth having
                    failed += 1
                    print(f"{key} failed: {error!r}", file=sys.stderr, flush=True)
                    continue
                on_result(key, result, done, total)
    if pending:
        print(f"stopped on request: {len(pending)} job(s) not started", file=sys.stderr, flush=True)
    return failed
