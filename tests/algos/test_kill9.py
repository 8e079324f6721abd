"""``kill -9`` during training, then ``rspo-gym train --resume``: the run's record and weights
equal the uninterrupted run's.

A training subprocess (the real command line) SIGKILLs itself at a named point of a named
iteration, installed by wrapping ``Trainer.save_checkpoint`` (and the checkpoint writer), so the
kill is real and lands at the same place every time. One run is killed four times in a row:

1. between the metrics row of iteration 1 and the first checkpoint (no checkpoint yet);
2. between the metrics row of iteration 2 and its checkpoint (the row is in the file, the
   checkpoint is iteration 1's);
3. at the checkpoint boundary right after iteration 3's checkpoint;
4. half-way through writing iteration 4's checkpoint (``checkpoint.pt.tmp`` is cut short);

and each time resumed by the next command; the last resume runs to the end in this process.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from rspo_gym.algos.checkpoints import read_checkpoint  # noqa: E402
from rspo_gym.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

SETTINGS = ["num_groups=1", "group_size=2", "max_turns=1", "history_length=0", "eval_every=2", "eval_tasks=1", "progress=false"]
ARGS = ["train", "--algo", "grpo", "--model", "tiny-untrained", "--iterations", "4", "--seed", "3"] + [a for s in SETTINGS for a in ("--set", s)]

#: Runs the command line (``sys.argv[3:]``) and SIGKILLs the process at point ``sys.argv[1]`` of
#: iteration ``sys.argv[2]``.
KILLER = """
import os, signal, sys
from rspo_gym.algos import checkpoints
from rspo_gym.algos.trainer import Trainer
from rspo_gym.cli import main

point, iteration = sys.argv[1], int(sys.argv[2])
save, write = Trainer.save_checkpoint, checkpoints._HashingWriter.write

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def write_then_die(self, data):
    written = write(self, data)
    if self.count > 4096:
        die()
    return written

def save_checkpoint(self, path=None):
    if self.iteration == iteration and point == "before_checkpoint":
        die()
    if self.iteration == iteration and point == "while_writing_checkpoint":
        checkpoints._HashingWriter.write = write_then_die
    written = save(self, path)
    if self.iteration == iteration and point == "after_checkpoint":
        die()
    return written

Trainer.save_checkpoint = save_checkpoint
main(sys.argv[3:])
"""


def _killed_run(point: str, iteration: int, out: Path, *extra: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", KILLER, point, str(iteration), *ARGS, "--output-dir", str(out), *extra],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _without_times(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in rows]


def _same_tensors(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_tensors(a[k], b[k]) for k in a)
    return True  # non-tensor leaves (history, buffer) are compared through metrics.jsonl


def test_runs_killed_at_every_point_resume_to_the_uninterrupted_record_and_weights(tmp_path):
    full, cut = tmp_path / "full", tmp_path / "cut"
    assert main([*ARGS, "--output-dir", str(full)]) == 0

    _killed_run("before_checkpoint", 1, cut)
    assert [r["iteration"] for r in _rows(cut)] == [1] and not (cut / "checkpoint.pt").exists()
    _killed_run("before_checkpoint", 2, cut, "--resume")
    assert [r["iteration"] for r in _rows(cut)] == [1, 2] and read_checkpoint(cut / "checkpoint.pt")["iteration"] == 1
    _killed_run("after_checkpoint", 3, cut, "--resume")
    assert [r["iteration"] for r in _rows(cut)] == [1, 2, 3] and read_checkpoint(cut / "checkpoint.pt")["iteration"] == 3
    _killed_run("while_writing_checkpoint", 4, cut, "--resume")
    assert [r["iteration"] for r in _rows(cut)] == [1, 2, 3, 4] and read_checkpoint(cut / "checkpoint.pt")["iteration"] == 3
    assert (cut / "checkpoint.pt.tmp").exists()

    assert main([*ARGS, "--output-dir", str(cut), "--resume"]) == 0
    assert _without_times(_rows(cut)) == _without_times(_rows(full))
    assert [r["iteration"] for r in _rows(cut)] == [1, 2, 3, 4]
    resumed, uninterrupted = read_checkpoint(cut / "checkpoint.pt"), read_checkpoint(full / "checkpoint.pt")
    for part in ("policy", "optimizer"):
        assert _same_tensors(resumed[part], uninterrupted[part]), part
