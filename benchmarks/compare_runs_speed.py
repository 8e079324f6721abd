"""How long ``rspo-gym compare`` takes on 2 groups x 3 seeds of fast-policy ALFWorld runs.

Trains the runs first (GRPO with ``--model drrn`` at two learning rates, seeds 0-2, a few
iterations; not timed as part of the comparison), then times whole ``rspo-gym compare`` commands
in fresh processes, start-up included: from the runs' own records (no evaluation), and with
``--evaluate --tasks N``, which evaluates every run's saved policy on the first N held-out tasks
(ALFWorld's 50-turn limit) before the statistics. One torch thread (``OMP_NUM_THREADS=1``),
as the fast policy is run everywhere. On a shared machine the times move with the load: the
load average before each command is recorded beside it.

    python benchmarks/compare_runs_speed.py                      # --tasks 8 35 140
    python benchmarks/compare_runs_speed.py --tasks 35 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import write_json  # noqa: E402

GROUPS = {"lr3e-4": 3e-4, "lr3e-3": 3e-3}
SEEDS = (0, 1, 2)


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown"
    names = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")]
    return names[0] if names else "unknown"


def train_runs(root: Path, iterations: int) -> float:
    """The 2 x 3 runs in ``root/<group>-s<seed>``; returns the seconds it took."""
    started = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    for name, lr in GROUPS.items():
        for seed in SEEDS:
            subprocess.run([sys.executable, "-m", "rspo_gym.cli", "train", "--algo", "grpo", "--model", "drrn", "--seed", str(seed),
                            "--iterations", str(iterations), "--set", "eval_every=2", "--set", f"learning_rate={lr}",
                            "--set", "progress=false", "--output-dir", str(root / f"{name}-s{seed}")],
                           env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def timed_compare(root: Path, out: Path, extra: list[str]) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    load = os.getloadavg()[0]
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rspo_gym.cli", "compare", *[f"--group={n}={root}/{n}-s*" for n in GROUPS],
                    "--baseline", "lr3e-4", "--out", str(out), *extra],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {"args": " ".join(extra) or "(records)", "seconds": round(time.perf_counter() - started, 1), "load_before": round(load, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[8, 35, 140], help="held-out tasks of each --evaluate comparison")
    parser.add_argument("--iterations", type=int, default=4, help="training iterations of each run")
    parser.add_argument("--repeats", type=int, default=1, help="times each command is timed")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "compare_runs_speed.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="compare-speed-") as tmp:
        root = Path(tmp)
        train_s = train_runs(root / "runs", args.iterations)
        rows = []
        for _ in range(args.repeats):
            rows.append(timed_compare(root / "runs", root / "report", []))
            for tasks in args.tasks:
                rows.append(timed_compare(root / "runs", root / "report", ["--evaluate", "--tasks", str(tasks)]))
    result = {"machine": f"{cpu_name()}, {os.cpu_count()} cores", "python": platform.python_version(),
              "runs": f"2 groups x {len(SEEDS)} seeds, GRPO --model drrn on rspo/ALFWorld-v0, {args.iterations} iterations",
              "train_s": round(train_s, 1), "compare": rows}
    print(f"{result['machine']}; {result['runs']} (trained in {result['train_s']} s)")
    print("| rspo-gym compare | seconds | load average before |\n|---|---|---|")
    for row in rows:
        print(f"| {row['args']} | {row['seconds']} | {row['load_before']} |")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
