"""Every kind of model a run can be trained with is evaluated from its run folder, by
``rspo-gym eval`` and by ``examples/evaluate.py``: the fast action-scoring policy (``--model drrn``,
whose ``policy/`` holds ``action_scorer.pt``, not a transformers model) and the LLM presets.

The runs are trained in-process (a second each); the evaluations run in subprocesses, as a user
runs them, so the exit code and the output are the real ones."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module", params=["drrn", pytest.param("tiny-untrained", marks=pytest.mark.slow)])
def run_folder(request, tmp_path_factory) -> Path:
    """A one-iteration GRPO run of the model ``request.param`` (two turns, two held-out tasks)."""
    pytest.importorskip("transformers")
    from rspo_gym import GRPOTrainer

    out = tmp_path_factory.mktemp(request.param) / "run"
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model=request.param, iterations=1, num_groups=1, group_size=2, max_turns=2,
                          eval_tasks=2, eval_every=0, progress=False, output_dir=str(out))
    trainer.learn()
    trainer.close()
    return out


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *command], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)


def test_rspo_gym_eval_reads_the_run_folder(run_folder):
    done = _run("-m", "rspo_gym", "eval", "--model", str(run_folder), "--set", "progress=false")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "max_turns 2" in done.stdout and "eval/success" in done.stdout


def test_examples_evaluate_reads_the_runs_policy(run_folder):
    done = _run("examples/evaluate.py", "--model", str(run_folder / "policy"), "--tasks", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "eval/success" in done.stdout
