"""What torch's threads cost on an idle and on a busy CPU, for the command line and the Python API.

Three workloads, each time in a fresh process with no OpenMP variables in its environment (the
user's case), first on the machine as it is, then beside ``--busy`` processes that each keep a core
busy (``while True: pass``), started by this script and stopped after:

- ``cli-drrn``: the README's fast-path command, ``rspo-gym train --algo rspo --base grpo
  --iterations 10 --model drrn`` (a new run folder each time);
- ``api-trainer``: the README's trainer example as a script (``RSPOTrainer`` on ``tiny-alfworld``,
  ``pick_and_place_simple``), ``learn(--api-iterations)`` with ``eval_every=0``: torch's default
  threads, as a user's script runs it;
- ``quickstart`` (opt-in: 5-7 min idle, much longer busy): ``rspo-gym quickstart``.

torch's threads that wait for a core another process holds spin on theirs meanwhile (unless
``OMP_WAIT_POLICY=PASSIVE``, which ``import rspo_gym`` sets): CPU seconds count that, wall seconds
the waiting. The table gives each row's busy wall time over its idle one: beside 6 busy processes
on 2 cores a fair share is about 3.5x. Every run records the 1-minute load average before it:
"idle" is the machine as it is, so a load above about 1 there means the idle row was not idle.

``--baseline-src`` names a checkout of another commit (``git worktree add --detach PATH COMMIT``,
or ``git archive COMMIT rspo_gym | tar -x -C PATH``): its rows are "before", measured in the same
run, interleaved with this checkout's; ``--variables`` adds the baseline under ``OMP_NUM_THREADS=1``
and under ``OMP_WAIT_POLICY=PASSIVE`` (each change alone). ``--small`` shrinks every workload to a
smoke test (seconds, not minutes).

    python benchmarks/thread_contention.py --busy 6 --workloads cli-drrn api-trainer
    python benchmarks/thread_contention.py --baseline-src /tmp/before --busy 6 --repeats 2

Prints a markdown table (median of the repeats) and writes JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: The README's trainer example, ``eval_every=0``; argv: output folder, iterations.
API_TRAINER = """
import sys
from rspo_gym import RSPOTrainer
from rspo_gym.quickstart import alfworld_task_ids as tasks
trainer = RSPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", swap="rank", learning_rate=3e-4, max_turns=25,
                      num_groups=4, train_task_ids=tasks("train", "pick_and_place_simple", 64), eval_every=0,
                      eval_task_ids=tasks("valid_seen", "pick_and_place_simple", 35), eval_temperature=1.0,
                      output_dir=sys.argv[1], progress=False)
