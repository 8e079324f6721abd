"""``rspo-gym compare`` on run folders whose records are written here by hand: a task played several
times is one column, runs that stop a part of an iteration apart are read on their curves at the
steps every run reached, ``--x learner_env_steps`` leaves an explorer's steps out, and a run
whose ``policy/`` was removed still compares on its records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rspo_gym.compare import compare_runs
from rspo_gym.compare.files import episode_seeds
from rspo_gym.errors import UserError
from rspo_gym.training.eval_records import write_evaluation

TASKS = (3, 5, 3, 5)
"""Two held-out tasks, each played twice (positions 0 and 2 play task 3)."""


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> dict:
    """A real run's ``config.json``, evaluated on ``TASKS``."""
    import torch

    from rspo_gym import GRPOTrainer

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("real") / "run"
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="drrn", iterations=1, group_size=2, num_groups=1, max_turns=2, eval_every=0,
                          eval_task_ids=list(TASKS), eval_tasks=len(TASKS), eval_split="valid_seen", progress=False, output_dir=str(out))
    trainer.learn()
    trainer.close()
    return json.loads((out / "config.json").read_text())


def make_run(root: Path, name: str, config: dict, seed: int, curve: list[tuple[int, int, list[int]]],
             explorer_steps: int = 0) -> Path:
    """A run folder without ``policy/``: one record per ``(iteration, total env steps, successes)``
    and a ``metrics.jsonl`` row per iteration whose env steps include ``explorer_steps``."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({**config, "seed": seed}))
    last = curve[-1][0]
    per_iteration = curve[-1][1] // last
    rows = [{"iteration": i, "env_steps": per_iteration, **({"explorer/env_steps": explorer_steps} if explorer_steps else {})}
            for i in range(1, last + 1)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for iteration, steps, wins in curve:
        write_evaluation(folder, {"format": 1, "iteration": iteration, "env_steps": steps, "split": "valid_seen", "temperature": 0.4,
                                  "eval_seed": 1000, "task_id": list(TASKS), "episode_seed": episode_seeds(1000, len(TASKS)),
                                  "success": wins, "score": [float(w) for w in wins], "steps": [5] * len(TASKS)})
    return folder


def test_a_task_played_twice_is_one_column(config, tmp_path):
    for seed, wins in ((0, [1, 0, 0, 0]), (1, [1, 1, 1, 0])):
        make_run(tmp_path, f"a-{seed}", config, seed, [(2, 200, wins)])
        make_run(tmp_path, f"b-{seed}", config, seed, [(2, 200, [0, 0, 0, 0])])
    summary = compare_runs(groups={"a": f"{tmp_path}/a-*", "b": f"{tmp_path}/b-*"}, baseline="b", out=None, progress=False)
    assert summary["tasks"] == 2 and summary["episodes"] == 4
    final = next(d for d in summary["differences"] if d["measure"] == "final")
    assert final["tasks"] == 2 and final["difference"] == pytest.approx(0.5)
    # task 3 won 1 of 2 (seed 0) and 2 of 2 (seed 1); task 5 0 of 2 and 1 of 2: tasks resampled, not episodes
    a = next(g for g in summary["groups"] if g["name"] == "a")
    assert a["final"]["success"]["tasks"] == 2


def test_runs_that_stop_apart_are_read_on_their_curves_at_the_common_steps(config, tmp_path):
    """Run b's last evaluation comes 60 steps past run a's: at a's 300 steps b is read between its
    records at 240 and 360, not at its record at 240 (a whole evaluation interval earlier)."""
    for seed in (0, 1):
        make_run(tmp_path, f"a-{seed}", config, seed, [(1, 150, [0, 0, 0, 0]), (2, 300, [1, 1, 1, 1])])
        make_run(tmp_path, f"b-{seed}", config, seed, [(2, 240, [0, 0, 0, 0]), (3, 360, [1, 1, 1, 1])])
    summary = compare_runs(groups={"a": f"{tmp_path}/a-*", "b": f"{tmp_path}/b-*"}, baseline="a", out=None, progress=False,
                           x="total_env_steps")
    assert summary["total_env_steps"] == 300 and summary["auc_env_steps"] == [240, 300]
    b = next(g for g in summary["groups"] if g["name"] == "b")
    assert b["final"]["success"]["mean"] == pytest.approx(0.5)  # 240 -> 0, 360 -> 1: halfway
    area = next(d for d in summary["differences"] if d["measure"] == "auc")
    # over 240..300: a rises 0.6 -> 1 (mean 0.8), b 0 -> 0.5 (mean 0.25)
    assert area["difference"] == pytest.approx(0.25 - 0.8)


def test_learner_steps_leave_the_explorers_out(config, tmp_path):
    """RSPO's iterations take 150 env steps, 50 of them its explorer's: at equal learner steps
    its iteration 2 (200 learner steps) pairs with GRPO's iteration 2 (200)."""
    for seed in (0, 1):
        make_run(tmp_path, f"grpo-{seed}", config, seed, [(1, 100, [0, 0, 0, 0]), (2, 200, [0, 1, 0, 1])])
        make_run(tmp_path, f"rspo-{seed}", config, seed, [(1, 150, [0, 0, 0, 0]), (2, 300, [1, 1, 1, 1])], explorer_steps=50)
    summary = compare_runs(groups={"grpo": f"{tmp_path}/grpo-*", "rspo": f"{tmp_path}/rspo-*"}, baseline="grpo", out=None,
                           progress=False, x="learner_env_steps")
    assert summary["learner_env_steps"] == 200 and summary["total_env_steps"] is None
    final = next(d for d in summary["differences"] if d["measure"] == "final")
    assert final["difference"] == pytest.approx(0.5)
    at_total = compare_runs(groups={"grpo": f"{tmp_path}/grpo-*", "rspo": f"{tmp_path}/rspo-*"}, baseline="grpo", out=None,
                            progress=False, x="total_env_steps")
    assert at_total["total_env_steps"] == 200  # RSPO read between 150 and 300 total steps: a third of the way
    assert next(d for d in at_total["differences"] if d["measure"] == "final")["difference"] == pytest.approx(1 / 3 - 0.5)


