"""``rspo-gym compare --x total_env_steps``: runs paired at equal compute, an RSPO explorer's env
steps included, on run folders of the fast policy (``model="drrn"``) trained here in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rspo_gym.cli import main
from rspo_gym.compare.stats import area_under_curve, curve_at
from rspo_gym.training.eval_records import read_evaluations

SETTINGS = dict(model="drrn", iterations=4, group_size=2, num_groups=2, eval_tasks=4, eval_every=1, max_turns=5, progress=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """GRPO (``grpo-<seed>``) and RSPO with an explorer of 2 episodes per task (``rspo-<seed>``),
    seeds 0 and 1: an RSPO iteration takes twice the env steps of a GRPO one."""
    import torch

    from rspo_gym import GRPOTrainer, RSPOTrainer

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("total")
    for seed in (0, 1):
        for trainer in (GRPOTrainer("rspo/ALFWorld-v0", seed=seed, output_dir=str(root / f"grpo-{seed}"), **SETTINGS),
                        RSPOTrainer("rspo/ALFWorld-v0", seed=seed, output_dir=str(root / f"rspo-{seed}"), explorer_group_size=2, **SETTINGS)):
            trainer.learn()
            trainer.close()  # releases the run folder's lock: compare refuses a run still being written
    return root


def _records(root: Path, name: str) -> list[list[dict]]:
    return [read_evaluations(root / f"{name}-{seed}") for seed in (0, 1)]


def test_runs_are_paired_at_the_total_env_steps_every_run_reached(runs, tmp_path, capsys):
    code = main(["compare", "--group", f"rspo={runs}/rspo-*", "--group", f"grpo={runs}/grpo-*", "--baseline", "grpo",
                 "--x", "total_env_steps", "--out", str(tmp_path / "out")])
    assert code == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    records = {name: _records(runs, name) for name in ("grpo", "rspo")}
    every = [run for name in records for run in records[name]]
    budget = min(run[-1]["env_steps"] for run in every)
    start = max(run[0]["env_steps"] for run in every)
    assert summary["x"] == "total_env_steps" and summary["total_env_steps"] == budget and summary["auc_env_steps"] == [start, budget]
    rspo_steps = [[rec["env_steps"] for rec in run] for run in records["rspo"]]
    assert all(steps[-1] > budget for steps in rspo_steps)  # RSPO's last evaluation is past the GRPO runs' compute
    groups = {g["name"]: g for g in summary["groups"]}
    for name in ("grpo", "rspo"):
        at_budget = [curve_at([rec["env_steps"] for rec in run], np.array([rec["success"] for rec in run], float), [budget])
                     for run in records[name]]  # each run's curve read at the budget
        assert groups[name]["final"]["success"]["mean"] == pytest.approx(np.mean(at_budget))
        grid = sorted({start, budget} | {rec["env_steps"] for run in every for rec in run if start <= rec["env_steps"] <= budget})
        areas = [area_under_curve(grid, curve_at([rec["env_steps"] for rec in run], np.array([rec["success"] for rec in run], float), grid))
                 for run in records[name]]
        assert groups[name]["auc"]["success"]["mean"] == pytest.approx(np.mean(areas))
    sentences = [d["sentence"] for d in summary["differences"]]
    assert len(sentences) == 2 and all(f"at {budget:,} total env steps" in s for s in sentences)
    assert "Paired at equal compute" in (tmp_path / "out" / "report.md").read_text()


def test_at_iterations_an_rspo_run_is_read_at_its_last_iteration_whatever_its_steps(runs, tmp_path):
    code = main(["compare", "--group", f"rspo={runs}/rspo-*", "--group", f"grpo={runs}/grpo-*", "--baseline", "grpo",
                 "--out", str(tmp_path / "out")])
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert code == 0 and summary["x"] == "iterations" and summary["total_env_steps"] is None and summary["auc_iterations"] == [1, 2, 3, 4]
    last = [run[-1]["success"] for run in _records(runs, "rspo")]
    assert {g["name"]: g for g in summary["groups"]}["rspo"]["final"]["success"]["mean"] == pytest.approx(np.mean(last))


def test_an_unknown_axis_is_one_line(runs, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", f"{runs}/grpo-*", "--x", "wall_time"])
    assert exit_info.value.code == 2 and "invalid choice: 'wall_time'" in capsys.readouterr().err
