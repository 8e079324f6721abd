"""``rspo-gym compare`` and the per-episode evaluation records of run folders, on run folders of the
fast policy (``model="drrn"``) trained here in a second or two each."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rspo_gym.cli import main
from rspo_gym.compare import compare_runs
from rspo_gym.compare.stats import area_under_curve, difference
from rspo_gym.intervals import difference_draws, paired_difference_ci
from rspo_gym.training.eval_records import EVALUATIONS, read_evaluations

#: A tiny ALFWorld run: two groups of two tasks, five turns, evaluated on four tasks every iteration.
ALFWORLD = dict(iterations=2, group_size=2, num_groups=2, eval_tasks=4, eval_every=1, max_turns=5)


def train(out: Path, env: str = "rspo/ALFWorld-v0", seed: int = 0, iterations: int | None = None, resume: bool = False,
          callback=None, **config) -> Path:
    import torch

    from rspo_gym import GRPOTrainer

    torch.set_num_threads(1)  # the scorer's matrices are too small to share out (restored after each test)
    settings = {**ALFWORLD, **config} if env == "rspo/ALFWorld-v0" else config
    trainer = GRPOTrainer(env, model="drrn", seed=seed, progress=False, output_dir=str(out), **settings)
    trainer.learn(iterations, resume=resume, callback=callback)
    trainer.close()
    return out


@pytest.fixture(scope="module")
def alfworld_runs(tmp_path_factory) -> Path:
    """Seeds 0 and 1 of one ALFWorld setting, in ``<root>/a-<seed>``."""
    root = tmp_path_factory.mktemp("runs")
    for seed in (0, 1):
        train(root / f"a-{seed}", seed=seed)
    return root


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_each_evaluation_writes_its_episodes(alfworld_runs):
    records = read_evaluations(alfworld_runs / "a-0")
    assert [r["iteration"] for r in records] == [1, 2]
    metrics = [json.loads(line) for line in (alfworld_runs / "a-0" / "metrics.jsonl").read_text().splitlines()]
    for record, row in zip(records, metrics):
        assert record["task_id"] == [0, 1, 2, 3] and record["split"] == "valid_seen"
        assert len(set(record["episode_seed"])) == 4
        assert np.mean(record["success"]) == row["eval/success"] and np.mean(record["steps"]) == row["eval/length"]
    # the same positions get the same episode seeds in every run (so runs pair episode by episode)
    assert records[-1]["episode_seed"] == read_evaluations(alfworld_runs / "a-1")[-1]["episode_seed"]


def test_a_resumed_runs_records_equal_an_uninterrupted_ones(tmp_path):
    whole = train(tmp_path / "whole", iterations=4, checkpoint_every=2)

    def killed_after_iteration_3(trainer, metrics):
        if metrics["iteration"] == 3:  # evaluated and logged; its checkpoint (every 2) never written
            raise KeyboardInterrupt

    part = tmp_path / "part"
    with pytest.raises(KeyboardInterrupt):
        train(part, iterations=4, checkpoint_every=2, callback=killed_after_iteration_3)
    (part / EVALUATIONS / ".000004.json.5f3a9c1e.tmp").write_text('{"format": 1, "iter')  # a write the kill cut short
    assert [r["iteration"] for r in read_evaluations(part)] == [1, 2, 3]
    train(part, iterations=4, checkpoint_every=2, resume=True)
    assert sorted(p.name for p in (part / EVALUATIONS).iterdir()) == [f"{i:06d}.json" for i in (1, 2, 3, 4)]
    assert read_evaluations(part) == read_evaluations(whole)


def test_a_group_against_itself_differs_by_exactly_zero(alfworld_runs, tmp_path, capsys):
    for seed in (0, 1):
        shutil.copytree(alfworld_runs / f"a-{seed}", tmp_path / f"copy-{seed}")
    code, out, err = run_cli(capsys, "--group", f"a={alfworld_runs}/a-*", "--group", f"b={tmp_path}/copy-*",
                             "--baseline", "a", "--out", str(tmp_path / "report"))
    assert code == 0, err
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["evaluated_runs"] == [] and summary["auc_iterations"] == [1, 2]
    assert {(d["measure"], d["metric"]) for d in summary["differences"]} == {("final", "success"), ("auc", "success")}
    for d in summary["differences"]:
        assert d["difference"] == 0.0 and d["ci_low"] <= 0.0 <= d["ci_high"]
        assert d["verdict"] == "no difference at this noise" and d["paired_seeds"] and d["seeds"] == [2, 2] and d["tasks"] == 4
    assert "b − a, final held-out success: +0.000" in out
    for name in ("report.md", "forest.png", "curves_success.png"):
        assert (tmp_path / "report" / name).stat().st_size > 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert "![forest.png](forest.png)" in report and "no difference at this noise" in report


def test_runs_without_records_are_evaluated_from_their_saved_policy(alfworld_runs, tmp_path):
    """An old run folder (no ``evaluations/``): its saved policy, evaluated now on the same
    episodes, gives the record its training's last evaluation wrote."""
    for seed in (0, 1):
        shutil.copytree(alfworld_runs / f"a-{seed}", tmp_path / f"old-{seed}")
        shutil.rmtree(tmp_path / f"old-{seed}" / EVALUATIONS)
    summary = compare_runs(groups={"new": str(alfworld_runs / "a-*"), "old": str(tmp_path / "old-*")}, baseline="new",
                           out=None, progress=False, say=lambda line: None)
    assert summary["evaluated_runs"] == [str(tmp_path / "old-0"), str(tmp_path / "old-1")]
    assert summary["auc_iterations"] is None  # the old runs have no curve on these episodes
    final = [d for d in summary["differences"] if d["measure"] == "final"]
    assert [(d["difference"], d["ci_low"], d["ci_high"]) for d in final] == [(0.0, 0.0, 0.0)]


