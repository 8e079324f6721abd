"""Intervals, paired differences, curves and ``summary.json`` from ``rspo_matrix.py``'s cells.

Every statistic is a two-level bootstrap over (seeds x held-out tasks) matrices (``intervals.py``):
seeds and tasks are resampled, and a paired difference resamples the same seeds and tasks for both
arms, so a hard task or a lucky seed cancels. A difference is "better" / "worse" only when its
95 % interval excludes 0.

- Final held-out success (and WebShop's score) at the budget's end, at the training temperature:
  the headline, at equal *learner* env steps. Also at temperature 0.4, and at equal *total* env
  steps: each arm at the evaluation point whose total steps (the explorer's included) are
  closest to the budget (an explorer arm's 2/3 point, every other arm's end).
- Area under the held-out curve (start, 1/3, 2/3, end of the budget; trapezoids, divided by the
  budget): the mean success along training, i.e. speed.
- Farmed events: what the misaligned per-event reward pays per held-out episode, for every arm.

Writes ``summary.json`` (``rows`` and ``differences``, the headline), ``details.json`` (every view),
``tables.md`` and ``heldout_<env>.png`` (held-out curves with 95 % bands) into ``--out``.

    python benchmarks/rspo_matrix_report.py results/rspo_matrix/matrix --out docs/results_fast
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import write_json  # noqa: E402
from rspo_gym.intervals import bootstrap_mean_ci, paired_difference_ci  # noqa: E402
from rspo_matrix import ARMS, BASES, MAIN_ARMS, PLANS, load_results  # noqa: E402

#: (a, b) arm pairs whose paired difference a - b is reported, per base.
COMPARISONS = (
    ("outcome", "start"),
    ("dense-aligned", "outcome"),
    ("dense-misaligned", "outcome"),
    ("explorer-misaligned", "outcome"),
    ("explorer-misaligned", "dense-misaligned"),
    ("explorer-aligned", "outcome"),
    ("explorer-aligned", "dense-aligned"),
    ("rank-misaligned", "outcome"),
    ("rank-misaligned", "dense-misaligned"),
    ("explorer-misaligned-sync20", "outcome"),
    ("explorer-misaligned-sync0", "outcome"),
    ("explorer-misaligned-sync20", "explorer-misaligned"),
    ("explorer-misaligned-sync0", "explorer-misaligned"),
)
COLUMNS = {"success": 2, "score": 3, "events": 4}


def metrics_of(env: str) -> tuple[str, ...]:
    return ("success", "score") if "webshop" in env.lower() else ("success",)


def _point(record: dict, temperature: float, steps: int | None, *, total: bool = False, episodes: int | None = None) -> dict | None:
    """The evaluation of ``record`` at ``temperature`` at learner ``steps`` (None: its last); with
    ``total``, the one whose total env steps are closest to ``steps``; with ``episodes``, only
    those measured at that many episodes per task (a start measured for several bases)."""
    evals = [e for e in record["evals"] if e["temperature"] == temperature
             and (episodes is None or e.get("episodes", 1) == episodes)]
    if total and evals and steps is not None:
        return min(evals, key=lambda e: abs(e["total_steps"] - steps))
    if steps is not None:
        evals = [e for e in evals if e["learner_steps"] >= steps]
        return evals[0] if evals else None
    return evals[-1] if evals else None


def _vector(evaluation: dict, metric: str) -> list[float]:
    return [float(row[COLUMNS[metric]]) for row in evaluation["per_task"]]


class Matrix:
    """Per (env, base, arm): each seed's record, with the start of that seed as arm ``start``."""

    def __init__(self, cells: list[dict], starts: list[dict], plan) -> None:
        self.records: dict[tuple[str, str, str], dict[int, dict]] = {}
        for c in cells:
            self.records.setdefault((c["env"], c["base"], c["arm"]), {})[c["seed"]] = c
        self.starts = {(s["env"], s["seed"]): s for s in starts}
        self.plan = plan

    def budget(self, env: str, base: str) -> int:
        return self.plan.envs[env].for_base(base).learner_steps

    def episodes(self, env: str, base: str) -> int:
        """The held-out episodes per task of ``base``'s cells: its start is read at the same."""
        return self.plan.envs[env].for_base(base).heldout_episodes

    def seeds(self, env: str, base: str, arm: str) -> list[int]:
        if arm == "start":
            return sorted(seed for e, seed in self.starts if e == env)
        return sorted(self.records.get((env, base, arm), {}))

    def record(self, env: str, base: str, arm: str, seed: int) -> dict:
        return self.starts[(env, seed)] if arm == "start" else self.records[(env, base, arm)][seed]

    def matrix(self, env: str, base: str, arm: str, seeds: list[int], metric: str, temperature: float,
               steps: int | None, *, total: bool = False) -> list[list[float]] | None:
        out = []
        for seed in seeds:
            point = _point(self.record(env, base, arm, seed), temperature, None if arm == "start" else steps, total=total,
                           episodes=self.episodes(env, base) if arm == "start" else None)
            if point is None:
                return None
            out.append(_vector(point, metric))
        return out

    def auc(self, env: str, base: str, arm: str, seeds: list[int], metric: str, temperature: float, budget: int) -> list[list[float]]:
        """Per seed and task: the area under the held-out curve over [0, budget] / budget."""
        out = []
        for seed in seeds:
            start = _vector(_point(self.starts[(env, seed)], temperature, None, episodes=self.episodes(env, base)), metric)
            points = [(0, np.asarray(start))]
            for e in self.record(env, base, arm, seed)["evals"]:
                if e["temperature"] == temperature and e["learner_steps"] <= budget * 1.05:
                    points.append((min(e["learner_steps"], budget), np.asarray(_vector(e, metric))))
            x = np.array([p[0] for p in points], dtype=float)
            y = np.stack([p[1] for p in points])
            out.append((np.trapezoid(y, x, axis=0) / budget).tolist())
        return out


