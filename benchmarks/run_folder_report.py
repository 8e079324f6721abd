"""The report of a run-folder matrix (``rspo_matrix.py``'s run-folder presets, the LLM matrix):
every number comes from ``rspo-gym compare``'s library, which reads the cells' run folders.

Per base, every arm against the outcome arm (``rspo_gym.compare.compare_runs``, equal total env
steps: its own report, forest plot and held-out curves in ``<out>/<base>/``), then each pair of
``PAIRS`` at equal total env steps (the headline: equal compute) and at equal learner env steps,
each on the seeds both arms finished. An arm's rows: its final held-out success and the area
under its curve at equal total env steps, and its gain over the start (every cell's
``evaluations/000000.json`` is the start's record). From the cells' ``metrics.jsonl`` and
``cell.json``: how often an explorer won per episode against its learner (``explorer/success`` −
``rollout/success``, the mean over iterations of each seed), wall time and generated tokens.

Writes ``summary.json`` (rows and differences in ``docs/results_fast/summary.json``'s schema, with
``"regime": {"start": ..., "policy": ...}`` and ``measure``), ``tables.md`` and
``forest_<base>.png``; ``--merge-summary PATH`` replaces the LLM rows of an existing
``summary.json`` (``is_llm``) and keeps the rest.

    python benchmarks/rspo_matrix.py --preset llm-alfworld --jobs 2 --out results/llm-alfworld
    python benchmarks/run_folder_report.py results/llm-alfworld --out docs/results_llm_matrix \\
        --merge-summary docs/results_fast/summary.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BASE_LABELS, write_json  # noqa: E402

#: The comparisons ``(a, b)`` of every base, when both arms ran: RSPO's explorer against the
#: outcome, against the outcome with its N + M samples (what the extra samples alone buy) and
#: against the dense reward its explorer trains on; the dense rewards and the extra samples
#: against the outcome; PPO's explorer arm against its control on the same tasks and episodes
#: per task (``outcome-nm-matched``, once its cells are run).
PAIRS = (("agent-helpful", "outcome"), ("agent-helpful", "outcome-nm"), ("agent-helpful", "dense-helpful"),
         ("agent-misaligned", "outcome"), ("agent-misaligned", "dense-misaligned"), ("dense-helpful", "outcome"),
         ("dense-misaligned", "outcome"), ("outcome-nm", "outcome"), ("agent-helpful", "outcome-nm-matched"),
         ("outcome-nm-matched", "outcome"))
#: What a pair is read at: ``rspo-gym compare --x`` -> the ``measure`` of its rows.
AXES = {"total_env_steps": "equal_total_env_steps", "learner_env_steps": "equal_learner_env_steps"}
#: The fast policies, whose rows the fast matrix's reports write (``is_llm``).
FAST_POLICIES = ("drrn", "drrn-memory")
REPLICATES = 2000
#: The seeds a difference's detectable size is predicted at (``NoiseSplit.detectable``, on the
#: tasks it was measured on): what a 10-seed matrix would detect, told while it is still running.
PROJECTED_SEEDS = 10


@dataclass(frozen=True)
class Cell:
    """A finished cell: its run folder and its ``cell.json``."""

    folder: Path
    info: dict

    @property
    def key(self) -> tuple[str, str, str]:
        return self.info["env"], json.dumps(self.info["regime"], sort_keys=True), self.info["base"]


def is_llm(item: dict) -> bool:
    """Whether a ``summary.json`` row or difference is a run-folder matrix's (its policy is no fast one)."""
    return item.get("regime", {}).get("policy", "drrn") not in FAST_POLICIES


def load_cells(results: Path) -> list[Cell]:
    """Every finished cell under ``results/runs/`` (a folder without ``cell.json`` is still running)."""
    return [Cell(path.parent, json.loads(path.read_text())) for path in sorted((results / "runs").glob("*/cell.json"))]