def test_a_run_without_learner_counts_is_refused_at_learner_steps(config, tmp_path):
    for seed in (0, 1):
        make_run(tmp_path, f"a-{seed}", config, seed, [(1, 100, [0, 0, 0, 0]), (2, 200, [0, 1, 0, 1])])
    (tmp_path / "a-1" / "metrics.jsonl").write_text('{"iteration": 1}\n{"iteration": 2}\n')
    with pytest.raises(UserError, match="does not count its learner's env steps"):
        compare_runs(groups={"a": f"{tmp_path}/a-*"}, out=None, progress=False, x="learner_env_steps")


def test_a_run_whose_weights_were_removed_compares_on_its_records_only(config, tmp_path):
    for seed in (0, 1):
        make_run(tmp_path, f"a-{seed}", config, seed, [(2, 200, [1, 0, 1, 0])])
    assert compare_runs([f"{tmp_path}/a-*"], out=None, progress=False)["groups"][0]["final"]["success"]["mean"] == 0.5
    with pytest.raises(UserError, match="no policy/"):
        compare_runs([f"{tmp_path}/a-*"], out=None, progress=False, evaluate=True)
    shutil.rmtree(tmp_path / "a-0" / "evaluations")
    with pytest.raises(UserError, match="is not a run folder"):
        compare_runs([f"{tmp_path}/a-*"], out=None, progress=False)


def test_a_group_whose_runs_record_their_start_reports_its_gain(config, tmp_path):
    for seed in (0, 1):
        make_run(tmp_path, f"a-{seed}", config, seed, [(0, 0, [0, 0, 1, 0]), (2, 200, [1, 0, 1, 1])])
        make_run(tmp_path, f"b-{seed}", config, seed, [(2, 200, [0, 0, 0, 0])])
    summary = compare_runs(groups={"a": f"{tmp_path}/a-*", "b": f"{tmp_path}/b-*"}, baseline="b", out=None, progress=False)
    a, b = (next(g for g in summary["groups"] if g["name"] == name) for name in "ab")
    assert a["gain"]["success"]["difference"] == pytest.approx(0.75 - 0.25) and a["gain"]["success"]["paired_seeds"]
    assert "gain" not in b  # no record before training


def _two_groups(tmp_path: Path, config: dict, grpo: list, rspo: list) -> dict[str, str]:
    for seed in (0, 1):
        make_run(tmp_path, f"grpo-{seed}", config, seed, grpo)
        make_run(tmp_path, f"rspo-{seed}", config, seed, rspo)
    return {"rspo": f"{tmp_path}/rspo-*", "grpo": f"{tmp_path}/grpo-*"}


