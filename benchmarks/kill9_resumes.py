"""Random ``kill -9`` and ``--resume``: a run killed at random moments and resumed each time ends
with the uninterrupted run's record (every metrics row but wall times) and its weights and AdamW
state, bit for bit.

One uninterrupted reference run, then ``--trials`` runs, each SIGKILLed a random delay after its
training starts (``config.json`` appears; uniform over the reference's training time, seeded by
``--seed``: the moment lands anywhere, a rollout, an update, a metrics write or a checkpoint write)
and resumed with ``--resume`` until it finishes. The fast drrn policy keeps a trial to seconds.

    python benchmarks/kill9_resumes.py --trials 10

Prints one line per trial (the delay, the iteration it was killed at, exact or not) and exits 1
when any trial is not exact.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}
ARGS = ["-m", "rspo_gym", "train", "--model", "drrn", "--algo", "grpo", "--num-groups", "2", "--group-size", "2",
        "--max-turns", "5", "--seed", "5", "--set", "eval_every=0", "--set", "progress=false"]


def _train(out: Path, iterations: int, *extra: str, kill_after: float | None = None) -> tuple[int, float]:
    """Run ``rspo-gym train``; SIGKILL it ``kill_after`` seconds after its training starts
    (``config.json`` appears) when given. Its exit code and its training time."""
    command = [sys.executable, *ARGS, "--iterations", str(iterations), "--output-dir", str(out), *extra]
    process = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while not (out / "config.json").is_file() and process.poll() is None:
        time.sleep(0.05)
    started = time.perf_counter()
    try:
        process.wait(timeout=kill_after)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()
    if process.returncode not in (0, -signal.SIGKILL):
        raise RuntimeError(process.stderr.read().decode()[-3000:])
    process.stderr.close()
    return process.returncode, time.perf_counter() - started


def _rows(out: Path) -> list[dict]:
    if not (out / "metrics.jsonl").is_file():
        return []
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in rows]


def _same_tensors(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_tensors(a[k], b[k]) for k in a)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from rspo_gym.training.checkpoints import read_checkpoint

    draw = random.Random(args.seed)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        reference = Path(tmp) / "reference"
        _, training_s = _train(reference, args.iterations)
        print(f"reference: {args.iterations} iterations, {training_s:.1f} s of training", flush=True)
        expected_rows, expected = _rows(reference), read_checkpoint(reference / "checkpoint.pt")
        for trial in range(1, args.trials + 1):
            out = Path(tmp) / f"trial-{trial}"
            delay = draw.uniform(0.0, training_s)
            code, _ = _train(out, args.iterations, kill_after=delay)
            killed_at = len(_rows(out))
            resumes = 0
            while code != 0:
                extra = ["--resume"] if (out / "config.json").is_file() else ["--overwrite"]  # killed before config.json
                code, _ = _train(out, args.iterations, *extra)
                resumes += 1
            state = read_checkpoint(out / "checkpoint.pt")
            exact = _rows(out) == expected_rows and all(_same_tensors(state[k], expected[k]) for k in ("policy", "optimizer"))
            failures += not exact
            when = "finished before the kill" if resumes == 0 else f"killed with {killed_at} rows logged"
            print(f"trial {trial}: kill {delay:.1f} s into training, {when}, {resumes} resume(s): {'exact' if exact else 'NOT EXACT'}",
                  flush=True)
    print(f"{args.trials - failures}/{args.trials} exact")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