def _row(env, base, arm, process, seeds, metric, stats) -> dict:
    return {"env": env, "base": base, "arm": arm, "process_reward": process, "seeds": len(seeds), "metric": metric,
            "mean": stats[0], "ci_low": stats[1], "ci_high": stats[2]}


def _describe(arm: str, cells: dict) -> tuple[str, str | None]:
    if arm == "start":
        return "start", None
    any_cell = next(iter(cells.values()))
    return any_cell["kind"], any_cell["process_reward"]


def view(m: Matrix, plan, view_name: str) -> tuple[list[dict], list[dict]]:
    """Rows and paired differences of one view: ``final`` (T = 1.0, at the budget), ``final_t04``,
    ``equal_total`` (each arm where its total env steps are closest to the budget) or ``auc``."""
    envs = _envs(m, plan)
    temperature = plan.final_temperature if view_name == "final_t04" else plan.curve_temperature
    rows, diffs = [], []
    for env in envs:
        for base in BASES:
            budget = m.budget(env, base)
            arms = ["start"] + [a for a in ARMS if m.seeds(env, base, a)]
            if len(arms) == 1:
                continue

            def data(arm: str, seeds: list[int], metric: str):
                if view_name == "auc":
                    return None if arm == "start" else m.auc(env, base, arm, seeds, metric, temperature, budget)
                return m.matrix(env, base, arm, seeds, metric, temperature, budget, total=view_name == "equal_total")

            for arm in arms:
                seeds = m.seeds(env, base, arm)
                kind, process = _describe(arm, m.records.get((env, base, arm), {}))
                for metric in metrics_of(env):
                    values = data(arm, seeds, metric)
                    if values:
                        rows.append({**_row(env, base, kind, process, seeds, metric, bootstrap_mean_ci(values)), "name": arm})
            for a, b in COMPARISONS:
                if a not in arms or b not in arms:
                    continue
                seeds = sorted(set(m.seeds(env, base, a)) & set(m.seeds(env, base, b)))
                for metric in metrics_of(env):
                    va, vb = (data(a, seeds, metric), data(b, seeds, metric)) if seeds else (None, None)
                    if not va or not vb:
                        continue
                    diff, low, high = paired_difference_ci(va, vb)
                    ka, pa = _describe(a, m.records.get((env, base, a), {}))
                    kb, pb = _describe(b, m.records.get((env, base, b), {}))
                    diffs.append({"env": env, "base": base, "a": {"arm": ka, "process_reward": pa}, "b": {"arm": kb, "process_reward": pb},
                                  "metric": metric, "seeds": len(seeds), "mean": diff, "ci_low": low, "ci_high": high,
                                  "names": [a, b]})
    return rows, diffs


