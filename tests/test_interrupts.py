"""Ctrl-C (``KeyboardInterrupt``) anywhere in a checkpoint write leaves a run that resumes, and
the next writer of a run folder removes the temporary files a killed writer left."""

import os

import pytest
import torch

from rspo_gym.atomic import remove_stale_temporaries
from rspo_gym.training import checkpoints
from rspo_gym.training.checkpoints import read_checkpoint, tensors_folder, write_checkpoint


def test_remove_stale_temporaries_removes_only_the_named_targets_temporaries(tmp_path):
    kept = [".metrics.csv.tmp", ".metrics.csv.0badc0de.tmp.bak", ".notes.txt.0badc0de.tmp", "metrics.csv", ".metrics.csv.0BADC0DE.tmp"]
    for name in [*kept, ".metrics.csv.0badc0de.tmp", ".learning_curve.png.12345678.tmp"]:
        (tmp_path / name).write_text("x")
    (tmp_path / ".out.abcdef01.tmp").mkdir()  # a staging folder, with what was staged in it
    (tmp_path / ".out.abcdef01.tmp" / "summary.json").write_text("{}")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    os.symlink(outside, tmp_path / ".out.fedcba98.tmp")  # a link is removed, never followed

    removed = remove_stale_temporaries(tmp_path, ["metrics.csv", "learning_curve.png", "out"])

    assert [p.name for p in removed] == [".learning_curve.png.12345678.tmp", ".metrics.csv.0badc0de.tmp", ".out.abcdef01.tmp",
                                         ".out.fedcba98.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)
    assert (outside / "precious").read_text() == "keep"
    assert remove_stale_temporaries(tmp_path, []) == [] and remove_stale_temporaries(tmp_path / "absent", ["out"]) == []


# ---------------------------------------------------------------- Ctrl-C at every step of a checkpoint write

#: The steps of a checkpoint write, by where they are looked up: a Ctrl-C can land just before
#: or just after each call (Python raises ``KeyboardInterrupt`` between two bytecodes).
STEPS = [(checkpoints.os, "replace"), (checkpoints.os, "fsync"), (checkpoints.shutil, "rmtree"),
         (checkpoints, "_write_shard"), (checkpoints, "_write_synced"), (checkpoints, "fsync_dir"), (checkpoints, "remove_stale")]


def _interrupting(monkeypatch, at: int | None) -> list[str]:
    """Wrap every step so that the ``at``-th boundary (before or after a call, counted from 1)
    raises ``KeyboardInterrupt``; the boundaries passed, by name."""
    passed: list[str] = []

    def boundary(name: str) -> None:
        passed.append(name)
        if len(passed) == at:
            raise KeyboardInterrupt

    def wrap(owner, name):
        function = getattr(owner, name)

        def wrapped(*args, **kwargs):
            boundary(f"before {name}")
            result = function(*args, **kwargs)
            boundary(f"after {name}")
            return result
        monkeypatch.setattr(owner, name, wrapped)

    for owner, name in STEPS:
        wrap(owner, name)
    return passed


def _state(iteration: int) -> dict:
    generator = torch.Generator().manual_seed(iteration)
    return {"iteration": iteration, "weights": [torch.randn(1000, generator=generator) for _ in range(3)]}  # 3 shards of 4 kB


def test_a_ctrl_c_at_every_step_of_a_checkpoint_write_leaves_the_old_or_the_new_checkpoint_whole(tmp_path, monkeypatch):
    old, new = _state(1), _state(2)
    with monkeypatch.context() as counting:
        boundaries = _interrupting(counting, None)
        write_checkpoint(tmp_path / "count" / "checkpoint.pt", old, {}, max_shard_size=4096)
        boundaries.clear()
        write_checkpoint(tmp_path / "count" / "checkpoint.pt", new, {}, max_shard_size=4096)
    assert "after replace" in boundaries and len(boundaries) > 20
    survivors = []
    for at, where in enumerate(boundaries, 1):
        path = write_checkpoint(tmp_path / str(at) / "checkpoint.pt", old, {}, max_shard_size=4096)
        with monkeypatch.context() as patch:
            _interrupting(patch, at)
            with pytest.raises(KeyboardInterrupt):
                write_checkpoint(path, new, {}, max_shard_size=4096)
        loaded = read_checkpoint(path)  # raised "... is missing" for a Ctrl-C right after the rename
        assert loaded["iteration"] in (1, 2), where
        expected = old if loaded["iteration"] == 1 else new
        assert all(map(torch.equal, loaded["weights"], expected["weights"])), where
        survivors.append(loaded["iteration"])
        write_checkpoint(path, _state(3), {}, max_shard_size=4096)  # the next save clears what the interrupted one left
        assert read_checkpoint(path)["iteration"] == 3 and len(list(tensors_folder(path).iterdir())) == 1, where
        assert not path.with_name("checkpoint.pt.tmp").exists(), where
    switch = boundaries.index("after replace")
    assert survivors == [1] * switch + [2] * (len(boundaries) - switch)  # the rename is the one step that switches


# ---------------------------------------------------------------- what a killed writer left

LEFT_BY_A_KILL = [".config.json.0123abcd.tmp", ".metrics.jsonl.89abcdef.tmp", ".metrics.csv.00ff00ff.tmp",
                  ".learning_curve.png.deadbeef.tmp", "checkpoint.pt.tmp"]
USERS = [".notes.txt.0123abcd.tmp", "metrics.csv.bak"]  # not rspo-gym's temporary names: kept


def _learn(out, iterations: int, **flags) -> None:
    from rspo_gym import GRPOTrainer

    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="drrn", num_groups=1, group_size=2, max_turns=2, eval_every=0, seed=5,
                          progress=False, output_dir=str(out))
    trainer.learn(iterations, **flags)
    trainer.close()


