"""``examples/recipes/``: every algorithm x env script runs its CPU variant at a tiny size, and its
one-GPU and multi-GPU variants are the settings docs/training_at_scale.md derives."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "examples" / "recipes"
ALGOS = ("grpo", "ppo", "gigpo", "rspo")
ENVS = {"alfworld": "rspo/ALFWorld-v0", "webshop": "rspo/WebShop-v1"}
NAMES = [f"{algo}_{env}" for algo in ALGOS for env in ENVS]
#: The recipe whose CPU variant runs in the fast subset (``-m "not slow"``); the others are slow.
FAST = "rspo_alfworld"
#: A CPU run cut to seconds: the fastest model (the action scorer), one task of two trajectories, two turns.
TINY = ["--model", "drrn", "--iterations", "1", "--num-groups", "1", "--group-size", "2", "--max-turns", "2", "--eval-tasks", "1"]


def recipe(name: str, *args: str, dry_run: bool = False) -> subprocess.CompletedProcess:
    """``bash examples/recipes/<name>.sh ARGS`` with this checkout's package and interpreter first."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), "HF_HUB_OFFLINE": "1"}
    env.pop("DRY_RUN", None)
    if dry_run:
        env["DRY_RUN"] = "1"
    return subprocess.run(["bash", str(RECIPES / f"{name}.sh"), *args], capture_output=True, text=True, env=env, timeout=120)


def test_one_recipe_per_algorithm_and_env_each_in_the_readme():
    assert sorted(p.stem for p in RECIPES.glob("*.sh")) == sorted(NAMES)
    readme = (RECIPES / "README.md").read_text(encoding="utf-8")
    assert all(f"{name}.sh" in readme for name in NAMES)


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n == FAST else pytest.mark.slow) for n in NAMES])
def test_cpu_variant_trains_and_writes_metrics(name, tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "run"
    result = recipe(name, "cpu", *TINY, "--output-dir", str(out))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["iteration"] == 1
    config = json.loads((out / "config.json").read_text())
    assert config["env_id"] == ENVS[name.split("_")[1]]


def test_unknown_variant_is_a_usage_error():
    result = recipe("grpo_alfworld", "tpu", dry_run=True)
    assert result.returncode == 2 and "usage:" in result.stderr


class _Built(Exception):
    """Raised by the fake trainer class: the command got as far as building a trainer."""


def gpu_config(name: str, monkeypatch) -> tuple[str, str, object]:
    """(env, model, config) that the recipe's one-GPU command builds its trainer with, read by
    running that command's ``rspo-gym train`` up to the trainer (vLLM need not be installed)."""
    pytest.importorskip("torch")
    import rspo_gym.algos
    import rspo_gym.cli

    printed = recipe(name, "gpu", dry_run=True)
    assert printed.returncode == 0, printed.stderr
    argv = shlex.split(printed.stdout)
    assert argv[:2] == ["rspo-gym", "train"]
    built = {}

    def fake_trainer(env, model, config):
        built.update(env=env, model=model, config=config)
        raise _Built

    algo = argv[argv.index("--algo") + 1]
    cls = {"grpo": "GRPOTrainer", "ppo": "PPOTrainer", "gigpo": "GiGPOTrainer", "rspo": "RSPOTrainer"}[algo]
    monkeypatch.setattr(rspo_gym.algos, cls, fake_trainer)
    monkeypatch.setattr(rspo_gym.cli, "check_generation_backend", lambda backend: None)
    with pytest.raises(_Built):
        rspo_gym.cli.main(argv[1:])
    return built["env"], built["model"], built["config"]


@pytest.mark.parametrize("name", NAMES)
def test_gpu_variant_has_the_training_at_scale_settings(name, monkeypatch):
    algo, env_key = name.split("_")
    env, model, config = gpu_config(name, monkeypatch)
    assert (env, model) == (ENVS[env_key], "Qwen/Qwen2.5-1.5B-Instruct")
    # 16 tasks x 8 trajectories; PPO plays the same 128 trajectories one per task
    assert (config.num_groups, config.group_size) == ((128, 1) if algo == "ppo" else (16, 8))
    alfworld = env_key == "alfworld"
    assert config.max_prompt_length == (2048 if alfworld else 4096)
    assert config.mini_batch_size == (256 if alfworld else 64)
    assert config.max_turns == (50 if alfworld else 15)
    assert (config.max_new_tokens, config.think, config.constrained) == (512, True, False)
    assert (config.learning_rate, config.kl_coef, config.iterations) == (1e-6, 0.01, 150)
    assert (config.generation_backend, config.gradient_checkpointing, config.max_tokens_per_micro_batch) == ("vllm", True, 16384)
    if algo == "rspo":
        assert (config.base, config.swap, config.explorer_lora) == ("gigpo", "explorer", True)


@pytest.mark.parametrize("name", NAMES)
def test_launch_variant_is_the_gpu_run_under_accelerate(name, monkeypatch):
    gpu = shlex.split(recipe(name, "gpu", dry_run=True).stdout)
    launch = shlex.split(recipe(name, "launch", dry_run=True).stdout)
    assert launch == ["accelerate", "launch", "--num_processes", "8", "-m", "rspo_gym", *gpu[1:]]
    monkeypatch.setenv("NUM_GPUS", "4")
    assert shlex.split(recipe(name, "launch", dry_run=True).stdout)[:4] == ["accelerate", "launch", "--num_processes", "4"]