def _envs(m: Matrix, plan) -> dict:
    return {e: p for e, p in plan.envs.items() if any(key[0] == e for key in m.records)}


def farming(m: Matrix, plan) -> list[dict]:
    """Misaligned events per held-out episode at the budget's end (T = 1.0), mean and interval, per arm."""
    envs = _envs(m, plan)
    out = []
    for env in envs:
        for base in BASES:
            for arm in ["start"] + list(ARMS):
                seeds = m.seeds(env, base, arm)
                if not seeds or (arm == "start" and not any(m.seeds(env, base, a) for a in ARMS)):
                    continue
                values = m.matrix(env, base, arm, seeds, "events", plan.curve_temperature, m.budget(env, base))
                if values:
                    mean, low, high = bootstrap_mean_ci(values)
                    out.append({"env": env, "base": base, "name": arm, "seeds": len(seeds), "mean": mean, "ci_low": low, "ci_high": high})
    return out


def _public(rows: list[dict], diffs: list[dict]) -> tuple[list[dict], list[dict]]:
    """The headline rows and differences in ``summary.json``'s schema: main arms only (their
    (arm, process reward) pairs are unique; the sync sweep is in ``details.json``)."""
    keep = set(MAIN_ARMS) | {"start"}
    rows = [{k: v for k, v in r.items() if k != "name"} for r in rows if r["name"] in keep]
    diffs = [{k: v for k, v in d.items() if k != "names"} for d in diffs if set(d["names"]) <= keep]
    return rows, diffs


def _fmt(d: dict) -> str:
    return f"{d['mean']:.3f} [{d['ci_low']:.3f}, {d['ci_high']:.3f}]"


def _verdict(d: dict) -> str:
    return "better" if d["ci_low"] > 0 else "worse" if d["ci_high"] < 0 else "no difference shown"