@pytest.mark.parametrize("x", ["total_env_steps", "learner_env_steps"])
def test_a_budget_before_a_runs_first_record_is_refused(config, tmp_path, capsys, x):
    """RSPO's first iteration counts its explorer's warm-up, so its first record (50 steps) can
    lie past GRPO's last (40): no step count lies within every run's records. It was read at 40
    steps before its first record, as if it had scored its first record there, and printed
    "rspo is better"; the area was dropped without a word."""
    from rspo_gym.cli import main

    groups = _two_groups(tmp_path, config, [(1, 20, [0, 0, 0, 0]), (2, 40, [0, 0, 0, 0])],
                         [(1, 50, [1, 1, 1, 1]), (2, 100, [0, 0, 0, 0])])
    with pytest.raises(UserError) as refusal:
        compare_runs(groups=groups, baseline="grpo", out=None, progress=False, x=x)
    line = str(refusal.value)
    assert "\n" not in line and f"{tmp_path}/rspo-0's records start at 50" in line and f"{tmp_path}/grpo-0's end at 40" in line
    code = main(["compare", "--group", f"rspo={groups['rspo']}", "--group", f"grpo={groups['grpo']}", "--baseline", "grpo",
                 "--x", x, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "start at 50" in err[0] and not (tmp_path / "out").exists()


def test_runs_whose_records_meet_at_one_point_have_no_area_and_say_why(config, tmp_path, capsys):
    """GRPO's last record and RSPO's first are both at 50 steps: every run is read there (a
    measured point of each), and the area, which needs a span, is left out with its reason."""
    from rspo_gym.cli import main

    groups = _two_groups(tmp_path, config, [(1, 25, [0, 0, 0, 0]), (2, 50, [0, 1, 0, 0])],
                         [(1, 50, [1, 1, 0, 0]), (2, 100, [0, 0, 0, 0])])
    summary = compare_runs(groups=groups, baseline="grpo", out=None, progress=False, x="total_env_steps")
    assert summary["total_env_steps"] == 50 and summary["auc_env_steps"] is None
    assert [d["measure"] for d in summary["differences"]] == ["final"]
    assert summary["differences"][0]["difference"] == pytest.approx(0.5 - 0.25)
    why = summary["auc_left_out"]
    assert f"{tmp_path}/rspo-0's first record" in why and "50 total env steps" in why and f"{tmp_path}/grpo-0's last" in why
    code = main(["compare", "--group", f"rspo={groups['rspo']}", "--group", f"grpo={groups['grpo']}", "--baseline", "grpo",
                 "--x", "total_env_steps", "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0 and f"no area under the curve: {why}" in out.splitlines()
    assert f"No area under the curve: {why}" in (tmp_path / "out" / "report.md").read_text()


def _set_env_steps(folder: Path, iteration: int, steps) -> Path:
    path = folder / "evaluations" / f"{iteration:06d}.json"
    record = json.loads(path.read_text())
    record["env_steps"] = steps
    path.write_text(json.dumps(record))
    return path


@pytest.mark.parametrize("steps, why", [
    (0, "not more than the 100 of iteration 1's record"),
    (50, "not more than the 100 of iteration 1's record"),
    (10**9, "metrics.jsonl counts 300 env steps up to iteration 3"),
    (301, "metrics.jsonl counts 300 env steps up to iteration 3"),
])
@pytest.mark.parametrize("x", ["iterations", "total_env_steps"])
def test_env_steps_the_run_did_not_take_are_refused(config, tmp_path, steps, why, x):
    """A record's ``env_steps`` is the steps trained before it: it grows with the iteration and is
    the sum of ``metrics.jsonl``'s ``env_steps`` up to it. 0, 10^9 and a value below the record
    before used to be accepted, the curve quietly re-sorted."""
    for seed in (0, 1):
        make_run(tmp_path, f"a-{seed}", config, seed, [(1, 100, [0, 0, 0, 0]), (2, 200, [0, 1, 0, 1]), (3, 300, [1, 1, 0, 1])])
    target = 3 if steps > 200 else 2
    path = _set_env_steps(tmp_path / "a-1", target, steps)
    with pytest.raises(UserError) as refusal:
        compare_runs([f"{tmp_path}/a-*"], out=None, progress=False, x=x)
    line = str(refusal.value)
    assert "\n" not in line and str(path) in line and f"env_steps is {steps:,}" in line and why in line, line


def test_env_steps_are_checked_by_order_where_metrics_do_not_count_them(config, tmp_path):
    """A run whose ``metrics.jsonl`` has no ``env_steps`` still has records whose steps must grow."""
    for seed in (0, 1):
        make_run(tmp_path, f"a-{seed}", config, seed, [(1, 100, [0, 0, 0, 0]), (2, 200, [0, 1, 0, 1]), (3, 300, [1, 1, 0, 1])])
        (tmp_path / f"a-{seed}" / "metrics.jsonl").write_text("".join(f'{{"iteration": {i}}}\n' for i in (1, 2, 3)))
    assert compare_runs([f"{tmp_path}/a-*"], out=None, progress=False, x="total_env_steps")["total_env_steps"] == 300
    _set_env_steps(tmp_path / "a-0", 3, 10**9)  # nothing to check a growing value against
    assert compare_runs([f"{tmp_path}/a-*"], out=None, progress=False, x="total_env_steps")["total_env_steps"] == 300
    path = _set_env_steps(tmp_path / "a-0", 2, 100)
    with pytest.raises(UserError, match=f"{path}: env_steps is 100 at iteration 2, not more than the 100 of iteration 1's record"):
        compare_runs([f"{tmp_path}/a-*"], out=None, progress=False)
