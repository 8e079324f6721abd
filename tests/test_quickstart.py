"""The quick start does fixed, seeded work: its plan never reads the clock, the same config gives
the same numbers on a busy machine, and an opt-in time limit says what it cut."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rspo_gym.quickstart import QuickstartConfig, episode_matrix, estimated_seconds, plan

ROOT = Path(__file__).resolve().parents[1]

TINY_TRAINER = {"num_groups": 1, "group_size": 2, "explorer_group_size": 1, "max_turns": 3, "progress": False,
                "eval_temperature": 1.0}


def _tiny(tmp_path, name: str, **changes) -> QuickstartConfig:
    fields = {"train_tasks": 2, "eval_tasks": 2, "eval_episodes": 2, "iterations": 2, "eval_every": 1,
              "output_dir": str(tmp_path / name), "trainer_overrides": TINY_TRAINER, **changes}
    return QuickstartConfig(**fields)


def test_the_default_plan_is_fixed_work_that_does_not_read_the_clock(monkeypatch):
    work = plan(QuickstartConfig())
    assert (work["iterations"], work["evaluate_after"], work["eval_episodes"]) == (24, [0, 12, 24], 4)
    assert plan(QuickstartConfig(eval_every=0))["evaluate_after"] == [0, 24]
    assert len(work["eval_task_ids"]) == 35 and len(work["train_task_ids"]) == 64
    assert work["trajectories_per_iteration"] == 4 * 4  # the rank swap samples no explorer trajectories
    assert plan(QuickstartConfig(swap="explorer"))["trajectories_per_iteration"] == 4 * (4 + 2)
    estimate = estimated_seconds(work)
    assert 5 * 60 < estimate <= 10 * 60  # the README's "about 10 minutes on 2 cores"
    for clock in ("time", "perf_counter", "monotonic"):  # a machine whose clock says something else entirely
        monkeypatch.setattr(time, clock, lambda: 1e12)
    assert plan(QuickstartConfig()) == work and estimated_seconds(plan(QuickstartConfig())) == estimate


def test_another_seed_is_the_same_experiment_with_other_draws():
    zero, one = plan(QuickstartConfig()), plan(QuickstartConfig(seed=1))
    assert {k: v for k, v in zero.items() if k != "seed"} == {k: v for k, v in one.items() if k != "seed"}


def test_episode_matrix_reads_rounds_of_every_task():
    from types import SimpleNamespace as T

    wins = [T(won=w) for w in (True, False, True, True, False, False)]
    assert episode_matrix(wins, [10, 11, 12], 2) == [[1.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="expected 6 episodes, got 5"):
        episode_matrix(wins[:5], [10, 11, 12], 2)


@pytest.mark.parametrize("field, value", [("iterations", 0), ("eval_episodes", -1), ("threads", 1.5), ("eval_every", -1),
                                          ("time_limit_minutes", 0), ("train_tasks", True), ("cpu_capability", "avx1024")])
def test_bad_settings_are_refused_when_the_config_is_made(field, value):
    with pytest.raises(ValueError, match=field):
        QuickstartConfig(**{field: value})


_RECORD = """
import hashlib, json, sys
from rspo_gym.quickstart import QuickstartConfig, run_quickstart
fields = json.loads(sys.argv[1])
summary = run_quickstart(QuickstartConfig(**fields))
rows = [json.loads(line) for line in open(fields["output_dir"] + "/metrics.jsonl")]
rows = [{k: v for k, v in row.items() if not k.startswith("time/")} for row in rows]  # seconds differ, nothing else
digest = hashlib.sha256(open(fields["output_dir"] + "/policy/model.safetensors", "rb").read()).hexdigest()
print("RECORD " + json.dumps({"summary": {k: v for k, v in summary.items() if k not in ("seconds", "config")}, "rows": rows, "policy": digest}))
"""


def _record(config: QuickstartConfig, env: dict[str, str] | None = None) -> dict:
    fields = {k: getattr(config, k) for k in ("train_tasks", "eval_tasks", "eval_episodes", "iterations", "eval_every",
                                              "output_dir", "trainer_overrides", "cpu_capability")}
    environment = None if env is None else {**os.environ, **env}
    out = subprocess.run([sys.executable, "-c", _RECORD, json.dumps(fields)], capture_output=True, text=True, timeout=300, env=environment)
    assert out.returncode == 0, out.stderr[-2000:]
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("RECORD ")]
    return json.loads(line[len("RECORD "):])


@pytest.mark.slow
def test_a_short_quick_start_is_bit_identical_alone_and_beside_a_busy_process(tmp_path):
    pytest.importorskip("transformers")
    alone = _record(_tiny(tmp_path, "alone"))
    busy = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: sum(i * i for i in range(10**6))"])
    try:
        loaded = _record(_tiny(tmp_path, "loaded"))
    finally:
        busy.kill()
    assert alone == loaded
    assert [row["iteration"] for row in alone["rows"]] == [1, 2]
    assert alone["summary"]["iterations"] == alone["summary"]["iterations_planned"] == 2
    assert all(row["train/entropy"] > 0 for row in alone["rows"])  # float sums of real forward passes are compared


def test_an_opt_in_time_limit_says_how_many_iterations_ran(tmp_path):
    pytest.importorskip("transformers")
    from rspo_gym.quickstart import run_quickstart

    summary = run_quickstart(_tiny(tmp_path, "limited", iterations=50, time_limit_minutes=1e-3))
    assert summary["iterations_planned"] == 50 and summary["iterations"] < 50 and summary["cut_short_by_time_limit"]
    assert summary["evaluations"][-1]["iteration"] == summary["iterations"]  # the result is measured where training stopped
    assert "of the 50 planned RL iterations" in (tmp_path / "limited" / "summary.md").read_text()
    assert json.loads((tmp_path / "limited" / "summary.json").read_text())["held_out_gain_ci_low"] <= summary["held_out_gain"]


@pytest.mark.slow
def test_the_pinned_kernels_give_the_same_numbers_whatever_vector_unit_torch_would_pick(tmp_path):
    """``ATEN_CPU_CAPABILITY`` in the environment stands in for a CPU with or without wider vectors."""
    pytest.importorskip("transformers")
    outer = ("avx2", "default")  # every x86-64 machine can run both
    pinned = [_record(_tiny(tmp_path, f"pinned-{cap}"), env={"ATEN_CPU_CAPABILITY": cap}) for cap in outer]
    assert pinned[0] == pinned[1]
    assert pinned[0]["summary"]["cpu_capability"] == "AVX2"
    native = [_record(_tiny(tmp_path, f"native-{cap}", cpu_capability=None), env={"ATEN_CPU_CAPABILITY": cap}) for cap in outer]
    assert [r["summary"]["cpu_capability"] for r in native] == ["AVX2", "DEFAULT"]
    assert native[0]["policy"] != native[1]["policy"]  # what the pin prevents: other kernels, other float sums


@pytest.mark.slow
def test_the_pins_hold_against_the_vector_units_a_user_or_a_cpu_asks_for(tmp_path):
    """The variables that pick MKL's and ATen's code paths, set in the user's environment, each in
    a fresh process: the pinned weights come out the same bits under all of them. MKL honours a
    user's ``MKL_ENABLE_INSTRUCTIONS=AVX512`` over ``MKL_CBWR=AVX2``, so the pin removes it."""
    pytest.importorskip("transformers")
    outer = [{"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, {"MKL_ENABLE_INSTRUCTIONS": "AVX512"},
             {"ATEN_CPU_CAPABILITY": "avx2"}, {"ATEN_CPU_CAPABILITY": "avx512"}]
    records = [_record(_tiny(tmp_path, f"outer-{i}", iterations=1, eval_every=0), env=env) for i, env in enumerate(outer)]
    assert [r["policy"] for r in records] == [records[0]["policy"]] * len(outer)
    assert records[0]["summary"]["weights_sha256"] != records[0]["policy"]  # a sha256 of the tensors, not of the file
    assert {r["summary"]["mkl_branch"] for r in records} <= {"AVX2", "n/a"}  # n/a: a torch without MKL


def test_the_time_it_takes_is_one_number_with_its_cpu_wherever_it_is_said():
    """The plan's estimate, ``--help`` and the config's doc say the same minutes on the same CPU
    (they said 5, 5.5 and 5.4, with no CPU); the README and the quick start's page give the range
    of idle runs on that CPU, which holds the estimate."""
    from rspo_gym.cli import build_parser

    minutes = estimated_seconds(plan(QuickstartConfig())) / 60
    claim = f"{minutes:.1f} minutes on 2 idle AMD EPYC cores"
    assert claim in " ".join(build_parser().format_help().split())
    assert claim in " ".join(QuickstartConfig.__doc__.split())
    for page in (ROOT / "README.md", ROOT / "docs" / "quickstart.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        sentence = re.search(r"(\d+\.\d)–(\d+\.\d) minutes on an idle 2-core AMD EPYC", text)
        assert sentence, f"{page.name} gives no range of minutes on the idle 2-core AMD EPYC"
        low, high = (float(v) for v in sentence.groups())
        assert low <= round(minutes, 1) <= high, (page.name, low, minutes, high)


#: A row of the quick start page's table: CPU (and seed), held-out success at 0, 12 and 24, the gain.
_ROW = re.compile(r"^\| (AMD EPYC|Intel Xeon)([^|]*)\| ([\d.]+) % \| ([\d.]+) % \| ([\d.]+) % \| "
                  r"\*\*([+−][\d.]+) \[([+−][\d.]+), ([+−][\d.]+)\]\*\* \|", re.M)


def quoted_runs() -> dict[tuple[str, int], tuple[str, ...]]:
    """``(CPU, seed)`` -> the numbers ``docs/quickstart.md`` quotes, as the quick start prints them."""
    page = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    runs = {}
    for cpu, rest, *numbers in _ROW.findall(page):
        seed = re.search(r"seed (\d+)", rest)
        runs[(cpu, int(seed.group(1)) if seed else 0)] = tuple(n.replace("−", "-") for n in numbers)
    return runs


def test_the_readme_quotes_the_quick_start_page_on_the_cpu_it_names():
    runs = quoted_runs()
    assert {("AMD EPYC", 0), ("AMD EPYC", 1), ("AMD EPYC", 2), ("Intel Xeon", 0)} <= set(runs)
    start, middle, end, gain, low, high = runs[("AMD EPYC", 0)]
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"idle 2-core AMD EPYC it prints held-out success {start} % → {middle} % → {end} %" in readme
    assert f"a gain of {gain} points [{low}, {high}]".replace("-", "−") in readme


def printed_run(stdout: str) -> tuple[str, ...]:
    """The numbers of a quick start's printed summary, in the order of the page's table.

    >>> printed_run("- gain: +16.4%, 95 % interval [+5.0%, +27.9%] (paired)\\n| 0 | 27.9% | [1%, 2%] |\\n"
    ...             "| 12 | 30.0% | [1%, 2%] |\\n| 24 | 44.3% | [1%, 2%] |")
    ('27.9', '30.0', '44.3', '+16.4', '+5.0', '+27.9')
    """
    successes = re.findall(r"^\| \d+ \| ([\d.]+)% \|", stdout, re.M)
    gain = re.search(r"^- gain: ([+-][\d.]+)%, 95 % interval \[([+-][\d.]+)%, ([+-][\d.]+)%\]", stdout, re.M)
    return (*successes, *gain.groups())


def this_cpu() -> str | None:
    """The page's name for this machine's CPU, or None where the page names none for it."""
    from rspo_gym.quickstart import cpu_description

    model = cpu_description()["cpu"]
    return "AMD EPYC" if "AMD EPYC" in model else "Intel Xeon" if "Intel" in model and "Xeon" in model else None


@pytest.mark.slow
@pytest.mark.long
def test_the_quick_start_prints_the_numbers_its_page_quotes_for_this_cpu(tmp_path):
    """The README's command, run whole (5.4–8.5 idle minutes on 2 cores), prints the row of
    ``docs/quickstart.md`` for this CPU, to the digit."""
    pytest.importorskip("transformers")
    cpu = this_cpu()
    if cpu is None:
        pytest.skip("docs/quickstart.md quotes the quick start on AMD EPYC and Intel Xeon CPUs only; MKL's branch "
                    "differs by CPU maker, so another CPU prints other numbers")
    out = subprocess.run([sys.executable, "-m", "rspo_gym", "quickstart", "--output-dir", str(tmp_path / "qs")],
                         capture_output=True, text=True, timeout=4 * 3600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert printed_run(out.stdout) == quoted_runs()[(cpu, 0)], out.stdout[-1500:]
