"""Intervals, paired differences, curves and ``summary.json`` from ``rspo_matrix.py``'s cells.

Every statistic is a two-level bootstrap over (seeds x held-out tasks) matrices (``rspo_gym.compare.stats``):
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
``tables.md``, ``heldout_<env>.png`` (held-out curves with 95 % bands), ``forest_<env>.png`` and
``forest_auc_<env>.png`` (the headline's paired differences of the final success and of the area
under its curve, one row per base and pair of arms, the 95 % interval as a bar and 0 marked) into
``--out``. A cell or start file that is not a whole record (cut off by a kill or a full disk) is
named on stderr in one line and left out; ``rspo_matrix.py`` runs it again.

    python benchmarks/rspo_matrix_report.py results/rspo_matrix/matrix --out docs/results_fast

The regimes study (``--preset regimes``, or any preset whose plans are regimes) is grouped by
(env, regime, base, arm), compared by ``REGIME_COMPARISONS`` (a comparison needs 2 paired seeds,
so a partial run reports what it has), and written as ``details_regimes.json``,
``tables_regimes.md``, ``heldout_regimes_<env>.png`` (a panel per regime and base) and
``forest_regimes[_auc]_<env>_<regime>.png``. Its
``summary.json`` rows and differences carry ``"regime": {"start": ..., "policy": ...}``, with
metrics ``success`` (WebShop also ``score``) at the budget's end, ``auc_success`` (``auc_score``),
and, per arm, the mean over training iterations of the update's group outcomes:
``all_fail_share`` and, for explorer arms, ``explorer_win_share`` and ``explorer_rescued_share``
(a bootstrap over seeds). A helpful reward paid once per event reads ``<name>:once`` in
``process_reward``. ``--merge-summary`` merges into an existing ``summary.json``: the rows and
differences of the run's kind (with ``regime`` or without) are replaced, the others kept (an
existing file that is not such a summary stops the report in one line, exit 2, and is left as it was):

    python benchmarks/rspo_matrix_report.py results/rspo_matrix/regimes --preset regimes --out docs/results_fast --merge-summary
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import write_json  # noqa: E402
from rspo_gym.compare.stats import Estimate, area_under_curve, curve_band, difference, estimate, verdict  # noqa: E402
from rspo_gym.plotting import forest_plot  # noqa: E402
from run_folder_report import is_llm, report as run_folder_report  # noqa: E402
from rspo_matrix import ARMS, BASES, MAIN_ARMS, PLANS, REGIME_ARMS, env_of, load_results, regime_name  # noqa: E402

#: The explorer study's comparisons (a plan counting ``total`` env steps: every one at equal compute).
TOTAL_COMPARISONS = (
    ("outcome", "start"),
    ("outcome-nm", "outcome"),
    ("dense-helpful", "outcome"),
    ("dense-misaligned", "outcome"),
    ("dense-cand-purchase10", "outcome"),
    ("dense-cand-search", "outcome"),
    ("dense-cand-price", "outcome"),
    ("dense-cand-product", "outcome"),
    ("agent-helpful", "outcome-nm"),
    ("agent-helpful", "outcome"),
    ("agent-helpful", "dense-helpful"),
    ("agent-misaligned", "outcome-nm"),
    ("agent-misaligned", "outcome"),
    ("agent-misaligned", "dense-misaligned"),
    ("explorer-helpful", "outcome-nm"),
    ("agent-nowarm-helpful", "outcome-nm"),
    ("agent-m4-helpful", "outcome-nm"),
    ("agent-isnone-helpful", "outcome-nm"),
    ("agent-w20-helpful", "outcome-nm"),
    ("agent-nowarm-helpful", "agent-w20-helpful"),
    ("agent-m4-helpful", "agent-w20-helpful"),
    ("agent-isnone-helpful", "agent-w20-helpful"),
    ("agent-w48-helpful", "outcome-nm"),
    ("agent-w48u2-helpful", "outcome-nm"),
    ("agent-w24m4-helpful", "outcome-nm"),
    ("agent-w48u2-never-helpful", "outcome-nm"),
    ("agent-w48u2-win20-helpful", "outcome-nm"),
    ("outcome-nm-matched", "outcome"),
    ("agent-helpful", "outcome-nm-matched"),
    ("agent-w0u2-win20-helpful", "outcome-nm"),
    ("agent-helpful", "agent-w0u2-win20-helpful"),
)
TOTAL_MEASURE = "equal_total_env_steps"
"""The ``measure`` of the explorer study's ``summary.json`` rows: every arm read at the same total
env steps, the explorer's (and its warm-up's) included."""

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
#: The regimes study's comparisons (per env, regime and base).
REGIME_COMPARISONS = (
    ("outcome", "start"),
    ("dense-helpful", "outcome"),
    ("dense-misaligned", "outcome"),
    ("explorer-helpful", "outcome"),
    ("explorer-helpful", "dense-helpful"),
    ("explorer-misaligned", "outcome"),
    ("explorer-misaligned", "dense-misaligned"),
    ("rank-helpful", "outcome"),
    ("rank-misaligned", "outcome"),
)
COLUMNS = {"success": 2, "score": 3, "events": 4}
#: ``summary.json`` metric -> the cells' ``groups`` column averaged over training iterations.
SHARES = {"all_fail_share": 1, "explorer_win_share": 2, "explorer_rescued_share": 3}


def metrics_of(env: str) -> tuple[str, ...]:
    return ("success", "score") if "webshop" in env.lower() else ("success",)


def _point(record: dict, temperature: float, steps: int | None, *, total: bool = False, episodes: int | None = None,
           axis: str = "learner") -> dict | None:
    """The evaluation of ``record`` at ``temperature`` at ``steps`` on the plan's ``axis``
    (``learner`` or ``total`` env steps; None: its last); with ``total``, the one whose total env
    steps are closest to ``steps``; with ``episodes``, only those measured at that many episodes
    per task (a start measured for several bases)."""
    evals = [e for e in record["evals"] if e["temperature"] == temperature
             and (episodes is None or e.get("episodes", 1) == episodes)]
    if total and evals and steps is not None:
        return min(evals, key=lambda e: abs(e["total_steps"] - steps))
    if steps is not None:
        evals = [e for e in evals if e[f"{axis}_steps"] >= steps]
        return evals[0] if evals else None
    return evals[-1] if evals else None


def _vector(evaluation: dict, metric: str) -> list[float]:
    return [float(row[COLUMNS[metric]]) for row in evaluation["per_task"]]


def plan_key(record: dict) -> str:
    """The plan key of a cell or start: its env, or ``<env>@<regime name>`` for a regime's."""
    return record["env"] + (f"@{regime_name(record['regime'])}" if "regime" in record else "")