@pytest.mark.slow
def test_a_worse_group_is_reported_worse(tmp_path):
    """WebShop's score moves within three iterations at a high learning rate and not at all at a
    near-zero one: trained against untrained on the same 12 held-out goals."""
    for seed in (0, 1):
        for name, lr in (("good", 1e-2), ("bad", 1e-9)):
            train(tmp_path / f"{name}-{seed}", env="rspo/WebShop-v0", seed=seed, iterations=3, group_size=4, num_groups=4,
                  eval_tasks=12, eval_every=3, learning_rate=lr, checkpoint_every=0)
    summary = compare_runs([str(tmp_path / "*")], baseline="learning_rate=0.01", out=tmp_path / "report", progress=False)
    assert summary["metrics"] == ["success", "score"]
    score = next(d for d in summary["differences"] if d["metric"] == "score" and d["measure"] == "final")
    assert score["group"] == "learning_rate=1e-09" and score["verdict"] == "worse" and score["ci_high"] < 0
    assert (tmp_path / "report" / "curves_score.png").stat().st_size > 0


@pytest.mark.parametrize("case", ["not a run", "two envs", "two splits", "one seed", "no baseline", "bad group", "no match", "nothing"])
def test_refusals_are_one_line(case, alfworld_runs, tmp_path, capsys):
    runs = f"{alfworld_runs}/a-*"
    if case == "two envs":
        config = json.loads((alfworld_runs / "a-0" / "config.json").read_text())
        shutil.copytree(alfworld_runs / "a-0", tmp_path / "w")
        (tmp_path / "w" / "config.json").write_text(json.dumps({**config, "env_id": "rspo/WebShop-v0"}))
    if case == "two splits":
        config = json.loads((alfworld_runs / "a-0" / "config.json").read_text())
        shutil.copytree(alfworld_runs / "a-0", tmp_path / "w")
        (tmp_path / "w" / "config.json").write_text(json.dumps({**config, "eval_split": "valid_unseen"}))
    argv, expected = {
        "not a run": ([str(alfworld_runs)], "is not a run folder"),
        "two envs": ([runs, str(tmp_path / "w")], "different envs"),
        "two splits": ([runs, str(tmp_path / "w")], "different held-out splits"),
        "one seed": ([str(alfworld_runs / "a-0")], "has one seed"),
        "no baseline": ([runs, "--baseline", "b"], "matches no group"),
        "bad group": (["--group", "a"], "NAME=GLOB"),
        "no match": (["--group", f"a={tmp_path}/none-*"], "matches nothing"),
        "nothing": ([], "name the run folders"),
    }[case]
    code, out, err = run_cli(capsys, *argv, "--out", str(tmp_path / "report"))
    assert code == 2 and expected in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "report").exists()


