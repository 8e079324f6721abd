"""Every script in ``examples/`` runs, at a tiny size, and produces what its docstring promises."""

import importlib.util
import math
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_is_tested():
    tested = {"train_rspo_alfworld", "evaluate", "sb3_maskable_ppo", "custom_text_env", "trl_grpo"}
    assert {p.stem for p in EXAMPLES.glob("*.py")} == tested


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("example") / "run"
    returned = load("train_rspo_alfworld").main([
        "--iterations", "1", "--num-groups", "1", "--group-size", "2", "--train-tasks", "2",
        "--eval-tasks", "1", "--max-turns", "2", "--output-dir", str(out),
    ])
    return Path(returned)


def test_train_rspo_alfworld_writes_a_run_folder(trained_run):
    for name in ("config.json", "metrics.csv", "checkpoint.pt", "learning_curve.png"):
        assert (trained_run / name).is_file(), name
    assert (trained_run / "policy").is_dir()


def test_evaluate_a_trained_run(trained_run, capsys):
    metrics = load("evaluate").main(["--model", str(trained_run), "--tasks", "1"])
    assert 0.0 <= metrics["eval/success"] <= 1.0
    assert "eval/success" in capsys.readouterr().out


def test_sb3_maskable_ppo():
    pytest.importorskip("sb3_contrib")
    success = load("sb3_maskable_ppo").main(["--timesteps", "64", "--n-steps", "64", "--num-products", "100", "--eval-goals", "1", "--dim", "256"])
    assert success in (0.0, 1.0)


def test_custom_text_env(tmp_path, capsys):
    pytest.importorskip("transformers")
    module = load("custom_text_env")
    env = module.make_env()
    obs, info = env.reset(seed=0)
    assert (obs, info["admissible_actions"]) == ("You are 3 steps from the door.", ["go left", "go right"])
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step("go right")
    assert (reward, terminated, info["won"]) == (1.0, True, True)
    history = module.main(["--iterations", "1", "--num-groups", "1", "--group-size", "2", "--max-turns", "4",
                           "--eval-tasks", "1", "--output-dir", str(tmp_path / "corridor")])
    assert len(history) == 1 and not math.isnan(history[0]["eval/success"])
    assert (tmp_path / "corridor" / "policy").is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["window", "tools"])
def test_trl_grpo(mode, tmp_path):
    pytest.importorskip("trl")
    rewards = load("trl_grpo").main(["--mode", mode, "--steps", "1", "--tasks", "1", "--group-size", "2", "--max-turns", "1",
                                     "--max-new-tokens", "4", "--max-completion-length", "16", "--output-dir", str(tmp_path)])
    assert len(rewards) == 1 and rewards[0] in (0.0, 5.0, 10.0)


def test_trl_grpo_plays_the_env_with_the_clone(tmp_path, capsys):
    """The example's default run plays episodes: the default model is the env's clone, which writes
    actions the env takes (the random ``tiny`` model's replies are no actions: nothing was played)."""
    pytest.importorskip("trl")
    load("trl_grpo").main(["--steps", "1", "--tasks", "1", "--group-size", "2", "--max-turns", "3", "--max-new-tokens", "12",
                           "--output-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "2 episodes played" in out and "3.0 turns on average" in out, out
    actions = out.rsplit("\n  ", 1)[1].strip().split(" -> ")
    assert len(actions) == 3 and all(a.split(" ")[0] in {"go", "take", "open", "put", "examine", "look", "inventory", "close"} for a in actions), actions