def is_regime(key: str) -> bool:
    return "@" in key


class Matrix:
    """Per (plan key, base, arm): each seed's record, with the start of that seed as arm ``start``.
    A plan key is the env id, or ``<env id>@<regime name>`` for the regimes study's cells."""

    def __init__(self, cells: list[dict], starts: list[dict], plan) -> None:
        self.records: dict[tuple[str, str, str], dict[int, dict]] = {}
        for c in cells:
            self.records.setdefault((plan_key(c), c["base"], c["arm"]), {})[c["seed"]] = c
        self.starts = {(plan_key(s), s["seed"]): s for s in starts}
        self.plan = plan

    def where(self, key: str) -> dict:
        """A row's ``env`` (and ``regime``, for a regime's key)."""
        return {"env": env_of(key), **({"regime": self.plan.envs[key].regime_info} if is_regime(key) else {})}

    def budget(self, env: str, base: str) -> int:
        return self.plan.envs[env].for_base(base).learner_steps

    def axis(self, env: str) -> str:
        """What the plan's budget counts: ``learner`` or ``total`` env steps."""
        return self.plan.envs[env].axis

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
                           episodes=self.episodes(env, base) if arm == "start" else None, axis=self.axis(env))
            if point is None:
                return None
            out.append(_vector(point, metric))
        return out

    def auc(self, env: str, base: str, arm: str, seeds: list[int], metric: str, temperature: float, budget: int) -> list[list[float]]:
        """Per seed and task: the area under the held-out curve over [0, budget] / budget (steps on
        the plan's axis; a budget below the plan's, as a third of it, reads the early curve)."""
        out, axis = [], f"{self.axis(env)}_steps"
        for seed in seeds:
            start = _vector(_point(self.starts[(env, seed)], temperature, None, episodes=self.episodes(env, base)), metric)
            points = [(0, start)]
            for e in self.record(env, base, arm, seed)["evals"]:
                if e["temperature"] == temperature and e[axis] <= budget * 1.05:
                    points.append((min(e[axis], budget), _vector(e, metric)))
            out.append(area_under_curve([p[0] for p in points], np.array([p[1] for p in points]), span=budget).tolist())
        return out


def _row(where: dict, base, arm, process, metric, e: Estimate) -> dict:
    return {**where, "base": base, "arm": arm, "process_reward": process, "seeds": e.seeds, "metric": metric,
            "mean": e.mean, "ci_low": e.ci_low, "ci_high": e.ci_high}


def _describe(arm: str, cells: dict) -> tuple[str, str | None]:
    """The ``summary.json`` arm and process reward (``name:once`` where paid once per event)."""
    if arm == "start":
        return "start", None
    any_cell = next(iter(cells.values()))
    process = any_cell["process_reward"]
    return any_cell["kind"], process + ":once" if process and any_cell.get("process_once") else process


def comparisons(plan, env: str) -> tuple[tuple[str, str], ...]:
    """The (a, b) pairs reported for ``env``'s plan key: the regimes study's, the explorer study's
    (a plan on the ``total`` axis) or the matrix's."""
    if plan.envs[env].axis == "total":
        return TOTAL_COMPARISONS
    return REGIME_COMPARISONS if is_regime(env) else COMPARISONS


