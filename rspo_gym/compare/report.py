"""The files of a comparison: ``summary.json``, ``report.md``, ``forest.png`` and ``curves_<metric>.png``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rspo_gym.plotting import Band, curves_with_bands, forest_plot

__all__ = ["write_report", "report_markdown"]


def _ci(e: dict[str, Any]) -> str:
    return f"{e['mean']:.3f} [{e['ci_low']:.3f}, {e['ci_high']:.3f}]"


def _figures(summary: dict[str, Any], out: Path) -> list[str]:
    """The forest plot of every difference and each metric's curves; the files written."""
    written = []
    rows = [{"label": f"{d['group']}: {'AUC of ' if d['measure'] == 'auc' else 'final '}{d['metric']}", **d}
            for d in summary["differences"]]
    if rows and forest_plot(rows, out / "forest.png", title=f"{summary['env']}: each group − {summary['baseline']}",
                            xlabel="paired difference (95 % interval; green better, red worse)"):
        written.append("forest.png")
    steps = summary.get("x") == "total_env_steps"  # equal compute: the curves over total env steps
    for metric in summary["metrics"]:
        bands = [Band(g["name"], c["env_steps"] if steps else c["iterations"], c["mean"], c["ci_low"], c["ci_high"])
                 for g in summary["groups"] if (c := g["curve"].get(metric))]
        name = f"curves_{metric}.png"
        if bands and curves_with_bands(bands, out / name, title=f"{summary['env']}: held-out {metric} along training (95 % bands)",
                                       ylabel=f"held-out {metric}", xlabel="total env steps" if steps else "RL iteration"):
            written.append(name)
    return written


def report_markdown(summary: dict[str, Any], figures: list[str]) -> str:
    """``report.md``: the answer first (one sentence per comparison), then the figures and tables."""
    lines = [f"# Comparison on {summary['env']}", "",
             f"Held-out split {summary['split']}, {summary['tasks']} tasks, temperature {summary['temperature']}, "
             f"every run on the same episodes (evaluation seed {summary['eval_seed']}). Baseline: **{summary['baseline']}**.", ""]
    lines += [f"- {d['sentence']}" for d in summary["differences"]] or ["- one group: nothing to compare it with."]
    if summary["one_seed_groups"]:
        lines += ["", f"Groups of one seed ({', '.join(summary['one_seed_groups'])}): their intervals cover the held-out tasks "
                      f"only, not the training noise."]
    if summary["evaluated_runs"]:
        lines += ["", f"Evaluated now (no record of the final policy on these episodes): {len(summary['evaluated_runs'])} runs."]
    if summary.get("x") == "total_env_steps":
        lines += ["", f"Paired at equal compute: each run's last held-out record within {summary['total_env_steps']:,.0f} total env "
                      f"steps (the most every run reached, an explorer's steps included)."]
    if summary.get("auc_env_steps"):
        start, end = summary["auc_env_steps"]
        lines += ["", f"Area under the held-out curve: over total env steps {start:,.0f} to {end:,.0f}, divided by their span."]
    elif summary["auc_iterations"]:
        lines += ["", f"Area under the held-out curve: over iterations {summary['auc_iterations']}, divided by their span."]
    else:
        lines += ["", "No area under the curve: the runs have no records on these episodes at two common points."]
    lines += [""] + [f"![{name}]({name})" for name in figures]
    has_auc = bool(summary["auc_iterations"] or summary.get("auc_env_steps"))
    lines += ["", "## Groups", "", "| group | seeds | " + " | ".join(f"final {m} [95 % CI]" for m in summary["metrics"])
              + "".join(f" | AUC {m} [95 % CI]" for m in summary["metrics"] if has_auc) + " |",
              "|---|---|" + "---|" * (len(summary["metrics"]) * (2 if has_auc else 1))]
    for g in summary["groups"]:
        cells = [_ci(g["final"][m]) for m in summary["metrics"]] + [_ci(g["auc"][m]) for m in summary["metrics"] if "auc" in g]
        lines.append(f"| {g['name']} | {len(g['seeds'])} ({', '.join(map(str, g['seeds']))}) | " + " | ".join(cells) + " |")
    if summary["differences"]:
        lines += ["", "## Differences against the baseline", "",
                  "| group − baseline | measure | metric | difference [95 % CI] | verdict | seeds | tasks | detectable |",
                  "|---|---|---|---|---|---|---|---|"]
        for d in summary["differences"]:
            seeds = f"{d['seeds'][0]} / {d['seeds'][1]}" + ("" if d["paired_seeds"] else " (unpaired)")
            lines.append(f"| {d['group']} − {d['baseline']} | {'AUC' if d['measure'] == 'auc' else 'final'} | {d['metric']} | "
                         f"{d['difference']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}] | {d['verdict']} | {seeds} | "
                         f"{d['tasks']} | {d['detectable']:.3f} |")
    lines += ["", "## Runs", ""]
    for g in summary["groups"]:
        settings = ", ".join(f"{k}={v}" for k, v in g["settings"].items()) or "the only setting"
        lines.append(f"- **{g['name']}** ({settings}): " + ", ".join(f"`{r}`" for r in g["runs"]))
    return "\n".join(lines) + "\n"


def write_report(summary: dict[str, Any], out: str | Path) -> list[Path]:
    """Write the comparison's files into ``out`` (made if missing) and return their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    figures = _figures(summary, out)
    (out / "report.md").write_text(report_markdown(summary, figures), encoding="utf-8")
    return [out / "summary.json", out / "report.md", *(out / f for f in figures)]
