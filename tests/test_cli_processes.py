"""The command line as a process: the threads it gives torch, and what Ctrl-C prints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

_THREADS = """
import json, os, sys
from rspo_gym.cli import main
from rspo_gym.training.trainer import Trainer
import torch
seen, schedule_lr = set(), Trainer.schedule_lr
Trainer.schedule_lr = lambda self, *a: seen.add(torch.get_num_threads()) or schedule_lr(self, *a)
code = main(sys.argv[1:])
print("THREADS " + json.dumps({"code": code, "threads": sorted(seen), "wait": os.environ.get("OMP_WAIT_POLICY")}))
"""


def _trainer_threads(tmp_path, name: str, env: dict[str, str], *args: str) -> dict:
    """``rspo-gym train`` with the drrn scorer, as the first thing in a fresh process: torch's
    threads while it trained and the OpenMP wait policy it ran under."""
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
    assert chosen == {"code": 0, "threads": [1], "wait": "PASSIVE"}
    if os.cpu_count() and os.cpu_count() > 1:
        told = _trainer_threads(tmp_path, "told", {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "ACTIVE"})
        assert told == {"code": 0, "threads": [2], "wait": "ACTIVE"}


def _as_a_terminal_starts_it() -> None:
    """SIGINT unblocked and at its default in the child, as a shell starts a command: a child
    inherits its parent's signal mask and ignored signals, and the test process's may have been
    changed by the libraries earlier tests ran (in the whole suite the interrupted command never
    saw the signal; alone it did)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(command: list[str], ready: str, tmp_path) -> subprocess.CompletedProcess:
    """Run ``command`` in its own process group and, once ``ready`` is a line of its stdout or a
    file under ``tmp_path``, send the group SIGINT, as Ctrl-C in a terminal does."""
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with open(stdout, "w") as out, open(stderr, "w") as err:
        process = subprocess.Popen([sys.executable, "-m", "rspo_gym", *command], stdout=out, stderr=err, text=True,
                                   start_new_session=True, cwd=tmp_path, preexec_fn=_as_a_terminal_starts_it)
        deadline = time.monotonic() + 240
        while not ((tmp_path / ready).exists() or ready in stdout.read_text()):
            assert process.poll() is None and time.monotonic() < deadline, stderr.read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(1.0)  # into the work that follows
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout.read_text(), stderr.read_text())


@pytest.mark.parametrize("command, ready, hint", [
    (["quickstart", "--iterations", "50", "--train-tasks", "2", "--eval-tasks", "1", "--eval-episodes", "1", "--eval-every", "0",
      "--output-dir", "qs"], "[3/3]", "run the same command again"),
    (["train", "--model", "drrn", "--iterations", "500", "--num-groups", "1", "--group-size", "2", "--eval-tasks", "1",
      "--output-dir", "run"], "run/checkpoint.pt", "--output-dir run --resume"),
])
def test_ctrl_c_is_one_line_that_says_how_to_go_on_and_exits_130(tmp_path, command, ready, hint):
    pytest.importorskip("torch")
    done = _interrupt(command, ready, tmp_path)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and lines[0] == done.stderr.rstrip("\n").splitlines()[-1], done.stderr[-3000:]
    assert hint in lines[0]
    assert done.returncode == 130


def test_a_command_run_in_a_process_that_uses_torch_leaves_its_thread_count_as_it_was(tmp_path):
    """Tests and notebooks call ``main()`` again and again: the scorer's one thread is its run's only."""
    torch = pytest.importorskip("torch")
    from rspo_gym.cli import main

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert main(["train", "--model", "drrn", "--iterations", "1", "--num-groups", "1", "--group-size", "2",
                     "--eval-tasks", "1", "--max-turns", "3", "--output-dir", str(tmp_path / "run")]) == 0
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
