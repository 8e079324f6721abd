"""Checkpoints know their run and their bytes; resume keeps the record exact; run folders are not
silently reused."""

import copy
import hashlib
import io
import json
import shutil
import struct
from types import SimpleNamespace

import pytest
import torch

import rspo_gym  # noqa: F401

pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402

from rspo_gym.algos import GRPOTrainer, RSPOTrainer  # noqa: E402
from rspo_gym.training import checkpoints  # noqa: E402
from rspo_gym.training.checkpoints import MAGIC, claim_run_dir, read_checkpoint, run_identity, tensors_folder, write_checkpoint  # noqa: E402
from rspo_gym.errors import UserError  # noqa: E402
from tests.forged_checkpoint import Payload as _Payload, forged as _forged  # noqa: E402

TINY = dict(num_groups=1, group_size=2, max_turns=1, history_length=0, eval_every=0, progress=False)
MODEL = "tiny-untrained"


def _iterations(out) -> list[int]:
    return [json.loads(line)["iteration"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """The bytes of ``tensor``'s elements, so NaN and -0.0 compare exactly."""
    return tensor.detach().contiguous().reshape(-1).view(torch.uint8)


def _assert_bitwise_equal(saved, loaded, path="state"):
    """Same structure, types and non-tensor values; tensors of the same dtype, shape, values (bit
    for bit), on the CPU."""
    if isinstance(saved, torch.Tensor):
        assert isinstance(loaded, torch.Tensor) and loaded.device.type == "cpu", path
        assert (loaded.dtype, loaded.shape, loaded.requires_grad) == (saved.dtype, saved.shape, saved.requires_grad), path
        assert torch.equal(_bits(loaded), _bits(saved)), path
    elif isinstance(saved, (dict, list, tuple)):
        assert type(loaded) is type(saved) and len(loaded) == len(saved), path
        items = saved.items() if isinstance(saved, dict) else enumerate(saved)
        for key, value in items:
            _assert_bitwise_equal(value, loaded[key], f"{path}/{key}")
    elif isinstance(saved, SimpleNamespace):
        _assert_bitwise_equal(vars(saved), vars(loaded), path)
    else:
        assert loaded == saved, path


def _awkward_state() -> dict:
    """Tied weights, bf16 with NaN and -0.0, 0-dim, non-contiguous and shared-memory views, an
    empty tensor, a Parameter, a tensor inside an object, a complex tensor, a real AdamW state
    (0-dim ``step``)."""
    generator = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(40, 16), torch.nn.Linear(16, 40, bias=False))
    model[1].weight = model[0].weight  # tied, as Qwen2.5's embed_tokens and lm_head
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.tensor([[1, 2, 3]])).sum().backward()
    optimizer.step()
    wide = torch.randn(48, 16, generator=generator)
    ragged = torch.randn(200, generator=generator).bfloat16()
    ragged[3], ragged[4] = float("nan"), -0.0
    return {
        "iteration": 4,
        "history": [{"iteration": 1, "loss": 0.25}, {"iteration": 2, "loss": None}],
        "policy": {"model": model.state_dict()},
        "optimizer": optimizer.state_dict(),
        "bf16": ragged,
        "scalars": (torch.tensor(7.0), torch.tensor(3, dtype=torch.int64), torch.tensor(True)),
        "transposed": wide.T,
        "every_other": wide[:, ::2],
        "row": wide[5],  # a contiguous view into wide's memory, not the whole of it
        "empty": torch.zeros(0, 3),
        "parameter": torch.nn.Parameter(torch.ones(4, dtype=torch.float16)),
        "masks": [torch.tensor([1, -2, 3], dtype=torch.int8), torch.tensor([True, False])],
        "object": SimpleNamespace(hidden=torch.arange(5.0), label="x"),
        "complex": torch.tensor([1 + 2j, -0.5j]),  # a dtype safetensors 0.3 lacks: kept in the pickle
    }


def _shards(checkpoint):
    return sorted(next(tensors_folder(checkpoint).iterdir()).iterdir())


