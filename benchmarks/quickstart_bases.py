"""The quick start's setting with each base algorithm alone: does the base learn at that budget too?

Runs GRPO, GiGPO and PPO with the outcome reward on exactly what ``rspo-gym quickstart`` uses (the
``tiny-alfworld`` start, its 64 training and 30 held-out ``pick_and_place_simple`` tasks, learning
rate 3e-4, 25 turns, history 6, evaluation at T = 0.5 every 2 iterations, a wall-clock budget of
``--budget-minutes`` including the first evaluation). GRPO and GiGPO play 4 groups × 4, PPO 16
single trajectories (it has no groups). One run at a time, so each has the machine to itself::

    python benchmarks/quickstart_bases.py                 # grpo gigpo ppo, ~9 min each
    python benchmarks/quickstart_bases.py --bases grpo

Writes JSON (``--out``, default ``results/benchmarks/quickstart_bases.json``) with each run's
held-out success by iteration; compare with the quick start's own ``summary.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.common import write_json  # noqa: E402
from rspo_gym.algos import GiGPOTrainer, GRPOTrainer, PPOTrainer  # noqa: E402
from rspo_gym.quickstart import QuickstartConfig, resolved, task_sets  # noqa: E402

TRAINERS = {"grpo": GRPOTrainer, "gigpo": GiGPOTrainer, "ppo": PPOTrainer}


def run(base: str, config: QuickstartConfig, output_dir: Path) -> dict:
    start = time.perf_counter()
    overrides = dict(config.trainer_overrides)
    if base == "ppo":  # no groups: the same number of trajectories per iteration
        overrides["num_groups"], overrides["group_size"] = overrides["num_groups"] * overrides["group_size"], 1
    trainer = TRAINERS[base](
        config.env_id, model=config.model, reward="outcome", seed=config.seed, iterations=config.iterations,
        eval_every=config.eval_every, history_length=config.history_length, output_dir=str(output_dir / base),
        progress=False, **task_sets(config), **overrides,
    )
    before = trainer.evaluate()["eval/success"]
    history = trainer.learn(config.iterations, time_budget_s=config.budget_minutes * 60 - (time.perf_counter() - start), overwrite=True)
    trainer.close()
    evaluations = [(0, before)] + [(row["iteration"], row["eval/success"]) for row in history if "eval/success" in row]
    result = {"base": base, "evaluations": evaluations, "minutes": (time.perf_counter() - start) / 60,
              "seconds_per_iteration": [row["time/iteration_s"] for row in history]}
    print(f"{base:6s} " + " → ".join(f"{it}: {value:.1%}" for it, value in evaluations) + f"  ({result['minutes']:.1f} min)", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bases", nargs="+", choices=sorted(TRAINERS), default=["grpo", "gigpo", "ppo"])
    parser.add_argument("--budget-minutes", type=float, default=QuickstartConfig.budget_minutes)
    parser.add_argument("--output-dir", type=Path, default=ROOT / "results" / "quickstart_bases")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "quickstart_bases.json")
    args = parser.parse_args(argv)
    config = resolved(QuickstartConfig(budget_minutes=args.budget_minutes))
    runs = [run(base, config, args.output_dir) for base in args.bases]
    write_json(args.out, {"config": asdict(config), "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
