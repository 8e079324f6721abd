"""The non-LLM baseline: sb3-contrib ``MaskablePPO`` over hashed text features vs a random policy.

Trains ``MaskablePPO`` through ``rspo_gym.sb3.envs.make_sb3_env`` (hashed n-gram features, the
k-th admissible command as action ``k``, masked to the admissible ones) and evaluates it on
held-out tasks against a uniformly random admissible-action policy:

- ALFWorld: trains on the generated ``train`` tasks of one task type (``--task-type``, default
  ``pick_and_place_simple``, among the first ``--train-scan`` train task ids); evaluates on every
  ``valid_seen`` task of that type, within the registered 50-step limit. The outcome reward alone
  is too sparse for PPO here (random play wins about 0% of these tasks in 50 steps), so training
  adds the suite's potential-based milestone reward (``ProcessReward(mode="sum")``,
  ``--process-scale``; 0 turns it off); evaluation reads ``info["won"]`` only.
- WebShop: trains on ``split="train"``; evaluates on the first ``--eval-goals`` ``test`` goals,
  within the 15-step limit; keeps the page order of the commands (a product's position is its
  search rank) and searches for the instruction itself.

Two policies (``--policy``): ``mlp``, SB3's MLP from one flat feature vector to K logits
(``layout="flat"``); ``drrn``, ``rspo_gym.sb3.drrn.DRRNPolicy``, which scores each (state,
admissible command) pair with shared weights over ``layout="pairs"`` observations (a state block
of ``--dim`` and one ``--slot-dim`` block per command), so what it learns about a command holds at
whatever index the command is listed.

The trained policy is evaluated greedily (masked argmax) and sampled; the random policy with
``--random-repeats`` seeds per task. Single-threaded and seeded::

    python benchmarks/sb3_baseline.py                      # both envs, ~10 min each on one core
    python benchmarks/sb3_baseline.py --env webshop --webshop-timesteps 20000
    python benchmarks/sb3_baseline.py --policy drrn --alfworld-timesteps 50000   # ~5 min each

Prints a table (success, WebShop score, steps, wall time) and writes JSON (``--out``, default
``results/benchmarks/sb3_baseline.json``; ``sb3_baseline_drrn.json`` with ``--policy drrn``). SB3
bootstraps at the step limit while our LLM trainers count it as failure (see
``rspo_gym/sb3/envs.py``); success is ``info["won"]`` in both.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import rspo_gym  # noqa: E402,F401  (registers the envs)
from benchmarks.common import write_json  # noqa: E402
from rspo_gym.sb3.envs import make_sb3_env  # noqa: E402
from rspo_gym.envs.wrappers import ProcessReward  # noqa: E402

ENVS = {"alfworld": "rspo/ALFWorld-v0", "webshop": "rspo/WebShop-v0"}


def task_ids_of_type(split: str, task_type: str, scan: int) -> list[int]:
    """The ids among the split's first ``scan`` tasks whose ``task_type`` matches."""
    env = gym.make(ENVS["alfworld"], split=split)
    ids = [k for k in range(scan) if env.reset(options={"task_id": k})[1]["task_type"] == task_type]
    env.close()
    return ids


def play(env: gym.Env, task_id: int, choose: Callable[[np.ndarray, np.ndarray], int], seed: int) -> dict:
    """One episode of task ``task_id``; ``choose(obs, mask)`` picks each action index."""
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    steps, score, done = 0, 0.0, False
    while not done:
        obs, _, terminated, truncated, info = env.step(choose(obs, env.action_masks()))
        steps += 1
        score = float(info.get("score", score))
        done = terminated or truncated
    return {"won": bool(info["won"]), "score": score, "steps": steps}


def evaluate(env: gym.Env, task_ids: list[int], choose, repeats: int, seed: int) -> dict:
    start = time.perf_counter()
    episodes = [play(env, t, choose, seed + r) for r in range(repeats) for t in task_ids]
    return {
        "episodes": len(episodes),
        "success": float(np.mean([e["won"] for e in episodes])),
        "score": float(np.mean([e["score"] for e in episodes])),
        "steps": float(np.mean([e["steps"] for e in episodes])),
        "wall_s": time.perf_counter() - start,
    }


