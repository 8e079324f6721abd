"""``kill -9`` during training, then ``rspo-gym train --resume``: the run's record and weights
equal the uninterrupted run's; ``kill -9`` during a checkpoint write leaves a whole checkpoint.

A training subprocess (the real command line) SIGKILLs itself at a named point of a named
iteration, installed by wrapping ``Trainer.save_checkpoint`` (and the checkpoint writer's file
writes), so the kill is real and lands at the same place every time. Its checkpoints are cut into
1 MB shards, a dozen for the tiny model. One run is killed five times in a row:

1. between the metrics row of iteration 1 and the first checkpoint (no checkpoint yet);
2. between the metrics row of iteration 2 and its checkpoint (the row is in the file, the
   checkpoint is iteration 1's);
3. at the checkpoint boundary right after iteration 3's checkpoint;
4. half-way through writing the second tensor shard of iteration 4's checkpoint;
5. after writing every shard of iteration 4's checkpoint, before ``checkpoint.pt``;

and each time resumed by the next command; the last resume runs to the end in this process.
A second test kills the checkpoint writer alone at each point of a write, ``checkpoint.pt.tmp``
half written and the rename done but the previous shards not yet removed included.
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

from rspo_gym.training.checkpoints import read_checkpoint, tensors_folder, write_checkpoint  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

SETTINGS = ["num_groups=1", "group_size=2", "max_turns=1", "history_length=0", "eval_every=2", "eval_tasks=1", "progress=false"]
ARGS = ["train", "--algo", "grpo", "--model", "tiny-untrained", "--iterations", "4", "--seed", "3"] + [a for s in SETTINGS for a in ("--set", s)]

#: ``arm()`` makes the next checkpoint write SIGKILL its process at point ``point``: half-way
#: through its second shard, after its shards, half-way through ``checkpoint.pt.tmp``, or after
#: the rename, before the previous checkpoint's shards are removed.
DYING_WRITE = """
import os, signal
from rspo_gym.training import checkpoints

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def dying_write(file, parts, write=checkpoints._write_synced):
    data = b"".join(parts)
    if (point == "while_writing_shards" and file.name.startswith("tensors-00002-")) or (
        point == "while_writing_checkpoint_file" and file.suffix == ".tmp"
    ):
        with open(file, "wb") as f:
            f.write(data[: len(data) // 2])
        die()
    if point == "before_checkpoint_file" and file.suffix == ".tmp":
        die()
    return write(file, [data])

def arm():
    checkpoints._write_synced = dying_write
    if point == "before_removing_old_shards":
        checkpoints.remove_stale = lambda root, keep: die()
"""

#: Runs the command line (``sys.argv[3:]``) with 1 MB shards and SIGKILLs the process at point
#: ``sys.argv[1]`` of iteration ``sys.argv[2]``.
KILLER = """
import sys
from rspo_gym.training.trainer import Trainer
from rspo_gym.cli import main

point, iteration = sys.argv[1], int(sys.argv[2])
""" + DYING_WRITE + """
checkpoints.MAX_SHARD_SIZE = 1 << 20
save = Trainer.save_checkpoint

def save_checkpoint(self, path=None):
    if self.iteration == iteration and point == "before_checkpoint":
        die()
    if self.iteration == iteration:
        arm()
    written = save(self, path)
    if self.iteration == iteration and point == "after_checkpoint":
        die()
    return written

Trainer.save_checkpoint = save_checkpoint
main(sys.argv[3:])
"""

#: Reads checkpoint ``sys.argv[2]``, adds one to its iteration and writes it back (4 kB shards),
#: SIGKILLed at point ``sys.argv[1]``.
WRITER = """
import sys
point, path = sys.argv[1], sys.argv[2]
""" + DYING_WRITE + """
state = checkpoints.read_checkpoint(path)
state["iteration"] += 1
arm()
checkpoints.write_checkpoint(path, state, {}, max_shard_size=4096)
"""

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}


def _killed_run(point: str, iteration: int, out: Path, *extra: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", KILLER, point, str(iteration), *ARGS, "--output-dir", str(out), *extra],
        cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]


def _fresh_run(out: Path, *extra: str) -> None:
    """``rspo-gym train`` in a fresh process, as every killed run is: a process whose torch has had its
    thread count set and put back (earlier tests) computes other float bits than a fresh one on some
    CPUs (seen on an Intel Xeon: MKL's thread settings), and a resume is always a new process."""
    done = subprocess.run([sys.executable, "-m", "rspo_gym", *ARGS, "--output-dir", str(out), *extra],
                          cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def _tags(out: Path) -> list[Path]:
    return sorted(tensors_folder(out / "checkpoint.pt").iterdir())


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


@pytest.mark.slow
def test_runs_killed_at_every_point_resume_to_the_uninterrupted_record_and_weights(tmp_path):
    full, cut = tmp_path / "full", tmp_path / "cut"
    _fresh_run(full)

    _killed_run("before_checkpoint", 1, cut)
    assert [r["iteration"] for r in _rows(cut)] == [1] and not (cut / "checkpoint.pt").exists()
    _killed_run("before_checkpoint", 2, cut, "--resume")
    assert [r["iteration"] for r in _rows(cut)] == [1, 2] and read_checkpoint(cut / "checkpoint.pt")["iteration"] == 1
    _killed_run("after_checkpoint", 3, cut, "--resume")
    assert [r["iteration"] for r in _rows(cut)] == [1, 2, 3] and read_checkpoint(cut / "checkpoint.pt")["iteration"] == 3
    assert len(_tags(cut)) == 1
    _killed_run("while_writing_shards", 4, cut, "--resume")
    assert [r["iteration"] for r in _rows(cut)] == [1, 2, 3, 4] and read_checkpoint(cut / "checkpoint.pt")["iteration"] == 3
    orphan = next(tag for tag in _tags(cut) if tag.name.startswith("iteration-4-"))
    assert sorted(f.name for f in orphan.iterdir())[-1].startswith("tensors-00002-")  # killed in its second shard
    _killed_run("before_checkpoint_file", 4, cut, "--resume")
    assert [r["iteration"] for r in _rows(cut)] == [1, 2, 3, 4] and read_checkpoint(cut / "checkpoint.pt")["iteration"] == 3
    assert len(_tags(cut)) == 3 and not (cut / "checkpoint.pt.tmp").exists()  # iteration 3's and two orphans

    _fresh_run(cut, "--resume")
    assert [tag.name[:12] for tag in _tags(cut)] == ["iteration-4-"]  # the orphans are removed
    assert _without_times(_rows(cut)) == _without_times(_rows(full))
    assert [r["iteration"] for r in _rows(cut)] == [1, 2, 3, 4]
    resumed, uninterrupted = read_checkpoint(cut / "checkpoint.pt"), read_checkpoint(full / "checkpoint.pt")
    for part in ("policy", "optimizer"):
        assert _same_tensors(resumed[part], uninterrupted[part]), part


def test_a_checkpoint_write_killed_at_any_point_leaves_the_old_or_the_new_checkpoint_whole(tmp_path):
    generator = torch.Generator().manual_seed(0)
    state = {"iteration": 1, "weights": [torch.randn(1000, generator=generator) for _ in range(4)]}  # 4 shards of 4 kB
    survivor = {"while_writing_shards": 1, "before_checkpoint_file": 1, "while_writing_checkpoint_file": 1, "before_removing_old_shards": 2}
    writers = {}
    for point in survivor:  # the killed writers run side by side
        path = write_checkpoint(tmp_path / point / "checkpoint.pt", state, {}, max_shard_size=4096)
        writers[point] = subprocess.Popen([sys.executable, "-c", WRITER, point, str(path)], cwd=REPO, env=ENV, stderr=subprocess.PIPE)
    for point, iteration in survivor.items():
        assert writers[point].wait(timeout=600) == -signal.SIGKILL, writers[point].stderr.read()[-2000:]
        path = tmp_path / point / "checkpoint.pt"
        loaded = read_checkpoint(path)
        assert loaded["iteration"] == iteration and all(map(torch.equal, loaded["weights"], state["weights"])), point
        assert len(list(tensors_folder(path).iterdir())) == 2, point  # the checkpoint's shards and the other write's
        assert (tmp_path / point / "checkpoint.pt.tmp").exists() == (point == "while_writing_checkpoint_file"), point
        write_checkpoint(path, {**state, "iteration": 3}, {}, max_shard_size=4096)
        assert read_checkpoint(path)["iteration"] == 3 and len(list(tensors_folder(path).iterdir())) == 1, point
        assert not (tmp_path / point / "checkpoint.pt.tmp").exists()