def by_arm(cells: list[Cell]) -> dict[tuple, dict[str, dict[int, Cell]]]:
    """``(env, regime, base) -> arm -> seed -> cell``."""
    out: dict[tuple, dict[str, dict[int, Cell]]] = {}
    for cell in cells:
        out.setdefault(cell.key, {}).setdefault(cell.info["arm"], {})[cell.info["seed"]] = cell
    return out


def compare(arms: dict[str, dict[int, Cell]], names: list[str], baseline: str, x: str, out: Path | None = None) -> dict | None:
    """``compare_runs`` of the arms ``names`` on the seeds all of them finished (paired), or None
    under two such seeds."""
    from rspo_gym.compare import compare_runs

    seeds = sorted(set.intersection(*(set(arms[n]) for n in names)))
    if len(seeds) < 2:
        return None
    groups = {n: [str(arms[n][s].folder) for s in seeds] for n in names}
    return compare_runs(groups=groups, baseline=baseline, out=out, progress=False, replicates=REPLICATES, x=x, say=lambda _: None)


def _process(info: dict) -> str | None:
    name = info["process_reward"]
    return f"{name}:once" if name and info.get("process_once") else name


def _where(cell: Cell) -> dict:
    return {"env": cell.info["env"], "regime": cell.info["regime"], "base": cell.info["base"]}


def _interval(d: dict, key: str = "difference") -> dict:
    return {"mean": d[key], "ci_low": d["ci_low"], "ci_high": d["ci_high"]}


def _detectable(d: dict) -> dict:
    """A paired difference's smallest detectable difference, measured and predicted at ``PROJECTED_SEEDS``."""
    from rspo_gym.compare.stats import NoiseSplit

    out = {"detectable": d["detectable"]}
    if d.get("noise"):
        out[f"detectable_at_{PROJECTED_SEEDS}_seeds"] = NoiseSplit(**d["noise"]).detectable(PROJECTED_SEEDS, d["tasks"])
    return out


def arm_rows(arms: dict[str, dict[int, Cell]], arm: str) -> list[dict]:
    """An arm's rows at equal total env steps over its own seeds: final success, its area and its gain."""
    summary = compare(arms, [arm], arm, "total_env_steps")
    if summary is None:
        return []
    group, first = summary["groups"][0], next(iter(arms[arm].values()))
    common = {**_where(first), "arm": first.info["kind"], "name": arm, "process_reward": _process(first.info),
              "seeds": len(group["seeds"]), "measure": AXES["total_env_steps"], "total_env_steps": summary["total_env_steps"]}
    rows = [{**common, "metric": "success", **_interval(group["final"]["success"], "mean")}]
    if "auc" in group:
        rows.append({**common, "metric": "auc_success", **_interval(group["auc"]["success"], "mean")})
    if "gain" in group:
        rows.append({**common, "metric": "gain_success", **_interval(group["gain"]["success"]), **_detectable(group["gain"]["success"])})
    return rows


def pair_differences(arms: dict[str, dict[int, Cell]], a: str, b: str, x: str) -> list[dict]:
    """``a − b`` at ``x``: the final held-out success and the area under its curve."""
    summary = compare(arms, [a, b], b, x)
    if summary is None:
        return []
    first_a, first_b = next(iter(arms[a].values())), next(iter(arms[b].values()))
    out = []
    for d in summary["differences"]:
        out.append({**_where(first_a), "a": {"arm": first_a.info["kind"], "process_reward": _process(first_a.info)},
                    "b": {"arm": first_b.info["kind"], "process_reward": _process(first_b.info)}, "names": [a, b],
                    "metric": ("auc_" if d["measure"] == "auc" else "") + d["metric"], "seeds": d["seeds"][0], **_interval(d),
                    **_detectable(d), "measure": AXES[x], x: summary[x]})
    return out