def test_sharded_round_trip_is_bitwise_exact_and_keeps_ties_and_tensors_out_of_the_pickle(tmp_path):
    state = _awkward_state()
    identity = {"trainer": "GRPOTrainer", "config.num_groups": 2}
    path = write_checkpoint(tmp_path / "checkpoint.pt", state, identity, max_shard_size=1500, label="iteration-4")
    shards = _shards(path)
    assert len(shards) >= 3 and [f.name for f in shards][0] == f"tensors-00001-of-{len(shards):05d}.safetensors"
    assert [d.name[:12] for d in (tmp_path / "checkpoint_tensors").iterdir()] == ["iteration-4-"]
    pickled, names = path.read_bytes(), []
    for shard in shards:  # at most max_shard_size of data, but for a tensor larger than that alone
        stored = load_file(shard)  # the safetensors library reads what the checkpoint writer streamed
        names += stored
        assert sum(t.numel() * t.element_size() for t in stored.values()) <= 1500 or len(stored) == 1
        assert not any(t.numel() >= 16 and _bits(t).numpy().tobytes() in pickled for t in stored.values())  # not in checkpoint.pt
    assert "policy/model/0.weight" in names and "policy/model/1.weight" not in names  # the tied weight once
    assert "optimizer/state/0/exp_avg" in names and "bf16" in names and "object/0" in names and "complex" not in names

    loaded = read_checkpoint(path, expected=identity)
    _assert_bitwise_equal(state, loaded)
    weights = loaded["policy"]["model"]
    assert weights["1.weight"] is weights["0.weight"]  # one tensor under both names, as it was saved
    assert not (tmp_path / "checkpoint.pt.tmp").exists()

    write_checkpoint(path, {**state, "iteration": 5}, identity, max_shard_size=1500)
    assert len(list((tmp_path / "checkpoint_tensors").iterdir())) == 1  # the previous shards are gone
    assert read_checkpoint(path)["iteration"] == 5
    write_checkpoint(path, {**state, "iteration": 6}, identity, single_file=True)
    assert list((tmp_path / "checkpoint_tensors").iterdir()) == [] and read_checkpoint(path)["iteration"] == 6


