"""Everything ``summary.json`` holds, from groups of runs and their records (no I/O).

Per group: the final held-out success (and, where the env scores partial credit, the score) with
its two-level interval, and the area under the held-out curve (the mean success along training:
speed) where every run has records on the common episodes at two or more common iterations.
Against the baseline: the difference of each, with its interval, verdict, smallest detectable
difference and one sentence in plain words. The held-out curves of each group with 95 % bands.

``x="total_env_steps"`` pairs the runs at equal compute instead of equal iterations: every env step
a run took counts (an RSPO explorer's too, which an iteration of the learner does not show). The
final value is each run's held-out record at the largest total env steps every run reached (its
last record there), and the area is taken over total env steps, each run's curve read on one grid
between its records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rspo_gym.compare.runs import EvaluationPlan, Group
from rspo_gym.compare.stats import Difference, area_under_curve, curve_at, curve_band, difference, estimate
from rspo_gym.errors import UserError

__all__ = ["MEASURES", "AXES", "summarize", "sentence", "metrics_of", "steps_span"]

#: What a difference is of: the final held-out value, or the area under the held-out curve.
MEASURES = {"final": "final held-out", "auc": "area under the held-out curve of"}
#: What runs are paired at: equal ``iterations`` (of the learner) or equal ``total_env_steps``.
AXES = ("iterations", "total_env_steps")


def metrics_of(records: list[dict[str, Any]]) -> list[str]:
    """``success``, and ``score`` where some episode scored other than its success (WebShop)."""
    differs = any(s != float(w) for r in records for s, w in zip(r["score"], r["success"]))
    return ["success", "score"] if differs else ["success"]


def _matching(group: Group, plan: EvaluationPlan) -> dict[Path, dict[int, dict]]:
    """Per run of ``group``: its records on ``plan``'s episodes, by iteration."""
    return {r.path: {rec["iteration"]: rec for rec in r.records if plan.matches(rec)} for r in group.runs}


def _common_iterations(groups: list[Group], plan: EvaluationPlan) -> list[int]:
    sets = [set(records) for g in groups for records in _matching(g, plan).values()]
    return sorted(set.intersection(*sets)) if sets else []


def _auc_matrix(group: Group, plan: EvaluationPlan, iterations: list[int], metric: str) -> list[list[float]]:
    records = _matching(group, plan)
    return [area_under_curve(iterations, np.array([records[r.path][i][metric] for i in iterations], dtype=float)).tolist()
            for r in group.runs]


def _curve(group: Group, plan: EvaluationPlan, metric: str, replicates: int) -> dict[str, list[float]] | None:
    """The group's held-out ``metric`` at the iterations all its runs evaluated on ``plan``."""
    records = _matching(group, plan)
    common = sorted(set.intersection(*(set(v) for v in records.values())))
    if not common:
        return None
    matrices = [[records[r.path][i][metric] for r in group.runs] for i in common]
    means, lows, highs = curve_band(matrices, replicates=replicates)
    steps = [float(np.mean([records[r.path][i]["env_steps"] for r in group.runs])) for i in common]
    return {"iterations": common, "env_steps": steps, "mean": means.tolist(), "ci_low": lows.tolist(), "ci_high": highs.tolist()}


def steps_span(groups: list[Group], plan: EvaluationPlan) -> tuple[float, float]:
    """``(start, budget)`` of the total-env-steps view: ``budget`` the most total env steps every
    run's records reach, ``start`` the first total env steps by which every run has a record (the
    area's span; equal to ``budget`` when some run has one record only)."""
    steps = [sorted(rec["env_steps"] for rec in records.values())
             for g in groups for records in _matching(g, plan).values()]
    if not steps or any(not s for s in steps):
        raise UserError("--x total_env_steps reads every run's held-out records, and a run has none on these episodes: "
                        "evaluate along training (eval_every) or compare at --x iterations")
    return max(s[0] for s in steps), min(s[-1] for s in steps)


def _records_by_steps(group: Group, plan: EvaluationPlan) -> dict[Path, list[dict]]:
    """Per run of ``group``: its records on ``plan``'s episodes in order of total env steps."""
    return {path: sorted(records.values(), key=lambda rec: rec["env_steps"]) for path, records in _matching(group, plan).items()}


def _final_at_steps(group: Group, plan: EvaluationPlan, budget: float, metric: str) -> list[list[float]]:
    """Per run: the held-out ``metric`` of its last record within ``budget`` total env steps."""
    return [[rec for rec in records if rec["env_steps"] <= budget][-1][metric] for records in _records_by_steps(group, plan).values()]


def _auc_over_steps(group: Group, plan: EvaluationPlan, span: tuple[float, float], metric: str) -> list[list[float]]:
    """Per run and task: the area under the held-out curve over ``span`` of total env steps, each
    run's curve read at every record step of every run in the span (``curve_at``)."""
    records = _records_by_steps(group, plan)
    start, budget = span
    grid = sorted({start, budget} | {rec["env_steps"] for runs in records.values() for rec in runs if start <= rec["env_steps"] <= budget})
    return [area_under_curve(grid, curve_at([rec["env_steps"] for rec in runs], np.array([rec[metric] for rec in runs], dtype=float),
                                            grid)).tolist()
            for runs in records.values()]


