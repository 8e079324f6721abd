"""Is my change better? Paired comparisons of groups of run folders (``rspo-gym compare``).

``compare_runs`` takes run folders (paths or globs, grouped by their setting: the config without
the seed) or named groups, measures every run's final policy on one list of held-out tasks and
episode seeds (each run's own records where it has them, ``training/eval_records.py``; else an
evaluation of its saved ``policy/``), and compares each group with a baseline group: the paired
difference of the final held-out success (and WebShop's score) and of the area under the
held-out curve, each with its 95 % two-level bootstrap interval over seeds and tasks
(``intervals.py``), a verdict and the smallest difference these seeds and tasks could detect.

    from rspo_gym.compare import compare_runs
    summary = compare_runs(groups={"rspo": "runs/rspo-*", "grpo": "runs/grpo-*"}, baseline="grpo", out="compare")

- ``runs.py``: the run folders: found, checked, grouped, measured on common episodes.
- ``stats.py``: the statistics (pure).
- ``summary.py``: ``summary.json``'s content (pure).
- ``report.py``: the files (``summary.json``, ``report.md``, the forest plot and the curves).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rspo_gym.compare.runs import Group, check_groups, check_tasks, final_records, group_runs, load_runs, named_groups, plan_evaluation
from rspo_gym.errors import UserError

__all__ = ["compare_runs", "prepare", "check_options", "MIN_REPLICATES", "MAX_REPLICATES", "MAX_RESAMPLED"]

#: Fewer bootstrap resamples than this make an interval of noise.
MIN_REPLICATES = 100
#: More add nothing to a 95 % interval's second decimal, and each is a row of task indices in memory.
MAX_REPLICATES = 100_000
#: Resampled task indices held at once (replicates x tasks, 8 bytes each): 800 MB.
MAX_RESAMPLED = 10**8


def check_options(*, tasks: int | None, replicates: int, out: str | Path | None) -> None:
    """Refuse, in one line and before any run is read, options that cannot work: ``tasks`` out of
    bounds, ``replicates`` too few or too many, an ``out`` that is a file or under one."""
    check_tasks(tasks)
    if not isinstance(replicates, int) or isinstance(replicates, bool) or not MIN_REPLICATES <= replicates <= MAX_REPLICATES:
        raise UserError(f"--replicates must be from {MIN_REPLICATES} (fewer make an interval of noise) to {MAX_REPLICATES:,}, "
                        f"got {replicates!r}")
    if out is not None:
        from rspo_gym.compare.report import check_out

        check_out(out)


def prepare(runs: Sequence[str | Path] = (), *, groups: Mapping[str, str | Sequence[str]] | None = None, baseline: str | None = None,
            one_seed: bool = False) -> tuple[list[Group], str]:
    """The groups to compare and the baseline's name, checked (``UserError`` in one line):
    ``runs`` grouped by setting, or ``groups`` (name -> glob or globs); the baseline is the
    group named ``baseline``, else the first."""
    if runs and groups:
        raise UserError("give run folders or named groups (--group NAME=GLOB), not both")
    if groups:
        specs = [f"{name}={pattern}" for name, patterns in groups.items()
                 for pattern in ([patterns] if isinstance(patterns, (str, Path)) else patterns)]
        found = named_groups(specs)
    else:
        found = group_runs(load_runs([str(r) for r in runs]))
    names = [g.name for g in found]
    if baseline is None:
        baseline = names[0]
    elif baseline not in names:
        raise UserError(f"--baseline {baseline!r} matches no group; the groups are: {'; '.join(names)}")
    check_groups(found, one_seed=one_seed)
    return found, baseline


def compare_runs(runs: Sequence[str | Path] = (), *, groups: Mapping[str, str | Sequence[str]] | None = None,
                 baseline: str | None = None, out: str | Path | None = "compare", evaluate: bool = False, tasks: int | None = None,
                 one_seed: bool = False, replicates: int = 2000, progress: bool = True, x: str = "iterations",
                 say: Callable[[str], None] = print) -> dict[str, Any]:
    """Compare groups of runs with a baseline group; return ``summary.json``'s content, and
    write the report into ``out`` (None: write nothing).

    ``evaluate``: measure every run's saved policy now, even where its records would do;
    ``tasks``: on the first ``tasks`` tasks of the held-out split (default: the first run's last
    evaluation's tasks); ``one_seed``: accept groups of one seed (intervals over tasks only);
    ``replicates``: bootstrap resamples; ``progress``: a bar per evaluation; ``x``: pair the runs at
    equal ``iterations``, at equal ``total_env_steps`` (equal compute, an RSPO explorer's steps
    included; read from the runs' records) or at equal ``learner_env_steps`` (the learner's own
    episodes'; from ``metrics.jsonl``). ``out`` is replaced whole or left as it was
    (``report.write_report``); a run being written, a record that is not one rspo-gym wrote, or
    options out of bounds are a ``UserError`` in one line.
    """
    from rspo_gym.compare.summary import AXES, summarize

    if x not in AXES:
        raise UserError(f"x must be one of {', '.join(AXES)}, got {x!r}")

    check_options(tasks=tasks, replicates=replicates, out=out)
    found, baseline = prepare(runs, groups=groups, baseline=baseline, one_seed=one_seed)
    # the baseline first: its first run's episodes are the plan's
    found = sorted(found, key=lambda g: g.name != baseline)
    plan = plan_evaluation(found, tasks=tasks)
    if replicates * len(plan.task_ids) > MAX_RESAMPLED:
        raise UserError(f"--replicates {replicates:,} over {len(plan.task_ids):,} tasks would resample {replicates * len(plan.task_ids):,} "
                        f"task indices at once (at most {MAX_RESAMPLED:,}): ask for fewer replicates")
    finals, evaluated = final_records(found, plan, evaluate=evaluate, say=say, progress=progress)
    summary = summarize(found, baseline, plan, finals, evaluated=evaluated, replicates=replicates, x=x)
    if out is not None:
        from rspo_gym.compare.report import write_report

        write_report(summary, out)
    return summary
