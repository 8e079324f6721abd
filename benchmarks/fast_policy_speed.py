"""Training throughput of the fast action-scoring policy (``model="drrn"``) on one CPU core.

Env steps per second of whole training iterations (collection + update, the trainer's own
``time/collect_s`` and ``time/update_s``) for GRPO and RSPO-GRPO (explorer) on ALFWorld (all six
task types, the env's 50-step limit) and WebShop, with ``torch.set_num_threads(1)``. The first
iteration is a warm-up and is not counted. On a shared machine wall-clock rates fall with the
load; steps per CPU second of this one-thread process (``time.process_time``) are what one free
core would do.

    python benchmarks/fast_policy_speed.py                 # 6 iterations of 8 groups x 4
    python benchmarks/fast_policy_speed.py --iterations 3 --envs rspo/ALFWorld-v0
    python benchmarks/fast_policy_speed.py --baseline-src ../rspo_gym-before   # before / after
    python benchmarks/fast_policy_speed.py --models drrn drrn-memory            # the memory's cost
    python benchmarks/fast_policy_speed.py --pinned-kernels                    # the cost of rspo-gym's pinned kernels

``--baseline-src`` names a checkout of another commit (``git worktree add --detach PATH COMMIT``):
each cell is measured there first, in a subprocess with ``PYTHONPATH`` pointing to it, then here,
back to back, so both figures see the same machine load; the table adds the ratio of steps per
CPU second. "Here" is the checkout this script belongs to (its parent folder goes first on
``sys.path``), not whichever ``rspo_gym`` an editable install points to; each row records the
folder it imported (``src``) and a mismatch stops the run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout measured as "this checkout"
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import peak_rss_mb, write_json  # noqa: E402


def measure(env_id: str, algo: str, iterations: int, groups: int, group_size: int, model: str = "drrn") -> dict:
    from rspo_gym.algos import GRPOTrainer, RSPOTrainer

    common = dict(model=model, num_groups=groups, group_size=group_size, eval_every=0, progress=False, seed=0, learning_rate=1e-3,
                  micro_batch_size=64)  # the fast preset's: one pass per mini-batch
    with tempfile.TemporaryDirectory() as out:
        if algo == "grpo":
            trainer = GRPOTrainer(env_id, output_dir=out, **common)
        else:
            trainer = RSPOTrainer(env_id, base="grpo", swap="explorer", explorer_group_size=group_size // 2, output_dir=out, **common)
        cpu: list[float] = []  # this process's CPU time at the end of each iteration
        history = trainer.learn(iterations + 1, callback=lambda _t, _m: cpu.append(time.process_time()))[1:]  # the first warms up
        trainer.close()
    import rspo_gym

    steps = sum(row["env_steps"] for row in history)
    collect = sum(row["time/collect_s"] for row in history)
    update = sum(row["time/update_s"] for row in history)
    return {
        "env": env_id, "algo": algo, "model": model, "iterations": iterations, "env_steps": steps,
        "collect_s": collect, "update_s": update, "steps_per_s": steps / (collect + update),
        "collect_steps_per_s": steps / collect, "success": history[-1]["rollout/success"],
        "steps_per_cpu_s": steps / (cpu[-1] - cpu[0]),
        "src": str(Path(rspo_gym.__file__).resolve().parent.parent),
    }


def measure_at(src: Path, env_id: str, algo: str, iterations: int, groups: int, group_size: int) -> dict:
    """``measure`` run by this script in a subprocess that imports ``rspo_gym`` from checkout ``src``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "row.json"
        command = [sys.executable, __file__, "--src", str(src.resolve()), "--envs", env_id, "--algos", algo, "--iterations", str(iterations),
                   "--groups", str(groups), "--group-size", str(group_size), "--out", str(out)]
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src.resolve()), os.environ.get("PYTHONPATH", "")])}
        subprocess.run(command, check=True, env=environment, stdout=subprocess.DEVNULL)
        (row,) = json.loads(out.read_text(encoding="utf-8"))["rows"]
    if Path(row["src"]) != src.resolve():
        raise RuntimeError(f"the baseline imported rspo_gym from {row['src']}, not {src}")
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["rspo/ALFWorld-v0", "rspo/WebShop-v0"])
    parser.add_argument("--algos", nargs="+", default=["grpo", "rspo"], choices=["grpo", "rspo"])
    parser.add_argument("--models", nargs="+", default=["drrn"], choices=["drrn", "drrn-memory"],
                        help="fast policies to measure; with both, the table adds memory / plain (a baseline checkout: drrn only)")
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/fast_policy_speed.json"))
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="a checkout of another commit to measure first, cell by cell (before / after)")
    parser.add_argument("--pinned-kernels", action="store_true",
                        help="ATen's AVX2 kernels and MKL's COMPATIBLE branch, as rspo-gym train pins them for a drrn model")
    parser.add_argument("--src", type=Path, default=ROOT, help=argparse.SUPPRESS)  # the checkout to import (measure_at's)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.src.resolve()))  # ahead of an editable install of another checkout
    import torch

    torch.set_num_threads(1)
    if args.pinned_kernels:  # before the first kernel: a script's default is the CPU's own
        from rspo_gym.cpu_settings import pin_scorer_kernels

        note = pin_scorer_kernels()
        if note:
            raise RuntimeError(note)
    if args.baseline_src is not None and args.models != ["drrn"]:
        parser.error("--baseline-src measures the plain drrn only: leave out --models")
    cells = [(env, algo, model) for env in args.envs for algo in args.algos for model in args.models]
    sizes = (args.iterations, args.groups, args.group_size)
    baseline: list[dict] = []
    rows: list[dict] = []
    for env, algo, model in cells:
        if args.baseline_src is not None:
            baseline.append(measure_at(args.baseline_src, env, algo, *sizes))
        rows.append(measure(env, algo, *sizes, model))
        if Path(rows[-1]["src"]) != args.src.resolve():
            raise RuntimeError(f"measured rspo_gym from {rows[-1]['src']}, not {args.src.resolve()}")
    print("| env | algorithm | model | env steps | collect s | update s | env steps/s (train) | env steps/s (collect only) | env steps per CPU second (train) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['env']} | {r['algo']} | {r['model']} | {r['env_steps']} | {r['collect_s']:.2f} | {r['update_s']:.2f} | "
              f"{r['steps_per_s']:.0f} | {r['collect_steps_per_s']:.0f} | {r['steps_per_cpu_s']:.0f} |")
    from rspo_gym.quickstart import cpu_description

    result = {"threads": 1, "groups": args.groups, "group_size": args.group_size, "rows": rows, "machine": cpu_description()}
    if len(args.models) == 2:
        pairs = [(plain, memory) for plain, memory in zip(rows[::2], rows[1::2])]
        print("\n| env | algorithm | env steps per CPU second, drrn | drrn-memory | memory / plain |")
        print("|---|---|---|---|---|")
        for plain, memory in pairs:
            print(f"| {plain['env']} | {plain['algo']} | {plain['steps_per_cpu_s']:.0f} | {memory['steps_per_cpu_s']:.0f} | "
                  f"{memory['steps_per_cpu_s'] / plain['steps_per_cpu_s']:.2f} |")
        result["memory_over_plain_per_cpu_s"] = [m["steps_per_cpu_s"] / p["steps_per_cpu_s"] for p, m in pairs]
    if baseline:
        print("\n| env | algorithm | env steps per CPU second, baseline | this checkout | ratio |")
        print("|---|---|---|---|---|")
        for before, after in zip(baseline, rows):
            print(f"| {after['env']} | {after['algo']} | {before['steps_per_cpu_s']:.0f} | {after['steps_per_cpu_s']:.0f} | "
                  f"{after['steps_per_cpu_s'] / before['steps_per_cpu_s']:.2f} |")
        result["baseline"] = {"src": str(args.baseline_src.resolve()), "rows": baseline}
        result["speedup_per_cpu_s"] = [after["steps_per_cpu_s"] / before["steps_per_cpu_s"] for before, after in zip(baseline, rows)]
    write_json(args.out, {**result, "peak_rss_mb": peak_rss_mb()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
