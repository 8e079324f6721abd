"""How often the dense reward and the outcome disagree on which of two same-task trajectories is better.

Per env, grouped rollouts of the fast policy (``model="drrn"``, sampling at temperature 1, groups
of ``--group-size`` trajectories of one task) from the start of ``compare.py --preset fast`` (on
ALFWorld its partial clone of the expert: 200 episodes, 10 epochs; on WebShop the untrained
policy), then along a GRPO run on the outcome, ``--iterations`` rollouts in all. Every pair of
trajectories of one group is ranked by the outcome reward the comparison trains on (ALFWorld: the
win; WebShop: the purchase score) and by the dense return (that outcome plus the process reward:
ALFWorld's milestones potential, WebShop's score potential), as ``rspo_gym.algos.reward_alignment``
counts it.

    python benchmarks/reward_disagreement.py --out results/benchmarks/reward_disagreement.json
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import write_json  # noqa: E402

OUTCOMES = {"rspo/ALFWorld-v0": "outcome", "rspo/WebShop-v0": "score"}


def measure(env_id: str, iterations: int, groups: int, group_size: int, seed: int) -> dict:
    from rspo_gym.algos import GRPOTrainer
    from rspo_gym.algos.reward_alignment import pairwise_disagreement
    from rspo_gym.policies.scorer_warmstart import clone, expert_choices

    outcome_kind = OUTCOMES[env_id]
    rows = {"outcome": [], "dense": [], "groups": []}
    with tempfile.TemporaryDirectory() as out:
        trainer = GRPOTrainer(env_id, model="drrn", num_groups=groups, group_size=group_size, reward=outcome_kind,
                              dense_outcome=outcome_kind, learning_rate=1e-3, micro_batch_size=64, eval_every=0,
                              progress=False, seed=seed, output_dir=out)
        if env_id == "rspo/ALFWorld-v0":  # the fast comparison's ALFWorld start: a partial clone of the expert
            demos = expert_choices(trainer.policy, env_id, 200, history_length=trainer.config.history_length, seed=900_000)
            clone(trainer.policy, demos, epochs=10, learning_rate=3e-3, seed=seed)
        for it in range(iterations):
            rollout = trainer.collect(it)
            outcome = trainer.reward_view(rollout, outcome_kind)
            dense = trainer.reward_view(rollout, "dense")
            first = {}
            for row, traj in enumerate(outcome.traj_ids.tolist()):
                first.setdefault(traj, row)
            for traj, row in first.items():
                rows["outcome"].append(float(outcome.episode[row]))
                rows["dense"].append(float(dense.episode[row]))
                rows["groups"].append(it * groups + int(outcome.group_ids[row]))
            trainer.train_on(rollout, it)
        trainer.close()
    result = pairwise_disagreement(rows["outcome"], rows["dense"], rows["groups"])
    return {"env": env_id, "outcome": outcome_kind, "trajectories": len(rows["groups"]), **result}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(OUTCOMES))
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/reward_disagreement.json"))
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    results = [measure(env, args.iterations, args.groups, args.group_size, args.seed) for env in args.envs]
    print("| env | outcome | trajectories | pairs | outcome ties | dense reverses a ranked pair | dense breaks an outcome tie | orders differ |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['env']} | {r['outcome']} | {r['trajectories']} | {r['pairs']} | {r['outcome_ties']} | "
              f"{r['reversed_rate']:.1%} | {r['tie_broken_rate']:.1%} | {r['disagreement_rate']:.1%} |")
    write_json(args.out, {"iterations": args.iterations, "groups": args.groups, "group_size": args.group_size, "rows": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
