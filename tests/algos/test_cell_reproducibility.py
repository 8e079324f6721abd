"""Archived cells of the explorer study rerun to the same numbers: every evaluation (per goal), the
training curve and the group outcomes, each value equal, not close (wall time and memory aside).

``micro-v1-bases`` is one explorer cell of each base (grpo, ppo, gigpo) and PPO's matched control,
small enough for every CI run; its cells were made at the commit that added this file (with the
kernels pinned below). The slow test reruns one real cell of the WebShop-v1 study's archive
(``docs/results_fast/webshop_v1_cells.tar.gz``): PPO ``agent-helpful`` seed 0, the cell an audit
saw differ on another machine.

The reruns pin torch's AVX2 kernels and MKL's ``COMPATIBLE`` branch (the drrn commands' pins,
``rspo_gym.cpu_settings``): MKL promises that branch the same results on Intel and AMD CPUs. On
the Xeon (AVX-512) that made the archives, the WebShop-v1 cell gave the same bits with or without
those pins and with numpy's AVX-512 kernels turned off."""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MICRO_CELLS = Path(__file__).resolve().parent / "data" / "micro_v1_cells.json"
V1_ARCHIVE = ROOT / "docs" / "results_fast" / "webshop_v1_cells.tar.gz"
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "HF_HUB_OFFLINE": "1"}
UNTIMED = ("seconds", "peak_rss_mb")


def _rerun(out: Path, *argv: str) -> dict[str, dict]:
    """Run ``benchmarks/rspo_matrix.py`` in a fresh process (the pins take effect only there) and
    return its cells by file stem, without their wall time and memory."""
    env = {k: v for k, v in os.environ.items() if k != "MKL_ENABLE_INSTRUCTIONS"} | PINNED
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rspo_matrix.py"), *argv, "--jobs", "1", "--out", str(out)],
                          env=env, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    cells = {}
    for path in sorted((out / "cells").glob("*.json")):
        record = json.loads(path.read_text())
        cells[path.stem] = {k: v for k, v in record.items() if k not in UNTIMED}
    return cells


def _differences(archived: dict, rerun: dict) -> list[str]:
    """The archived keys whose values differ in the rerun, with the first differing evaluation
    named (its goal too). A key the rerun adds (a metric recorded since) is no difference."""
    out = []
    for key in sorted(archived):
        if archived.get(key) == rerun.get(key):
            continue
        if key == "evals" and len(archived[key]) == len(rerun.get(key) or []):
            for i, (a, b) in enumerate(zip(archived[key], rerun[key])):
                if a != b:
                    goal = next((g for g, (x, y) in enumerate(zip(a["per_task"], b["per_task"])) if x != y), None)
                    out.append(f"evals[{i}] (T = {a['temperature']}) from goal {goal}: success {a['success']} -> {b['success']}")
        else:
            out.append(key)
    return out


def test_one_cell_of_each_base_reruns_to_its_archived_numbers(tmp_path):
    archived = json.loads(MICRO_CELLS.read_text())
    assert {record["base"] for record in archived.values()} == {"grpo", "ppo", "gigpo"}
    rerun = _rerun(tmp_path, "--preset", "micro-v1-bases")
    assert sorted(rerun) == sorted(archived)
    for name, record in archived.items():
        assert record["train_curve"] and record["groups"] and len(record["evals"]) == 5
        assert not _differences(record, rerun[name]), (name, _differences(record, rerun[name]))


@pytest.mark.slow
@pytest.mark.long
def test_the_webshop_v1_study_s_ppo_explorer_cell_reruns_to_its_archived_numbers(tmp_path):
    name = "WebShop-v1-ppo-agent-helpful-seed0"
    with tarfile.open(V1_ARCHIVE) as tar:
        archived = json.load(tar.extractfile(f"cells/{name}.json"))
        start = tar.extractfile("starts/WebShop-v1-seed0.json").read()
    (tmp_path / "starts").mkdir()
    (tmp_path / "starts" / "WebShop-v1-seed0.json").write_bytes(start)  # the untrained start, measured once
    rerun = _rerun(tmp_path, "--preset", "webshop-v1", "--bases", "ppo", "--arms", "agent-helpful", "--seeds", "0")
    archived = {k: v for k, v in archived.items() if k not in UNTIMED}
    assert not _differences(archived, rerun[name]), _differences(archived, rerun[name])