def gain_difference(rows: list[dict]) -> list[dict]:
    """The outcome arm's gain over the start (its ``gain_success`` row), as a difference ``outcome − start``."""
    rows = [r for r in rows if r["name"] == "outcome" and r["metric"] == "gain_success"]
    return [{**{k: r[k] for k in ("env", "regime", "base")}, "a": {"arm": "outcome", "process_reward": None},
             "b": {"arm": "start", "process_reward": None}, "names": ["outcome", "start"], "metric": "success", "seeds": r["seeds"],
             **{k: v for k, v in r.items() if k in ("mean", "ci_low", "ci_high") or k.startswith("detectable")}, "measure": r["measure"]}
            for r in rows]


def all_tokens(cell: Cell, rows: list[dict]) -> int | None:
    """The cell's generated tokens, or None where its count leaves out its explorer's warm-up: a
    cell that logged the warm-up's env steps but not its tokens ran before the warm-up's tokens
    were counted, and averaging it in would make its arm look cheaper than it was."""
    warmed = any(r.get("explorer/warmup_env_steps", 0) > 0 for r in rows)
    if warmed and not any("explorer/warmup_generated_tokens" in r for r in rows):
        return None
    return cell.info["generated_tokens"]


def costs(arms: dict[str, dict[int, Cell]]) -> list[dict]:
    """Per arm: wall minutes and generated tokens per cell (means over seeds), and for an explorer
    arm how much more often its explorer won per episode than its learner (each seed's mean over
    the iterations both played, with a 95 % interval over seeds)."""
    from rspo_gym.compare.files import metrics_rows
    from rspo_gym.compare.stats import estimate

    out = []
    for arm, seeds in arms.items():
        cells = list(seeds.values())
        logs = [list(metrics_rows(c.folder)) for c in cells]
        tokens = [t for t in (all_tokens(c, rows) for c, rows in zip(cells, logs)) if t is not None]
        row = {"name": arm, "seeds": len(cells), "minutes": sum(c.info["seconds"] for c in cells) / len(cells) / 60,
               "token_cells": len(tokens), **({"generated_tokens": sum(tokens) / len(tokens)} if tokens else {})}
        gaps = [[r["explorer/success_gap"] for r in rows if "explorer/success_gap" in r] for rows in logs]
        if all(gaps) and len(cells) >= 2:
            row["explorer_success_gap"] = estimate([[sum(g) / len(g)] for g in gaps], replicates=REPLICATES).to_dict()
        out.append(row)
    return out


def _tokens(cost: dict) -> str:
    """The mean generated tokens per cell, saying over how many cells where some could not count all of theirs."""
    if "generated_tokens" not in cost:
        return ""
    counted = "" if cost["token_cells"] == cost["seeds"] else f" ({cost['token_cells']} of {cost['seeds']} cells)"
    return f"{cost['generated_tokens']:,.0f}{counted}"


def _ci(d: dict) -> str:
    return f"{d['mean']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"


def tables(rows: list[dict], diffs: list[dict], spent: dict[str, list[dict]]) -> str:
    """``tables.md``: per base, the arms, then the differences (equal total env steps first)."""
    lines = ["# The LLM matrix: every number from `rspo-gym compare`", ""]
    for base in sorted({r["base"] for r in rows}, key=list(BASE_LABELS).index):
        lines += [f"## {BASE_LABELS[base]}", "", "| arm | seeds | final success | AUC success | gain over the start | minutes per cell | "
                  "generated tokens | explorer − learner wins per episode |", "|---|---|---|---|---|---|---|---|"]
        costs_of = {c["name"]: c for c in spent[base]}
        for name in dict.fromkeys(r["name"] for r in rows if r["base"] == base):
            mine = {r["metric"]: r for r in rows if r["base"] == base and r["name"] == name}
            c = costs_of.get(name, {})
            gap = _ci(c["explorer_success_gap"]) if "explorer_success_gap" in c else ""
            lines.append(f"| {name} | {mine['success']['seeds']} | {mine['success']['mean']:.3f} [{mine['success']['ci_low']:.3f}, "
                         f"{mine['success']['ci_high']:.3f}] | {mine['auc_success']['mean']:.3f} | "
                         f"{_ci(mine['gain_success']) if 'gain_success' in mine else ''} | {c.get('minutes', 0):.1f} | "
                         f"{_tokens(c)} | {gap} |")
        for measure in AXES.values():
            chosen = [d for d in diffs if d["base"] == base and d["measure"] == measure and d["b"]["arm"] != "start"]
            if chosen:
                projected = f"detectable_at_{PROJECTED_SEEDS}_seeds"
                lines += ["", f"{measure.replace('_', ' ')}:", "",
                          f"| a − b | metric | seeds | difference [95 %] | detectable | detectable at {PROJECTED_SEEDS} seeds |",
                          "|---|---|---|---|---|---|"]
                lines += [f"| {d['names'][0]} − {d['names'][1]} | {d['metric']} | {d['seeds']} | {_ci(d)} | {d['detectable']:.3f} | "
                          f"{format(d[projected], '.3f') if projected in d else ''} |" for d in chosen]
        lines.append("")
    return "\n".join(lines)