def test_a_damaged_policy_to_evaluate_is_one_line(alfworld_runs, tmp_path, capsys):
    for seed in (0, 1):
        shutil.copytree(alfworld_runs / f"a-{seed}", tmp_path / f"r-{seed}")
    (tmp_path / "r-0" / "policy" / "action_scorer.pt").write_bytes(b"\x80\x02not a checkpoint" * 8)
    code, out, err = run_cli(capsys, f"{tmp_path}/r-*", "--evaluate", "--out", str(tmp_path / "report"))
    said, error = err.splitlines()  # the run it was evaluating, then the error
    assert code == 2 and said.startswith("evaluating") and error.startswith("rspo-gym: error: ") and "r-0/policy" in error


def test_one_seed_is_accepted_when_asked(alfworld_runs, tmp_path):
    summary = compare_runs([alfworld_runs / "a-0"], one_seed=True, out=tmp_path / "r", progress=False)
    assert summary["one_seed_groups"] == ["all"] and summary["differences"] == []
    assert "tasks only" in (tmp_path / "r" / "report.md").read_text()


def test_unpaired_seeds_resample_each_group_on_its_own():
    a = [[1.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    b = [[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]
    draws = difference_draws(a, b, paired_seeds=False, replicates=500)
    assert draws.shape == (500,) and abs(draws.mean() - (np.mean(a) - np.mean(b))) < 0.1
    with pytest.raises(ValueError, match="same tasks and seeds"):
        difference_draws(a, b, paired_seeds=True)
    # paired on identical shapes: the interval of intervals.paired_difference_ci
    d = difference(a[:2], b, paired_seeds=True)
    assert (d.difference, d.ci_low, d.ci_high) == pytest.approx(paired_difference_ci(a[:2], b))


def test_pairing_on_tasks_sees_what_two_means_miss():
    """Two settings whose tasks differ in difficulty far more than the settings do: B wins
    one more task in ten on every seed. The unpaired view (means with intervals that overlap)
    cannot tell them apart; the paired difference can."""
    rng = np.random.default_rng(0)
    easy = rng.random(40) < 0.5
    a = np.array([easy & (rng.random(40) < 0.9) for _ in range(3)], dtype=float)
    b = np.maximum(a, (rng.random((3, 40)) < 0.12)).astype(float)
    d = difference(b, a, paired_seeds=True)
    assert d.verdict == "better" and d.ci_low > 0
    shuffled = a[:, rng.permutation(40)]  # the same results, the tasks no longer matched
    unpaired = difference(b, shuffled, paired_seeds=False)
    assert unpaired.difference == pytest.approx(d.difference) and unpaired.ci_low < 0 < unpaired.ci_high


def test_area_under_curve_is_the_mean_along_training():
    assert area_under_curve([1, 2, 4], np.array([[0.0], [1.0], [1.0]])).tolist() == pytest.approx([(0.5 + 2.0) / 3])
    with pytest.raises(ValueError):
        area_under_curve([3], np.array([[1.0]]))
