"""What RSPO's replay did to its learner in a matrix's explorer cells, with intervals over seeds.

Reads the ``mechanism`` rows that explorer cells of ``benchmarks/rspo_matrix.py`` record (the
trainer's ``explorer/`` replay metrics, ``docs/metrics.md``), pools each cell's iterations by their
counts (a ratio of sums, never a mean of empty iterations), and prints, per base, one row per
measure: the mean over seeds and its 95 % bootstrap interval over seeds (``rspo_gym.intervals``).
Cells that also measured the transfer of the explorer's wins (``transfer``: the learner's start and
final weights on goals only the explorer won and on goals nobody won) get one more table, per
temperature: each label's gain and the transfer (their difference, paired within a seed), over
seeds. With ``--archive``, it also checks that every cell's other numbers equal the archived
cell's: the measures must not have changed the run.

    python benchmarks/replay_mechanism.py results/webshop-v1-mechanism results/webshop-v1-mechanism-other \\
        --archive docs/results_fast/webshop_v1_cells.tar.gz --json docs/results_fast/replay_mechanism.json
    python benchmarks/replay_mechanism.py results/webshop-v1-transfer \\
        --archive docs/results_fast/webshop_v1_cells.tar.gz --json docs/results_fast/transfer.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path

import numpy as np

from rspo_gym.intervals import bootstrap_mean_ci, paired_difference_ci

UNTIMED = ("seconds", "peak_rss_mb")
#: what a rerun cell may add to its archived self: measures taken beside the run, not of it
ADDED = ("mechanism", "transfer")
#: (name, key) of each transfer measure, a per-seed number (``RSPOTrainer.measure_transfer``)
TRANSFER = (
    ("explorer-only goals", "explorer_only_tasks"),
    ("goals nobody won", "nobody_tasks"),
    ("success on explorer-only goals, start", "explorer_only_start"),
    ("success on explorer-only goals, end", "explorer_only_end"),
    ("gain on explorer-only goals", "explorer_only_gain"),
    ("success on goals nobody won, start", "nobody_start"),
    ("success on goals nobody won, end", "nobody_end"),
    ("gain on goals nobody won", "nobody_gain"),
    ("transfer: explorer-only gain − nobody-won gain", "transfer"),
)
#: (name, value key, count key): each a count-weighted mean over a cell's iterations
POOLED = (
    ("IS weight, replayed winning tokens", "is_weight_win", "replay_win_tokens"),
    ("share below 0.1, replayed winning tokens", "is_weight_win_low", "replay_win_tokens"),
    ("IS weight, replayed losing tokens", "is_weight_loss", "replay_loss_tokens"),
    ("share below 0.1, replayed losing tokens", "is_weight_loss_low", "replay_loss_tokens"),
    ("log-prob gain, replayed winning actions (nats)", "replay_win_logp_gain", "replay_win_logp_tokens"),
    ("log-prob gain, learner's own winning actions (nats)", "own_win_logp_gain", "own_win_logp_tokens"),
    ("learner success on revisits, explorer-only goals", "revisit_success_explorer_only", "revisits_explorer_only"),
    ("learner success on revisits, goals nobody won", "revisit_success_nobody", "revisits_nobody"),
)


def pooled(cell: dict, value: str, count: str) -> tuple[float, float]:
    """(count, count-weighted mean of ``value``) over the cell's iterations; mean NaN when count is 0."""
    keys = cell["mechanism"]["keys"]
    rows = np.asarray(cell["mechanism"]["rows"], dtype=float)
    v, n = rows[:, keys.index(value)], rows[:, keys.index(count)]
    total = float(n.sum())
    return total, float((v * n).sum() / total) if total else float("nan")


def _interval(values: list[float]) -> dict:
    kept = [v for v in values if v == v]
    if not kept:
        return {"seeds": 0}
    mean, low, high = bootstrap_mean_ci([[v] for v in kept])
    return {"seeds": len(kept), "mean": mean, "low": low, "high": high}


