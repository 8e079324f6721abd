"""Wall time and per-type success of ``rspo-gym eval`` on real ALFWorld games.

Runs the command as a user does (``rspo-gym eval --games DIR --json ...`` in a subprocess, so
model loading and start-up count), then prints its table (success per task type, as verl-agent's
and GiGPO's tables) and the wall time, and writes both with the machine to JSON::

    python benchmarks/eval_real_games.py                                  # tiny-alfworld on valid_seen
    python benchmarks/eval_real_games.py --tasks 20 --max-turns 20        # a shorter check

The default games are ``../shared/data/alfworld/json_2.1.1/valid_seen`` beside the repository
(ALFWorld's seen validation games; the papers' tables are on ``valid_unseen``, which this data
does not include). Writes ``results/benchmarks/eval_real_games.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import write_json  # noqa: E402
from rspo_gym.training.eval_report import ALFWORLD_COLUMNS, Tally, alfworld_table  # noqa: E402

DEFAULT_GAMES = ROOT.parent / "shared" / "data" / "alfworld" / "json_2.1.1" / "valid_seen"


def evaluate(model: str, games: Path, tasks: int | None, max_turns: int | None, extra: list[str]) -> tuple[dict, float, float]:
    """``rspo-gym eval``'s JSON report, its wall time and its CPU time (user + system) in seconds:
    on a shared machine the wall time grows with the load, the CPU time much less."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "eval.json"
        command = [sys.executable, "-m", "rspo_gym", "eval", "--model", model, "--games", str(games), "--json", str(report),
                   "--set", "progress=false", *extra]
        command += ["--tasks", str(tasks)] if tasks else []
        command += ["--max-turns", str(max_turns)] if max_turns else []
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            sys.exit(f"rspo-gym eval failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
        return json.loads(report.read_text(encoding="utf-8")), wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-alfworld", help="any model rspo-gym eval takes (default: tiny-alfworld)")
    parser.add_argument("--games", type=Path, default=DEFAULT_GAMES, help="folder of game.tw-pddl files")
    parser.add_argument("--tasks", type=int, default=None, help="the first TASKS games only (default: all)")
    parser.add_argument("--max-turns", type=int, default=None, help="turn limit (default: the env's, 50)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to rspo-gym eval")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "eval_real_games.json")
    args = parser.parse_args()
    if not args.games.is_dir():
        sys.exit(f"no games at {args.games}: pass --games DIR")
    report, wall, cpu = evaluate(args.model, args.games, args.tasks, args.max_turns, [x for kv in args.set for x in ("--set", kv)])
    tallies = {t: Tally(v["episodes"], v["successes"]) for t, v in report["task_types"].items()}
    print(f"{args.model} on {report['episodes']} games of {args.games.name}, max_turns {report['max_turns']}, "
          f"temperature {report['temperature']}")
    print(alfworld_table(tallies))
    print(f"wall time {wall:.1f} s ({wall / report['episodes']:.2f} s per game), CPU time {cpu:.1f} s, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    write_json(args.out, {
        "model": args.model, "games": str(args.games), "episodes": report["episodes"], "max_turns": report["max_turns"],
        "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "success_percent": {label: report["task_types"][t]["success_percent"] for t, label in ALFWORLD_COLUMNS},
        "games_per_type": {label: report["task_types"][t]["episodes"] for t, label in ALFWORLD_COLUMNS},
        "all_percent": report["overall"]["success_percent"], "report": report,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_average_after": os.getloadavg()[0]},
    })


if __name__ == "__main__":
    main()