def forests(diffs: list[dict], out: Path) -> None:
    """``forest_<base>.png``: the final success's differences at equal total env steps, and the gain."""
    from rspo_gym.compare.stats import verdict
    from rspo_gym.plotting import forest_plot

    for base in sorted({d["base"] for d in diffs}):
        rows = [{"label": f"{d['names'][0]} − {d['names'][1]}", "difference": d["mean"], "ci_low": d["ci_low"], "ci_high": d["ci_high"],
                 "verdict": verdict(d["ci_low"], d["ci_high"])}
                for d in diffs if d["base"] == base and d["metric"] == "success" and d["measure"] == AXES["total_env_steps"]]
        forest_plot(rows, out / f"forest_{base}.png", title=f"tiny-alfworld on ALFWorld, {BASE_LABELS[base]}: final held-out success at "
                    f"equal total env steps, a − b (95 % intervals over seeds and tasks)", xlabel="a − b, held-out success")


def report(results: Path, out: Path, merge: Path | None = None) -> dict:
    """Write the report of the run-folder matrix in ``results`` into ``out``; return ``summary.json``."""
    out.mkdir(parents=True, exist_ok=True)
    rows, diffs, spent = [], [], {}
    for (_, _, base), arms in by_arm(load_cells(results)).items():
        mine = [r for arm in arms for r in arm_rows(arms, arm)]
        rows += mine
        diffs += gain_difference(mine)
        for x in AXES:
            for a, b in PAIRS:
                if a in arms and b in arms:
                    diffs += pair_differences(arms, a, b, x)
        if "outcome" in arms:  # compare's own report of every arm against the outcome (those with two of its seeds): curves, a forest plot
            paired = [a for a in arms if len(set(arms[a]) & set(arms["outcome"])) >= 2]
            compare(arms, ["outcome", *(a for a in paired if a != "outcome")], "outcome", "total_env_steps", out=out / base)
        spent[base] = costs(arms)
    summary = {"rows": rows, "differences": diffs}
    if merge is not None:
        old = json.loads(merge.read_text()) if merge.exists() else {"rows": [], "differences": []}
        write_json(merge, {k: [i for i in old.get(k, []) if not is_llm(i)] + summary[k] for k in ("rows", "differences")})
    if merge is None or merge.resolve() != (out / "summary.json").resolve():
        write_json(out / "summary.json", summary)
    write_json(out / "costs.json", spent)
    (out / "tables.md").write_text(tables(rows, diffs, spent), encoding="utf-8")
    forests(diffs, out)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the matrix's folder (holding runs/ and starts/)")
    parser.add_argument("--out", type=Path, default=None, help="default: the results folder")
    parser.add_argument("--merge-summary", type=Path, default=None, metavar="PATH",
                        help="also merge the rows into this summary.json (its run-folder rows replaced, the others kept)")
    args = parser.parse_args(argv)
    report(args.results, args.out or args.results, args.merge_summary)
    print(((args.out or args.results) / "tables.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