def run_env(name: str, args: argparse.Namespace) -> dict:
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    from rspo_gym.sb3.drrn import DRRNPolicy

    env_id = ENVS[name]
    if name == "alfworld":
        train_ids = task_ids_of_type("train", args.task_type, args.train_scan)
        eval_kwargs = {"split": "valid_seen"}
        eval_ids = task_ids_of_type("valid_seen", args.task_type, 140)
        common = {"sort": True}
        setting = {"task_type": args.task_type, "train_tasks": len(train_ids), "eval_split": "valid_seen"}

        def train_env() -> gym.Env:
            env = gym.make(env_id, split="train")
            if args.process_scale > 0:
                env = ProcessReward(env, "milestones", scale=args.process_scale, mode="sum")
            return make_sb3_env(env, task_ids=train_ids, **common)
    else:
        eval_kwargs = {"split": "test"}
        eval_ids = list(range(args.eval_goals))
        common = {"sort": False}
        setting = {"train_split": "train", "eval_split": "test"}

        def train_env() -> gym.Env:
            return make_sb3_env(env_id, split="train", **common)
    common.update(num_actions=args.num_actions, dim=args.dim)
    policy_kwargs = {"net_arch": [args.hidden, args.hidden]}
    if args.policy == "drrn":
        common.update(layout="pairs", slot_dim=args.slot_dim)
        policy_kwargs["state_dim"] = args.dim

    vec = make_vec_env(train_env, n_envs=args.n_envs, seed=args.seed)
    model = MaskablePPO(
        DRRNPolicy if args.policy == "drrn" else "MlpPolicy",
        vec,
        n_steps=args.n_steps,
        batch_size=args.batch_size,
        n_epochs=args.n_epochs,
        learning_rate=args.lr,
        gamma=args.gamma,
        ent_coef=args.ent_coef,
        policy_kwargs=policy_kwargs,
        seed=args.seed,
        device="cpu",
        verbose=0,
    )
    start = time.perf_counter()
    model.learn(total_timesteps=args.timesteps[name])
    train_s = time.perf_counter() - start
    vec.close()

    eval_env = make_sb3_env(env_id, **common, **eval_kwargs)
    rng = np.random.default_rng(args.seed)

    def greedy(obs, mask):
        return int(model.predict(obs, action_masks=mask, deterministic=True)[0])

    def sampled(obs, mask):
        return int(model.predict(obs, action_masks=mask, deterministic=False)[0])

    def random(obs, mask):
        return int(rng.choice(np.flatnonzero(mask)))

    rows = {
        "MaskablePPO greedy": evaluate(eval_env, eval_ids, greedy, 1, args.seed),
        "MaskablePPO sampled": evaluate(eval_env, eval_ids, sampled, args.random_repeats, args.seed),
        "random admissible": evaluate(eval_env, eval_ids, random, args.random_repeats, args.seed),
    }
    eval_env.close()
    return {
        "env_id": env_id,
        "policy": args.policy,
        **setting,
        "eval_tasks": len(eval_ids),
        "timesteps": args.timesteps[name],
        "train_s": train_s,
        "results": rows,
    }


def print_table(results: dict) -> None:
    print(f"\n{'env':<9} {'policy':<20} {'episodes':>8} {'success':>8} {'score':>7} {'steps':>6} {'eval s':>7} {'train s':>8}")
    for name, result in results.items():
        for policy, row in result["results"].items():
            train = f"{result['train_s']:.0f}" if policy.startswith("MaskablePPO") else "-"
            print(
                f"{name:<9} {policy:<20} {row['episodes']:>8} {row['success']:>8.3f} {row['score']:>7.3f} "
                f"{row['steps']:>6.1f} {row['wall_s']:>7.1f} {train:>8}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", choices=["alfworld", "webshop", "both"], default="both")
    parser.add_argument("--policy", choices=["mlp", "drrn"], default="mlp", help="flat MLP, or DRRN pair scoring")
    parser.add_argument("--alfworld-timesteps", type=int, default=150_000)
    parser.add_argument("--webshop-timesteps", type=int, default=60_000)
    parser.add_argument("--task-type", default="pick_and_place_simple")
    parser.add_argument("--process-scale", type=float, default=1.0, help="ALFWorld training milestone reward scale")
    parser.add_argument("--train-scan", type=int, default=2000, help="train task ids scanned for the task type")
    parser.add_argument("--eval-goals", type=int, default=100, help="first WebShop test goals evaluated")
    parser.add_argument("--random-repeats", type=int, default=3, help="seeds per task for the sampled/random policies")
    parser.add_argument("--num-actions", type=int, default=128, help="Discrete(K): admissible commands kept")
    parser.add_argument("--dim", type=int, default=4096, help="hashed feature dimension (drrn: of the state block)")
    parser.add_argument("--slot-dim", type=int, default=256, help="drrn: hashed feature dimension of each command")
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--n-steps", type=int, default=128, help="rollout steps per env per PPO update")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--n-epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--ent-coef", type=float, default=0.01)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="JSON path (default results/benchmarks/sb3_baseline[_drrn].json)")
    args = parser.parse_args()
    if args.out is None:
        args.out = ROOT / "results" / "benchmarks" / ("sb3_baseline_drrn.json" if args.policy == "drrn" else "sb3_baseline.json")
    args.timesteps = {"alfworld": args.alfworld_timesteps, "webshop": args.webshop_timesteps}
    torch.set_num_threads(1)

    names = list(ENVS) if args.env == "both" else [args.env]
    results = {}
    for name in names:
        results[name] = run_env(name, args)
        print_table({name: results[name]})
    print_table(results)
    config = {k: v for k, v in vars(args).items() if k != "out"}
    write_json(args.out, {"benchmark": "sb3_baseline", "platform": platform.platform(), "config": config, "envs": results})


if __name__ == "__main__":
    main()
