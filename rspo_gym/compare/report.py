"""The files of a comparison: ``summary.json``, ``report.md``, ``forest.png`` and ``curves_<metric>.png``.

They are written into a staging folder first and moved into ``--out`` at the end, so a compare
that is killed or fails (a full disk, a read-only folder) leaves ``--out`` as it was: a new
folder appears whole (one rename) and an existing one has each file replaced whole, never a
truncated ``summary.json`` or a report of one comparison beside the numbers of another.

A kill leaves the staging folder (``.<out>.<8 hex digits>.tmp``, beside a new ``--out`` or inside
an existing one); the next compare into that ``--out`` removes those left by a writer that is
gone. A writer holds an exclusive ``flock`` on its staging folder while it writes (the kernel drops
it when the process dies, ``kill -9`` included), so one whose lock can be taken is a dead
writer's; one changed in the last minute is kept all the same, for the instant between a live
writer's ``mkdir`` and its lock (and where the filesystem has no locks, age is the only test: a
writer stages its files in seconds).
``summary.json`` is strict JSON: a value that is not a finite number is a bug, never ``NaN``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

from rspo_gym.atomic import DISK_FULL
from rspo_gym.errors import UserError
from rspo_gym.plotting import Band, curves_with_bands, forest_plot

try:
    import fcntl
except ImportError:  # Windows: no flock; a leftover is then known by its age alone
    fcntl = None

__all__ = ["write_report", "report_markdown", "check_out", "remove_leftovers", "STALE_AFTER_S"]

#: The figures a comparison may write; one an earlier comparison left in ``--out`` and this one
#: does not write is removed, so that ``report.md`` and the figures beside it are of one comparison.
FIGURES = ("forest.png", "curves_success.png", "curves_score.png")
#: A staging folder unchanged this long, whose lock no process holds, is a dead writer's.
STALE_AFTER_S = 60.0


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
    steps = summary["x"] == "total_env_steps"  # equal compute: the curves over total env steps
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
             f"Held-out split {summary['split']}, {summary['tasks']} tasks ({summary['episodes']} episodes), temperature {summary['temperature']}, "
             f"every run on the same episodes (evaluation seed {summary['eval_seed']}). Baseline: **{summary['baseline']}**.", ""]
    lines += [f"- {d['sentence']}" for d in summary["differences"]] or ["- one group: nothing to compare it with."]
    gains = [f"- {g['name']}: {m} {d['difference']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}] ({d['verdict']})"
             for g in summary["groups"] for m, d in g.get("gain", {}).items()]
    if gains:
        lines += ["", "Gain over the start (final − the record before training, paired run by run and task by task):", ""] + gains
    if summary["one_seed_groups"]:
        lines += ["", f"Groups of one seed ({', '.join(summary['one_seed_groups'])}): their intervals cover the held-out tasks "
                      f"only, not the training noise."]
    if summary["evaluated_runs"]:
        lines += ["", f"Evaluated now (no record of the final policy on these episodes): {len(summary['evaluated_runs'])} runs."]
    if summary["x"] == "total_env_steps":
        lines += ["", f"Paired at equal compute: each run's held-out curve read at {summary['total_env_steps']:,.0f} total env "
                      f"steps (the most every run reached, an explorer's steps included), joined linearly between its records."]
    elif summary["x"] == "learner_env_steps":
        lines += ["", f"Paired at equal learner steps: each run's held-out curve read at {summary['learner_env_steps']:,.0f} env steps "
                      f"of its learner's own episodes (the most every run reached), joined linearly between its records."]
    if summary["auc_env_steps"]:
        start, end = summary["auc_env_steps"]
        lines += ["", f"Area under the held-out curve: over {summary['x'].replace('_', ' ')} {start:,.0f} to {end:,.0f}, divided by their span."]
    elif summary["auc_iterations"]:
        lines += ["", f"Area under the held-out curve: over iterations {summary['auc_iterations']}, divided by their span."]
    else:
        lines += ["", f"No area under the curve: {summary['auc_left_out']}."]
    lines += [""] + [f"![{name}]({name})" for name in figures]
    has_auc = bool(summary["auc_iterations"] or summary["auc_env_steps"])
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


def check_out(out: str | Path) -> None:
    """Refuse, in one line, an ``out`` that cannot be the comparison's folder: a file, a path
    under a file, a dangling link, or under a folder this process cannot write; checked before
    any run is read, so the refusal comes at once."""
    out = Path(out).expanduser()
    existing = out
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():
            raise UserError(f"--out {out} cannot be made: {existing} is a link to {os.readlink(existing)!r}, which does not exist")
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == out else f"is under {existing}, a file"
        raise UserError(f"--out {out} {what}, not a folder: name a folder for the comparison's files")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"--out {out}: {existing} is not writable by this user: name a folder you can write")


def _lock(folder: Path) -> int | None:
    """A descriptor holding an exclusive ``flock`` on ``folder`` (None where there are no locks):
    while it is open, no later compare takes ``folder`` for a dead writer's leftover."""
    if fcntl is None:
        return None
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    with contextlib.suppress(OSError):  # a filesystem without locks: the leftovers' age protects this one
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _remove_if_stale(folder: Path) -> None:
    """Remove ``folder``, a staging folder, when its writer is gone (module doc)."""
    try:
        if time.time() - os.lstat(folder).st_mtime < STALE_AFTER_S:
            return
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # gone already (another compare removed it), or not a folder
        return
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a live writer's
                return
            except OSError:  # no locks on this filesystem: its age says it
                pass
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.close(fd)


