"""Checkpoints know their run and their bytes; resume keeps the record exact; run folders are not
silently reused."""

import json

import pytest
import torch

import rspo_gym  # noqa: F401

pytest.importorskip("transformers")

from rspo_gym.algos import GRPOTrainer, RSPOTrainer  # noqa: E402
from rspo_gym.algos.checkpoints import MAGIC, read_checkpoint, write_checkpoint  # noqa: E402
from rspo_gym.errors import UserError  # noqa: E402

TINY = dict(num_groups=1, group_size=2, max_turns=1, history_length=0, eval_every=0, progress=False)
MODEL = "tiny-untrained"


def _iterations(out) -> list[int]:
    return [json.loads(line)["iteration"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_checkpoint_round_trips_and_every_flipped_byte_is_reported(tmp_path):
    state = {"iteration": 3, "weights": torch.arange(1000, dtype=torch.float32), "history": [{"a": 1.5}]}
    identity = {"trainer": "GRPOTrainer", "config.num_groups": 2}
    path = write_checkpoint(tmp_path / "checkpoint.pt", state, identity)
    loaded = read_checkpoint(path, expected=identity)
    assert loaded["iteration"] == 3 and torch.equal(loaded["weights"], state["weights"]) and loaded["history"] == [{"a": 1.5}]
    assert not (tmp_path / "checkpoint.pt.tmp").exists()
    data = path.read_bytes()
    for offset in (len(MAGIC) + 100, len(data) // 2, len(data) - 60):  # payload, payload, trailer's identity
        flipped = bytearray(data)
        flipped[offset] ^= 0x10
        path.write_bytes(bytes(flipped))
        with pytest.raises(UserError, match="is damaged"):
            read_checkpoint(path, expected=identity)
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="is damaged"):
        read_checkpoint(path)
    torch.save(state, path)  # a bare torch.save file of an older version
    with pytest.raises(UserError, match="older rspo-gym"):
        read_checkpoint(path)
    path.write_bytes(b"")
    with pytest.raises(UserError, match="not an rspo-gym checkpoint"):
        read_checkpoint(path)


def test_resume_refuses_checkpoints_of_other_runs_in_one_line_and_leaves_the_folder(tmp_path):
    out = tmp_path / "run"
    RSPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), explorer_group_size=1, iterations=1, **{**TINY, "num_groups": 2}).learn()
    config_before = (out / "config.json").read_text()
    grpo = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=1, **TINY)
    with pytest.raises(UserError, match=r"belongs to another run \(trainer: 'RSPOTrainer' in the checkpoint, 'GRPOTrainer' here; algo"):
        grpo.learn(resume=True)
    smaller = RSPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), explorer_group_size=1, iterations=1, **TINY)
    with pytest.raises(UserError, match=r"\(num_groups: 2 in the checkpoint, 1 here\)") as refused:
        smaller.learn(resume=True)
    assert "\n" not in str(refused.value)
    assert (out / "config.json").read_text() == config_before  # the run's config is not overwritten


def test_a_fresh_run_refuses_a_run_folder_unless_overwrite_and_history_is_the_runs_record(tmp_path):
    out = tmp_path / "run"
    first = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=2, **TINY)
    assert len(first.learn()) == 2
    with pytest.raises(UserError, match="holds a run .*--resume.*--overwrite"):
        GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=2, **TINY).learn()
    assert _iterations(out) == [1, 2]
    resumed = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=2, **TINY)
    with pytest.raises(UserError, match="at iteration 2.*at least 2, not 1"):
        resumed.learn(1, resume=True)  # a run cannot be un-trained: no 2-row answer to learn(1)
    assert [row["iteration"] for row in resumed.learn(2, resume=True)] == [1, 2]  # the run's whole record
    assert [row["iteration"] for row in resumed.learn(3)] == [1, 2, 3] and _iterations(out) == [1, 2, 3]
    again = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=1, **TINY)
    assert [row["iteration"] for row in again.learn(overwrite=True)] == [1]
    assert _iterations(out) == [1] and read_checkpoint(out / "checkpoint.pt")["iteration"] == 1


def test_resume_rewrites_metrics_from_the_checkpoint(tmp_path):
    """A row logged after the checkpoint (a kill between the two) or a torn last line is dropped;
    a run killed before its first checkpoint starts over instead of adding a second run."""
    out = tmp_path / "run"
    GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=1, **TINY).learn()
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"iteration": 2, "rollout/success": 0.0}\n{"iterat')
    resumed = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=2, **TINY)
    resumed.learn(resume=True)
    assert _iterations(out) == [1, 2]
    (out / "checkpoint.pt").unlink()  # as if killed before the first checkpoint
    history = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=1, **TINY).learn(resume=True)
    assert [row["iteration"] for row in history] == [1] and _iterations(out) == [1]


def test_iterations_must_be_positive():
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, **TINY)
    for bad in (-3, 0, 1.5):
        with pytest.raises(UserError, match="iterations must be a positive integer"):
            trainer.learn(bad)