def test_flipped_missing_or_cut_bytes_anywhere_are_refused_in_one_line(tmp_path):
    state = _awkward_state()
    path = write_checkpoint(tmp_path / "checkpoint.pt", state, {"trainer": "GRPOTrainer"}, max_shard_size=1500)
    shard = _shards(path)[1]
    advice = "resume from an intact copy, or start over (rspo-gym train --overwrite; learn(overwrite=True))"

    def refused(match: str) -> None:
        with pytest.raises(UserError, match=match) as error:
            read_checkpoint(path)
        assert "\n" not in str(error.value) and str(error.value).endswith(advice)

    for file in (path, shard):
        data = file.read_bytes()
        for offset in (len(MAGIC) + 10, len(data) // 2, len(data) - 60):  # checkpoint.pt: skeleton, skeleton or trailer, trailer
            flipped = bytearray(data)
            flipped[offset] ^= 0x10
            file.write_bytes(bytes(flipped))
            refused(f"{file} is damaged")
        file.write_bytes(data[: len(data) // 2])
        refused(f"{file} is damaged")
        file.write_bytes(data)
    shard.write_bytes(shard.read_bytes()[:-1])
    refused(rf"{shard} is damaged \(cut short at \d+ bytes of \d+\)")
    shard.unlink()
    refused(rf"{shard} is missing \(it holds tensors of {path}\)")


def _format1_bytes(state, identity) -> bytes:
    """A checkpoint as rspo-gym wrote it before the shards, built from its documented layout:
    MAGIC, torch.save payload, JSON trailer, trailer length."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    digest = hashlib.sha256(payload + json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    trailer = json.dumps({"format": 1, "payload_bytes": len(payload), "sha256": digest, "identity": identity}).encode()
    return MAGIC + payload + trailer + struct.pack(">Q", len(trailer))


def test_single_file_checkpoints_of_earlier_versions_still_load_and_every_flipped_byte_is_reported(tmp_path):
    state = {"iteration": 3, "weights": torch.arange(1000, dtype=torch.float32), "history": [{"a": 1.5}], "step": torch.tensor(2.0)}
    identity = {"trainer": "GRPOTrainer", "config.num_groups": 2}
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(_format1_bytes(state, identity))
    _assert_bitwise_equal(state, read_checkpoint(path, expected=identity))
    assert write_checkpoint(path, state, identity, single_file=True).read_bytes() == _format1_bytes(state, identity)
    assert not tensors_folder(path).exists()
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


def test_an_orphan_tensor_folder_of_a_killed_save_is_ignored_and_removed_by_the_next_save(tmp_path):
    path = write_checkpoint(tmp_path / "checkpoint.pt", {"iteration": 1, "w": torch.ones(600)}, {}, max_shard_size=1000)
    orphan = tensors_folder(path) / "iteration-2-0123abcd"  # what a save killed while writing its shards leaves
    orphan.mkdir()
    (orphan / "tensors-00001-of-00002.safetensors").write_bytes(b"\x00" * 100)
    loaded = read_checkpoint(path)
    assert loaded["iteration"] == 1 and torch.equal(loaded["w"], torch.ones(600))
    write_checkpoint(path, {"iteration": 2, "w": torch.zeros(600)}, {}, max_shard_size=1000)
    assert not orphan.exists() and len(list(tensors_folder(path).iterdir())) == 1
    assert read_checkpoint(path)["iteration"] == 2


def test_a_trainer_resumes_from_shards_or_a_single_file_exactly_and_tied_weights_stay_tied(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "MAX_SHARD_SIZE", 1 << 20)  # the tiny model's 11 MB in a dozen shards
    full = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(tmp_path / "full"), iterations=2, **TINY)
    full.learn(1)
    shards = _shards(tmp_path / "full" / "checkpoint.pt")
    assert len(shards) >= 3 and (tmp_path / "full" / "checkpoint.pt").stat().st_size * 10 < sum(f.stat().st_size for f in shards)
    shutil.copytree(tmp_path / "full", tmp_path / "cut")
    write_checkpoint(tmp_path / "single" / "checkpoint.pt", full.state(), run_identity(full), single_file=True)
    after_one = copy.deepcopy({**full.state(), "config": None})  # config: each trainer's own
    full_history = full.learn(2)
    for folder in ("cut", "single"):
        resumed = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(tmp_path / folder), iterations=2, **TINY)
        resumed.load_checkpoint(tmp_path / folder / "checkpoint.pt")
        assert resumed.policy.model.lm_head.weight is resumed.policy.model.model.embed_tokens.weight
        _assert_bitwise_equal(after_one, {**resumed.state(), "config": None})
        history = resumed.learn(2, resume=True)  # the command's path: load again, train iteration 2
        drop = lambda rows: [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]  # noqa: E731
        assert drop(history) == drop(full_history)
        assert resumed.policy.model.lm_head.weight is resumed.policy.model.model.embed_tokens.weight
        _assert_bitwise_equal(
            {k: full.state()[k] for k in ("policy", "optimizer")}, {k: resumed.state()[k] for k in ("policy", "optimizer")}
        )


def test_an_explorers_crafted_optimizer_state_is_refused_in_one_line_before_it_is_loaded(tmp_path):
    # the learner's optimizer: tests/test_run_folder_contract.py; the explorer's AdamW is loaded by RSPO itself
    kwargs = dict(model="drrn", output_dir=str(tmp_path), num_groups=1, group_size=2, max_turns=2, eval_every=0, progress=False, seed=5)
    trainer = RSPOTrainer("rspo/ALFWorld-v0", **kwargs)
    trainer.learn(1)
    trainer.close()
    path = tmp_path / "checkpoint.pt"
    state = read_checkpoint(path)
    moments = state["explorer_optimizer"]["state"][0]
    moments["exp_avg"], moments["exp_avg_sq"] = moments["exp_avg"][:1].clone(), moments["exp_avg_sq"][:1].clone()  # was a segfault
    write_checkpoint(path, state, run_identity(trainer), label="forged")
    resumed = RSPOTrainer("rspo/ALFWorld-v0", **kwargs)
    with pytest.raises(UserError, match=r"does not fit this run's model and optimizer \(explorer_optimizer state exp_avg of "
                                        r"parameter 0 has shape \[1, 32\], its parameter \[8192, 32\]\)"):
        resumed.learn(2, resume=True)
    resumed.close()


def test_a_folder_holding_only_checkpoint_tensors_is_a_run_and_overwrite_removes_them(tmp_path):
    (tmp_path / "checkpoint_tensors" / "iteration-3-0123abcd").mkdir(parents=True)
    with pytest.raises(UserError, match=r"holds a run \(checkpoint_tensors\)"):
        claim_run_dir(tmp_path, resume=False, overwrite=False)
    claim_run_dir(tmp_path, resume=False, overwrite=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_fresh_run_refuses_a_run_folder_unless_overwrite_and_history_is_the_runs_record(tmp_path):
    out = tmp_path / "run"
    first = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=2, **TINY)
    assert len(first.learn()) == 2
    with pytest.raises(UserError, match="holds a run .*--resume.*--overwrite"):
        GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=2, **TINY).learn()
    assert _iterations(out) == [1, 2]
    resumed = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=2, **TINY)
    with pytest.raises(UserError, match="logged 2 iterations.*at least 2, not 1"):
        resumed.learn(1, resume=True)  # a run cannot be un-trained: no 2-row answer to learn(1)
    assert [row["iteration"] for row in resumed.learn(2, resume=True)] == [1, 2]  # the run's whole record
    assert [row["iteration"] for row in resumed.learn(3)] == [1, 2, 3] and _iterations(out) == [1, 2, 3]
    again = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=1, **TINY)
    assert [row["iteration"] for row in again.learn(overwrite=True)] == [1]
    assert _iterations(out) == [1] and read_checkpoint(out / "checkpoint.pt")["iteration"] == 1


@pytest.mark.slow
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
    (out / "checkpoint.pt").unlink()  # as if killed before the first checkpoint, after logging iteration 1
    for name, rows in (("metrics.jsonl", 1), ("metrics.csv", 2)):  # the csv's header and first row
        (out / name).write_text("".join((out / name).read_text().splitlines(keepends=True)[:rows]))
    history = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, output_dir=str(out), iterations=1, **TINY).learn(resume=True)
    assert [row["iteration"] for row in history] == [1] and _iterations(out) == [1]


def test_iterations_must_be_positive():
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model=MODEL, **TINY)
    for bad in (-3, 0, 1.5):
        with pytest.raises(UserError, match="iterations must be a positive integer"):
            trainer.learn(bad)


def test_a_forged_checkpoint_with_a_recomputed_digest_runs_no_code(tmp_path):
    import pickle

    marker = tmp_path / "marker"
    identity = {"trainer": "GRPOTrainer", "config.num_groups": 2}
    path = write_checkpoint(tmp_path / "checkpoint.pt", {"iteration": 1, "w": torch.ones(8)}, identity)
    _forged(path, pickle.dumps({"iteration": 1, "evil": _Payload(marker)}))
    with pytest.raises(UserError, match=r"is refused: it names posix\.system, which a checkpoint may not") as error:
        read_checkpoint(path, expected=identity)
    assert "\n" not in str(error.value) and not marker.exists()

    single = tmp_path / "single.pt"
    single.write_bytes(_format1_bytes({"iteration": 1, "evil": _Payload(marker)}, identity))  # a format-1 file, digest right
    with pytest.raises(UserError, match="is refused") as error:
        read_checkpoint(single, expected=identity)
    assert "\n" not in str(error.value) and not marker.exists()