@pytest.mark.slow
def test_the_next_writer_of_a_run_folder_removes_the_temporary_files_a_killed_one_left(tmp_path):
    threads = torch.get_num_threads()
    try:
        _learn(tmp_path, 1)
        for flags in ({"resume": True}, {"overwrite": True}):
            for name in LEFT_BY_A_KILL + USERS:
                (tmp_path / name).write_text("left")
            _learn(tmp_path, 2, **flags)
            names = {p.name for p in tmp_path.iterdir()}
            assert names.isdisjoint(LEFT_BY_A_KILL) and names >= set(USERS), flags
    finally:
        torch.set_num_threads(threads)  # the scorer's run sets its own


# ---------------------------------------------------------------- what Ctrl-C's line says

def test_ctrl_c_before_the_first_checkpoint_says_a_command_that_then_runs(tmp_path, monkeypatch, capsys):
    """The folder holds the run's config.json and first row, no checkpoint: the same command again
    is refused (the folder holds a run), so the line says --overwrite."""
    from rspo_gym.cli import main
    from rspo_gym.training.trainer import Trainer

    def interrupted(self, path=None):
        raise KeyboardInterrupt

    command = ["train", "--model", "drrn", "--iterations", "1", "--num-groups", "1", "--group-size", "2", "--max-turns", "2",
               "--set", "eval_every=0", "--set", "progress=false", "--output-dir", str(tmp_path / "run")]
    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "save_checkpoint", interrupted)
        assert main(command) == 130
    assert (tmp_path / "run" / "config.json").is_file() and not (tmp_path / "run" / "checkpoint.pt").exists()
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rspo-gym train: interrupted; no checkpoint was written yet: ")
    advised = command + (["--overwrite"] if "--overwrite" in line else [])
    assert main(advised) == 0, capsys.readouterr().err  # was exit 2: "... holds a run (config.json, metrics.jsonl, ...)"
    assert (tmp_path / "run" / "checkpoint.pt").is_file()
