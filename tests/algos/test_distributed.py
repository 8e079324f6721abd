"""Data parallelism on CPU: 2 processes with gloo under torchrun equal one process.

The launched script is ``distributed_run.py`` (a user script built on ``GRPOTrainer``): random tiny
model, fp32, one mini-batch per update, so an exact N-rank update is the 1-rank update over the
same rows, up to float rounding (the engine path scores full logits, one process chunked ones).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import rspo_gym  # noqa: F401

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from rspo_gym.algos import GRPOTrainer  # noqa: E402
from rspo_gym.training.distributed import SingleProcess, group_share, rank_minibatches  # noqa: E402

SCRIPT = Path(__file__).with_name("distributed_run.py")
sys.path.insert(0, str(SCRIPT.parent))
from distributed_run import SETTINGS, main as run_script  # noqa: E402

TORCHRUN = shutil.which("torchrun")
needs_torchrun = pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed")


def _launch(
    out: Path, iterations: int, kill_after: int | None = None, ranks: int = 2, rspo: bool = False, fsdp: bool = False,
    uneven: bool = False, mini: bool = False,
) -> subprocess.CompletedProcess:
    args = [TORCHRUN, "--standalone", f"--nproc_per_node={ranks}", str(SCRIPT), str(out), str(iterations)]
    if kill_after is not None:
        args.append(str(kill_after))
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[2]), "HF_HUB_OFFLINE": "1", "RSPO": "1" if rspo else "0", "FSDP": "1" if fsdp else "0", "UNEVEN": "1" if uneven else "0", "MINI": "1" if mini else "0"}
    return subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)


def _max_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _close(row: dict, expected: dict) -> None:
    """The same metrics (timings aside), equal to float rounding."""
    keys = {k for k in expected if not k.startswith("time/")}
    assert keys == {k for k in row if not k.startswith("time/")}
    for key in sorted(keys):
        assert row[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-6), key


def _same_metrics(run: Path, reference: Path) -> list[dict]:
    """``run``'s metrics rows, asserted equal row by row to ``reference``'s (same count)."""
    rows = _rows(run / "metrics.jsonl")
    for row, expected in zip(rows, _rows(reference / "metrics.jsonl"), strict=True):
        _close(row, expected)
    return rows


def test_group_share_covers_every_group_once():
    shares = [group_share(7, 3, r) for r in range(3)]
    assert [g for share in shares for g in share] == list(range(7))
    assert [len(s) for s in shares] == [2, 2, 3]
    with pytest.raises(ValueError, match="2 task groups .* for 3 ranks"):
        group_share(2, 3, 0)


def test_one_process_without_a_launcher_is_the_single_process_seam():
    trainer = GRPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", num_groups=1, group_size=1, progress=False)
    assert type(trainer.dist) is SingleProcess and trainer.policy.train_model is None


def test_the_single_process_clip_equals_torchs_below_at_and_above_the_bound():
    """``SingleProcess.clip_grad_norm`` skips the scaling by exactly 1; norms, gradients and a NaN
    norm's NaN gradients stay torch's ``clip_grad_norm_``'s to the bit."""
    torch.manual_seed(0)
    for scale in (1e-3, 1.0, 1e3, float("nan")):
        grads = [torch.randn(8, 3) * scale, torch.randn(5) * scale]
        ours, theirs = [[torch.nn.Parameter(torch.zeros_like(g)) for g in grads] for _ in range(2)]
        for params in (ours, theirs):
            for p, g in zip(params, grads):
                p.grad = g.clone()
        norm = SingleProcess().clip_grad_norm(iter(ours), 1.0)  # a generator, as a critic's parameters() is
        expected = float(torch.nn.utils.clip_grad_norm_(theirs, 1.0))
        assert norm == expected or (norm != norm and expected != expected)
        for a, b in zip(ours, theirs):
            assert torch.equal(a.grad, b.grad) or (a.grad.isnan().all() and b.grad.isnan().all())


