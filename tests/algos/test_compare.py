"""The comparison benchmark's pipeline (``benchmarks/compare.py --preset micro``): cells, resume, table."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _compare_module():
    # importable by its own name: cells run in spawned processes that unpickle ``compare.run_cell``
    sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("compare", BENCHMARKS / "compare.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_micro_comparison_writes_cells_resumes_and_tabulates(tmp_path, monkeypatch):
    compare = _compare_module()
    assert compare.main(["--preset", "micro", "--out", str(tmp_path)]) == 0
    out = tmp_path / "micro"
    cells = sorted((out / "cells").glob("*.json"))
    assert len(cells) == 4
    for path in cells:
        cell = json.loads(path.read_text())
        assert cell["env_steps"] >= 16 and 0.0 <= cell["success"] <= 1.0 and cell["generated_tokens"] > 0
        assert cell["seconds_per_iteration"] > 0 and cell["peak_rss_mb"] > 100  # its own process: torch is in it
    start = json.loads((out / "initial" / "ALFWorld-v0.json").read_text())
    table = (out / "compare.md").read_text()
    assert f"| rspo/ALFWorld-v0 | ppo | rspo-explorer | 1 | {cell_success(out, 'ppo', 'rspo-explorer'):.3f} ({start['success']:.3f}) |" in table

    def refuse(*args, **kwargs):
        raise AssertionError("a finished cell was run again")

    monkeypatch.setattr(compare, "run_cell", refuse)
    monkeypatch.setattr(compare, "evaluate_start", refuse)
    assert compare.main(["--preset", "micro", "--out", str(tmp_path)]) == 0  # everything resumed


def cell_success(out: Path, base: str, variant: str) -> float:
    return json.loads((out / "cells" / f"ALFWorld-v0-{base}-{variant}-seed0.json").read_text())["success"]


def test_curves_table_starts_from_the_initial_policy():
    compare = _compare_module()
    cell = {
        "env": "rspo/WebShop-v0", "base": "gigpo", "variant": "rspo-anneal", "seed": 0, "success": 0.1, "score": 0.4,
        "seconds": 60.0, "generated_tokens": 100, "seconds_per_iteration": 20.0, "peak_rss_mb": 900.0,
        "curve": [{"iteration": 1, "env_steps": 120, "success": 0.05, "score": 0.3}, {"iteration": 2, "env_steps": 240, "success": 0.1, "score": 0.4}],
    }
    initial = {"rspo/WebShop-v0": {"success": 0.0, "score": 0.2}}
    assert "| rspo/WebShop-v0 | gigpo | rspo-anneal | 0 | 0: 0.00 (0.20) → 1: 0.05 (0.30) → 2: 0.10 (0.40) |" in compare.curves_table([cell], initial)
    row = compare.summarise([cell], initial).splitlines()[2]
    assert row == "| rspo/WebShop-v0 | gigpo | rspo-anneal | 1 | 0.100 (0.000) | 0.400 (0.200) | – | 20 | 900 | 1.0 | 100 |"
    measured = {**cell, "heldout": {"success": 0.05, "score": 0.35, "tasks": 100}}
    start = {"rspo/WebShop-v0": {**initial["rspo/WebShop-v0"], "heldout": {"success": 0.1, "score": 0.41, "tasks": 100}}}
    assert "| 0.400 (0.200) | 0.350 (0.410) | 20 |" in compare.summarise([measured], start)
    old = {k: v for k, v in cell.items() if k not in ("seconds_per_iteration", "peak_rss_mb", "curve")}
    assert "| – | – | – |" in compare.summarise([old], {})  # cells recorded before those fields existed
    assert compare.curves_table([old], {}) == ""


def test_learning_preset_has_the_eleven_combinations_and_scores_webshop():
    compare = _compare_module()
    preset = compare.PRESETS["learning"]
    pairs = preset.pairs()
    expected = {(base, variant) for base in ("grpo", "ppo", "gigpo") for variant in ("outcome", "dense", "rspo-explorer")}
    assert set(pairs) == expected | {("grpo", "rspo-rank"), ("grpo", "rspo-anneal")} and len(pairs) == 11
    dense = compare._trainer("rspo/WebShop-v0", "gigpo", "dense", 0, preset)
    explorer = compare._trainer("rspo/WebShop-v0", "grpo", "rspo-explorer", 0, preset)
    alfworld = compare._trainer("rspo/ALFWorld-v0", "grpo", "outcome", 0, preset)
    assert (dense.config.reward, dense.config.dense_outcome, dense.process_gamma) == ("dense", "score", 0.95)
    assert (explorer.config.reward, explorer.config.dense_outcome) == ("score", "score")
    assert (alfworld.config.reward, alfworld.config.dense_outcome) == ("outcome", "outcome")
    assert dense.config.train_task_ids == [0, 1, 2, 3] and dense.config.eval_task_ids == [0, 1, 2, 3] * 8
    assert (dense.config.eval_split, dense.config.eval_temperature, dense.config.learning_rate) == ("train", 0.4, 1e-3)
    assert (alfworld.config.eval_split, alfworld.config.learning_rate) == ("valid_seen", 3e-4)  # WebShop's recipe stays WebShop's
    for trainer in (dense, explorer, alfworld):
        trainer.close()