def summarise(cells: dict[str, dict]) -> dict:
    """Per measure, the per-seed values, their total counts and the interval over seeds."""
    out = {}
    for name, value, count in POOLED:
        per_seed = [pooled(cell, value, count) for cell in cells.values()]
        out[value] = {"name": name, "count": sum(n for n, _ in per_seed), "per_seed": [m for _, m in per_seed],
                      **_interval([m for _, m in per_seed])}
    replay = [pooled(c, "replay_win_logp_gain", "replay_win_logp_tokens")[1] for c in cells.values()]
    own = [pooled(c, "own_win_logp_gain", "own_win_logp_tokens")[1] for c in cells.values()]
    pairs = [(a, b) for a, b in zip(replay, own) if a == a and b == b]
    if pairs:
        mean, low, high = paired_difference_ci([[a] for a, _ in pairs], [[b] for _, b in pairs])
        out["logp_gain_replay_minus_own"] = {"name": "log-prob gain, replayed − own winning actions (nats)",
                                             "seeds": len(pairs), "mean": mean, "low": low, "high": high}
    return out


def summarise_transfer(cells: dict[str, dict]) -> dict:
    """Per base and temperature, each ``TRANSFER`` measure's per-seed values and interval over seeds
    (a seed whose explorer won no goal alone has no transfer, and is left out of those rows)."""
    out: dict = {}
    for cell in cells.values():
        for measured in cell.get("transfer", []):
            out.setdefault(cell["base"], {}).setdefault(str(measured["temperature"]), []).append(measured)
    return {base: {temperature: {key: {"name": name, "per_seed": [m[key] for m in rows],
                                       **_interval([float("nan") if m[key] is None else m[key] for m in rows])}
                                 for name, key in TRANSFER}
                   for temperature, rows in by_temperature.items()}
            for base, by_temperature in out.items()}


def archive_differences(cells: dict[str, dict], archive: Path) -> dict[str, list[str]]:
    """Per cell, the keys (other than the new ``mechanism`` and the timings) that differ from the archive's."""
    out = {}
    with tarfile.open(archive) as tar:
        for stem, cell in cells.items():
            archived = json.load(tar.extractfile(f"cells/{stem}.json"))
            out[stem] = sorted(k for k in set(archived) | set(cell)
                               if k not in (*UNTIMED, *ADDED) and archived.get(k) != cell.get(k))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="+", help="matrix folders holding cells/")
    parser.add_argument("--archive", type=Path, default=None, help="a cells archive (.tar.gz) the cells must reproduce")
    parser.add_argument("--json", type=Path, default=None, help="write the summary here")
    args = parser.parse_args(argv)
    cells = {p.stem: json.loads(p.read_text()) for folder in args.results for p in sorted((folder / "cells").glob("*.json"))}
    cells = {stem: cell for stem, cell in cells.items() if "mechanism" in cell}
    if not cells:
        print(f"no cell with recorded replay measures in {', '.join(str(f / 'cells') for f in args.results)}", file=sys.stderr)
        return 2
    bases = sorted({cell["base"] for cell in cells.values()})
    summary = {"cells": sorted(cells),
               "measures": {base: summarise({k: c for k, c in cells.items() if c["base"] == base}) for base in bases}}
    print(f"{len(cells)} cells: {', '.join(sorted(cells))}\n")
    print("| base | measure | seeds | total count | mean over seeds [95 % CI] |\n|---|---|---|---|---|")
    for base in bases:
        for row in summary["measures"][base].values():
            ci = f"{row['mean']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]" if row.get("seeds") else "–"
            print(f"| {base} | {row['name']} | {row['seeds']} | {row.get('count', '')} | {ci} |")
    summary["transfer"] = summarise_transfer(cells)
    for base, by_temperature in summary["transfer"].items():
        for temperature, rows in by_temperature.items():
            print(f"\ntransfer, {base}, T = {temperature}\n\n| measure | seeds | mean over seeds [95 % CI] |\n|---|---|---|")
            for key, row in rows.items():
                sign = "" if key.endswith("_tasks") else "+"  # counts of goals carry no sign
                ci = f"{row['mean']:{sign}.3f} [{row['low']:{sign}.3f}, {row['high']:{sign}.3f}]" if row.get("seeds") else "–"
                print(f"| {row['name']} | {row['seeds']} | {ci} |")
    if args.archive:
        summary["archive_differences"] = archive_differences(cells, args.archive)
        differing = {k: v for k, v in summary["archive_differences"].items() if v}
        print(f"\ncells equal to the archive's (besides the replay measures): {len(cells) - len(differing)} of {len(cells)}"
              + (f"; differing: {differing}" if differing else ""))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
