"""Supervised warm start: behaviour-clone an env's expert, then win held-out tasks?

Runs ``rspo_gym.policies.warmstart.warm_start`` with ``WarmStartConfig``'s defaults (flags
override them) on the ``tiny`` preset, then plays constrained episodes (admissible actions only;
seeded sampling at ``--temperature`` 0.5, 0 for greedy) of held-out tasks within the env's step
limit. ALFWorld (default): the generated ``valid_seen`` and ``valid_unseen`` tasks, success per
task type. WebShop (``--env rspo/WebShop-v0``, cloned on the ``train`` goals, ``--task-types ''``):
the first tasks of ``test`` / ``valid``, success and mean score. Single-threaded and seeded, so
reruns on the same machine give the same numbers::

    python benchmarks/warmstart.py --save results/warmstart/alfworld-tiny
    python benchmarks/warmstart.py --eval-tasks 40   # first 40 tasks of each split
    python benchmarks/warmstart.py --device cuda --splits valid_seen   # ~1 min on a GPU
    python benchmarks/warmstart.py --prompt-format conversation --constrained-loss --epochs 12 --threads 2 \
        --save-asset rspo_gym/policies/assets/tiny_alfworld_chat_bc.safetensors   # tiny-alfworld-chat
    python benchmarks/warmstart.py --env rspo/WebShop-v0 --task-types '' --episodes 400 --epochs 3 \
        --history-length 2 --temperature 0 --eval-tasks 100 --save results/warmstart/webshop-tiny

The ALFWorld defaults (600 pick-and-place episodes, history 6, 8 epochs of 16 rows, cosine lr) take
~35-40 min of cloning on one CPU thread and ~30 s on an H200; results in
``rspo_gym/policies/warmstart.py``'s docstring.

Writes JSON (``--out``, default ``results/benchmarks/warmstart_<env>.json``) and, with
``--save DIR``, the warm-started weights and tokenizer (``LLMPolicy.save``), which
``load_model(DIR)`` loads back as a trainer's starting point.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections import defaultdict
from dataclasses import asdict, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from benchmarks.common import write_json  # noqa: E402
from rspo_gym.rollout.generation import GenerationConfig  # noqa: E402
from rspo_gym.policies.llm import LLMPolicy  # noqa: E402
from rspo_gym.policies.models import load_model  # noqa: E402
from rspo_gym.policies.warmstart import WarmStartConfig, warm_start  # noqa: E402
from rspo_gym.envs.alfworld.vocab import TASK_TYPES  # noqa: E402
from rspo_gym.rollout.collector import CollectConfig, collect  # noqa: E402
from rspo_gym.rollout.vector import GroupedVectorEnv  # noqa: E402

#: held-out splits and their sizes (WebShop: test has 500 goals, valid 1,000)
SPLITS = {
    "rspo/ALFWorld-v0": {"valid_seen": 140, "valid_unseen": 134},
    "rspo/WebShop-v0": {"test": 500, "valid": 1000},
}


def evaluate(policy: LLMPolicy, env_id: str, split: str, tasks: int, history_length: int, temperature: float, seed: int,
             prompt_format: str = "window") -> dict:
    """Constrained episodes of the split's first ``tasks`` tasks (greedy at temperature 0,
    else seeded sampling); success per task type (ALFWorld) and mean score."""
    venv = GroupedVectorEnv(env_id, num_groups=tasks, group_size=1, env_kwargs={"split": split})
    generation = GenerationConfig(temperature=temperature, seed=seed)
    config = CollectConfig(generation=generation, constrained=True, history_length=history_length, prompt_format=prompt_format)
    start = time.perf_counter()
    rollout = collect(policy, venv, config, task_ids=list(range(tasks)))
    seconds = time.perf_counter() - start
    venv.close()
    wins: dict[str, list[bool]] = defaultdict(list)
    for trajectory in rollout.trajectories:
        wins[trajectory.task_type].append(trajectory.won)
    per_type = {t: {"won": sum(w), "tasks": len(w), "success": sum(w) / max(len(w), 1)} for t, w in sorted(wins.items())}
    return {
        "tasks": tasks,
        "success": rollout.success_rate(),
        "score": sum(t.score for t in rollout.trajectories) / tasks,
        "per_type": per_type,
        "mean_length": sum(t.length for t in rollout.trajectories) / tasks,
        "seconds": seconds,
    }


def main() -> None:
    defaults = WarmStartConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="rspo/ALFWorld-v0", choices=sorted(SPLITS))
    parser.add_argument("--model", default="tiny", help="load_model name or directory")
    parser.add_argument("--episodes", type=int, default=defaults.episodes)
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--history-length", type=int, default=defaults.history_length)
    parser.add_argument("--prompt-format", default=defaults.prompt_format, choices=("window", "conversation"))
    parser.add_argument("--constrained-loss", action="store_true", help="fit the expert among the admissible actions only")
    parser.add_argument("--explore", type=float, default=defaults.explore, help="chance a demonstration step plays a random action")
    parser.add_argument("--warmup-steps", type=int, default=defaults.warmup_steps)
    parser.add_argument("--schedule", default=defaults.schedule, choices=("constant", "cosine"))
    parser.add_argument("--task-types", default=",".join(defaults.task_types or ()), help="comma-separated; empty: all")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--eval-tasks", type=int, default=0, help="first N tasks of each split (0: all)")
    parser.add_argument("--splits", default=None, help="comma-separated evaluation splits (default: all held-out ones)")
    parser.add_argument("--temperature", type=float, default=0.5, help="evaluation sampling (0: greedy)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="torch device of the policy (float32 everywhere)")
    parser.add_argument("--save", type=Path, help="directory for the warm-started weights and tokenizer")
    parser.add_argument("--save-asset", type=Path, help="the weights alone as a preset's safetensors file "
                        "(rspo_gym/policies/assets/; the tied output embedding left out)")
    parser.add_argument("--out", type=Path, default=None, help="default: results/benchmarks/warmstart_<env>.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    config = replace(
        defaults,
        episodes=args.episodes,
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        history_length=args.history_length,
        prompt_format=args.prompt_format,
        constrained_loss=args.constrained_loss,
        explore=args.explore,
        warmup_steps=args.warmup_steps,
        schedule=args.schedule,
        task_types=tuple(args.task_types.split(",")) if args.task_types else None,
        seed=args.seed,
        env_kwargs=(("split", "train"),),  # both envs record demonstrations on their train split
    )
    model, tokenizer = load_model(args.model, seed=args.seed, device=args.device, dtype=torch.float32)
    policy = LLMPolicy(model, tokenizer, seed=args.seed)
    start = time.perf_counter()
    history = warm_start(policy, args.env, config)
    bc_seconds = time.perf_counter() - start
    for entry in history:
        print(f"epoch {entry['epoch']}: loss {entry['loss']:.4f} ({entry['seconds']:.1f} s)")
    print(f"warm start: {config.episodes} episodes, {history[0]['rows']} rows, {bc_seconds:.1f} s")
    if args.save is not None:
        policy.save(args.save)
        print(f"saved {args.save}")
    if args.save_asset is not None:
        from safetensors.torch import save_file

        state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
        save_file(state, str(args.save_asset))
        print(f"saved {args.save_asset}")

    sizes = SPLITS[args.env]
    splits = [s for s in args.splits.split(",") if s] if args.splits else list(sizes)
    results = {}
    for split in splits:
        size = sizes[split]
        results[split] = evaluate(policy, args.env, split, min(args.eval_tasks or size, size), config.history_length, args.temperature, args.seed,
                                  config.prompt_format)
        print(f"evaluated {split}: {results[split]['seconds']:.0f} s", flush=True)
    print(f"\n{'task type':34s}" + "".join(f"{split:>16s}" for split in splits))
    empty = {"won": 0, "tasks": 0, "success": 0.0}
    types = TASK_TYPES if "alfworld" in args.env.lower() else sorted({t for s in splits for t in results[s]["per_type"]})
    for task_type in types:
        cells = [results[s]["per_type"].get(task_type, empty) for s in splits]
        print(f"{str(task_type):34s}" + "".join(f"{c['won']:>7d}/{c['tasks']:<3d} {c['success']:4.0%}" for c in cells))
    print(f"{'overall':34s}" + "".join(f"{results[s]['success']:>15.1%} " for s in splits))
    print(f"{'mean score':34s}" + "".join(f"{results[s]['score']:>16.3f}" for s in splits))

    out = args.out or ROOT / "results" / "benchmarks" / f"warmstart_{args.env.split('/')[-1].split('-')[0].lower()}.json"
    write_json(
        out,
        {
            "env": args.env,
            "model": args.model,
            "parameters": sum(p.numel() for p in model.parameters()),
            "config": asdict(config),
            "bc_seconds": bc_seconds,
            "history": history,
            "eval": results,
            "eval_temperature": args.temperature,
            "torch_threads": args.threads,
            "device": args.device,
            "python": platform.python_version(),
            "torch": torch.__version__,
            "machine": platform.machine(),
        },
    )


if __name__ == "__main__":
    main()
