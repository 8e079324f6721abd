"""``benchmarks/rspo_matrix.py`` and its report: the plan, a cell's record, ``summary.json``'s schema."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _module(name: str):
    sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_matrix_has_every_arm_seeds_and_both_budgets():
    m = _module("rspo_matrix")
    plan = m.PLANS["matrix"]
    assert set(plan.envs) == {m.ALFWORLD, m.WEBSHOP}
    assert plan.envs[m.ALFWORLD].learner_steps >= 64_000
    entries = {(base, arms): seeds for base, seeds, arms in plan.cells}
    assert len(entries[("grpo", m.MAIN_ARMS)]) >= 10
    assert len(entries[("grpo", ("explorer-misaligned-sync20", "explorer-misaligned-sync0"))]) >= 5
    for base in ("ppo", "gigpo"):
        assert len(entries[(base, m.MAIN_ARMS)]) >= 5
    todo = plan.todo()
    assert len(todo) == len(set(todo)) == 2 * (10 * 6 + 2 * 5 * 6 + 5 * 2)
    assert todo[0][1:] == ("grpo", "outcome", 0) and todo[2][3] == 0  # GRPO first, envs interleaved
    after = todo[2 * 10 * 6:]
    assert {c[1] for c in after[:2 * 6 * 2 + 2 * 2]} == {"ppo", "gigpo", "grpo"} and {c[3] for c in after[:28]} == {0}
    assert len(plan.fractions) >= 3 and plan.curve_temperature == 1.0 and plan.final_temperature == 0.4
    assert {m.ARMS[a].kind for a in m.MAIN_ARMS} == {"outcome", "dense", "rspo-explorer", "rspo-rank"}
    assert m.ARMS["explorer-misaligned"].process_reward(m.ALFWORLD) == "events"
    assert m.ARMS["dense-aligned"].process_reward(m.WEBSHOP) == "score"


def test_a_pilot_sets_any_trainer_setting_of_every_cell_and_keeps_the_rest(monkeypatch):
    m = _module("rspo_matrix")
    chosen = []

    def select_and_stop(plan, args):
        chosen.append(select(plan, args))
        raise SystemExit(0)

    select = m._select
    monkeypatch.setattr(m, "_select", select_and_stop)
    with pytest.raises(SystemExit):
        m.main(["--preset", "pilot", "--envs", m.ALFWORLD, "--steps", "500", "--lr", "1e-3",
                "--set", "group_size=8", "--set", "num_groups=4", "--set", "filter_groups=true",
                "--task-type", "pick_and_place_simple", "--heldout-episodes", "4"])
    (plan,) = chosen
    assert set(plan.envs) == {m.ALFWORLD}
    alfworld = plan.envs[m.ALFWORLD]
    assert alfworld.learner_steps == 500
    assert alfworld.trainer == {**m.COMMON, "learning_rate": 1e-3, "group_size": 8, "num_groups": 4, "filter_groups": True}
    assert alfworld.clone == m.ENVS[m.ALFWORLD].clone  # only the trainer settings and the task type change
    assert alfworld.task_type == "pick_and_place_simple"
    assert alfworld.heldout_episodes == 4 and m.ENVS[m.ALFWORLD].heldout_episodes == 1


def test_a_typed_plan_trains_clones_and_holds_out_on_its_task_type_only(monkeypatch):
    from rspo_gym.envs.alfworld.tasks import GeneratedTasks

    m = _module("rspo_matrix")
    monkeypatch.setattr(m, "TYPED_POOL", 20)  # the real pool's 1,000 take ~15 s to find
    kind = "pick_and_place_simple"
    plan = m.EnvPlan(100, m.COMMON, clone=(3, 1), heldout=(("valid_seen", 140),), task_type=kind)
    trainer = m.make_trainer(m.ALFWORLD, "grpo", m.ARMS["outcome"], 0, plan)
    try:
        train = trainer.config.train_task_ids
        clone = m.typed_task_ids("train", kind, m.TYPED_POOL + 3)[m.TYPED_POOL:]
        held_out = m.typed_task_ids("valid_seen", kind, 140)
    finally:
        trainer.close()
    assert len(train) == m.TYPED_POOL and len(clone) == 3 and not set(train) & set(clone)
    train_split = GeneratedTasks("train")
    assert {train_split.world(t).task.task_type for t in train + clone} == {kind}
    assert len(held_out) == 35 and {GeneratedTasks("valid_seen").world(t).task.task_type for t in held_out} == {kind}


def test_a_cell_is_held_out_along_training_at_both_temperatures():
    m = _module("rspo_matrix")
    plan = m.PLANS["micro"]
    cell = m.run_cell(m.WEBSHOP, "grpo", "outcome", 0, plan)
    budget = plan.envs[m.WEBSHOP].learner_steps
    curve = [e for e in cell["evals"] if e["temperature"] == 1.0]
    assert len(curve) == len(plan.fractions)
    assert [e["learner_steps"] >= round(f * budget) for e, f in zip(curve, plan.fractions)] == [True] * len(plan.fractions)
    final = [e for e in cell["evals"] if e["temperature"] == 0.4]
    assert len(final) == 1 and final[0]["learner_steps"] >= budget
    assert [row[:2] for row in final[0]["per_task"]] == [["test", 0], ["test", 1], ["test", 2]]
    assert cell["train_curve"][-1][0] == cell["learner_steps"] == cell["total_steps"]


def test_held_out_episodes_are_averaged_per_task_in_task_order(monkeypatch):
    from dataclasses import replace
    from types import SimpleNamespace

    import rspo_gym.rollout.collector as collector

    m = _module("rspo_matrix")
    plan = replace(m.PLANS["micro"].envs[m.WEBSHOP], heldout=(("test", 3),), heldout_episodes=2)
    played = []

    def finished_out_of_order(policy, venv, config, task_ids):
        played.append(list(task_ids))
        episodes = [(2, 1, 0.5, {"search": 3}), (0, 0, 0.2, {}), (1, 0, 0.0, {"open": 1}),
                    (2, 0, 0.3, {"search": 1, "price": 1}), (0, 1, 1.0, {"search": 1}), (1, 0, 0.1, {})]
        return SimpleNamespace(trajectories=[SimpleNamespace(task_id=t, won=w, score=sc, process_events=ev)
                                             for t, w, sc, ev in episodes])

    monkeypatch.setattr(collector, "collect", finished_out_of_order)
    trainer = m.make_trainer(m.WEBSHOP, "grpo", m.ARMS["outcome"], 0, plan)
    try:
        rows = m.heldout(trainer, m.WEBSHOP, plan, 1.0)
    finally:
        trainer.close()
    assert played == [[0, 1, 2, 0, 1, 2]]  # every task twice, in one rollout
    assert rows == [["test", 0, 0.5, 0.6, 0.5], ["test", 1, 0.0, 0.05, 0.5], ["test", 2, 0.5, 0.4, 2.5]]


def _cell(env, base, arm, seed, wins, kind, process):
    per_task = [["valid_seen", k, w, float(w), 0] for k, w in enumerate(wins)]
    evals = [{"learner_steps": s, "total_steps": s, "temperature": t, "success": sum(wins) / len(wins), "score": 0.0,
              "per_task": per_task} for s, t in ((30, 1.0), (60, 1.0), (100, 0.4), (100, 1.0))]
    return {"env": env, "base": base, "arm": arm, "kind": kind, "process_reward": process, "seed": seed, "evals": evals}


def _results_folder(tmp_path, env: str, seeds, tasks: int) -> Path:
    """``<tmp>/results`` with cells/ and a start per seed that lost every one of ``tasks`` tasks."""
    out = tmp_path / "results"
    (out / "cells").mkdir(parents=True)
    (out / "starts").mkdir()
    for seed in seeds:
        start = {"env": env, "seed": seed, "evals": [{"learner_steps": 0, "temperature": t, "per_task": [["valid_seen", k, 0, 0.0, 0] for k in range(tasks)]}
                                                     for t in (1.0, 0.4)]}
        (out / "starts" / f"{seed}.json").write_text(json.dumps(start))
    return out


def _report_under(report, preset: str, plan, argv: list[str]) -> None:
    """Run the report with ``PLANS[preset]`` set to ``plan`` for the call."""
    saved = dict(report.PLANS)
    report.PLANS[preset] = plan
    try:
        report.main(argv)
    finally:
        report.PLANS.clear()
        report.PLANS.update(saved)


def test_summary_json_has_the_documented_schema_and_pairs_by_seed(tmp_path):
    m = _module("rspo_matrix")
    report = _module("rspo_matrix_report")
    env = m.ALFWORLD
    out = _results_folder(tmp_path, env, range(4), 6)
    for seed in range(4):
        for arm, kind, process, wins in (("outcome", "outcome", None, [1, 0, 0, 0, 1, 0]),
                                         ("explorer-misaligned", "rspo-explorer", "events", [1, 1, 1, 0, 1, 0]),
                                         ("dense-misaligned", "dense", "events", [0, 0, 0, 0, 0, 0])):
            (out / "cells" / f"{arm}-{seed}.json").write_text(json.dumps(_cell(env, "grpo", arm, seed, wins, kind, process)))
    plan = m.Plan({env: m.EnvPlan(100)}, (("grpo", tuple(range(4)), ("outcome",)),))
    _report_under(report, "matrix", plan, [str(out), "--out", str(tmp_path / "docs")])
    summary = json.loads((tmp_path / "docs" / "summary.json").read_text())
    assert set(summary) == {"rows", "differences"}
    assert all(set(r) == {"env", "base", "arm", "process_reward", "seeds", "metric", "mean", "ci_low", "ci_high"} for r in summary["rows"])
    assert {(r["arm"], r["process_reward"]) for r in summary["rows"]} == {("start", None), ("outcome", None), ("rspo-explorer", "events"), ("dense", "events")}
    diffs = {(d["a"]["arm"], d["b"]["arm"]): d for d in summary["differences"]}
    assert set(diffs[("outcome", "start")]) == {"env", "base", "a", "b", "metric", "seeds", "mean", "ci_low", "ci_high"}
    d = diffs[("outcome", "start")]
    assert d["mean"] == pytest.approx(2 / 6) and d["ci_low"] <= d["mean"] <= d["ci_high"]
    assert diffs[("rspo-explorer", "outcome")]["mean"] == pytest.approx(2 / 6)
    assert diffs[("rspo-explorer", "dense")]["mean"] == pytest.approx(4 / 6) and diffs[("rspo-explorer", "dense")]["seeds"] == 4
    assert (tmp_path / "docs" / "heldout_ALFWorld-v0.png").is_file()
    details = json.loads((tmp_path / "docs" / "details.json").read_text())
    assert {"final", "final_t04", "equal_total", "auc"} == set(details["views"])


@pytest.mark.parametrize(("steps", "expected"), [(None, 0.0), (100, 0.5)])
def test_the_report_reads_final_at_the_budget_a_run_was_given(tmp_path, steps, expected):
    m = _module("rspo_matrix")
    report = _module("rspo_matrix_report")
    env = m.ALFWORLD
    out = _results_folder(tmp_path, env, [0], 2)
    cell = _cell(env, "grpo", "outcome", 0, [1, 0], "outcome", None)
    for evaluation in cell["evals"]:  # lost everything at 30 steps, won half at the 100-step end
        if evaluation["learner_steps"] == 30:
            evaluation["per_task"] = [["valid_seen", k, 0, 0.0, 0] for k in range(2)]
    (out / "cells" / "outcome-0.json").write_text(json.dumps(cell))
    plan = m.Plan({env: m.EnvPlan(30)}, (("grpo", (0,), ("outcome",)),))
    _report_under(report, "pilot", plan, [str(out), "--preset", "pilot", "--out", str(tmp_path / "docs")]
                  + (["--steps", str(steps)] if steps else []))
    rows = json.loads((tmp_path / "docs" / "summary.json").read_text())["rows"]
    assert [r["mean"] for r in rows if r["arm"] == "outcome"] == [pytest.approx(expected)]


def test_a_base_with_its_own_budget_and_episodes_is_read_at_them_against_its_start_measured_alike(tmp_path):
    m = _module("rspo_matrix")
    report = _module("rspo_matrix_report")
    env = m.ALFWORLD
    out = _results_folder(tmp_path, env, [0], 2)  # the start lost both tasks at one episode each ...
    start_path = out / "starts" / "0.json"
    start = json.loads(start_path.read_text())
    start["evals"] += [{"learner_steps": 0, "temperature": t, "episodes": 2, "per_task": [["valid_seen", k, 0.5, 0.5, 0] for k in range(2)]}
                       for t in (1.0, 0.4)]  # ... and won half of them at two
    start_path.write_text(json.dumps(start))
    cell = _cell(env, "grpo", "outcome", 0, [1, 0], "outcome", None)
    for evaluation in cell["evals"]:  # lost everything at 30 steps (the env's budget), won half at its own 100
        evaluation["episodes"] = 2
        if evaluation["learner_steps"] == 30:
            evaluation["per_task"] = [["valid_seen", k, 0, 0.0, 0] for k in range(2)]
    (out / "cells" / "outcome-0.json").write_text(json.dumps(cell))
    plan = m.Plan({env: m.EnvPlan(30, bases={"grpo": {"learner_steps": 100, "heldout_episodes": 2}})}, (("grpo", (0,), ("outcome",)),))
    _report_under(report, "matrix", plan, [str(out), "--out", str(tmp_path / "docs")])
    summary = json.loads((tmp_path / "docs" / "summary.json").read_text())
    assert {r["arm"]: r["mean"] for r in summary["rows"]} == {"start": pytest.approx(0.5), "outcome": pytest.approx(0.5)}
    (d,) = summary["differences"]
    assert d["mean"] == pytest.approx(0.0)


def test_grpo_has_its_own_alfworld_settings_and_a_pilot_overrides_them():
    m = _module("rspo_matrix")
    alfworld = m.PLANS["matrix"].envs[m.ALFWORLD]
    grpo, ppo = alfworld.for_base("grpo"), alfworld.for_base("ppo")
    assert (grpo.learner_steps, grpo.trainer["learning_rate"], grpo.heldout_episodes) == (128_000, 1e-4, 4)
    assert (ppo.learner_steps, ppo.trainer["learning_rate"], ppo.heldout_episodes) == (64_000, 3e-4, 1)
    assert grpo.trainer == {**m.COMMON, "learning_rate": 1e-4} and grpo.clone == ppo.clone and not grpo.bases
    assert alfworld.episode_counts == [1, 4]
    piloted = alfworld.overridden({"learning_rate": 1e-3}, learner_steps=500)
    assert (piloted.for_base("grpo").learner_steps, piloted.for_base("grpo").trainer["learning_rate"]) == (500, 1e-3)
    assert piloted.for_base("grpo").heldout_episodes == 4  # what the pilot did not set stays the base's own


def test_a_start_measured_at_one_episode_count_is_measured_at_the_missing_ones_only(tmp_path, monkeypatch):
    m = _module("rspo_matrix")
    out = tmp_path / "results"
    (out / "starts").mkdir(parents=True)
    m.write_json(m.start_path(out, m.ALFWORLD, 0), {"env": m.ALFWORLD, "seed": 0, "evals": [{"temperature": 1.0, "per_task": []}]})
    scheduled = []

    def capture(jobs, workers, keep):
        scheduled.extend((key, args) for key, _, args in jobs)
        keep(("start", (m.ALFWORLD, 0)), {"env": m.ALFWORLD, "seed": 0, "evals": [{"temperature": 1.0, "episodes": 4, "success": 0.5,
                                                                                   "score": 0.5, "per_task": []}]}, 1, 1)
        return 0

    monkeypatch.setattr(m, "run_fresh", capture)
    m.main(["--envs", m.ALFWORLD, "--bases", "grpo", "--arms", "outcome", "--seeds", "0", "--out", str(out)])
    starts = [(key, args) for key, args in scheduled if key[0] == "start"]
    assert [(key, args[-1]) for key, args in starts] == [(("start", (m.ALFWORLD, 0)), (4,))]
    assert m.start_episode_counts(out, m.ALFWORLD, 0) == {1, 4}