def _paired_seeds(a: Group, b: Group) -> bool:
    """Whether row k of both groups is one training seed: the same seeds, each once."""
    return a.seeds == b.seeds and len(set(a.seeds)) == len(a.seeds)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _fmt(value: float) -> str:
    return f"{value:+.3f}"


def sentence(group: str, baseline: str, measure: str, metric: str, d: Difference, at: str = "") -> str:
    """One comparison in plain words, with its interval, what it rests on and its verdict
    (``at``: where the runs are paired, e.g. "at 36,000 total env steps")."""
    what = f"{MEASURES[measure]} {metric}{f' {at}' if at else ''}"
    rests = (f"{d.seeds[0]} and {d.seeds[1]} seeds" if d.seeds[0] != d.seeds[1] else _count(d.seeds[0], "seed")) + \
        f" × {_count(d.tasks, 'task')}{'' if d.paired_seeds else ', seeds unpaired'}"
    head = f"{group} − {baseline}, {what}: {_fmt(d.difference)} (95 % interval {_fmt(d.ci_low)} to {_fmt(d.ci_high)}; {rests})"
    if d.verdict == "better":
        return f"{head}: {group} is better."
    if d.verdict == "worse":
        return f"{head}: {group} is worse."
    if d.detectable == 0.0:
        return f"{head}: the two did the same on every episode."
    return (f"{head}: no difference at this noise; these seeds and tasks would detect a difference of about "
            f"{d.detectable:.3f}.")


def summarize(groups: list[Group], baseline: str, plan: EvaluationPlan, finals: dict[Path, dict[str, Any]], *,
              evaluated: list[Path], replicates: int = 2000, x: str = "iterations") -> dict[str, Any]:
    """The comparison of every group with ``baseline``, as ``summary.json`` holds it
    (``docs/cli.md`` describes each key); ``x``: pair the runs at equal ``iterations`` or at
    equal ``total_env_steps`` (read from their records)."""
    if x not in AXES:
        raise UserError(f"--x must be one of {', '.join(AXES)}, got {x!r}")
    env = groups[0].runs[0].env_id
    metrics = metrics_of(list(finals.values()))
    at, span = "", None
    if x == "total_env_steps":
        span = steps_span(groups, plan)
        at = f"at {span[1]:,.0f} total env steps"
        final = {g.name: {m: _final_at_steps(g, plan, span[1], m) for m in metrics} for g in groups}
        auc_iterations = []
        has_auc = span[1] > span[0]
        auc = {g.name: {m: _auc_over_steps(g, plan, span, m) for m in metrics} for g in groups} if has_auc else {}
    else:
        auc_iterations = _common_iterations(groups, plan)
        has_auc = len(auc_iterations) >= 2
        final = {g.name: {m: [finals[r.path][m] for r in g.runs] for m in metrics} for g in groups}
        auc = {g.name: {m: _auc_matrix(g, plan, auc_iterations, m) for m in metrics} for g in groups} if has_auc else {}
    out_groups = []
    for g in groups:
        entry = {"name": g.name, "settings": g.settings, "runs": [str(r.path) for r in g.runs], "seeds": g.seeds,
                 "final": {m: estimate(final[g.name][m], replicates=replicates).to_dict() for m in metrics}}
        if has_auc:
            entry["auc"] = {m: estimate(auc[g.name][m], replicates=replicates).to_dict() for m in metrics}
        entry["curve"] = {m: _curve(g, plan, m, min(replicates, 1000)) for m in metrics}
        out_groups.append(entry)
    base = next(g for g in groups if g.name == baseline)
    differences = []
    for g in groups:
        if g is base:
            continue
        paired = _paired_seeds(g, base)
        for measure, values in (("final", final), ("auc", auc)):
            if not values:
                continue
            for m in metrics:
                d = difference(values[g.name][m], values[base.name][m], paired_seeds=paired, replicates=replicates)
                differences.append({"group": g.name, "baseline": base.name, "measure": measure, "metric": m, **d.to_dict(),
                                    "sentence": sentence(g.name, base.name, measure, m, d, at)})
    return {
        "env": env, "split": plan.split, "temperature": plan.temperature, "eval_seed": plan.eval_seed,
        "task_ids": list(plan.task_ids), "tasks": len(plan.task_ids), "metrics": metrics, "baseline": base.name,
        "evaluated_runs": [str(p) for p in evaluated],
        "x": x,
        "total_env_steps": span[1] if span else None,
        "auc_env_steps": list(span) if span and has_auc else None,
        "auc_iterations": auc_iterations if has_auc and not span else None,
        "one_seed_groups": [g.name for g in groups if len(g.runs) < 2],
        "groups": out_groups, "differences": differences,
    }