def view(m: Matrix, plan, view_name: str) -> tuple[list[dict], list[dict]]:
    """Rows and paired differences of one view: ``final`` (T = 1.0, at the budget), ``final_t04``,
    ``equal_total`` (each arm where its total env steps are closest to the budget), ``auc`` or
    ``auc_third`` (the area under the curve's first third: early speed)."""
    envs = _envs(m, plan)
    temperature = plan.final_temperature if view_name == "final_t04" else plan.curve_temperature
    rows, diffs = [], []
    for env in envs:
        regime = is_regime(env)
        for base in BASES:
            budget = m.budget(env, base)
            arms = ["start"] + [a for a in ARMS if m.seeds(env, base, a)]
            if len(arms) == 1:
                continue

            def data(arm: str, seeds: list[int], metric: str):
                if view_name in ("auc", "auc_third"):
                    upto = budget if view_name == "auc" else round(budget / 3)
                    return None if arm == "start" else m.auc(env, base, arm, seeds, metric, temperature, upto)
                return m.matrix(env, base, arm, seeds, metric, temperature, budget, total=view_name == "equal_total")

            def usable(arm: str, seeds: list[int]) -> list[int]:
                """A regime's seeds (a partial run): those with a start where the view reads it."""
                if (regime or m.axis(env) == "total") and view_name.startswith("auc"):
                    return [s for s in seeds if (env, s) in m.starts]
                return seeds

            for arm in arms:
                seeds = usable(arm, m.seeds(env, base, arm))
                kind, process = _describe(arm, m.records.get((env, base, arm), {}))
                for metric in metrics_of(env):
                    values = data(arm, seeds, metric) if seeds else None
                    if values:
                        rows.append({**_row(m.where(env), base, kind, process, metric, estimate(values)), "name": arm})
            for a, b in comparisons(plan, env):
                if a not in arms or b not in arms:
                    continue
                seeds = usable(a, sorted(set(m.seeds(env, base, a)) & set(m.seeds(env, base, b))))
                if (regime or m.axis(env) == "total") and len(seeds) < 2:  # a partial run: no interval from one seed
                    continue
                for metric in metrics_of(env):
                    va, vb = (data(a, seeds, metric), data(b, seeds, metric)) if seeds else (None, None)
                    if not va or not vb:
                        continue
                    d = difference(va, vb, paired_seeds=True)
                    ka, pa = _describe(a, m.records.get((env, base, a), {}))
                    kb, pb = _describe(b, m.records.get((env, base, b), {}))
                    diffs.append({**m.where(env), "base": base, "a": {"arm": ka, "process_reward": pa}, "b": {"arm": kb, "process_reward": pb},
                                  "metric": metric, "seeds": len(seeds), "mean": d.difference, "ci_low": d.ci_low, "ci_high": d.ci_high,
                                  "names": [a, b]})
    return rows, diffs


def equal_learner(m: Matrix, plan) -> list[dict]:
    """The explorer study's RSPO arms against their controls at equal *learner* env steps: each
    seed's RSPO cell at its budget's end (T = 1.0) against the control's evaluation whose learner
    env steps are closest to that cell's learner's. The learner's optimizer steps are its turns
    over ``mini_batch_size`` per epoch, so this is also about equal learner updates: it asks what
    the explorer's episodes did to the learner, its cost in env steps set aside. The control is
    read at one of its evaluation points (a sixth, a third, two thirds or all of the budget): the
    distance in learner steps is recorded per comparison (``learner_steps_a``, ``learner_steps_b``)."""
    diffs = []
    for env in _envs(m, plan):
        if m.axis(env) != "total":
            continue
        for base in BASES:
            for a, b in TOTAL_COMPARISONS:
                seeds = sorted(set(m.seeds(env, base, a)) & set(m.seeds(env, base, b)))
                if not ARMS[a].has_explorer or ARMS[b].has_explorer or len(seeds) < 2:
                    continue
                for metric in metrics_of(env):
                    va, vb, steps_a, steps_b = [], [], [], []
                    for seed in seeds:
                        final = _point(m.record(env, base, a, seed), plan.curve_temperature, None)
                        evals = [e for e in m.record(env, base, b, seed)["evals"] if e["temperature"] == plan.curve_temperature]
                        near = min(evals, key=lambda e: abs(e["learner_steps"] - final["learner_steps"]))
                        va.append(_vector(final, metric))
                        vb.append(_vector(near, metric))
                        steps_a.append(final["learner_steps"])
                        steps_b.append(near["learner_steps"])
                    d = difference(va, vb, paired_seeds=True)
                    ka, pa = _describe(a, m.records[(env, base, a)])
                    kb, pb = _describe(b, m.records[(env, base, b)])
                    diffs.append({**m.where(env), "base": base, "a": {"arm": ka, "process_reward": pa}, "b": {"arm": kb, "process_reward": pb},
                                  "metric": metric, "seeds": len(seeds), "mean": d.difference, "ci_low": d.ci_low, "ci_high": d.ci_high,
                                  "names": [a, b], "learner_steps_a": round(float(np.mean(steps_a))),
                                  "learner_steps_b": round(float(np.mean(steps_b)))})
    return diffs


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
                    e = estimate(values)
                    out.append({**m.where(env), "base": base, "name": arm, "seeds": e.seeds, "mean": e.mean, "ci_low": e.ci_low, "ci_high": e.ci_high})
    return out


