"""torch's threads and code paths in a user's script as in the command line: the wait policy set at
import, the drrn scorer's one thread, unusable thread variables told, and the scorer's pinned
kernels holding its numbers on every CPU."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from rspo_gym.cpu_settings import prepare_process, variable_problems

#: Variables that would change what a fresh process does: each test sets its own.
_CLEARED = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY")


def _python(code: str, env: dict[str, str] | None = None, *args: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          env={**environment, **(env or {})})


def _last_json(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("threads", ["1", "4", "2,1", " 3 "])
def test_usable_thread_counts_and_mkl_branches_are_no_problem(threads):
    for branch in ("", "COMPATIBLE", "AVX2", "AVX2,STRICT", "BRANCH=AVX512_E1", "AUTO"):
        assert variable_problems({"OMP_NUM_THREADS": threads, "MKL_CBWR": branch}) == []


@pytest.mark.parametrize("name, value", [("OMP_NUM_THREADS", "0"), ("OMP_NUM_THREADS", "-1"), ("OMP_NUM_THREADS", "garbage"),
                                         ("OMP_NUM_THREADS", "3abc"), ("MKL_CBWR", "garbage"), ("MKL_CBWR", "avx2"),
                                         ("MKL_CBWR", " AVX2"), ("MKL_CBWR", "AVX10")])
def test_an_unusable_value_is_one_line_that_names_it(name, value):
    (problem,) = variable_problems({name: value})
    assert problem.startswith(f"{name}={value!r} is not ") and "\n" not in problem


def test_the_wait_policy_is_passive_unless_the_user_chose_one_or_torch_has_loaded():
    environ: dict[str, str] = {}
    prepare_process(environ, modules={})
    assert environ == {"OMP_WAIT_POLICY": "PASSIVE"}
    chosen = {"OMP_WAIT_POLICY": "ACTIVE"}
    prepare_process(chosen, modules={})
    assert chosen == {"OMP_WAIT_POLICY": "ACTIVE"}
    late: dict[str, str] = {}
    prepare_process(late, modules={"torch": object()})  # OpenMP has read its variables: nothing to pretend
    assert late == {}


def test_importing_rspo_gym_lets_openmp_threads_sleep_in_a_script():
    """A script gets the command line's wait policy: OpenMP reads it when torch loads."""
    shown = _last_json(_python("import json, os, rspo_gym, torch; print(json.dumps(os.environ.get('OMP_WAIT_POLICY')))"))
    assert shown == "PASSIVE"


