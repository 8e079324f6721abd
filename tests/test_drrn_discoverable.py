"""``--model drrn``, the fast path (a small action-scoring network instead of an LLM), is found
where a newcomer looks for models: ``rspo-gym train --help``, the list a ``--model`` error gives,
and the command-line page, whose one-minute command reaches the trainer as written."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rspo_gym import cli

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rspo_gym", *args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)


def test_train_help_names_drrn():
    done = _cli("train", "--help")
    assert done.returncode == 0, done.stderr
    help_text = " ".join(done.stdout.split())  # argparse's line breaks undone
    assert "drrn (the fast path" in help_text


@pytest.mark.slow
def test_a_model_error_lists_drrn_beside_the_presets():
    pytest.importorskip("transformers")
    done = _cli("train", "--algo", "grpo", "--model", "nonexist", "--iterations", "1", "--set", "progress=false")
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Model 'nonexist' is not available offline" in lines[0], done.stderr[-3000:]
    assert "tiny-alfworld" in lines[0] and "drrn (a trainer's fast action-scoring policy)" in lines[0]


def _documented_drrn_command() -> list[str]:
    """The arguments of the ``rspo-gym train ... --model drrn`` command of docs/cli.md."""
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    commands = [line for line in re.findall(r"^(?:\w+=\S+ )*rspo-gym train .*$", text, re.M) if "--model drrn" in line]
    assert commands, "docs/cli.md shows no rspo-gym train command with --model drrn"
    words = shlex.split(commands[0].split("#")[0])
    return words[words.index("rspo-gym") + 1:]  # after the environment settings and the program


def test_the_documented_drrn_command_reaches_the_trainer(monkeypatch):
    seen = {}

    class _Stop(Exception):
        pass

    def fake_trainer(algo, env, model, overrides):
        seen.update(algo=algo, env=env, model=model, overrides=overrides)
        raise _Stop

    monkeypatch.setattr(cli, "_trainer", fake_trainer)
    with pytest.raises(_Stop):
        cli.main(_documented_drrn_command())
    assert seen["model"] == "drrn"
    cli._checked_config(seen["algo"], seen["overrides"])  # the settings are valid for the algorithm
