"""Ctrl-C (``KeyboardInterrupt``) anywhere in a checkpoint write leaves a run that resumes, and
the next writer of a run folder removes the temporary files a killed writer left."""

import os
import shutil

import pytest
import torch

from rspo_gym.atomic import atomic_folder, remove_stale_temporaries, restore_swapped_folders
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


def _save_folder(path, version: int, interrupt_at: int | None = None) -> int:
    """Save a 3-file folder of ``version`` through ``atomic_folder``, raising Ctrl-C at its
    ``interrupt_at``-th step (a file written, a rename, a removal)."""
    steps = {"n": 0}

    def step() -> None:
        steps["n"] += 1
        if steps["n"] == interrupt_at:
            raise KeyboardInterrupt

    real_rename, real_rmtree = os.rename, shutil.rmtree

    def rename(*args, **kwargs):
        step()
        return real_rename(*args, **kwargs)

    def rmtree(*args, **kwargs):
        step()
        return real_rmtree(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "rename", rename)
        patch.setattr(shutil, "rmtree", rmtree)
        with atomic_folder(path) as staging:
            for name in ("config.json", "weights.bin", "tokenizer.json"):
                (staging / name).write_text(f"{name} {version}")
                step()
    return steps["n"]


def test_a_ctrl_c_at_every_step_of_a_folder_save_leaves_the_old_or_the_new_folder_whole(tmp_path):
    (tmp_path / "count").mkdir()
    _save_folder(tmp_path / "count" / "policy", 1)
    total = _save_folder(tmp_path / "count" / "policy", 2)
    assert total == 6  # three files, the old folder aside, the new one in, the old one removed
    seen = []
    for at in range(1, total + 1):
        folder = tmp_path / str(at)
        folder.mkdir()
        _save_folder(folder / "policy", 1)
        try:
            _save_folder(folder / "policy", 2, interrupt_at=at)
        except KeyboardInterrupt:
            pass
        restore_swapped_folders(folder, ["policy"])
        remove_stale_temporaries(folder, ["policy"])
        versions = {p.read_text().split()[1] for p in (folder / "policy").iterdir()}
        assert len(versions) == 1 and len(list((folder / "policy").iterdir())) == 3, at  # one whole version
        assert [p.name for p in folder.iterdir()] == ["policy"], at  # nothing left beside it
        seen.append(versions.pop())
    assert seen == ["1"] * 5 + ["2"]  # the second rename is the one step that switches


def test_a_kill_between_the_two_renames_gets_the_previous_folder_back(tmp_path):
    (tmp_path / ".policy.0123abcd.old").mkdir()
    (tmp_path / ".policy.0123abcd.old" / "weights.bin").write_text("previous")
    (tmp_path / "adapter").mkdir()
    (tmp_path / ".adapter.89abcdef.old").mkdir()  # the swap went through: only the removal was left
    assert restore_swapped_folders(tmp_path, ["policy", "adapter"]) == [tmp_path / "policy"]
    assert (tmp_path / "policy" / "weights.bin").read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapter", "policy"]


# ---------------------------------------------------------------- what a killed writer left

LEFT_BY_A_KILL = [".config.json.0123abcd.tmp", ".metrics.jsonl.89abcdef.tmp", ".metrics.csv.00ff00ff.tmp",
                  ".learning_curve.png.deadbeef.tmp", "checkpoint.pt.tmp", ".policy.0badf00d.tmp", ".transfer.json.12345678.tmp"]
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
    err = capsys.readouterr().err.splitlines()  # a note of the scorer's may come first
    line = err[-1]
    assert [x for x in err if "interrupted" in x] == [line], err
    assert line.startswith("rspo-gym train: interrupted; no checkpoint was written yet: ")
    advised = command + (["--overwrite"] if "--overwrite" in line else [])
    assert main(advised) == 0, capsys.readouterr().err  # was exit 2: "... holds a run (config.json, metrics.jsonl, ...)"
    assert (tmp_path / "run" / "checkpoint.pt").is_file()


# ---------------------------------------------------------------- Ctrl-C at random moments of a run

@pytest.mark.slow
def test_ctrl_c_at_random_moments_of_an_rspo_run_then_its_advice_ends_with_the_uninterrupted_runs_files(tmp_path, capsys,
                                                                                                         monkeypatch):
    """Five seeded moments of a short RSPO run: a real SIGINT (a timer's, started as the run
    writes its ``config.json``) into ``main()`` in this process, then the command its line says,
    until the run ends. The folder then holds the uninterrupted run's rows, checkpoint shards,
    ``policy/`` and curve, byte for byte, and nothing a writer left.
    ``benchmarks/kill9_resumes.py`` does the same in fresh processes, 60 times, ``kill -9`` too."""
    import random
    import signal
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from kill9_resumes import ARGS, _advice, _files, _leftovers, _rows

    from rspo_gym.cli import main
    from rspo_gym.training import trainer

    def command(out: Path) -> list[str]:
        return [*ARGS[2:], "--iterations", "3", "--output-dir", str(out)]

    armed: list[float] = []
    save_config = trainer.save_config

    def save_config_and_start_the_timer(*args, **kwargs):
        save_config(*args, **kwargs)
        if armed:
            signal.setitimer(signal.ITIMER_REAL, armed.pop())

    monkeypatch.setattr(trainer, "save_config", save_config_and_start_the_timer)

    def interrupted_after(delay: float, argv: list[str]) -> int | None:
        """``main(argv)``'s exit code, SIGINT coming ``delay`` seconds after config.json is written;
        None when it came after main() returned (the run was done)."""
        handler = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
        # Python's own SIGINT handler, as a terminal starts a command (one started in the background ignores SIGINT)
        ctrl_c = signal.signal(signal.SIGINT, signal.default_int_handler)
        armed[:], code = [delay], None
        try:
            code = main(argv)
            signal.setitimer(signal.ITIMER_REAL, 0)
        except KeyboardInterrupt:  # the timer's one shot, after main() returned
            assert code is not None
            code = None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, handler)
            signal.signal(signal.SIGINT, ctrl_c)
        return code

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the scorer's own count: main() leaves the thread state as it finds it
    try:
        reference, warm = tmp_path / "reference", tmp_path / "warm"
        assert main(command(reference)) == 0 and main(command(warm)) == 0
        expected_rows, expected_files = _rows(reference), _files(reference)
        assert _rows(warm) == expected_rows and _files(warm) == expected_files  # runs in one process are the same run
        span = (warm / "learning_curve.png").stat().st_mtime - (warm / "config.json").stat().st_mtime
        capsys.readouterr()
        draw, interrupted = random.Random(0), 0
        for trial in range(5):
            out = tmp_path / f"trial-{trial}"
            code = interrupted_after(draw.uniform(0.0, span), command(out))
            following = []
            while code not in (0, None):
                assert code == 130 and len(following) < 3, code
                flags, line = _advice(capsys.readouterr().err)
                assert flags is not None, line  # one line, no traceback
                following.append(flags)
                code = main(command(out) + flags)
            assert _rows(out) == expected_rows and _files(out) == expected_files, (trial, following)
            assert _leftovers(out) == [], trial
            interrupted += bool(following)
        assert interrupted >= 3  # the moments fall inside the run, but for a slow second
    finally:
        torch.set_num_threads(threads)