_API = """
import json, sys, tempfile, warnings
warnings.simplefilter("always")
from rspo_gym import GRPOTrainer
import torch
if len(sys.argv) > 1:
    torch.set_num_threads(int(sys.argv[1]))
before = torch.get_num_threads()
seen = []
with tempfile.TemporaryDirectory() as out, warnings.catch_warnings(record=True) as caught:
    trainer = GRPOTrainer("rspo/WebShop-v0", model="drrn", num_groups=1, group_size=2, max_turns=2, eval_every=1,
                          eval_tasks=1, progress=False, output_dir=out)
    trainer.learn(1, callback=lambda t, m: seen.append(torch.get_num_threads()))
    trainer.close()
print(json.dumps({"before": before, "during": seen[0], "after": torch.get_num_threads(),
                  "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]}))
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: torch's default is already one thread")
def test_the_scorer_trains_on_one_thread_in_a_script_and_gives_the_count_back():
    pytest.importorskip("torch")
    from rspo_gym.cpu_settings import default_threads

    run = _last_json(_python(_API))
    assert run == {"before": default_threads(), "during": 1, "after": default_threads(), "warnings": []}


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: torch's default is already one thread")
@pytest.mark.parametrize("env, args, during", [({"OMP_NUM_THREADS": "2"}, (), 2), ({}, ("3",), 3)])
def test_a_thread_count_the_user_chose_wins(env, args, during):
    pytest.importorskip("torch")
    run = _last_json(_python(_API, env, *args))
    assert run["during"] == during and run["after"] == during and run["warnings"] == []


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: torch's default is already one thread")
@pytest.mark.parametrize("value", ["0", "garbage", "-1"])
def test_an_unusable_omp_num_threads_is_warned_in_one_line_and_the_scorer_still_runs_on_one_thread(value):
    """Before, any OMP_NUM_THREADS turned the one-thread rule off, silently; an unusable one also
    made torch take a thread per core, and the metrics changed."""
    pytest.importorskip("torch")
    run = _last_json(_python(_API, {"OMP_NUM_THREADS": value}))
    assert run["during"] == 1
    assert run["warnings"] == variable_problems({"OMP_NUM_THREADS": value})


def test_an_unusable_mkl_cbwr_is_warned_in_a_script():
    pytest.importorskip("torch")
    run = _last_json(_python(_API, {"MKL_CBWR": "garbage"}))
    assert run["warnings"] == variable_problems({"MKL_CBWR": "garbage"})


@pytest.mark.parametrize("name, value", [("OMP_NUM_THREADS", "garbage"), ("MKL_CBWR", "avx2")])
def test_the_command_line_refuses_an_unusable_variable_in_one_line_before_it_loads_anything(name, value):
    done = _python("import sys; from rspo_gym.cli import main; sys.exit(main(sys.argv[1:]))", {name: value},
                   "train", "--model", "drrn", "--iterations", "1", "--num-groups", "1", "--group-size", "2")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [f"rspo-gym: error: {variable_problems({name: value})[0]}"]


# -- the scorer's numbers on every CPU ----------------------------------------------------------

_DRRN_RUN = ["train", "--env", "rspo/WebShop-v0", "--algo", "grpo", "--model", "drrn", "--iterations", "3", "--group-size", "4",
             "--num-groups", "4", "--eval-tasks", "4", "--set", "eval_every=3", "--set", "progress=false"]
_FINGERPRINT = """
import hashlib, json, sys
from rspo_gym.cli import main
code = main(sys.argv[1:])
import torch
from rspo_gym.quickstart import mkl_branch
state = torch.load(sys.argv[-1] + "/policy/action_scorer.pt", weights_only=True)["model"]
digest = hashlib.sha256()
for name, tensor in sorted(state.items()):
    digest.update(name.encode()); digest.update(tensor.contiguous().numpy().tobytes())
rows = [json.loads(line) for line in open(sys.argv[-1] + "/metrics.jsonl")]
print(json.dumps({"code": code, "sha256": digest.hexdigest(), "kernels": torch.backends.cpu.get_cpu_capability(),
                  "mkl": mkl_branch(), "score": [row["rollout/score"] for row in rows], "eval": rows[-1]["eval/score"]}))
"""

#: The run above on a 2-core Intel Xeon with AVX-512 (ATen's AVX2 kernels, MKL's COMPATIBLE branch).
PINNED_SHA256 = "f2dc58cd050bf2fb2924b290eb320acd52a660e9c3fd03ac7e788f44f3076b29"
PINNED_SCORES = [0.084375, 0.21875, 0.16666666666666666]


def _has_avx2() -> bool:
    from rspo_gym.cpu_settings import _has_avx2 as has

    return platform.machine() in ("x86_64", "AMD64") and has()


@pytest.mark.slow
@pytest.mark.skipif(not _has_avx2(), reason="the scorer's kernels are pinned on x86-64 CPUs with AVX2")
def test_the_drrn_command_trains_to_the_same_bits_under_every_code_path_switch_of_the_cpu(tmp_path):
    """ATen's vector width and MKL's branch are what a CPU's make and model choose; the command
    pins both, so the switches a user or a CPU sets change nothing (before, each changed the
    weights' bits: ``benchmarks/numeric_portability.py --workload drrn --native``)."""
    torch = pytest.importorskip("torch")
    if not torch.backends.mkl.is_available():
        pytest.skip("a torch without MKL")
    switches = [{}, {"ATEN_CPU_CAPABILITY": "avx512"}, {"MKL_CBWR": "AVX2"}, {"MKL_ENABLE_INSTRUCTIONS": "AVX512"}]
    runs = [_last_json(_python(_FINGERPRINT, switch, *_DRRN_RUN, "--output-dir", str(tmp_path / str(i))))
            for i, switch in enumerate(switches)]
    assert {(run["kernels"], run["mkl"]) for run in runs} == {("AVX2", "COMPATIBLE")}
    assert {run["sha256"] for run in runs} == {PINNED_SHA256}
    assert runs[0]["score"] == PINNED_SCORES
