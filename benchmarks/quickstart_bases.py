"""The quick start's setting with each base algorithm alone: does the base learn with that work too?

Runs GRPO, GiGPO and PPO with the outcome reward on exactly what ``rspo-gym quickstart`` does (the
``tiny-alfworld`` start, its 64 training and 35 held-out ``pick_and_place_simple`` tasks × 4
episodes at T = 1.0, learning rate 3e-4, 25 turns, history 6, the same iterations and evaluation
points). GRPO and GiGPO play 4 groups × 4, PPO 16 single trajectories (it has no groups). One run at
a time, so each has the machine to itself::

    python benchmarks/quickstart_bases.py                 # grpo gigpo ppo
    python benchmarks/quickstart_bases.py --bases grpo

Writes JSON (``--out``, default ``results/benchmarks/quickstart_bases.json``) with each run's
held-out success by iteration and its paired gain; compare with the quick start's ``summary.json``.
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
import torch  # noqa: E402

from rspo_gym.intervals import bootstrap_mean_ci, paired_difference_ci  # noqa: E402
from rspo_gym.quickstart import QuickstartConfig, held_out_matrix, per_task, plan, resolved, task_sets  # noqa: E402

TRAINERS = {"grpo": GRPOTrainer, "gigpo": GiGPOTrainer, "ppo": PPOTrainer}


def run(base: str, config: QuickstartConfig, output_dir: Path) -> dict:
    start = time.perf_counter()
    torch.set_num_threads(config.threads)
    work = plan(config)
    overrides = dict(config.trainer_overrides)
    if base == "ppo":  # no groups: the same number of trajectories per iteration
        overrides["num_groups"], overrides["group_size"] = overrides["num_groups"] * overrides["group_size"], 1
    trainer = TRAINERS[base](
        config.env_id, model=config.model, reward="outcome", seed=config.seed, iterations=config.iterations,
        eval_every=0, history_length=config.history_length, output_dir=str(output_dir / base), progress=False,
        **{**task_sets(config), **overrides, "eval_seed": config.seed + 1000},
    )
    matrices = {0: held_out_matrix(trainer, work)[1]}

    def after_iteration(trainer_, metrics: dict) -> None:
        if metrics["iteration"] in work["evaluate_after"]:
            matrices[metrics["iteration"]] = held_out_matrix(trainer, work)[1]

    trainer.learn(config.iterations, callback=after_iteration, overwrite=True)
    trainer.close()
    evaluations = [(it, bootstrap_mean_ci(per_task(m))[0]) for it, m in sorted(matrices.items())]
    gain = paired_difference_ci(per_task(matrices[config.iterations]), per_task(matrices[0]))
    result = {"base": base, "evaluations": evaluations, "gain": gain, "minutes": (time.perf_counter() - start) / 60}
    print(f"{base:6s} " + " → ".join(f"{it}: {value:.1%}" for it, value in evaluations)
          + f"  gain {gain[0]:+.1%} [{gain[1]:+.1%}, {gain[2]:+.1%}] ({result['minutes']:.1f} min)", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bases", nargs="+", choices=sorted(TRAINERS), default=["grpo", "gigpo", "ppo"])
    parser.add_argument("--output-dir", type=Path, default=ROOT / "results" / "quickstart_bases")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "quickstart_bases.json")
    args = parser.parse_args(argv)
    config = resolved(QuickstartConfig())
    runs = [run(base, config, args.output_dir) for base in args.bases]
    write_json(args.out, {"config": asdict(config), "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