def group_shares(m: Matrix, plan) -> list[dict]:
    """Per (env, regime, base, arm) of the cells that log them (the regimes study's): the mean
    over seeds of each seed's mean over training iterations of ``groups/all_fail`` (the share of
    groups without a win: no outcome signal) and, for explorer arms, ``groups/explorer_wins``
    (the share of wins the explorer played, over the iterations that had a win) and ``groups/explorer_rescued`` (the share of groups
    whose only wins are the explorer's), with a bootstrap-over-seeds 95 % interval; rows in
    ``summary.json``'s schema, metrics ``all_fail_share``, ``explorer_win_share``, ``explorer_rescued_share``."""
    out = []
    for env in _envs(m, plan):
        for base in BASES:
            for arm in ARMS:
                cells = m.records.get((env, base, arm), {})
                seeds = [s for s in sorted(cells) if cells[s].get("groups")]
                if not seeds:
                    continue
                kind, process = _describe(arm, cells)
                for metric, column in SHARES.items():
                    if column > 1 and not ARMS[arm].has_explorer:
                        continue
                    # the explorer's share of the wins: over iterations with a win (an iteration without
                    # one, all_fail == 1, logs a share of 0 that says nothing about who wins)
                    per_seed = [[v[column] for v in cells[s]["groups"] if v[column] is not None and (metric != "explorer_win_share" or v[1] < 1)]
                                for s in seeds]
                    values = [[float(np.mean(v))] for v in per_seed if v]
                    if not values:
                        continue
                    out.append({**_row(m.where(env), base, kind, process, metric, estimate(values)), "name": arm})
    return out


def training_rates(m: Matrix, plan) -> list[dict]:
    """Per (env, base, arm) of a plan on the ``total`` axis, what its training rollouts did, a
    bootstrap over seeds of per-seed values: ``train_success`` (the learner's wins per episode,
    every arm), ``train_events`` (what the farmable ``events`` reward would pay per learner
    episode: how hard it farms), and for explorer arms ``explorer_train_success``, ``explorer_success_gap`` (the
    explorer's wins per episode minus its learner's, iteration by iteration: does the explorer
    win more per sample?), ``explorer_events`` (what the farmable reward would pay per explorer
    episode) and ``explorer_win_share`` (the explorer's share of the update's wins, a ratio of sums
    over the run)."""
    out = []
    for env in _envs(m, plan):
        if m.axis(env) != "total":
            continue
        for base in BASES:
            for arm in ARMS:
                cells = m.records.get((env, base, arm), {})
                if not cells:
                    continue
                seeds = sorted(cells)
                curves = [cells[s]["train_curve"] for s in seeds]
                per_seed = {"train_success": [[float(np.mean([r[2] for r in c]))] for c in curves],
                            "train_events": [[float(np.mean([r[4] for r in c]))] for c in curves]}
                if ARMS[arm].has_explorer:
                    per_seed["explorer_train_success"] = [[float(np.mean([r[6] for r in c]))] for c in curves]
                    per_seed["explorer_success_gap"] = [[float(np.mean([r[6] - r[2] for r in c]))] for c in curves]
                    per_seed["explorer_events"] = [[float(np.mean([r[7] for r in c]))] for c in curves]
                    wins = [(sum(g[4] for g in cells[s]["groups"]), sum(g[5] for g in cells[s]["groups"])) for s in seeds]
                    per_seed["explorer_win_share"] = [[explorer / total] for total, explorer in wins if total]
                kind, process = _describe(arm, cells)
                for metric, values in per_seed.items():
                    if values:
                        out.append({**_row(m.where(env), base, kind, process, metric, estimate(values)),
                                    "name": arm, "measure": TOTAL_MEASURE})
    return out


def _public_total(views: dict, rates: list[dict], learner: list[dict] = ()) -> tuple[list[dict], list[dict]]:
    """The explorer study's rows and differences in ``summary.json``'s schema, each with
    ``"measure": "equal_total_env_steps"`` and the cell arm's ``name`` (``outcome`` and the N + M
    ``outcome-nm`` share the ``arm`` "outcome"): final held-out ``success`` and ``score``,
    ``auc_*`` (the whole curve) and ``auc_third_*`` (its first third), and the training rates;
    ``equal_learner_*`` differences read the control at the RSPO learner's env steps instead
    (``equal_learner``)."""
    rows, diffs = list(rates), [{**d, "metric": "equal_learner_" + d["metric"], "measure": TOTAL_MEASURE} for d in learner]
    for view_name, prefix in (("final", ""), ("auc", "auc_"), ("auc_third", "auc_third_")):
        view_rows, view_diffs = views[view_name]
        rows += [{**r, "metric": prefix + r["metric"], "measure": TOTAL_MEASURE} for r in view_rows]
        diffs += [{**d, "metric": prefix + d["metric"], "measure": TOTAL_MEASURE} for d in view_diffs]
    return rows, diffs


def summary_kind(item: dict) -> str:
    """Which study a ``summary.json`` row or difference belongs to: ``llm`` (a run-folder matrix's,
    ``run_folder_report.py``'s), ``total`` (the explorer study, at equal total env steps),
    ``regimes`` (it carries ``regime``) or ``matrix``."""
    if is_llm(item):
        return "llm"
    if item.get("measure") == TOTAL_MEASURE:
        return "total"
    return "regimes" if "regime" in item else "matrix"


def _public(rows: list[dict], diffs: list[dict]) -> tuple[list[dict], list[dict]]:
    """The headline rows and differences in ``summary.json``'s schema: main arms only (their
    (arm, process reward) pairs are unique; the sync sweep is in ``details.json``)."""
    keep = set(MAIN_ARMS) | {"start"}
    rows = [{k: v for k, v in r.items() if k != "name"} for r in rows if r["name"] in keep]
    diffs = [{k: v for k, v in d.items() if k != "names"} for d in diffs if set(d["names"]) <= keep]
    return rows, diffs


