"""What the drrn fast path costs on an idle and on a busy CPU: wall and CPU seconds, before / after.

The README's fast-path command, ``rspo-gym train --algo rspo --base grpo --iterations 10 --model
drrn``, each time in a fresh process (a new run folder), with no OpenMP variables in its
environment (the user's case), first on the machine as it is, then beside ``--busy`` processes
that each keep a core busy (``while True: pass``), started by this script and stopped after.
torch's threads that wait for a core another process holds spin on theirs meanwhile: CPU seconds
count that, wall seconds the waiting.

``--baseline-src`` names a checkout of another commit (``git worktree add --detach PATH COMMIT``,
or ``git archive COMMIT rspo_gym | tar -x -C PATH``): its rows are "before", measured in the same
run, interleaved with this checkout's; ``--variables`` adds the baseline under ``OMP_NUM_THREADS=1``
(what docs/cli.md advised) and under ``OMP_WAIT_POLICY=PASSIVE`` (the wait policy alone).

    python benchmarks/thread_contention.py --baseline-src /tmp/before --busy 2 --repeats 2

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
COMMAND = ["-m", "rspo_gym", "train", "--algo", "rspo", "--base", "grpo", "--iterations", "10", "--model", "drrn"]
#: Variables that choose torch's threads and how they wait: none are inherited, so each row runs as
#: a user's shell without them would, plus the row's own.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def measure(src: Path, extra_env: dict[str, str], scratch: Path) -> dict[str, float]:
    """One run of the command from ``src``: its wall and CPU seconds (user + system, its threads)."""
    env = {key: value for key, value in os.environ.items() if key not in THREAD_VARIABLES}
    env.update(extra_env, PYTHONPATH=str(src), HF_HUB_OFFLINE="1")
    out = tempfile.mkdtemp(dir=scratch)
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, *COMMAND, "--output-dir", out], env=env, cwd=scratch,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{src}: exit {os.waitstatus_to_exitcode(status)}: {process.stderr.read()[-2000:]}")
    process.stderr.close()
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime}


def load_average() -> float:
    return os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-src", type=Path, default=None, help="a checkout of the commit to compare with")
    parser.add_argument("--busy", type=int, default=2, help="busy-loop processes of the loaded measurement")
    parser.add_argument("--variables", action="store_true",
                        help="also the baseline under OMP_NUM_THREADS=1 and under OMP_WAIT_POLICY=PASSIVE: each change alone")
    parser.add_argument("--repeats", type=int, default=1, help="runs per row and load (the table shows their median)")
    parser.add_argument("--out", type=Path, default=Path("results/thread_contention.json"))
    args = parser.parse_args()
    rows = [("this checkout", ROOT, {})]
    if args.baseline_src is not None:
        before = [("before", {})] + ([("before, OMP_NUM_THREADS=1", {"OMP_NUM_THREADS": "1"}),
                                      ("before, OMP_WAIT_POLICY=PASSIVE", {"OMP_WAIT_POLICY": "PASSIVE"})] if args.variables else [])
        rows = [(name, args.baseline_src.resolve(), extra) for name, extra in before] + rows
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="thread-contention-") as scratch:
        for load in ("as is", "busy"):
            spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy if load == "busy" else 0)]
            try:
                time.sleep(1.0 if spinners else 0.0)
                runs: dict[str, list[dict]] = {name: [] for name, _, _ in rows}
                loads = []
                for _ in range(args.repeats):
                    for name, src, extra in rows:  # interleaved: a change in the machine's load hits every row alike
                        loads.append(load_average())
                        runs[name].append(measure(src, extra, Path(scratch)))
                        print(f"{load:6s} {name:32s} {runs[name][-1]['wall_s']:7.1f} s wall {runs[name][-1]['cpu_s']:7.1f} s CPU", flush=True)
            finally:
                for spinner in spinners:
                    spinner.kill()
                    spinner.wait()
            for name, _, extra in rows:
                results.append({"load": "machine as is" if load == "as is" else f"+ {args.busy} busy loops", "row": name, "env": extra,
                                "wall_s": statistics.median(r["wall_s"] for r in runs[name]),
                                "cpu_s": statistics.median(r["cpu_s"] for r in runs[name]),
                                "runs": runs[name], "load_average_1min": statistics.mean(loads)})
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo", encoding="utf-8") if line.startswith("model name")), "?")
    print(f"\n`rspo-gym {' '.join(COMMAND[2:])}`, {os.cpu_count()} CPUs ({cpu}), median of {args.repeats}:\n")
    print("| load | code | wall s | CPU s | 1-min load average |\n|---|---|---|---|---|")
    for r in results:
        print(f"| {r['load']} | {r['row']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['load_average_1min']:.1f} |")
    write_json(args.out, {"command": COMMAND[2:], "cpu": cpu, "cpus": os.cpu_count(), "busy": args.busy, "rows": results})


if __name__ == "__main__":
    main()