def tables(views: dict, farmed: list[dict], m: Matrix) -> str:
    lines = []
    final = views["final"]
    lines += ["### Final held-out results (T = 1.0, equal learner env steps)", "",
              "| env | base | arm | process reward | seeds | metric | mean [95 % CI] | T = 0.4 | equal total steps | AUC (speed) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    index = {name: {(r["env"], r["base"], r["name"], r["metric"]): r for r in views[name][0]} for name in views}
    for r in final[0]:
        key = (r["env"], r["base"], r["name"], r["metric"])
        other = [index[v].get(key) for v in ("final_t04", "equal_total", "auc")]
        lines.append(f"| {r['env']} | {r['base']} | {r['name']} | {r['process_reward'] or '–'} | {r['seeds']} | {r['metric']} | "
                     f"{_fmt(r)} | " + " | ".join(_fmt(o) if o else "–" for o in other) + " |")
    for name, title in (("final", "equal learner env steps, T = 1.0"), ("equal_total", "equal total env steps, T = 1.0"),
                        ("final_t04", "equal learner env steps, T = 0.4"), ("auc", "area under the held-out curve")):
        lines += ["", f"### Paired differences: {title}", "", "| env | base | a − b | metric | seeds | difference [95 % CI] | verdict |",
                  "|---|---|---|---|---|---|---|"]
        for d in views[name][1]:
            lines.append(f"| {d['env']} | {d['base']} | {d['names'][0]} − {d['names'][1]} | {d['metric']} | {d['seeds']} | {_fmt(d)} | {_verdict(d)} |")
    lines += ["", "### Farmed events per held-out episode (what the misaligned reward pays, T = 1.0)", "",
              "| env | base | arm | seeds | events per episode [95 % CI] |", "|---|---|---|---|---|"]
    for f in farmed:
        lines.append(f"| {f['env']} | {f['base']} | {f['name']} | {f['seeds']} | {_fmt(f)} |")
    return "\n".join(lines) + "\n"


def plot(m: Matrix, plan, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for env in _envs(m, plan):
        bases = [b for b in BASES if any(m.seeds(env, b, a) for a in ARMS)]
        if not bases:
            continue
        fig, axes = plt.subplots(1, len(bases), figsize=(5 * len(bases), 4), dpi=110, sharey=True, squeeze=False)
        for ax, base in zip(axes[0], bases):
            for k, arm in enumerate(a for a in ARMS if m.seeds(env, base, a)):
                seeds = m.seeds(env, base, arm)
                starts = m.matrix(env, base, "start", seeds, "success", plan.curve_temperature, None)
                steps = sorted({e["learner_steps"] for s in seeds for e in m.record(env, base, arm, s)["evals"]
                                if e["temperature"] == plan.curve_temperature})
                xs, means, lows, highs = [0], *[[v] for v in bootstrap_mean_ci(starts)]
                targets = [round(f * m.budget(env, base)) for f in plan.fractions]
                for target in targets:
                    values = m.matrix(env, base, arm, seeds, "success", plan.curve_temperature, target)
                    if values is None or not steps:
                        continue
                    mean, low, high = bootstrap_mean_ci(values)
                    xs.append(target), means.append(mean), lows.append(low), highs.append(high)
                style = "--" if arm.startswith("dense") else ":" if "sync" in arm else "-"
                ax.plot(xs, means, style, color=f"C{k}", label=arm, marker="o", markersize=3)
                ax.fill_between(xs, lows, highs, color=f"C{k}", alpha=0.12)
            ax.axvline(m.budget(env, base), color="grey", linewidth=0.6)
            ax.set_title(f"{base} ({len(m.seeds(env, base, 'outcome'))} seeds)")
            ax.set_xlabel("learner env steps")
        axes[0][0].set_ylabel("held-out success, T = 1.0 (95 % band)")
        axes[0][-1].legend(fontsize=7)
        fig.suptitle(f"{env}: held-out success along training (start at 0)")
        fig.tight_layout()
        fig.savefig(out / f"heldout_{env.split('/')[-1]}.png")
        plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the matrix's folder (holding cells/ and starts/)")
    parser.add_argument("--out", type=Path, default=None, help="default: the results folder")
    parser.add_argument("--preset", choices=sorted(PLANS), default="matrix", help="the plan the cells were run with")
    parser.add_argument("--steps", type=int, default=None, help="the learner env steps the cells were run with "
                        "(rspo_matrix.py --steps): the budget whose end is 'final'")
    args = parser.parse_args(argv)
    plan = PLANS[args.preset]
    if args.steps is not None:
        plan = replace(plan, envs={e: p.overridden(learner_steps=args.steps) for e, p in plan.envs.items()})
    out = args.out or args.results
    out.mkdir(parents=True, exist_ok=True)
    cells, starts = load_results(args.results)
    m = Matrix(cells, starts, plan)
    views = {name: view(m, plan, name) for name in ("final", "final_t04", "equal_total", "auc")}
    farmed = farming(m, plan)
    rows, diffs = _public(*views["final"])
    write_json(out / "summary.json", {"rows": rows, "differences": diffs})
    write_json(out / "details.json", {"budget": "final: equal learner env steps at T = 1.0 (the headline)",
                                      "views": {k: {"rows": r, "differences": d} for k, (r, d) in views.items()},
                                      "farmed_events": farmed})
    text = tables(views, farmed, m)
    (out / "tables.md").write_text(text, encoding="utf-8")
    plot(m, plan, out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