def _public_regimes(views: dict, shares: list[dict]) -> tuple[list[dict], list[dict]]:
    """The regimes study's rows and differences in ``summary.json``'s schema, each with its
    ``regime``: final held-out ``success`` (WebShop also ``score``) at equal learner steps, the
    area under the held-out curve as ``auc_success`` (``auc_score``), and the group shares."""
    keep = set(REGIME_ARMS) | {"start"}

    def public(items: list[dict], names: str, prefix: str = "") -> list[dict]:
        chosen = [i for i in items if "regime" in i and (set(i[names]) <= keep if names == "names" else i[names] in keep)]
        return [{**{k: v for k, v in i.items() if k != names}, "metric": prefix + i["metric"]} for i in chosen]

    (final_rows, final_diffs), (auc_rows, auc_diffs) = views["final"], views["auc"]
    rows = public(final_rows, "name") + public(auc_rows, "name", "auc_") + public(shares, "name")
    return rows, public(final_diffs, "names") + public(auc_diffs, "names", "auc_")


def merged(path: Path, rows: list[dict], diffs: list[dict], kind: str) -> dict:
    """``summary.json`` at ``path`` with this report's ``kind`` of rows and differences
    (``summary_kind``: the matrix's, the regimes study's or the explorer study's) replaced by
    ``rows`` and ``diffs``; the other kinds kept."""
    old = read_summary(path)
    kept = {k: [i for i in old.get(k, []) if summary_kind(i) != kind] for k in ("rows", "differences")}
    return {"rows": kept["rows"] + rows, "differences": kept["differences"] + diffs}


def read_summary(path: Path) -> dict:
    """The ``summary.json`` at ``path`` to merge into (none yet: empty); a file that is not one
    (cut off, or not rows and differences) is a ``ValueError`` saying so in one line, so that it is
    neither overwritten nor half-merged."""
    if not path.exists():
        return {"rows": [], "differences": []}
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        old = None
    if not (isinstance(old, dict) and all(isinstance(old.get(k, []), list) and all(isinstance(i, dict) for i in old.get(k, []))
                                          for k in ("rows", "differences"))):
        raise ValueError(f"cannot merge into {path}: it is not a summary this report wrote (cut off, or not JSON rows and "
                         "differences); move it away or drop --merge-summary")
    return old


def _fmt(d: dict) -> str:
    return f"{d['mean']:.3f} [{d['ci_low']:.3f}, {d['ci_high']:.3f}]"


def _verdict(d: dict) -> str:
    return "better" if d["ci_low"] > 0 else "worse" if d["ci_high"] < 0 else "no difference shown"


def _final_and_differences(views: dict, title: str, others: dict[str, str], differences: tuple[tuple[str, str], ...]) -> list[str]:
    """The final held-out table (each row with the ``others`` views' values, ``view -> column
    title``) and one table of paired differences per ``(view, title)`` of ``differences``."""
    lines = [f"### Final held-out results ({title})", "",
             "| env | base | arm | process reward | seeds | metric | mean [95 % CI] | " + " | ".join(others.values()) + " |",
             "|---|---|---|---|---|---|---|" + "---|" * len(others)]
    index = {name: {(r["env"], r["base"], r["name"], r["metric"]): r for r in views[name][0]} for name in views}
    for r in views["final"][0]:
        key = (r["env"], r["base"], r["name"], r["metric"])
        other = [index[v].get(key) for v in others]
        lines.append(f"| {r['env']} | {r['base']} | {r['name']} | {r['process_reward'] or '–'} | {r['seeds']} | {r['metric']} | "
                     f"{_fmt(r)} | " + " | ".join(_fmt(o) if o else "–" for o in other) + " |")
    for name, heading in differences:
        lines += ["", f"### Paired differences: {heading}", "", "| env | base | a − b | metric | seeds | difference [95 % CI] | verdict |",
                  "|---|---|---|---|---|---|---|"]
        for d in views[name][1]:
            lines.append(f"| {d['env']} | {d['base']} | {d['names'][0]} − {d['names'][1]} | {d['metric']} | {d['seeds']} | {_fmt(d)} | {_verdict(d)} |")
    return lines


def _farmed_table(farmed: list[dict], reward: str) -> list[str]:
    lines = ["", f"### Farmed events per held-out episode (what {reward} pays, T = 1.0)", "",
             "| env | base | arm | seeds | events per episode [95 % CI] |", "|---|---|---|---|---|"]
    return lines + [f"| {f['env']} | {f['base']} | {f['name']} | {f['seeds']} | {_fmt(f)} |" for f in farmed]


def tables(views: dict, farmed: list[dict], m: Matrix) -> str:
    lines = _final_and_differences(
        views, "T = 1.0, equal learner env steps", {"final_t04": "T = 0.4", "equal_total": "equal total steps", "auc": "AUC (speed)"},
        (("final", "equal learner env steps, T = 1.0"), ("equal_total", "equal total env steps, T = 1.0"),
         ("final_t04", "equal learner env steps, T = 0.4"), ("auc", "area under the held-out curve")))
    lines += _farmed_table(farmed, "the misaligned reward")
    return "\n".join(lines) + "\n"


