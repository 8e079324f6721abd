"""Everything ``summary.json`` holds, from groups of runs and their records (no I/O).

Per group: the final held-out success (and, where the env scores partial credit, the score) with
its two-level interval, and the area under the held-out curve (the mean success along training:
speed) where every run has records on the common episodes at two or more common iterations.
Where every run of a group has a record before training (iteration 0), the group's gain: its
final value less its start, paired run by run and task by task. Against the baseline: the
difference of each, with its interval, verdict, smallest detectable
difference and one sentence in plain words. The held-out curves of each group with 95 % bands.

Every matrix has one column per held-out task: a task played several times (``eval_task_ids``
listing it k times, each episode with its own seed) is the mean of its episodes, so the intervals
resample tasks, whose difficulty their episodes share.

``x="total_env_steps"`` pairs the runs at equal compute instead of equal iterations: every env step
a run took counts (an RSPO explorer's too, which an iteration of the learner does not show);
``x="learner_env_steps"`` at equal steps of the learner's own episodes (``metrics.jsonl``'s
``env_steps`` less the explorer's). The final value is each run's held-out curve read at the
most steps every run's records reached (joined linearly between its records: runs stop a part
of an iteration apart), and the area is taken over those steps, each run's curve read on one
grid between its records. A run is read only within its records: where no count of steps lies
within every run's, the runs are refused (``steps_span``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from rspo_gym.compare.runs import EvaluationPlan, Group, Run
from rspo_gym.compare.stats import Difference, area_under_curve, curve_at, curve_band, difference, estimate
from rspo_gym.errors import UserError

__all__ = ["MEASURES", "AXES", "STEP_AXES", "summarize", "sentence", "metrics_of", "steps_span"]

#: What a difference is of: the final held-out value, or the area under the held-out curve.
MEASURES = {"final": "final held-out", "auc": "area under the held-out curve of"}
#: What runs are paired at: equal ``iterations`` (of the learner), equal ``total_env_steps`` (equal
#: compute) or equal ``learner_env_steps`` (the steps the learner's own episodes took).
AXES = ("iterations", "total_env_steps", "learner_env_steps")
#: The axes that read runs on their curves over env steps.
STEP_AXES = AXES[1:]


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
    return [area_under_curve(iterations, np.array([plan.per_task(records[r.path][i][metric]) for i in iterations], dtype=float)).tolist()
            for r in group.runs]


def _curve(group: Group, plan: EvaluationPlan, metric: str, replicates: int) -> dict[str, list[float]] | None:
    """The group's held-out ``metric`` at the iterations all its runs evaluated on ``plan``."""
    records = _matching(group, plan)
    common = sorted(set.intersection(*(set(v) for v in records.values())))
    if not common:
        return None
    matrices = [[plan.per_task(records[r.path][i][metric]) for r in group.runs] for i in common]
    means, lows, highs = curve_band(matrices, replicates=replicates)
    steps = [float(np.mean([records[r.path][i]["env_steps"] for r in group.runs])) for i in common]
    return {"iterations": common, "env_steps": steps, "mean": means.tolist(), "ci_low": lows.tolist(), "ci_high": highs.tolist()}


def _steps_of(run: Run, x: str) -> Callable[[dict], float]:
    """What a record of ``run`` counts on axis ``x``: its total env steps, or the learner's env
    steps by its iteration (``Run.learner_steps``; a run without those counts is refused)."""
    if x == "total_env_steps":
        return lambda rec: rec["env_steps"]
    learner = run.learner_steps
    if learner is None or any(rec["iteration"] not in learner for rec in run.records):
        raise UserError(f"{run.path}'s metrics.jsonl does not count its learner's env steps at every evaluation: "
                        f"compare it at --x total_env_steps or --x iterations")
    return lambda rec: learner[rec["iteration"]]


def _records_by_steps(group: Group, plan: EvaluationPlan, x: str) -> list[list[tuple[float, dict]]]:
    """Per run of ``group``: ``(steps, record)`` of its records on ``plan``'s episodes, in order of
    the steps axis ``x`` counts."""
    out = []
    for run in group.runs:
        steps = _steps_of(run, x)
        out.append(sorted(((steps(rec), rec) for rec in run.records if plan.matches(rec)), key=lambda pair: pair[0]))
    return out


def steps_span(groups: list[Group], plan: EvaluationPlan, x: str = "total_env_steps") -> tuple[float, float, str | None]:
    """``(start, budget, why)`` of a steps view: ``budget`` the most env steps (on axis ``x``)
    every run's records reach, ``start`` the first by which every run has a record (the area's
    span), and where they are one point, ``why`` the area is left out (else None).

    Every run is read only within its records: a run read before its first one would be given
    that record's value at steps it had not yet taken (RSPO's first record comes late, its
    explorer's warm-up counted in its first iteration). Where some run's records start past
    where another's end, no count of steps lies within every run's, and the runs are refused
    (one line naming both)."""
    runs = [(run, records) for g in groups for run, records in zip(g.runs, _records_by_steps(g, plan, x))]
    if not runs or any(not records for _, records in runs):
        raise UserError(f"--x {x} reads every run's held-out records, and a run has none on these episodes: "
                        f"evaluate along training (eval_every) or compare at --x iterations")
    late, first = max(((run, records[0][0]) for run, records in runs), key=lambda pair: pair[1])
    early, last = min(((run, records[-1][0]) for run, records in runs), key=lambda pair: pair[1])
    axis = x.replace("_", " ")
    if first > last:
        raise UserError(f"--x {x}: {late.path}'s records start at {first:,.0f} {axis}, past where {early.path}'s end at "
                        f"{last:,.0f}: no count of steps lies within every run's records, and a run is not read where it has "
                        f"none; train the shorter runs longer, or compare at --x iterations")
    why = None
    if first == last:
        why = (f"{late.path}'s first record is at {last:,.0f} {axis}, where {early.path}'s last is: the runs' records "
               f"share that one point, and an area needs a span")
    return first, last, why


