"""Random interrupts, then resumes: a short RSPO run interrupted once at a random moment, by Ctrl-C
or ``kill -9``, and continued until it finishes, ends with the uninterrupted run's files: every
metrics row but wall times, and its checkpoint's tensor shards (weights, AdamW states, the
explorer's), ``policy/`` and ``learning_curve.png`` byte for byte; and with nothing a killed
writer left in the folder.

One uninterrupted reference run, then ``--trials`` runs. Trial k gets signal
``signals[k % len(signals)]`` a random delay after its training starts (``config.json`` appears;
uniform over the reference's time from ``config.json`` to ``learning_curve.png``, its last file;
seeded by ``--seed``: the moment lands anywhere, a rollout, an update, a metrics write, a
checkpoint write, the final ``policy/`` and curve), sent to its process group as a terminal sends
Ctrl-C. A signal that comes after the command printed its last line (Python shutting down: exit 0,
or -2 once Python's handlers are gone) finds the work done; its folder is compared as it is. Ctrl-C must end the command with exit 130 and one line on stderr saying how
to go on, and the next command is the one that line says; after ``kill -9`` the next command adds
``--resume`` (or is the same command when the run folder holds no run yet). The fast drrn policy
keeps a trial to a few process starts.

    python benchmarks/kill9_resumes.py --trials 50 --jobs 2

Prints one row per trial and a summary per signal, writes JSON (``--json``), exits 1 when any
trial fails.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_json  # noqa: E402  (benchmarks/ is on sys.path)

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}
ARGS = ["-m", "rspo_gym", "train", "--model", "drrn", "--algo", "rspo", "--base", "grpo", "--num-groups", "1", "--group-size", "2",
        "--max-turns", "3", "--seed", "5", "--set", "eval_every=0", "--set", "progress=false"]
SIGNALS = {"INT": signal.SIGINT, "KILL": signal.SIGKILL}
#: The last line ``rspo-gym train`` prints once its work is done (all of it is in the run folder).
FINISHED = "metrics, config, checkpoint, policy/ and learning_curve.png in "
#: What a killed writer can leave in a run folder: ``atomic_write``'s temporaries, ``checkpoint.pt.tmp``.
_TEMPORARY = re.compile(r"^\..+\.[0-9a-f]{8}\.tmp$|^checkpoint\.pt\.tmp$")


def _as_a_terminal_starts_it() -> None:
    """SIGINT unblocked and at its default in the child, as a shell starts a command (a child
    inherits ignored signals: under ``nohup ... &`` SIGINT would never arrive)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _train(out: Path, iterations: int, extra: list[str], interrupt: tuple[int, float] | None = None) -> tuple[int, str, str]:
    """Run ``rspo-gym train`` into ``out``; send its process group ``interrupt = (signal, delay)``
    ``delay`` seconds after its training starts (``config.json`` appears). Its exit code, stdout
    and stderr."""
    command = [sys.executable, *ARGS, "--iterations", str(iterations), "--output-dir", str(out), *extra]
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=stdout, stderr=stderr, text=True,
                                   start_new_session=True, preexec_fn=_as_a_terminal_starts_it)
        while not (out / "config.json").is_file() and process.poll() is None:
            time.sleep(0.02)
        if interrupt is not None:
            try:
                process.wait(timeout=interrupt[1])
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, interrupt[0])
        process.wait()
        stdout.seek(0)
        stderr.seek(0)
        return process.returncode, stdout.read(), stderr.read()


def _rows(out: Path) -> list[dict]:
    """``metrics.jsonl`` and ``metrics.csv``'s rows without their wall times."""
    rows = []
    if (out / "metrics.jsonl").is_file():
        rows += [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    if (out / "metrics.csv").is_file():
        with open(out / "metrics.csv", newline="") as f:
            rows += list(csv.DictReader(f))
    return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in rows]


def _logged(out: Path) -> int:
    return len((out / "metrics.jsonl").read_text().splitlines()) if (out / "metrics.jsonl").is_file() else 0


def _files(out: Path) -> dict[str, bytes]:
    """The files compared byte for byte: the checkpoint's shards, ``policy/``, the curve."""
    shards = sorted((out / "checkpoint_tensors").glob("*/*"))
    files = {f"checkpoint_tensors/{p.name}": p for p in shards}
    files.update({f"policy/{p.name}": p for p in sorted((out / "policy").glob("*"))})
    files["learning_curve.png"] = out / "learning_curve.png"
    return {name: path.read_bytes() for name, path in files.items() if path.is_file()}


def _leftovers(out: Path) -> list[str]:
    """Temporary files in ``out`` and tensor folders beyond the one ``checkpoint.pt`` names."""
    left = sorted(p.name for p in out.iterdir() if _TEMPORARY.match(p.name)) if out.is_dir() else []
    folders = sorted(p.name for p in (out / "checkpoint_tensors").glob("*")) if (out / "checkpoint_tensors").is_dir() else []
    return left + ([f"checkpoint_tensors/{name}" for name in folders] if len(folders) > 1 else [])