def remove_leftovers(out: Path) -> None:
    """Remove the staging folders that killed compares into ``out`` left beside or inside it."""
    name = re.compile(rf"^\.{re.escape(out.absolute().name or 'compare')}\.[0-9a-f]{{8}}\.tmp$")
    for home in (out.absolute().parent, out):
        try:
            entries = [e for e in os.scandir(home) if name.match(e.name) and e.is_dir(follow_symlinks=False)]
        except OSError:  # no such folder (a new --out), or not readable: nothing to clean there
            continue
        for entry in entries:
            _remove_if_stale(Path(entry.path))


def write_report(summary: dict[str, Any], out: str | Path) -> list[Path]:
    """Write the comparison's files into ``out`` (made if missing) and return their paths:
    staged beside it (a new ``out``) or inside it (an existing one), then moved in, ``summary.json``
    last. A write that fails is a ``UserError`` naming ``out`` (a full disk is left to the caller,
    an ``OSError`` of ``atomic.DISK_FULL``), and ``out`` is left as it was."""
    out = Path(out).expanduser()
    check_out(out)
    text = json.dumps(summary, indent=2, allow_nan=False) + "\n"  # before anything is written
    remove_leftovers(out)
    fresh = not out.exists()
    home = out.absolute().parent if fresh else out
    staging = home / f".{out.absolute().name or 'compare'}.{secrets.token_hex(4)}.tmp"
    lock = None
    try:
        home.mkdir(parents=True, exist_ok=True)
        os.mkdir(staging)
        lock = _lock(staging)
        (staging / "summary.json").write_text(text, encoding="utf-8")
        figures = _figures(summary, staging)
        (staging / "report.md").write_text(report_markdown(summary, figures), encoding="utf-8")
        if fresh:
            os.rename(staging, out)  # the whole folder at once
        else:
            for stale in set(FIGURES) - set(figures):
                with contextlib.suppress(FileNotFoundError):
                    (out / stale).unlink()
            for name in [*figures, "report.md", "summary.json"]:
                os.replace(staging / name, out / name)
            os.rmdir(staging)
    except BaseException as err:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(err, OSError) and err.errno not in DISK_FULL:
            raise UserError(f"cannot write the comparison into {out} ({err.strerror or err}"
                            f"{f': {err.filename}' if err.filename else ''}): it is left as it was") from None
        raise
    finally:
        if lock is not None:
            os.close(lock)  # after the folder is renamed or removed: no compare can take it for a leftover
    return [out / "summary.json", out / "report.md", *(out / f for f in figures)]