def _read_at(records: list[tuple[float, dict]], plan: EvaluationPlan, metric: str, grid: Sequence[float]) -> np.ndarray:
    """One run's per-task held-out ``metric`` read on ``grid``: its curve joined linearly between records."""
    return curve_at([steps for steps, _ in records], np.array([plan.per_task(rec[metric]) for _, rec in records], dtype=float), grid)


def _final_at_steps(group: Group, plan: EvaluationPlan, budget: float, metric: str, x: str) -> list[list[float]]:
    """Per run: the held-out ``metric`` at ``budget`` steps on its curve. A run is evaluated at
    the end of an iteration, so runs stop a fraction of an iteration apart; reading each at its
    last record within the budget would read a run that overshot by a few steps at its
    evaluation before that, a whole evaluation interval earlier."""
    return [_read_at(records, plan, metric, [budget])[0].tolist() for records in _records_by_steps(group, plan, x)]


def _auc_over_steps(group: Group, plan: EvaluationPlan, span: tuple[float, float], metric: str, x: str) -> list[list[float]]:
    """Per run and task: the area under the held-out curve over ``span`` steps, each run's curve
    read at every record step of every run in the span (``curve_at``)."""
    by_run = _records_by_steps(group, plan, x)
    start, budget = span
    grid = sorted({start, budget} | {steps for records in by_run for steps, _ in records if start <= steps <= budget})
    return [area_under_curve(grid, _read_at(records, plan, metric, grid)).tolist() for records in by_run]


def _start_matrix(group: Group, plan: EvaluationPlan, metric: str) -> list[list[float]] | None:
    """Per run: the per-task held-out ``metric`` of its record before training (iteration 0),
    where every run has one on ``plan``'s episodes (a run evaluated at its start); else None."""
    starts = [records.get(0) for records in _matching(group, plan).values()]
    return None if any(s is None for s in starts) else [plan.per_task(s[metric]) for s in starts]


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
    if x in STEP_AXES:
        start, budget, left_out = steps_span(groups, plan, x)
        span = (start, budget)
        at = f"at {span[1]:,.0f} {x.replace('_', ' ')}"
        final = {g.name: {m: _final_at_steps(g, plan, span[1], m, x) for m in metrics} for g in groups}
        auc_iterations = []
        has_auc = left_out is None
        auc = {g.name: {m: _auc_over_steps(g, plan, span, m, x) for m in metrics} for g in groups} if has_auc else {}
    else:
        auc_iterations = _common_iterations(groups, plan)
        has_auc = len(auc_iterations) >= 2
        left_out = None if has_auc else "the runs have no records on these episodes at two common iterations"
        final = {g.name: {m: [plan.per_task(finals[r.path][m]) for r in g.runs] for m in metrics} for g in groups}
        auc = {g.name: {m: _auc_matrix(g, plan, auc_iterations, m) for m in metrics} for g in groups} if has_auc else {}
    out_groups = []
    for g in groups:
        entry = {"name": g.name, "settings": g.settings, "runs": [str(r.path) for r in g.runs], "seeds": g.seeds,
                 "final": {m: estimate(final[g.name][m], replicates=replicates).to_dict() for m in metrics}}
        if has_auc:
            entry["auc"] = {m: estimate(auc[g.name][m], replicates=replicates).to_dict() for m in metrics}
        starts = {m: _start_matrix(g, plan, m) for m in metrics}
        if all(v is not None for v in starts.values()):  # what training moved: final − start, run by run and task by task
            entry["gain"] = {m: difference(final[g.name][m], starts[m], paired_seeds=True, replicates=replicates).to_dict()
                             for m in metrics}
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
        "task_ids": list(plan.task_ids), "tasks": plan.tasks, "episodes": len(plan.task_ids), "metrics": metrics, "baseline": base.name,
        "evaluated_runs": [str(p) for p in evaluated],
        "x": x,
        "total_env_steps": span[1] if span and x == "total_env_steps" else None,
        "learner_env_steps": span[1] if span and x == "learner_env_steps" else None,
        "auc_env_steps": list(span) if span and has_auc else None,
        "auc_iterations": auc_iterations if has_auc and not span else None,
        "auc_left_out": left_out,
        "one_seed_groups": [g.name for g in groups if len(g.runs) < 2],
        "groups": out_groups, "differences": differences,
    }
