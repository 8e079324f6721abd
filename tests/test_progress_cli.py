"""The commands and examples that evaluate or train for minutes show their progress on stderr:
``rspo-gym eval``, ``examples/evaluate.py`` (a bar over the episodes) and
``examples/sb3_maskable_ppo.py`` (SB3's own bar). Each runs in a subprocess, as a user runs it.

Off a terminal a bar is a line every ``LOG_EVERY_S`` seconds; the runs here take less, so the
subprocess sets it to 0 (every redraw a line) before it runs the command."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}
#: Runs ``sys.argv[1]`` (a module's or a script's name) with the rest of the arguments, a bar's every redraw a line.
EVERY_REDRAW = (
    "import runpy, sys; from rspo_gym.training import progress; progress.LOG_EVERY_S = 0.0; "
    "target, sys.argv = sys.argv[1], sys.argv[1:]; "
    "runpy.run_path(target, run_name='__main__') if target.endswith('.py') else runpy.run_module(target, run_name='__main__')"
)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)


def _last_bar_line(stderr: str, description: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith(f"{description}:")]
    assert lines, stderr[-3000:]
    return lines[-1]


def test_rspo_gym_eval_counts_the_episodes():
    pytest.importorskip("transformers")
    done = _run("-c", EVERY_REDRAW, "rspo_gym", "eval", "--model", "drrn", "--tasks", "2", "--max-turns", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    line = _last_bar_line(done.stderr, "evaluating rspo/ALFWorld-v0")
    assert "100%" in line and "2/2 episodes" in line and ", turn 2, " in line and line.endswith(" steps/s")
    assert "eval/success" in done.stdout and "\r" not in done.stderr


@pytest.mark.slow
def test_examples_evaluate_counts_the_episodes():
    pytest.importorskip("transformers")
    done = _run("-c", EVERY_REDRAW, "examples/evaluate.py", "--model", "drrn", "--tasks", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    line = _last_bar_line(done.stderr, "evaluating rspo/ALFWorld-v0")
    assert "100%" in line and "2/2 episodes" in line and "eval/success" in done.stdout


def test_the_sb3_example_shows_sb3s_progress_bar():
    pytest.importorskip("sb3_contrib")
    pytest.importorskip("rich")
    done = _run("examples/sb3_maskable_ppo.py", "--timesteps", "64", "--n-steps", "64", "--num-products", "100",
                "--eval-goals", "1", "--dim", "256")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "64/64" in done.stdout and "MaskablePPO on 1 held-out goals" in done.stdout  # off a terminal rich draws the bar once, at its end