trainer.learn(iterations=int(sys.argv[2]))
"""


def workload_command(workload: str, out: str, small: bool, api_iterations: int) -> list[str]:
    """The Python arguments of one run of ``workload`` writing to ``out``."""
    if workload == "cli-drrn":
        return ["-m", "rspo_gym", "train", "--algo", "rspo", "--base", "grpo", "--iterations", "2" if small else "10",
                "--model", "drrn", "--output-dir", out]
    if workload == "api-trainer":
        return ["-c", API_TRAINER, out, str(api_iterations)]
    small_run = ["--iterations", "1", "--train-tasks", "2", "--eval-tasks", "2", "--eval-episodes", "1", "--eval-every", "0"]
    return ["-m", "rspo_gym", "quickstart", "--output-dir", out, *(small_run if small else [])]


WORKLOADS = ("cli-drrn", "api-trainer", "quickstart")
#: Variables that choose torch's threads and how they wait: none are inherited, so each row runs as
#: a user's shell without them would, plus the row's own.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def measure(src: Path, extra_env: dict[str, str], scratch: Path, command: list[str]) -> dict[str, float]:
    """One run of ``command`` (its output folder in ``scratch``) from ``src``: its wall and CPU
    seconds (user + system, its threads) and the 1-minute load average before it."""
    env = {key: value for key, value in os.environ.items() if key not in THREAD_VARIABLES}
    env.update(extra_env, PYTHONPATH=str(src), HF_HUB_OFFLINE="1")
    load = load_average()
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, *command], env=env, cwd=scratch,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{src}: exit {os.waitstatus_to_exitcode(status)}: {process.stderr.read()[-2000:]}")
    process.stderr.close()
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "load_average_1min": load}


def load_average() -> float:
    return os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=["cli-drrn", "api-trainer"])
    parser.add_argument("--api-iterations", type=int, default=1, help="learn() iterations of the api-trainer workload")
    parser.add_argument("--small", action="store_true", help="every workload at a smoke-test size")
    parser.add_argument("--baseline-src", type=Path, default=None, help="a checkout of the commit to compare with")
    parser.add_argument("--busy", type=int, default=6, help="busy-loop processes of the loaded measurement")
    parser.add_argument("--variables", action="store_true",
                        help="also the baseline under OMP_NUM_THREADS=1 and under OMP_WAIT_POLICY=PASSIVE: each change alone")
    parser.add_argument("--repeats", type=int, default=1, help="runs per row and load (the table shows their median)")
    parser.add_argument("--out", type=Path, default=Path("results/thread_contention.json"))
    args = parser.parse_args()
    codes = [("this checkout", ROOT, {})]
    if args.baseline_src is not None:
        before = [("before", {})] + ([("before, OMP_NUM_THREADS=1", {"OMP_NUM_THREADS": "1"}),
                                      ("before, OMP_WAIT_POLICY=PASSIVE", {"OMP_WAIT_POLICY": "PASSIVE"})] if args.variables else [])
        codes = [(name, args.baseline_src.resolve(), extra) for name, extra in before] + codes
    rows = [(workload, *code) for workload in args.workloads for code in codes]
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="thread-contention-") as scratch:
        for load in ("as is", "busy"):
            spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy if load == "busy" else 0)]
            try:
                time.sleep(1.0 if spinners else 0.0)
                runs: dict[tuple[str, str], list[dict]] = {(workload, name): [] for workload, name, _, _ in rows}
                for _ in range(args.repeats):
                    for workload, name, src, extra in rows:  # interleaved: a change in the machine's load hits every row alike
                        command = workload_command(workload, tempfile.mkdtemp(dir=scratch), args.small, args.api_iterations)
                        run = measure(src, extra, Path(scratch), command)
                        runs[(workload, name)].append(run)
                        print(f"{load:6s} {workload:12s} {name:32s} {run['wall_s']:7.1f} s wall {run['cpu_s']:7.1f} s CPU "
                              f"load {run['load_average_1min']:.1f}", flush=True)
            finally:
                for spinner in spinners:
                    spinner.kill()
                    spinner.wait()
            for workload, name, _, extra in rows:
                done = runs[(workload, name)]
                results.append({"load": "machine as is" if load == "as is" else f"+ {args.busy} busy loops", "workload": workload,
                                "row": name, "env": extra, "wall_s": statistics.median(r["wall_s"] for r in done),
                                "cpu_s": statistics.median(r["cpu_s"] for r in done), "runs": done,
                                "load_average_1min": statistics.mean(r["load_average_1min"] for r in done)})
    idle = {(r["workload"], r["row"]): r["wall_s"] for r in results if r["load"] == "machine as is"}
    for r in results:
        r["wall_over_idle"] = r["wall_s"] / idle[(r["workload"], r["row"])]
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo", encoding="utf-8") if line.startswith("model name")), "?")
    print(f"\n{os.cpu_count()} CPUs ({cpu}), median of {args.repeats}{', small sizes' if args.small else ''}:\n")
    print("| workload | load | code | wall s | × its idle wall | CPU s | 1-min load average before |\n|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['workload']} | {r['load']} | {r['row']} | {r['wall_s']:.1f} | {r['wall_over_idle']:.1f} | {r['cpu_s']:.1f} | "
              f"{r['load_average_1min']:.1f} |")
    write_json(args.out, {"workloads": args.workloads, "small": args.small, "api_iterations": args.api_iterations, "cpu": cpu,
                          "cpus": os.cpu_count(), "busy": args.busy, "rows": results})


if __name__ == "__main__":
    main()
