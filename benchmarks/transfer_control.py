"""Did the explorer's wins teach RSPO's learner more than the same budget without an explorer taught its control?

An RSPO explorer cell of the WebShop-v1 study records, at its end, its training goals that only
its explorer won and goals nobody won, each played by the learner's start and final weights
(``RSPOTrainer.measure_transfer``, the cell's ``transfer``). The goals the explorer won are easier
than those nobody won (the start already wins some of them), so the nobody-won goals are a weak
control for what the learner would have learnt on them anyway. Here the control is the same seed's
``outcome-nm`` arm: GRPO with the explorer arm's samples per task and no explorer, whose draws
play the same goals at the same iterations. Its final policy (kept by the matrix in
``policies/<cell>/``) plays each RSPO cell's goals on the same episodes (``transfer.goal_successes``:
the same goal list and evaluation seed), and the start is replayed too, to check that the pairing
holds: its per-goal successes must equal the cell's recorded ones.

Per temperature, over seeds with 95 % paired bootstrap intervals: RSPO's learner − the control's
final success on the explorer-only goals (did the explorer's wins transfer beyond the control's own
samples of those goals?), the same on the nobody-won goals, and their difference.

    python benchmarks/transfer_control.py results/webshop-v1-transfer results/webshop-v1-control \\
        --json docs/results_fast/transfer_control.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rspo_gym.algos.replay_metrics import LABELS  # noqa: E402
from rspo_gym.intervals import paired_difference_ci  # noqa: E402

CONTROL_ARM = "outcome-nm"


def control_successes(cell: dict, control_policy: Path, temperature: float) -> dict[str, dict[str, list[float]]]:
    """The start's and the control policy's per-goal successes on the cell's goals at ``temperature``."""
    import rspo_matrix as matrix
    from rspo_gym.policies.action_scorer import ActionScorerPolicy
    from rspo_gym.training.transfer import goal_successes

    measured = next(m for m in cell["transfer"] if m["temperature"] == temperature)
    sample = {label: measured["goals"][label]["task_ids"] for label in LABELS}
    plan = matrix.PLANS["webshop-v1"].envs[cell["env"]].for_base(cell["base"])
    cls, settings = matrix.trainer_settings(cell["env"], cell["base"], matrix.ARMS[CONTROL_ARM], cell["seed"], plan)
    played = {}
    for name in ("start", "control"):
        trainer = cls(cell["env"], **settings)  # fresh: a scorer loads weights only over its own command registry
        try:
            if name == "control":
                trainer.policy.load_state_dict(ActionScorerPolicy.load(control_policy).state_dict())
            played[name] = goal_successes(trainer, sample, measured["episodes"], temperature)
        finally:
            trainer.close()
    return played


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def compare(cells: dict[str, dict], controls: Path) -> dict:
    """Per temperature: per seed, each label's RSPO and control final success and the start check;
    over seeds, the paired differences."""
    import rspo_matrix as matrix

    out: dict = {}
    for stem, cell in sorted(cells.items()):
        policy = matrix.policy_path(controls, cell["env"], cell["base"], CONTROL_ARM, cell["seed"])
        if not policy.is_dir():
            print(f"{stem}: no control policy at {policy}: run the {CONTROL_ARM} cell of seed {cell['seed']} first", file=sys.stderr)
            continue
        for measured in cell["transfer"]:
            temperature = measured["temperature"]
            if not measured["goals"] or not measured["goals"]["explorer_only"]["task_ids"]:
                continue  # no goal only the explorer won: nothing to compare on this seed
            played = control_successes(cell, policy, temperature)
            row = {"seed": cell["seed"], "start_reproduced": all(played["start"][label] == measured["goals"][label]["start"]
                                                                for label in LABELS)}
            for label in LABELS:
                row[f"{label}_rspo"] = _mean(measured["goals"][label]["end"])
                row[f"{label}_control"] = _mean(played["control"][label])
                row[f"{label}_start"] = _mean(played["start"][label])
            out.setdefault(str(temperature), {"seeds": []})["seeds"].append(row)
            print(f"{stem} T={temperature}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items() if isinstance(v, float)), flush=True)
    for summary in out.values():
        rows = summary["seeds"]
        for label in LABELS:
            mean, low, high = paired_difference_ci([[r[f"{label}_rspo"]] for r in rows], [[r[f"{label}_control"]] for r in rows])
            summary[f"{label}_rspo_minus_control"] = {"mean": mean, "low": low, "high": high}
        mean, low, high = paired_difference_ci([[r["explorer_only_rspo"] - r["explorer_only_control"]] for r in rows],
                                               [[r["nobody_rspo"] - r["nobody_control"]] for r in rows])
        summary["difference_in_differences"] = {"mean": mean, "low": low, "high": high}
        summary["start_reproduced"] = all(r["start_reproduced"] for r in rows)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("explorer_cells", type=Path, help="a matrix folder whose cells/ hold RSPO cells with a transfer")
    parser.add_argument("controls", type=Path, help=f"a matrix folder whose policies/ hold the {CONTROL_ARM} cells' final policies")
    parser.add_argument("--json", type=Path, default=None, help="write the comparison here")
    args = parser.parse_args(argv)
    cells = {p.stem: json.loads(p.read_text()) for p in sorted((args.explorer_cells / "cells").glob("*.json"))}
    cells = {stem: cell for stem, cell in cells.items() if cell.get("transfer")}
    if not cells:
        print(f"no cell with a recorded transfer in {args.explorer_cells / 'cells'}", file=sys.stderr)
        return 2
    result = compare(cells, args.controls)
    for temperature, summary in result.items():
        print(f"\nT = {temperature}, {len(summary['seeds'])} seeds, start reproduced: {summary['start_reproduced']}\n")
        print("| measure | mean over seeds [95 % CI] |\n|---|---|")
        for key in (*(f"{label}_rspo_minus_control" for label in LABELS), "difference_in_differences"):
            r = summary[key]
            print(f"| {key} | {r['mean']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}] |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
