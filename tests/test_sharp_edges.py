"""Settings that used to be ignored, fail late, take the machine's memory or lose a run's
record are refused by the command line at once: exit code 2, one line on stderr, nothing made.

Each case runs ``python -m rspo_gym`` in a subprocess, as a user does, so the exit code, the
line count and the imports are the real ones."""

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.forged_checkpoint import Payload as _Payload, forged as _forged

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}
BASE = ["train", "--algo", "grpo", "--model", "tiny-untrained", "--iterations", "1", "--max-turns", "2", "--set", "eval_every=0",
        "--set", "progress=false"]
TRAIN = [*BASE, "--group-size", "1", "--num-groups", "1"]


def _cli(*args: str, runs: Path | None = None) -> subprocess.CompletedProcess:
    env = {**ENV, "RSPO_GYM_RUNS_DIR": str(runs)} if runs is not None else ENV
    return subprocess.run([sys.executable, "-m", "rspo_gym", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)


def _refused(done: subprocess.CompletedProcess, expected: str) -> None:
    """Exit 2, one line on stderr holding ``expected``, nothing on stdout."""
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr[-3000:]
    assert done.stdout == ""


@pytest.mark.parametrize("args,expected", [
    (["--set", "group_size=10000000"], "group_size must be an integer from 1 to 1024, got 10000000"),
    (["--set", "num_groups=10000000"], "num_groups must be an integer from 1 to 10000, got 10000000"),
    (["--set", "num_groups=1000", "--set", "group_size=1000"], "num_groups x group_size must be at most 65536"),
    (["--set", "eval_tasks=1000000000"], "eval_tasks must be an integer from 1 to 10000"),
    (["--set", "lora_r=100000000"], "lora_r must be an integer from 0 to 4096"),
    (["--set", "max_prompt_length=1"], "max_prompt_length must be an integer >= 64 or None, got 1"),
    (["--set", "eval_task_ids=[1000000000000000]"], "eval_task_ids must be a non-empty list of task ids"),
    (["--set", 'env_kwargs={"max_episode_steps": -1}'], "env_kwargs must be a JSON object whose max_episode_steps is a positive"),
    (["--seed", "18446744073709551616"], "seed must be an integer from 0 to 9223372036854775807"),
    (["--set", "generation_backend=vllm", "--set", "constrained=false"], "generation_backend='vllm' needs vLLM, which is not installed"),
    (["--output-dir", "/etc/passwd/x"], "output_dir '/etc/passwd/x' cannot be made: /etc/passwd is a file"),
    (["--output-dir", "/proc/x"], "output_dir '/proc/x' is not writable"),
    (["--group-size", "abc"], "argument --group-size: invalid int value: 'abc'"),
    (["--seed", "3", "--set", "seed=7"], "--seed 3 and --set seed=7 disagree: give one of them"),
    (["--group-size", "2", "--set", "group_size=3"], "--group-size 2 and --set group_size=3 disagree"),
    (["--base", "ppo"], "--base and --swap are RSPO's"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_settings_are_one_line_exit_2_before_torch_loads(args, expected):
    if "vllm" in " ".join(args) and "vllm" in sys.modules:
        pytest.skip("vLLM is installed here")
    started = time.perf_counter()
    _refused(_cli(*BASE, *args), expected)
    assert time.perf_counter() - started < 10  # a model load alone is longer (2 s on an idle machine: see below)


def test_config_and_validation_import_no_torch():
    code = ("import sys, time; t = time.perf_counter(); import rspo_gym.cli, rspo_gym.algos.config, rspo_gym.algos.validation, "
            "rspo_gym.algos.config_reference, rspo_gym.algos.runs; print('torch' in sys.modules, time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=ENV, capture_output=True, text=True, check=True)
    imported, seconds = done.stdout.split()
    assert imported == "False", "the config path imports torch"
    assert float(seconds) < 2
    assert _cli("config", "--algo", "rspo").returncode == 0


def test_env_and_task_errors_are_one_line_before_the_model_and_leave_no_run_folder(tmp_path):
    pytest.importorskip("transformers")
    runs = tmp_path / "runs"
    _refused(_cli(*TRAIN, "--env", "CartPole-v1", runs=runs), "CartPole-v1 is not a text env: it has Box observations")
    _refused(_cli(*TRAIN, "--env", "CartPole-v1", "--output-dir", str(tmp_path / "x"), runs=runs), "is not a text env")
    _refused(_cli(*TRAIN, "--env", "rspo/WebShop-v0", "--set", "train_task_ids=[99999999]", runs=runs),
             "train_task_ids [99999999] out of range: the training env has")
    _refused(_cli(*TRAIN, "--set", "eval_task_ids=[140]", "--set", "eval_every=1", runs=runs),
             "eval_task_ids [140] out of range: split 'valid_seen' has 140 tasks")
    assert not runs.exists() and not (tmp_path / "x").exists()


def _fake_run(out: Path, rows: int) -> None:
    """A run folder as a run of ``rows`` iterations leaves it, less what a test removes."""
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps({"config_class": "TrainerConfig", "seed": 0}))
    (out / "metrics.jsonl").write_text("".join(json.dumps({"iteration": i}) + "\n" for i in range(1, rows + 1)))
    (out / "checkpoint_tensors" / "iteration-8-0123abcd").mkdir(parents=True)


def test_resume_continues_the_named_run_or_refuses_without_touching_its_record(tmp_path):
    missing = tmp_path / "mistyped"
    _refused(_cli(*TRAIN, "--resume", "--output-dir", str(missing)), f"--resume: {missing} holds no run (no config.json)")
    assert not missing.exists()
    out = tmp_path / "run"
    _fake_run(out, rows=8)  # checkpoint.pt deleted, shards and metrics kept
    before = {name: (out / name).read_text() for name in ("config.json", "metrics.jsonl")}
    _refused(_cli(*TRAIN, "--resume", "--output-dir", str(out)), "has no checkpoint.pt but its metrics reach iteration 8")
    assert {name: (out / name).read_text() for name in before} == before


@pytest.mark.slow
def test_set_seed_is_the_run_seed_and_overwrite_removes_the_previous_results(tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "run"
    _fake_run(out, rows=2)
    (out / "checkpoint.pt").write_bytes(b"old")
    (out / "policy").mkdir()
    (out / "policy" / "stale.bin").write_bytes(b"old weights")
    (out / "learning_curve.png").write_bytes(b"old curve")
    done = _cli(*TRAIN, "--set", "seed=7", "--output-dir", str(out), "--overwrite")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((out / "config.json").read_text())["seed"] == 7
    assert not (out / "policy" / "stale.bin").exists() and (out / "policy" / "config.json").is_file()
    assert (out / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert [json.loads(line)["iteration"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1]

    marker = tmp_path / "marker"  # the run's checkpoint forged: code in its pickle, digest recomputed
    _forged(out / "checkpoint.pt", pickle.dumps({"iteration": 1, "evil": _Payload(marker)}))
    _refused(_cli(*TRAIN, "--set", "seed=7", "--output-dir", str(out), "--resume"), "checkpoint.pt is refused: it names posix.system")
    assert not marker.exists()