@pytest.mark.slow
@needs_torchrun
def test_two_ranks_update_like_one_process_and_resume_under_one(tmp_path):
    launched = _launch(tmp_path / "two", 1)
    assert launched.returncode == 0, launched.stderr[-3000:]
    rank0 = torch.load(tmp_path / "two" / "weights-rank0.pt")
    rank1 = torch.load(tmp_path / "two" / "weights-rank1.pt")
    assert _max_difference(rank0, rank1) == 0.0  # the engine keeps the ranks identical
    start = GRPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", **SETTINGS).policy.model.state_dict()
    run_script(str(tmp_path / "one"), 1, None)
    single = torch.load(tmp_path / "one" / "weights-rank0.pt")
    assert _max_difference(rank0, single) < 1e-5
    assert _max_difference(single, start) > 1e-4  # the update did move the weights
    rows = _rows(tmp_path / "two" / "metrics.jsonl")
    assert len(rows) == 1  # written once, by rank 0
    _close(rows[0], _rows(tmp_path / "one" / "metrics.jsonl")[0])
    # the 2-rank checkpoint resumes in one process, as the 1-process run continues
    run_script(str(tmp_path / "two"), 2, None)
    run_script(str(tmp_path / "one"), 2, None)
    _same_metrics(tmp_path / "two", tmp_path / "one")


def test_ranks_take_their_rows_of_one_process_mini_batches():
    order = torch.randperm(11, generator=torch.Generator().manual_seed(0))
    counts = [4, 7]  # uneven shares
    parts = [rank_minibatches(counts, rank, 5, order) for rank in range(2)]
    one = rank_minibatches([11], 0, 5, order)
    assert [len(m) for m in one] == [5, 5, 1]  # full mini-batches, then a short last one
    for step, rows in enumerate(one):
        ranks = torch.cat([parts[0][step], parts[1][step] + counts[0]])
        assert sorted(ranks.tolist()) == sorted(rows.tolist())


@pytest.mark.slow
@needs_torchrun
def test_two_ranks_with_uneven_shares_and_several_mini_batches_update_like_one_process(tmp_path):
    # 3 groups on 2 ranks, 5-row mini-batches over two epochs: one process's steps, rows split unevenly
    launched = _launch(tmp_path / "two", 2, uneven=True, mini=True)
    assert launched.returncode == 0, launched.stderr[-3000:]
    run_script(str(tmp_path / "one"), 2, None, uneven=True, mini=True)
    rows = _same_metrics(tmp_path / "two", tmp_path / "one")
    assert len(rows) == 2
    single = torch.load(tmp_path / "one" / "weights-rank0.pt")
    for rank in range(2):
        assert _max_difference(torch.load(tmp_path / "two" / f"weights-rank{rank}.pt"), single) < 1e-5


@pytest.mark.slow
@needs_torchrun
def test_two_rank_run_resumes_after_sigkill_exactly(tmp_path):
    killed = _launch(tmp_path / "cut", 3, kill_after=2)
    assert killed.returncode != 0  # rank 0 was SIGKILLed after iteration 2's checkpoint
    assert len(_rows(tmp_path / "cut" / "metrics.jsonl")) == 2
    resumed = _launch(tmp_path / "cut", 3)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    run_script(str(tmp_path / "full"), 3, None)
    rows = _same_metrics(tmp_path / "cut", tmp_path / "full")
    assert [row["iteration"] for row in rows] == [1, 2, 3]
    full = torch.load(tmp_path / "full" / "weights-rank0.pt")
    assert _max_difference(torch.load(tmp_path / "cut" / "weights-rank1.pt"), full) < 1e-5


@pytest.mark.slow
@needs_torchrun
def test_rspo_explorer_under_two_ranks_trains_like_one_process(tmp_path):
    # 3 iterations: the explorer is re-synced (a new copy and optimizer, prepared again) at the 3rd
    launched = _launch(tmp_path / "two", 3, rspo=True)
    assert launched.returncode == 0, launched.stderr[-3000:]
    run_script(str(tmp_path / "one"), 3, None, rspo=True)
    rows = _same_metrics(tmp_path / "two", tmp_path / "one")
    assert len(rows) == 3 and all(row["explorer/replayed_rows"] > 0 for row in rows)
    single = torch.load(tmp_path / "one" / "weights-rank0.pt")
    assert _max_difference(torch.load(tmp_path / "two" / "weights-rank1.pt"), single) < 1e-5


