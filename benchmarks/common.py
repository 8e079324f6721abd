"""Helpers shared by the benchmark scripts: memory readings, real instructions, JSON output."""

from __future__ import annotations

import json
import resource
from pathlib import Path

__all__ = ["peak_rss_mb", "load_instructions", "write_json", "saved_bytes"]


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
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
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