def _advice(stderr: str) -> tuple[list[str] | None, str]:
    """The flags Ctrl-C's line says to go on with (None: no such line, or more than it) and the line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if "Traceback" in stderr or not last.startswith("rspo-gym train: interrupted; ") or sum("interrupted" in x for x in lines) != 1:
        return None, last
    return [flag for flag in ("--resume", "--overwrite") if f" {flag}" in last.split(" (instead of")[0]], last


def _trial(tmp: Path, trial: int, name: str, delay: float, iterations: int, reference: tuple) -> dict:
    out = tmp / f"trial-{trial}"
    code, stdout, stderr = _train(out, iterations, [], (SIGNALS[name], delay))
    result = {"trial": trial, "signal": name, "delay_s": round(delay, 3), "exit": code, "rows_logged": _logged(out),
              "left_by_interrupt": _leftovers(out), "commands": 1, "problems": []}
    if FINISHED in stdout:  # the signal came after the command's work, while Python shut down, or not at all
        result["finished_before_signal"] = True
        following = None
        if code not in (0, -SIGNALS[name]):
            result["problems"].append(f"exit {code} after the command's end: {stderr[-500:]!r}")
    elif name == "INT":
        following, line = _advice(stderr)
        result["line"] = line
        if code != 130 or following is None:
            result["problems"].append(f"Ctrl-C gave exit {code} and not one line: {stderr[-500:]!r}")
            following = ["--resume"] if (out / "config.json").is_file() else []
    else:
        if code != -signal.SIGKILL:
            result["problems"].append(f"kill -9 gave exit {code}: {stderr[-500:]!r}")
        following = ["--resume"] if (out / "config.json").is_file() or (out / "checkpoint.pt").is_file() else []
    while following is not None:
        code, _, stderr = _train(out, iterations, following)
        result["commands"] += 1
        if code == 0:
            break
        result["problems"].append(f"{' '.join(following) or 'the same command'} gave exit {code}: {stderr.strip()[-500:]!r}")
        if result["commands"] >= 4:
            break
        following = ["--resume"]
    rows, files = reference
    result["same_rows"] = _rows(out) == rows
    mine = _files(out)
    result["different_files"] = sorted(k for k in set(files) | set(mine) if files.get(k) != mine.get(k))
    result["left_at_end"] = _leftovers(out)
    if not result["same_rows"] or result["different_files"]:
        result["problems"].append(f"not the uninterrupted run's: rows {'equal' if result['same_rows'] else 'differ'}, "
                                  f"files differing: {result['different_files']}")
    if result["left_at_end"]:
        result["problems"].append(f"left in the run folder: {result['left_at_end']}")
    return result


def _summary(results: list[dict]) -> list[dict]:
    rows = []
    for name in sorted({r["signal"] for r in results}, reverse=True):
        these = [r for r in results if r["signal"] == name]
        rows.append({
            "signal": name, "trials": len(these),
            "finished_before_signal": sum(bool(r.get("finished_before_signal")) for r in these),
            "left_a_partial_save": sum(any("tensors" in x or x == "checkpoint.pt.tmp" for x in r["left_by_interrupt"])
                                                   for r in these),
            "exact_and_clean": sum(not r["problems"] for r in these),
            "failures": sum(bool(r["problems"]) for r in these),
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--signals", default="INT,KILL", help="comma-separated, of INT and KILL; trial k gets the k-th, cyclically")
    parser.add_argument("--jobs", type=int, default=1, help="trials run side by side")
    parser.add_argument("--json", type=Path, default=REPO / "results" / "benchmarks" / "kill9_resumes.json")
    args = parser.parse_args()
    names = args.signals.split(",")
    if not names or any(n not in SIGNALS for n in names):
        parser.error(f"--signals: a comma-separated list of {', '.join(SIGNALS)}")
    for flag in ("trials", "iterations", "jobs"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be at least 1")

    draw = random.Random(args.seed)
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        reference = Path(tmp) / "reference"
        code, _, stderr = _train(reference, args.iterations, [])
        if code != 0:
            raise RuntimeError(stderr[-3000:])
        training_s = (reference / "learning_curve.png").stat().st_mtime - (reference / "config.json").stat().st_mtime
        print(f"reference: {args.iterations} iterations, {training_s:.1f} s from config.json to learning_curve.png", flush=True)
        expected = (_rows(reference), _files(reference))
        plan = [(trial, names[(trial - 1) % len(names)], draw.uniform(0.0, training_s)) for trial in range(1, args.trials + 1)]
        print(f"{'trial':>5} {'signal':>6} {'delay s':>8} {'exit':>5} {'rows':>5} {'cmds':>5}  left by the interrupt -> result", flush=True)
        results = []
        with ThreadPoolExecutor(args.jobs) as pool:
            for result in pool.map(lambda p: _trial(Path(tmp), *p, args.iterations, expected), plan):
                verdict = "exact, clean" if not result["problems"] else "FAILED: " + "; ".join(result["problems"])
                print(f"{result['trial']:>5} {result['signal']:>6} {result['delay_s']:>8.2f} {result['exit']:>5} {result['rows_logged']:>5} "
                      f"{result['commands']:>5}  {', '.join(result['left_by_interrupt']) or '-'} -> {verdict}", flush=True)
                results.append(result)
    summary = _summary(results)
    print(f"\n{'signal':>6} {'trials':>6} {'finished first':>14} {'partial save':>15} {'exact, clean':>12} {'failures':>8}")
    for row in summary:
        print(f"{row['signal']:>6} {row['trials']:>6} {row['finished_before_signal']:>14} {row['left_a_partial_save']:>15} "
              f"{row['exact_and_clean']:>12} {row['failures']:>8}")
    write_json(args.json, {
        "script": "benchmarks/kill9_resumes.py", "command": ARGS[2:], "iterations": args.iterations, "seed": args.seed,
        "signals": names, "jobs": args.jobs, "reference_training_s": round(training_s, 3), "wall_s": round(time.time() - started, 1),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "summary": summary, "trials": results,
    })
    return 1 if any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