def total_tables(views: dict, farmed: list[dict], rates: list[dict], learner: list[dict] = ()) -> str:
    """``tables_total.md``: the explorer study's results, every arm at equal total env steps, and
    the RSPO arms against their controls at equal learner env steps (``equal_learner``)."""
    lines = _final_and_differences(
        views, "T = 1.0, equal total env steps", {"final_t04": "T = 0.4", "auc": "AUC (speed)", "auc_third": "AUC, first third"},
        (("final", "final, equal total env steps, T = 1.0"), ("auc", "area under the held-out curve"),
         ("auc_third", "area under the first third of the curve"), ("final_t04", "final, T = 0.4")))
    if learner:
        lines += ["", "### Paired differences: RSPO's end against its control at equal learner env steps, T = 1.0", "",
                  "| env | base | a − b | metric | seeds | learner env steps a / b | difference [95 % CI] | verdict |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {d['env']} | {d['base']} | {d['names'][0]} − {d['names'][1]} | {d['metric']} | {d['seeds']} | "
                  f"{d['learner_steps_a']:,} / {d['learner_steps_b']:,} | {_fmt(d)} | {_verdict(d)} |" for d in learner]
    lines += ["", "### Training rollouts (per episode, mean over the run; 95 % CI over seeds)", "",
              "| env | base | arm | seeds | learner success | explorer success | explorer − learner | learner's process events (its reward's) | explorer's process events | explorer's share of wins |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    by_arm: dict[tuple, dict] = {}
    for r in rates:
        by_arm.setdefault((r["env"], r["base"], r["name"]), {})[r["metric"]] = r
    for (env, base, arm), metrics in by_arm.items():
        cells = [_fmt(metrics[k]) if k in metrics else "–" for k in
                 ("train_success", "explorer_train_success", "explorer_success_gap", "train_events", "explorer_events", "explorer_win_share")]
        lines.append(f"| {env} | {base} | {arm} | {metrics['train_success']['seeds']} | " + " | ".join(cells) + " |")
    lines += _farmed_table(farmed, "the farmable `events` reward")
    return "\n".join(lines) + "\n"


def regime_tables(views: dict, farmed: list[dict], shares: list[dict]) -> str:
    """``tables_regimes.md``: the regimes study's results, per env, regime and base."""
    def where(d: dict) -> str:
        return f"{d['env']} | {regime_name(d['regime'])}"

    lines = ["### Regimes: final held-out results (T = 1.0, equal learner env steps)", "",
             "| env | regime | base | arm | process reward | seeds | metric | mean [95 % CI] | T = 0.4 | equal total steps | AUC (speed) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    index = {name: {(r["env"], regime_name(r["regime"]), r["base"], r["name"], r["metric"]): r for r in views[name][0]} for name in views}
    for r in views["final"][0]:
        key = (r["env"], regime_name(r["regime"]), r["base"], r["name"], r["metric"])
        other = [index[v].get(key) for v in ("final_t04", "equal_total", "auc")]
        lines.append(f"| {where(r)} | {r['base']} | {r['name']} | {r['process_reward'] or '–'} | {r['seeds']} | {r['metric']} | "
                     f"{_fmt(r)} | " + " | ".join(_fmt(o) if o else "–" for o in other) + " |")
    for name, title in (("final", "equal learner env steps, T = 1.0"), ("auc", "area under the held-out curve"),
                        ("equal_total", "equal total env steps, T = 1.0"), ("final_t04", "equal learner env steps, T = 0.4")):
        lines += ["", f"### Regimes, paired differences: {title}", "",
                  "| env | regime | base | a − b | metric | seeds | difference [95 % CI] | verdict |", "|---|---|---|---|---|---|---|---|"]
        for d in views[name][1]:
            lines.append(f"| {where(d)} | {d['base']} | {d['names'][0]} − {d['names'][1]} | {d['metric']} | {d['seeds']} | {_fmt(d)} | {_verdict(d)} |")
    lines += ["", "### Regimes: outcome signal in the update's groups (mean over training iterations; 95 % CI over seeds)", "",
              "all-fail: groups without a win; explorer wins: the share of wins the explorer played, over the iterations "
              "that had a win; rescued: groups whose only wins are the explorer's.", "",
              "| env | regime | base | arm | seeds | all-fail share | explorer win share | explorer rescued share |", "|---|---|---|---|---|---|---|---|"]
    by_arm: dict[tuple, dict] = {}
    for r in shares:
        by_arm.setdefault((r["env"], regime_name(r["regime"]), r["base"], r["name"]), {})[r["metric"]] = r
    for (env, regime, base, arm), metrics in by_arm.items():
        cells = [_fmt(metrics[k]) if k in metrics else "–" for k in SHARES]
        seeds = metrics["all_fail_share"]["seeds"] if "all_fail_share" in metrics else "–"
        lines.append(f"| {env} | {regime} | {base} | {arm} | {seeds} | " + " | ".join(cells) + " |")
    lines += ["", "### Regimes: farmed events per held-out episode (what the misaligned reward pays, T = 1.0)", "",
              "| env | regime | base | arm | seeds | events per episode [95 % CI] |", "|---|---|---|---|---|---|"]
    for f in farmed:
        lines.append(f"| {where(f)} | {f['base']} | {f['name']} | {f['seeds']} | {_fmt(f)} |")
    return "\n".join(lines) + "\n"


def _curves(ax, m: Matrix, plan, env: str, base: str, metric: str = "success") -> None:
    """Held-out ``metric`` along training of every arm of (``env``'s plan key, ``base``), with 95 % bands."""
    import matplotlib

    for arm in (a for a in ARMS if m.seeds(env, base, a)):
        colour = matplotlib.colormaps["tab20"](list(ARMS).index(arm) % 20)  # one colour per arm in every panel
        seeds = [s for s in m.seeds(env, base, arm) if (env, s) in m.starts]
        if not seeds:
            continue
        starts = m.matrix(env, base, "start", seeds, metric, plan.curve_temperature, None)
        steps = sorted({e["learner_steps"] for s in seeds for e in m.record(env, base, arm, s)["evals"]
                        if e["temperature"] == plan.curve_temperature})
        xs, matrices = [0], [starts]
        targets = [round(f * m.budget(env, base)) for f in plan.fractions]
        for target in targets:
            values = m.matrix(env, base, arm, seeds, metric, plan.curve_temperature, target)
            if values is None or not steps:
                continue
            xs.append(target), matrices.append(values)
        means, lows, highs = curve_band(matrices, replicates=2000)  # the tables' bootstrap: a band and a row agree
        style = "--" if arm.startswith("dense") else ":" if "sync" in arm else "-"
        ax.plot(xs, means, style, color=colour, label=arm, marker="o", markersize=3)
        ax.fill_between(xs, lows, highs, color=colour, alpha=0.12)
    ax.axvline(m.budget(env, base), color="grey", linewidth=0.6)
    ax.set_xlabel(f"{m.axis(env)} env steps")


def plot(m: Matrix, plan, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for env in _envs(m, plan):
        if is_regime(env):
            continue
        bases = [b for b in BASES if any(m.seeds(env, b, a) for a in ARMS)]
        if not bases:
            continue
        # the explorer study (total axis) also plots WebShop's score, its headline there
        for metric in metrics_of(env) if m.axis(env) == "total" else ("success",):
            fig, axes = plt.subplots(1, len(bases), figsize=(5 * len(bases), 4), dpi=110, sharey=True, squeeze=False)
            for ax, base in zip(axes[0], bases):
                _curves(ax, m, plan, env, base, metric)
                ax.set_title(f"{base} ({len(m.seeds(env, base, 'outcome'))} seeds)")
            axes[0][0].set_ylabel(f"held-out {metric}, T = 1.0 (95 % band)")
            max(axes[0], key=lambda ax: len(ax.get_lines())).legend(fontsize=7)  # on the panel with the most arms
            fig.suptitle(f"{env}: held-out {metric} along training (start at 0)")
            fig.tight_layout()
            fig.savefig(out / f"heldout_{env.split('/')[-1]}{'' if metric == 'success' else '_' + metric}.png")
            plt.close(fig)


def plot_regimes(m: Matrix, plan, out: Path) -> None:
    """``heldout_regimes_<env>.png``: a panel per regime (columns) and base (rows), the arms' held-out
    success curves; ``heldout_regimes_<env>_score.png`` the same for an env with a score (WebShop)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in _envs(m, plan) if is_regime(k)]
    for env_id in dict.fromkeys(env_of(k) for k in keys):
        regimes = [k for k in keys if env_of(k) == env_id]
        bases = [b for b in BASES if any(m.seeds(k, b, a) for k in regimes for a in ARMS)]
        for metric in metrics_of(env_id):
            fig, axes = plt.subplots(len(bases), len(regimes), figsize=(max(4.5 * len(regimes), 6), 3.6 * len(bases)), dpi=110,
                                     squeeze=False)  # each regime its own scale: an untrained start's ~1 % beside a clone's ~15 %
            for row, base in zip(axes, bases):
                for ax, key in zip(row, regimes):
                    if not any(m.seeds(key, base, a) for a in ARMS):  # a regime this base did not run
                        ax.axis("off")
                        continue
                    _curves(ax, m, plan, key, base, metric)
                    ax.set_title(f"{key.split('@', 1)[1]}, {base} ({len(m.seeds(key, base, 'outcome'))} seeds)", fontsize=9)
                row[0].set_ylabel(f"held-out {metric}, T = 1.0")
            fullest = max((ax for row in axes for ax in row), key=lambda ax: len(ax.get_lines()))
            fullest.legend(fontsize=6)  # on the panel with the most arms
            fig.suptitle(f"{env_id.split('/')[-1]}: held-out {metric} per regime (95 % bands)", fontsize=10)
            fig.tight_layout()
            suffix = "" if metric == "success" else f"_{metric}"
            fig.savefig(out / f"heldout_regimes_{env_id.split('/')[-1]}{suffix}.png")
            plt.close(fig)


def plot_forests(differences: list[dict], out: Path) -> list[Path]:
    """``summary.json``'s paired differences of held-out success, one forest plot per env and
    measure: ``forest_<env>.png`` (the final success) and ``forest_auc_<env>.png`` (the area under
    its curve), a row per base and pair of arms; the regimes study's per regime too:
    ``forest_regimes_<env>_<regime>.png`` and ``forest_regimes_auc_<env>_<regime>.png``."""
    written = []
    panels: dict[tuple[str, str, str | None], list[dict]] = {}
    for d in differences:
        if d.get("measure") == TOTAL_MEASURE:  # the explorer study: WebShop's score is its headline
            if d["metric"] in ("score", "auc_score", "success"):
                panels.setdefault((d["env"], d["metric"], "total"), []).append(d)
            continue
        if d["metric"] not in ("success", "auc_success"):
            continue
        measure = "auc" if d["metric"].startswith("auc_") else "final"
        panels.setdefault((d["env"], measure, regime_name(d["regime"]) if "regime" in d else None), []).append(d)
    for (env, measure, regime), chosen in panels.items():
        if regime == "total":
            rows = [{"label": f"{d['base']}: {d['names'][0]} − {d['names'][1]}", "difference": d["mean"], "ci_low": d["ci_low"],
                     "ci_high": d["ci_high"], "verdict": verdict(d["ci_low"], d["ci_high"])} for d in chosen]
            what = {"score": "final held-out score", "auc_score": "area under the held-out score curve",
                    "success": "final held-out success"}[measure]
            name = f"forest_total_{env.split('/')[-1]}_{measure}"
            if forest_plot(rows, out / f"{name}.png", title=f"{env}: paired differences a − b of the {what}, equal total env steps "
                                                             f"(95 % intervals over seeds and goals)", xlabel=f"a − b, {what}"):
                written.append(out / f"{name}.png")
            continue
        rows = [{"label": " ".join(f"{d['base']}: {d['a']['arm']} {d['a']['process_reward'] or ''} − {d['b']['arm']} "
                                   f"{d['b']['process_reward'] or ''}".split()),
                 "difference": d["mean"], "ci_low": d["ci_low"], "ci_high": d["ci_high"], "verdict": verdict(d["ci_low"], d["ci_high"])}
                for d in chosen]
        what = "area under the held-out success curve" if measure == "auc" else "final held-out success"
        name = "forest_" + ("regimes_" if regime else "") + ("auc_" if measure == "auc" else "") + env.split("/")[-1] + (f"_{regime}" if regime else "")
        title = f"{env}{f', regime {regime}' if regime else ''}: paired differences a − b of the {what} (95 % intervals over seeds and tasks)"
        if forest_plot(rows, out / f"{name}.png", title=title, xlabel=f"a − b, {what}"):
            written.append(out / f"{name}.png")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the matrix's folder (holding cells/ and starts/)")
    parser.add_argument("--out", type=Path, default=None, help="default: the results folder")
    parser.add_argument("--preset", choices=sorted(PLANS), default="matrix", help="the plan the cells were run with")
    parser.add_argument("--steps", type=int, default=None, help="the learner env steps the cells were run with "
                        "(rspo_matrix.py --steps): the budget whose end is 'final'")
    parser.add_argument("--merge-summary", action="store_true",
                        help="merge into --out's summary.json: replace its rows and differences of this run's kind "
                             "(the regimes study's, which carry `regime`, or the others) and keep the rest")
    args = parser.parse_args(argv)
    plan = PLANS[args.preset]
    if all(p.run_folders for p in plan.envs.values()):  # run folders: compare's own report
        out = args.out or args.results
        run_folder_report(args.results, out, out / "summary.json" if args.merge_summary else None)
        print((out / "tables.md").read_text())
        return 0
    if args.steps is not None:
        plan = replace(plan, envs={e: p.overridden(learner_steps=args.steps) for e, p in plan.envs.items()})
    out = args.out or args.results
    if args.merge_summary:
        try:
            read_summary(out / "summary.json")  # before the work: a summary that cannot take the merge stops it
        except ValueError as error:
            print(f"rspo_matrix_report.py: error: {error}", file=sys.stderr)
            raise SystemExit(2) from None
    out.mkdir(parents=True, exist_ok=True)
    cells, starts = load_results(args.results)
    m = Matrix(cells, starts, plan)
    regimes = any(is_regime(k) for k in plan.envs)
    total = any(p.axis == "total" for p in plan.envs.values())
    names = ("final", "final_t04", "equal_total", "auc") + (("auc_third",) if total else ())  # total: the premise's early speed
    views = {name: view(m, plan, name) for name in names}
    farmed = farming(m, plan)
    kind = "total" if total else "regimes" if regimes else "matrix"
    if total:
        rates = training_rates(m, plan)
        learner = equal_learner(m, plan)
        rows, diffs = _public_total(views, rates, learner)
    elif regimes:
        shares = group_shares(m, plan)
        rows, diffs = _public_regimes(views, shares)
    else:
        rows, diffs = _public(*views["final"])
    summary = merged(out / "summary.json", rows, diffs, kind) if args.merge_summary else {"rows": rows, "differences": diffs}
    write_json(out / "summary.json", summary)
    suffix = {"total": "_total", "regimes": "_regimes", "matrix": ""}[kind]
    details = {"budget": ("final: equal total env steps at T = 1.0 (the headline)" if total
                          else "final: equal learner env steps at T = 1.0 (the headline)"),
               "views": {k: {"rows": r, "differences": d} for k, (r, d) in views.items()}, "farmed_events": farmed}
    if regimes:
        details["group_shares"] = shares
    if total:
        details["training_rates"] = rates
        details["equal_learner"] = learner
    write_json(out / f"details{suffix}.json", details)
    text = total_tables(views, farmed, rates, learner) if total else regime_tables(views, farmed, shares) if regimes else tables(views, farmed, m)
    (out / f"tables{suffix}.md").write_text(text, encoding="utf-8")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is not installed: no plots", file=sys.stderr)
    else:
        plot_regimes(m, plan, out) if regimes else plot(m, plan, out)
        plot_forests(diffs, out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
