"""The small search that chose the quick start's settings, and its seed check.

Each candidate is the quick start with a few fields changed; each (candidate, seed) runs
``run_quickstart`` in its own process (so its peak memory and its torch threads are its own) and
leaves its folder under ``--output-dir``. A finished run is never rerun, so an interrupted search
resumes. ``--out`` gathers every finished run's before, after, gain with its interval, iterations
and minutes::

    python benchmarks/quickstart_search.py --candidates explorer-12 rank-18 default  # the search, seed 0
    python benchmarks/quickstart_search.py --candidates default --seeds 0 1 2 # the seed check

Run it on an idle machine: the minutes are part of the result (the numbers are not: the work is
fixed and seeded).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.common import write_json  # noqa: E402

_DEFAULT_TRAINER = {"learning_rate": 3e-4, "max_turns": 25, "eval_temperature": 1.0, "num_groups": 4, "group_size": 4}

CANDIDATES: dict[str, dict] = {
    "default": {},  # RSPO-GRPO, rank swap with the milestones potential, 24 iterations, evaluations at 0, 12, 24
    # the explorer swap (explorer trajectories and a second update make an iteration ~2x as long)
    "explorer-12": {"swap": "explorer", "iterations": 12, "eval_every": 6},
    "explorer-12-lr1e-3": {"swap": "explorer", "iterations": 12, "eval_every": 6,
                           "trainer_overrides": {**_DEFAULT_TRAINER, "learning_rate": 1e-3}},
    "rank-18": {"iterations": 18, "eval_every": 6},
}

_RUN = """
import json, sys
from rspo_gym.quickstart import QuickstartConfig, run_quickstart
run_quickstart(QuickstartConfig(**json.loads(sys.argv[1])))
"""


def run_one(name: str, seed: int, output_dir: Path) -> dict | None:
    folder = output_dir / f"{name}-seed{seed}"
    summary = folder / "summary.json"
    if not summary.exists():
        fields = {**CANDIDATES[name], "seed": seed, "output_dir": str(folder)}
        # cmdline names the quick start, so a machine's priority rules can tell it apart
        result = subprocess.run([sys.executable, "-c", _RUN + "# quickstart", json.dumps(fields)], cwd=ROOT)
        if result.returncode != 0 or not summary.exists():
            print(f"{name} seed {seed}: failed (exit {result.returncode})", flush=True)
            return None
    data = json.loads(summary.read_text())
    row = {"candidate": name, "seed": seed, "changes": CANDIDATES[name], **{k: data[k] for k in (
        "held_out_success_before_rl", "held_out_success_after_rl", "held_out_gain", "held_out_gain_ci_low",
        "held_out_gain_ci_high", "iterations", "seconds")}, "evaluations": data["evaluations"]}
    print(f"{name:10s} seed {seed}: {row['held_out_success_before_rl']:.3f} -> {row['held_out_success_after_rl']:.3f}, gain "
          f"{row['held_out_gain']:+.3f} [{row['held_out_gain_ci_low']:+.3f}, {row['held_out_gain_ci_high']:+.3f}], "
          f"{row['iterations']} iterations, {row['seconds'] / 60:.1f} min", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", nargs="+", choices=sorted(CANDIDATES), default=["default"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--output-dir", type=Path, default=ROOT / "results" / "quickstart_search")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "quickstart_search.json")
    args = parser.parse_args(argv)
    rows = [row for name in args.candidates for seed in args.seeds if (row := run_one(name, seed, args.output_dir))]
    previous = json.loads(args.out.read_text())["runs"] if args.out.exists() else []
    keep = [r for r in previous if (r["candidate"], r["seed"]) not in {(x["candidate"], x["seed"]) for x in rows}]
    write_json(args.out, {"runs": keep + rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
