"""The command line as a process: the threads it gives torch, and what Ctrl-C prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_THREADS = """
import json, os, sys
from rspo_gym.cli import main
code = main(sys.argv[1:])
import torch
print("THREADS " + json.dumps({"code": code, "threads": torch.get_num_threads(), "wait": os.environ.get("OMP_WAIT_POLICY")}))
"""


def _trainer_threads(tmp_path, name: str, env: dict[str, str], *args: str) -> dict:
    """``rspo-gym train`` with the drrn scorer, as the first thing in a fresh process: torch's
    threads after it and the OpenMP wait policy it ran under."""
    environment = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    command = [sys.executable, "-c", _THREADS, "train", "--algo", "rspo", "--base", "grpo", "--model", "drrn",
               "--iterations", "1", "--num-groups", "1", "--group-size", "2", "--eval-tasks", "1", "--max-turns", "3",
               "--output-dir", str(tmp_path / name), *args]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, env={**environment, **env})
    assert out.returncode == 0, out.stderr[-2000:]
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("THREADS ")]
    return json.loads(line[len("THREADS "):])


def test_the_scorer_trains_on_one_thread_that_waits_passively_unless_the_user_says_otherwise(tmp_path):
    """On a shared CPU torch's default (a thread per core, each spinning while it waits for the
    others) cost the drrn run 13x its CPU time; its matrices are too small to share out."""
    pytest.importorskip("torch")
    chosen = _trainer_threads(tmp_path, "chosen", {})
    assert chosen == {"code": 0, "threads": 1, "wait": "PASSIVE"}
    if os.cpu_count() and os.cpu_count() > 1:
        told = _trainer_threads(tmp_path, "told", {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "ACTIVE"})
        assert told == {"code": 0, "threads": 2, "wait": "ACTIVE"}