@pytest.mark.slow
@needs_torchrun
def test_fsdp2_two_ranks_train_like_one_process_and_resume_after_sigkill(tmp_path):
    # FSDP2 over gloo, one shard group per decoder layer, ranks with 1 and 2 groups (so 2 and 4
    # old-log-prob passes): generation and old log-probs run on weights gathered once per phase,
    # the update on shards; rank 0 is SIGKILLed after iteration 2
    killed = _launch(tmp_path / "fsdp", 3, kill_after=2, fsdp=True, uneven=True)
    assert killed.returncode != 0
    # accelerate's sharded state, one folder per save, the latest kept: the one checkpoint.pt names
    saved = [folder.name for folder in (tmp_path / "fsdp" / "checkpoint_engine").iterdir()]
    assert len(saved) == 1 and saved[0].startswith("iteration-2-")
    resumed = _launch(tmp_path / "fsdp", 3, fsdp=True, uneven=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    run_script(str(tmp_path / "one"), 3, None, uneven=True)
    rows = _same_metrics(tmp_path / "fsdp", tmp_path / "one")
    assert [row["iteration"] for row in rows] == [1, 2, 3]
    gathered = torch.load(tmp_path / "fsdp" / "weights-rank0.pt")  # the main rank's gathered state
    assert _max_difference(gathered, torch.load(tmp_path / "one" / "weights-rank0.pt")) < 1e-5
    exported = (tmp_path / "fsdp" / "policy" / "model.safetensors")
    assert exported.is_file()  # the whole model, gathered for the export


@pytest.mark.slow
@needs_torchrun
def test_rspo_explorer_under_fsdp2_resumes_after_sigkill_like_one_process(tmp_path):
    # the explorer is a sharded full copy with its own sharded AdamW, re-synced shard by shard at
    # iteration 2 (after the resume); each rank's replay buffer comes back to that rank
    killed = _launch(tmp_path / "fsdp", 3, kill_after=2, rspo=True, fsdp=True, uneven=True)
    assert killed.returncode != 0
    saved = next((tmp_path / "fsdp" / "checkpoint_engine").iterdir())
    assert {p.name for p in saved.iterdir()} >= {"pytorch_model_fsdp_0", "pytorch_model_fsdp_1", "optimizer_1"}
    resumed = _launch(tmp_path / "fsdp", 3, rspo=True, fsdp=True, uneven=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    run_script(str(tmp_path / "one"), 3, None, rspo=True, uneven=True)
    rows = _same_metrics(tmp_path / "fsdp", tmp_path / "one")
    assert len(rows) == 3 and all(row["explorer/replayed_rows"] > 0 for row in rows)
    gathered = torch.load(tmp_path / "fsdp" / "weights-rank0.pt")
    assert _max_difference(gathered, torch.load(tmp_path / "one" / "weights-rank0.pt")) < 1e-5


MERGED_UNDER_FSDP2 = """
import sys, torch
sys.path.insert(0, sys.argv[2])
from distributed_run import fsdp2_on_cpu
from rspo_gym.training.distributed import Accelerated
from rspo_gym.policies.adapters import merged_weights
from rspo_gym.policies.models import load_model

fsdp2_on_cpu()
model, _ = load_model("tiny-untrained")
whole = {name: tensor.clone() for name, tensor in model.state_dict().items()}
dist = Accelerated()
sharded, _ = dist.accelerator.prepare(model, torch.optim.AdamW(model.parameters()))
pushed = dict(merged_weights(sharded))
assert type(next(iter(sharded.state_dict().values()))).__name__ == "DTensor"
assert pushed.keys() == whole.keys() and all(torch.equal(pushed[k], whole[k]) for k in whole)
print("rank", dist.rank, "pushes", len(pushed), "whole tensors")
dist.close()
"""


@pytest.mark.slow
@needs_torchrun
def test_weights_pushed_to_a_generation_engine_are_whole_under_fsdp2(tmp_path):
    script = tmp_path / "merged.py"
    script.write_text(MERGED_UNDER_FSDP2)
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[2]), "HF_HUB_OFFLINE": "1"}
    command = [TORCHRUN, "--standalone", "--nproc_per_node=2", str(script), "x", str(SCRIPT.parent)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0 and "terminate called without an active exception" in done.stderr:
        # a rank's C++ thread teardown aborted (SIGABRT), seen once in six full-suite runs on a
        # loaded 2-core machine and never alone: one fresh run, which must then pass whole
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("whole tensors") == 2


def test_an_explorer_run_resumes_only_under_its_rank_count():
    from rspo_gym.algos import RSPOTrainer
    from rspo_gym.errors import UserError

    trainer = RSPOTrainer(
        "rspo/ALFWorld-v0", "tiny-untrained", swap="explorer", num_groups=1, group_size=1, explorer_group_size=1, progress=False,
    )
    state = trainer.state()
    assert state["buffers"] == [[]]  # one rank's (empty) buffer
    state["buffers"] = [[], []]
    with pytest.raises(UserError, match="saved by 2 rank\\(s\\) and resumes under 1"):
        trainer.load_state(state)


def test_rollouts_do_not_depend_on_how_groups_are_split():
    from rspo_gym.rollout.collector import collect

    trainer = GRPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", num_groups=2, group_size=2, max_turns=3, progress=False, seed=2)
    config, seeds = trainer.collect_config(0), trainer.row_seeds(0, 2)
    whole = collect(trainer.policy, trainer.venv, config, seed=40, row_seeds=seeds)
    halves = []
    for g in range(2):
        venv = GRPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", num_groups=1, group_size=2, progress=False).venv
        halves.append(collect(trainer.policy, venv, config, seed=40 + g, row_seeds=seeds[2 * g:2 * g + 2]))
    responses = [r.response_ids for r in whole.rows]
    assert responses == [r.response_ids for half in halves for r in half.rows]
    assert len({tuple(r) for r in responses}) > 1  # sampled, not one repeated reply
    for row, expected in zip(whole.rows, [r for half in halves for r in half.rows]):
        assert row.logprobs == pytest.approx(expected.logprobs, abs=1e-5)


@pytest.mark.slow
def test_a_trainer_on_ray_env_workers_collects_the_in_process_rollout():
    ray = pytest.importorskip("ray", reason="the Ray pool needs the [ray] extra")
    from rspo_gym.rollout.ray_pool import RayEnvs

    kwargs = dict(num_groups=2, group_size=2, max_turns=3, progress=False, seed=4)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    remote = GRPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", env_pool="ray", env_workers=2, **kwargs)
    try:
        assert isinstance(remote.venv.pool, RayEnvs)
        local = GRPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", **kwargs)
        assert remote.collect(0) == local.collect(0)
    finally:
        remote.close()
        ray.shutdown()


def test_bad_env_pool_settings_get_clear_errors():
    with pytest.raises(ValueError, match="env_pool must be one of"):
        GRPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", env_pool="threads", progress=False)
    with pytest.raises(ValueError, match="env_workers must be a positive integer"):
        GRPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", env_pool="processes", env_workers=0, progress=False)


def test_a_lora_learner_under_a_sharding_engine_is_refused_before_any_work(monkeypatch):
    from rspo_gym.training import trainer as trainer_module
    from rspo_gym.errors import UserError

    class Sharded(SingleProcess):
        shards_state = True

    monkeypatch.setattr(trainer_module, "detect", Sharded)
    with pytest.raises(UserError, match="LoRA learner under FSDP / DeepSpeed is not supported"):
        GRPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", lora_r=4, progress=False)
    assert GRPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", progress=False).dist.shards_state
