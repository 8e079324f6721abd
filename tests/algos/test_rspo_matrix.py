"""``benchmarks/rspo_matrix.py`` and its report: the plan, a cell's record, ``summary.json``'s schema."""

import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
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


def test_a_typed_plan_trains_clones_and_holds_out_on_its_task_type_only():
    from rspo_gym.envs.alfworld.tasks import GeneratedTasks

    m = _module("rspo_matrix")
    kind = "pick_and_place_simple"
    plan = m.EnvPlan(100, m.COMMON, clone=(3, 1), heldout=(("valid_seen", 140),), task_type=kind, train_pool=20)  # the default 1,000 take ~15 s to find
    trainer = m.make_trainer(m.ALFWORLD, "grpo", m.ARMS["outcome"], 0, plan)
    try:
        train = trainer.config.train_task_ids
        clone = m.typed_task_ids("train", kind, 20 + 3)[20:]
        held_out = m.typed_task_ids("valid_seen", kind, 140)
    finally:
        trainer.close()
    assert len(train) == 20 and len(clone) == 3 and not set(train) & set(clone)
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
    assert (tmp_path / "docs" / "forest_ALFWorld-v0.png").stat().st_size > 0  # the differences above, one row each
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


# -- the regimes study: start x policy, helpful process rewards, group outcomes


def test_the_regimes_preset_runs_each_start_and_policy_with_its_own_files():
    m = _module("rspo_matrix")
    plan = m.PLANS["regimes"]
    assert list(plan.envs) == [f"{m.ALFWORLD}@{r}" for r in ("untrained-drrn-memory", "clone-25-drrn-memory", "clone-50-drrn-memory",
                                                               "clone-200-drrn-memory")] + [f"{m.WEBSHOP}@untrained-drrn", f"{m.WEBSHOP}@untrained-drrn-memory"]
    alfworld = [p for k, p in plan.envs.items() if m.env_of(k) == m.ALFWORLD]
    assert [p.clone for p in alfworld] == [(0, 0), (25, 10), (50, 10), (200, 10)]
    grpo = m.PLANS["matrix"].envs[m.ALFWORLD].for_base("grpo")
    budgets = [(64_000, 1e-3)] + [(128_000, 1e-4)] * 3  # the clones at GRPO's ALFWorld settings, the untrained start at its own
    for p, (steps, lr) in zip(alfworld, budgets, strict=True):  # for every base
        assert (p.model, p.trainer["model"], p.learner_steps, p.trainer["learning_rate"], p.heldout, p.heldout_episodes) == \
            ("drrn-memory", "drrn-memory", steps, lr, grpo.heldout, 4)
        assert p.regime and not p.bases and p.for_base("ppo").learner_steps == steps
    webshop = [p for k, p in plan.envs.items() if m.env_of(k) == m.WEBSHOP]
    assert [(p.model, p.clone, p.learner_steps, p.heldout, p.heldout_episodes) for p in webshop] == \
        [(model, (0, 0), 24_000, (("test", 200),), 1) for model in ("drrn", "drrn-memory")]
    assert [(base, len(seeds), arms) for base, seeds, arms in plan.cells] == [("grpo", 10, m.REGIME_ARMS), ("ppo", 5, m.REGIME_ARMS),
                                                                              ("gigpo", 5, m.REGIME_ARMS)]
    assert len(m.REGIME_ARMS) == 7 and len(set(plan.todo())) == len(plan.todo()) == 6 * 20 * 7
    out = Path("out")
    key = f"{m.ALFWORLD}@clone-50-drrn-memory"
    assert m.cell_path(out, key, "grpo", "explorer-helpful", 3) == out / "cells" / "ALFWorld-v0-clone-50-drrn-memory-grpo-explorer-helpful-seed3.json"
    assert m.start_path(out, key, 3) == out / "starts" / "ALFWorld-v0-clone-50-drrn-memory-seed3.json"
    assert m.clone_name(m.ALFWORLD, 3, plan.envs[key]) == "ALFWorld-v0-clone50x10-drrn-memory-seed3.pt"
    # the matrix's files keep their names
    assert m.cell_path(out, m.ALFWORLD, "grpo", "outcome", 0) == out / "cells" / "ALFWorld-v0-grpo-outcome-seed0.json"
    assert m.start_path(out, m.WEBSHOP, 1) == out / "starts" / "WebShop-v0-seed1.json"
    assert m.clone_name(m.ALFWORLD, 2, m.PLANS["matrix"].envs[m.ALFWORLD]) == "ALFWorld-v0-seed2.pt"
    assert not any(p.regime for name in ("matrix", "pilot", "micro") for p in m.PLANS[name].envs.values())
    assert m.MAIN_ARMS == tuple(list(m.ARMS)[:6])  # the matrix's arms as they were


def test_the_helpful_role_trains_with_its_choice_and_a_run_overrides_it(monkeypatch):
    m = _module("rspo_matrix")
    assert m.ARMS["dense-helpful"].process(m.ALFWORLD) == m.HELPFUL[m.ALFWORLD]
    assert m.ARMS["rank-helpful"].process_reward(m.WEBSHOP) == m.HELPFUL[m.WEBSHOP].name
    assert m.ARMS["explorer-misaligned"].process(m.ALFWORLD) == m.ProcessChoice("events", once=False)
    chosen = []
    select = m._select
    monkeypatch.setattr(m, "_select", lambda plan, args: chosen.append(select(plan, args)) or sys.exit(0))
    with pytest.raises(SystemExit):
        m.main(["--preset", "regimes", "--regimes", "clone-50-drrn-memory", "untrained-drrn", "--bases", "grpo", "--seeds", "0", "1",
                "--arms", "outcome", "explorer-helpful", "--helpful", "ALFWorld-v0=events:once", "--steps", "500"])
    (plan,) = chosen
    assert list(plan.envs) == [f"{m.ALFWORLD}@clone-50-drrn-memory", f"{m.WEBSHOP}@untrained-drrn"]
    assert plan.cells == (("grpo", (0, 1), ("outcome", "explorer-helpful")),)
    alfworld, webshop = plan.envs.values()
    assert alfworld.helpful == m.ProcessChoice("events", once=True) and webshop.helpful is None and alfworld.learner_steps == 500
    assert len(plan.todo()) == 2 * 2 * 2
    trainer = m.make_trainer(m.ALFWORLD, "grpo", m.ARMS["explorer-helpful"], 0, replace(alfworld, model="drrn",
                             helpful=m.ProcessChoice("events", once=True, weights={"open": 0.2})))
    try:
        config = trainer.config
        assert (config.process_reward, config.process_once, config.process_weights, trainer.model_name) == ("events", True, {"open": 0.2}, "drrn")
    finally:
        trainer.close()
    chosen.clear()
    with pytest.raises(SystemExit):  # a start or a policy selects every regime of it
        m.main(["--preset", "regimes", "--regimes", "untrained", "--envs", m.ALFWORLD])
    assert list(chosen[0].envs) == [f"{m.ALFWORLD}@untrained-drrn-memory"]
    for bad in (["--regimes", "clone-7"], ["--helpful", "ALFWorld-v0=nope"], ["--helpful", "ALFWorld-v0=events:twice"]):
        chosen.clear()
        with pytest.raises(SystemExit) as error:
            m.main(["--preset", "regimes", *bad])
        assert error.value.code == 2 and not chosen  # argparse's error, before anything runs


def _serially(jobs, workers, keep, stop=lambda: False) -> int:
    """``run_fresh`` in this process: the micro cells take seconds, a fresh process each would dominate."""
    jobs = list(jobs)
    for done, (key, fn, args) in enumerate(jobs, 1):
        if stop():
            break
        keep(key, fn(*args), done, len(jobs))
    return 0


def test_micro_regimes_run_end_to_end_and_merge_into_the_matrix_summary(tmp_path, monkeypatch):
    m = _module("rspo_matrix")
    report = _module("rspo_matrix_report")
    monkeypatch.setattr(m, "run_fresh", _serially)
    out = tmp_path / "regimes"
    plan = m.PLANS["micro-regimes"]
    assert [p.regime_name for p in plan.envs.values()] == ["untrained-drrn", "clone-2-drrn"]
    assert m.main(["--preset", "micro-regimes", "--out", str(out)]) == 0
    cells, starts = m.load_results(out)
    assert len(cells) == 2 * 2 * 3 and len(starts) == 2 * 2
    assert sorted(p.name for p in (out / "clones").iterdir()) == ["ALFWorld-v0-clone2x1-drrn-seed0.pt", "ALFWorld-v0-clone2x1-drrn-seed1.pt"]
    assert {(c["regime"]["start"], c["regime"]["policy"]) for c in cells + starts} == {("untrained", "drrn"), ("clone-2", "drrn")}
    budget = plan.envs[f"{m.ALFWORLD}@untrained-drrn"].learner_steps
    for c in cells:
        helpful = c["arm"] != "outcome"
        assert (c["process_reward"], c["process_once"]) == ((m.HELPFUL[m.ALFWORLD].name, True) if helpful else (None, False))
        assert len(c["groups"]) == len(c["train_curve"]) >= 1
        assert [g[0] for g in c["groups"]] == [row[0] for row in c["train_curve"]] and c["groups"][-1][0] == c["learner_steps"] >= budget
        assert all(0.0 <= v <= 1.0 for g in c["groups"] for v in g[1:])
    seconds = json.loads(m.cell_path(out, f"{m.ALFWORLD}@clone-2-drrn", "grpo", "outcome", 0).read_text())["seconds"]
    assert m.main(["--preset", "micro-regimes", "--out", str(out)]) == 0  # resumable: nothing left to run
    assert json.loads(m.cell_path(out, f"{m.ALFWORLD}@clone-2-drrn", "grpo", "outcome", 0).read_text())["seconds"] == seconds

    docs = tmp_path / "docs"
    docs.mkdir()
    matrix_rows = [{"env": m.WEBSHOP, "base": "grpo", "arm": "outcome", "process_reward": None, "seeds": 10, "metric": "score",
                    "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}]
    matrix_diffs = [{"env": m.WEBSHOP, "base": "grpo", "a": {"arm": "outcome", "process_reward": None}, "b": {"arm": "start", "process_reward": None},
                     "metric": "score", "seeds": 10, "mean": 0.1, "ci_low": 0.0, "ci_high": 0.2}]
    stale = {**matrix_rows[0], "regime": {"start": "clone-9", "policy": "drrn"}}  # a regimes report's row from before: replaced
    (docs / "summary.json").write_text(json.dumps({"rows": matrix_rows + [stale], "differences": matrix_diffs}))
    report.main([str(out), "--preset", "micro-regimes", "--out", str(docs), "--merge-summary"])
    summary = json.loads((docs / "summary.json").read_text())
    assert summary["rows"][:1] == matrix_rows and summary["differences"][:1] == matrix_diffs
    rows, diffs = summary["rows"][1:], summary["differences"][1:]
    assert all(r["regime"] in ({"start": "untrained", "policy": "drrn"}, {"start": "clone-2", "policy": "drrn"}) for r in rows + diffs)
    assert all(set(r) == {"env", "regime", "base", "arm", "process_reward", "seeds", "metric", "mean", "ci_low", "ci_high"} for r in rows)
    by_metric = {}
    for r in rows:
        by_metric.setdefault(r["metric"], []).append(r)
    choice = m.HELPFUL[m.ALFWORLD]
    helpful = choice.name + (":once" if choice.once else "")
    # per regime: 4 success rows (start and 3 arms), 3 AUCs, 3 all-fail shares, the explorer's two shares (its share
    # of the wins only where some iteration had a win)
    assert {k: len(v) for k, v in by_metric.items() if k != "explorer_win_share"} == {
        "success": 8, "auc_success": 6, "all_fail_share": 6, "explorer_rescued_share": 2}
    assert len(by_metric.get("explorer_win_share", [])) <= 2
    assert {(r["arm"], r["process_reward"]) for r in by_metric["success"]} == {("start", None), ("outcome", None), ("dense", helpful),
                                                                               ("rspo-explorer", helpful)}
    for r in rows:
        assert r["seeds"] == 2 and 0.0 <= r["ci_low"] <= r["mean"] <= r["ci_high"] <= 1.0
    for r in by_metric["all_fail_share"]:  # the cells' own mean over iterations, averaged over seeds
        cells_of = [c for c in cells if c["regime"] == r["regime"] and c["kind"] == r["arm"]]
        assert r["mean"] == pytest.approx(np.mean([np.mean([g[1] for g in c["groups"]]) for c in cells_of]))
    assert {r["arm"] for r in by_metric.get("explorer_win_share", [])} <= {"rspo-explorer"}
    pairs = {(d["a"]["arm"], d["b"]["arm"], d["metric"]) for d in diffs}
    assert pairs == {("outcome", "start", "success"), ("dense", "outcome", "success"), ("rspo-explorer", "outcome", "success"),
                     ("rspo-explorer", "dense", "success"), ("dense", "outcome", "auc_success"), ("rspo-explorer", "outcome", "auc_success"),
                     ("rspo-explorer", "dense", "auc_success")}
    assert len(diffs) == 2 * len(pairs) and all(d["seeds"] == 2 for d in diffs)
    details = json.loads((docs / "details_regimes.json").read_text())
    assert set(details) == {"budget", "views", "farmed_events", "group_shares"}
    assert len(details["group_shares"]) == 8 + len(by_metric.get("explorer_win_share", []))
    assert len(details["views"]["equal_total"]["rows"]) == 8
    assert "| rspo/ALFWorld-v0 | clone-2-drrn | grpo | explorer-helpful | 2 |" in (docs / "tables_regimes.md").read_text()
    assert (docs / "heldout_regimes_ALFWorld-v0.png").is_file()
    assert not (docs / "details.json").exists() and not (docs / "tables.md").exists()  # the matrix's stay as they are


def _regime_cell(env, regime, base, arm, seed, wins, kind, process, groups, once=True):
    cell = _cell(env, base, arm, seed, wins, kind, process)
    for evaluation in cell["evals"]:  # at 30 learner steps every task lost: the curve rises later
        if evaluation["learner_steps"] == 30:
            evaluation["per_task"] = [[row[0], row[1], 0, 0.0, 0] for row in evaluation["per_task"]]
    return {**cell, "regime": regime, "process_once": once and process is not None, "groups": groups}


def test_the_regimes_report_reads_auc_and_group_shares_and_skips_unpaired_comparisons(tmp_path):
    m = _module("rspo_matrix")
    report = _module("rspo_matrix_report")
    env = m.ALFWORLD
    regime = {"start": "clone-5", "policy": "drrn"}
    out = _results_folder(tmp_path, env, range(3), 4)
    for start in (out / "starts").iterdir():
        start.write_text(json.dumps({**json.loads(start.read_text()), "regime": regime}))
    groups = {"outcome": [[30, 1.0, 0.0, 0.0], [60, 0.5, 0.0, 0.0], [100, 0.0, 0.0, 0.0]],
              "explorer-helpful": [[30, 0.5, 0.5, 0.25], [45, 1.0, 0.0, 0.0], [60, 0.25, 1.0, 0.5], [100, 0.0, 0.0, 0.0]]}
    for seed in range(3):
        for arm, kind, process, wins in (("outcome", "outcome", None, [1, 0, 0, 0]), ("explorer-helpful", "rspo-explorer", "pickup", [1, 1, 0, 0]),
                                         ("dense-helpful", "dense", "pickup", [1, 1, 1, 1])):
            if arm == "dense-helpful" and seed:  # a partial run: one seed of it
                continue
            cell = _regime_cell(env, regime, "grpo", arm, seed, wins, kind, process, groups.get(arm, [[100, 0.25, 0.0, 0.0]]))
            (out / "cells" / f"{arm}-{seed}.json").write_text(json.dumps(cell))
    plan = m.Plan(m.regimes(env, [m.EnvPlan(100, clone=(5, 1))]), (("grpo", tuple(range(3)), m.REGIME_ARMS),))
    _report_under(report, "micro-regimes", plan, [str(out), "--preset", "micro-regimes", "--out", str(tmp_path / "docs")])
    summary = json.loads((tmp_path / "docs" / "summary.json").read_text())
    rows = {(r["arm"], r["metric"]): r for r in summary["rows"]}
    assert all(r["regime"] == regime for r in summary["rows"] + summary["differences"])
    # AUC over [0, 100] of (0 at the start, 0 at 30, w at 60, w at 100): w * (15 + 40) / 100
    assert rows[("outcome", "auc_success")]["mean"] == pytest.approx(0.25 * 0.55)
    assert rows[("rspo-explorer", "auc_success")]["mean"] == pytest.approx(0.5 * 0.55)
    assert rows[("rspo-explorer", "success")]["process_reward"] == "pickup:once"
    assert rows[("outcome", "all_fail_share")]["mean"] == pytest.approx(0.5)
    assert rows[("rspo-explorer", "all_fail_share")]["mean"] == pytest.approx(1.75 / 4)
    # the share of the wins over the iterations that had one: the all-fail iteration's logged 0 does not count
    assert rows[("rspo-explorer", "explorer_win_share")]["mean"] == pytest.approx(0.5)
    assert rows[("rspo-explorer", "explorer_rescued_share")]["mean"] == pytest.approx(0.75 / 4)
    assert rows[("dense", "all_fail_share")]["seeds"] == 1 and ("dense", "explorer_win_share") not in rows
    diffs = {(d["a"]["arm"], d["b"]["arm"], d["metric"]): d for d in summary["differences"]}
    assert diffs[("rspo-explorer", "outcome", "auc_success")]["mean"] == pytest.approx(0.25 * 0.55)
    assert diffs[("rspo-explorer", "outcome", "success")]["seeds"] == 3
    assert not any("dense" in (a, b) for a, b, _ in diffs)  # one paired seed: no interval
    # the matrix's report merged in afterwards replaces the rows without a regime and keeps these
    matrix = _results_folder(tmp_path / "matrix", env, [0, 1], 4)
    for seed in (0, 1):
        (matrix / "cells" / f"outcome-{seed}.json").write_text(json.dumps(_cell(env, "grpo", "outcome", seed, [1, 1, 0, 0], "outcome", None)))
    _report_under(report, "matrix", m.Plan({env: m.EnvPlan(100)}, (("grpo", (0, 1), ("outcome",)),)),
                  [str(matrix), "--out", str(tmp_path / "docs"), "--merge-summary"])
    merged = json.loads((tmp_path / "docs" / "summary.json").read_text())
    assert [r for r in merged["rows"] if "regime" in r] == summary["rows"]
    assert [d for d in merged["differences"] if "regime" in d] == summary["differences"]
    assert [(r["arm"], r["mean"]) for r in merged["rows"] if "regime" not in r] == [("start", 0.0), ("outcome", 0.5)]


# -- hostile input: cut-off files and bad arguments


def _scheduled(m, monkeypatch, argv) -> list:
    """The jobs ``main(argv)`` would run (none is run)."""
    scheduled = []

    def capture(jobs, workers, keep, stop=lambda: False):
        scheduled.extend(key for key, _, _ in jobs)
        return 0

    monkeypatch.setattr(m, "run_fresh", capture)
    assert m.main(argv) == 0
    return scheduled


def test_a_cut_off_cell_or_start_is_run_again_and_a_whole_one_is_kept(tmp_path, monkeypatch):
    m = _module("rspo_matrix")
    out = tmp_path / "results"
    whole = _cell(m.ALFWORLD, "grpo", "outcome", 0, [1, 0], "outcome", None)
    m.write_json(m.cell_path(out, m.ALFWORLD, "grpo", "outcome", 0), whole)
    m.cell_path(out, m.ALFWORLD, "grpo", "outcome", 1).write_text(json.dumps(whole)[:100])  # killed while writing
    m.cell_path(out, m.ALFWORLD, "grpo", "outcome", 2).write_text("{}")  # parses, but holds no cell
    for seed in (0, 1, 2):
        m.write_json(m.start_path(out, m.ALFWORLD, seed), {"env": m.ALFWORLD, "seed": seed, "evals": [
            {"temperature": t, "episodes": k, "per_task": []} for k in (1, 4) for t in (1.0, 0.4)]})
    m.start_path(out, m.ALFWORLD, 2).write_text('{"env": "rspo/ALF')
    argv = ["--envs", m.ALFWORLD, "--bases", "grpo", "--arms", "outcome", "--seeds", "0", "1", "2", "--out", str(out)]
    scheduled = _scheduled(m, monkeypatch, argv)
    assert scheduled == [("start", (m.ALFWORLD, 2)), ("cell", (m.ALFWORLD, "grpo", "outcome", 1)), ("cell", (m.ALFWORLD, "grpo", "outcome", 2))]


def test_a_run_folder_cell_with_a_cut_off_cell_json_is_not_done(tmp_path):
    m = _module("rspo_matrix")
    (tmp_path / "cell.json").write_text('{"env": "rspo/ALFWorld-v0", "seco')
    assert not m.is_done(tmp_path)
    (tmp_path / "cell.json").write_text(json.dumps({"env": m.ALFWORLD, "seed": 0, "seconds": 3.0}))
    assert m.is_done(tmp_path)


def test_the_report_names_a_cut_off_cell_in_one_line_and_reports_the_rest(tmp_path, capsys):
    m = _module("rspo_matrix")
    report = _module("rspo_matrix_report")
    env = m.ALFWORLD
    out = _results_folder(tmp_path, env, [0, 1], 2)
    (out / "cells" / "outcome-0.json").write_text(json.dumps(_cell(env, "grpo", "outcome", 0, [1, 0], "outcome", None)))
    (out / "cells" / "outcome-1.json").write_text(json.dumps(_cell(env, "grpo", "outcome", 1, [1, 1], "outcome", None))[:80])
    plan = m.Plan({env: m.EnvPlan(100)}, (("grpo", (0, 1), ("outcome",)),))
    _report_under(report, "matrix", plan, [str(out), "--out", str(tmp_path / "docs")])
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "outcome-1.json" in line] == [
        f"skipped {out / 'cells' / 'outcome-1.json'}: not a whole record (cut off, or not written by rspo_matrix.py); "
        "rspo_matrix.py runs it again"]
    rows = json.loads((tmp_path / "docs" / "summary.json").read_text())["rows"]
    assert [r["seeds"] for r in rows if r["arm"] == "outcome"] == [1]


@pytest.mark.parametrize("argv,message", [
    (["--seeds", "-1"], "seed must be an integer from 0 to 9223372036854775807, got -1"),
    (["--seeds", str(2**64)], f"seed must be an integer from 0 to 9223372036854775807, got {2**64}"),
    (["--set", "learning_rate=abc"], "learning_rate must be a number > 0, got 'abc'"),
    (["--set", "num_grups=3"], "unknown TrainerConfig field 'num_grups' (did you mean 'num_groups'?)"),
    (["--lr", "1e39"], "learning_rate must be a float32 number"),
    (["--jobs", "0"], "--jobs: must be a positive integer, got '0'"),
    (["--steps", "-5"], "--steps: must be a positive integer, got '-5'"),
])
def test_bad_arguments_are_one_line_and_exit_2_before_any_job(tmp_path, monkeypatch, capsys, argv, message):
    m = _module("rspo_matrix")
    scheduled = []
    monkeypatch.setattr(m, "run_fresh", lambda jobs, *args: scheduled.extend(jobs) or 0)
    with pytest.raises(SystemExit) as error:
        m.main(["--preset", "pilot", "--out", str(tmp_path / "new"), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert error.value.code == 2 and not scheduled and message in err[-1] and "Traceback" not in "".join(err)
    if not message.startswith("--"):  # argparse's own refusals of a flag's type print its usage first
        assert len(err) == 1
    assert not (tmp_path / "new").exists()  # nothing written either


@pytest.mark.parametrize("preset", ["pilot", "llm-micro"])
def test_an_out_that_is_a_file_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, preset):
    m = _module("rspo_matrix")
    monkeypatch.setattr(m, "run_fresh", lambda *args: pytest.fail("no job may start"))
    file = tmp_path / "passwd"
    file.write_text("root:x:0:0\n")
    with pytest.raises(SystemExit) as error:
        m.main(["--preset", preset, "--out", str(file)])
    assert error.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"rspo_matrix.py: error: --out {file}: not a folder (an existing file)"]
    assert file.read_text() == "root:x:0:0\n"


def test_merging_into_a_cut_off_summary_is_one_line_and_leaves_it_as_it_was(tmp_path, capsys):
    m = _module("rspo_matrix")
    report = _module("rspo_matrix_report")
    env = m.ALFWORLD
    out = _results_folder(tmp_path, env, [0], 2)
    (out / "cells" / "outcome-0.json").write_text(json.dumps(_cell(env, "grpo", "outcome", 0, [1, 0], "outcome", None)))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "summary.json").write_text('{"rows": [{"env": ')
    plan = m.Plan({env: m.EnvPlan(100)}, (("grpo", (0,), ("outcome",)),))
    with pytest.raises(SystemExit) as error:
        _report_under(report, "matrix", plan, [str(out), "--out", str(docs), "--merge-summary"])
    assert error.value.code == 2 and (docs / "summary.json").read_text() == '{"rows": [{"env": '
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"rspo_matrix_report.py: error: cannot merge into {docs / 'summary.json'}: it is not a summary this report wrote "
        "(cut off, or not JSON rows and differences); move it away or drop --merge-summary")


@pytest.mark.parametrize("preset", ["webshop-v1", "llm-alfworld"])
def test_ppo_s_matched_control_samples_the_explorer_arm_s_tasks_and_episodes_per_task(preset):
    m = _module("rspo_matrix")
    key, env_plan = next(iter(m.PLANS[preset].envs.items()))
    env = m.env_of(key)

    def sampling(base: str, arm: str) -> tuple[int, int]:
        _, settings = m.trainer_settings(env, base, m.ARMS[arm], 0, env_plan.for_base(base))
        return settings["num_groups"], settings["group_size"] + settings.get("explorer_group_size", 0)

    tasks, per_task = sampling("ppo", "agent-helpful")
    assert sampling("ppo", "outcome-nm-matched") == (tasks, per_task) and per_task == 3
    assert sampling("ppo", "outcome-nm") == (tasks * per_task, 1)  # the unmatched control: one episode on more tasks
    assert sampling("grpo", "outcome-nm-matched") == sampling("grpo", "outcome-nm") == sampling("grpo", "agent-helpful")
    assert "outcome-nm-matched" in next(arms for base, _, arms in m.PLANS[preset].cells if base == "ppo")


def test_equal_learner_reads_the_control_where_its_learner_steps_are_nearest_the_rspo_learner_s_end():
    report = _module("rspo_matrix_report")
    plan = report.PLANS["webshop-v1"]

    def cell(arm: str, kind: str, seed: int, points: list[tuple[int, float]]) -> dict:
        evals = [{"temperature": 1.0, "learner_steps": steps, "total_steps": 36_000 * (i + 1) // len(points),
                  "per_task": [[0, 0, score, score, 0]] * 4} for i, (steps, score) in enumerate(points)]
        return {"env": "rspo/WebShop-v1", "base": "grpo", "arm": arm, "kind": kind, "process_reward": None, "seed": seed, "evals": evals}

    cells = [cell("agent-helpful", "rspo-explorer", s, [(4_000, 0.0), (23_000, 0.5 + s / 10)]) for s in (0, 1)]
    cells += [cell("outcome-nm", "outcome", s, [(12_000, 0.1), (24_000, 0.2), (36_000, 0.9)]) for s in (0, 1)]
    diffs = report.equal_learner(report.Matrix(cells, [], plan), plan)
    assert [(d["names"], d["metric"]) for d in diffs] == [(["agent-helpful", "outcome-nm"], m) for m in ("success", "score")]
    assert diffs[0]["learner_steps_a"] == 23_000 and diffs[0]["learner_steps_b"] == 24_000  # not the control's end (36,000)
    assert diffs[0]["mean"] == pytest.approx(0.55 - 0.2)


def test_replay_mechanism_summarises_transfer_per_temperature_and_ignores_it_against_the_archive(tmp_path):
    import io
    import tarfile

    mechanism = _module("replay_mechanism")
    keys = ["explorer_only_tasks", "nobody_tasks", "explorer_only_start", "explorer_only_end", "explorer_only_gain",
            "nobody_start", "nobody_end", "nobody_gain", "transfer"]

    def measured(temperature, transfer, tasks=3.0):
        row = dict.fromkeys(keys, 0.0)
        row.update(explorer_only_tasks=tasks, nobody_tasks=5.0, transfer=transfer, temperature=temperature,
                   explorer_only_gain=None if transfer is None else transfer)
        return row

    cells = {f"c{seed}": {"base": "grpo", "seed": seed, "evals": [seed],
                          "transfer": [measured(1.0, value), measured(0.4, None if value is None else value / 2, 0.0 if value is None else 3.0)]}
             for seed, value in enumerate([0.1, 0.3, None])}
    summary = mechanism.summarise_transfer(cells)
    at_one = summary["grpo"]["1.0"]["transfer"]
    assert at_one["per_seed"] == [0.1, 0.3, None] and at_one["seeds"] == 2  # a seed without explorer-only goals is left out
    assert at_one["mean"] == pytest.approx(0.2) and at_one["low"] <= 0.2 <= at_one["high"]
    assert summary["grpo"]["0.4"]["transfer"]["mean"] == pytest.approx(0.1)
    assert summary["grpo"]["1.0"]["explorer_only_tasks"]["seeds"] == 3

    # a rerun cell that adds the transfer equals its archived self; any other change is named
    archive = tmp_path / "cells.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for stem, cell in cells.items():
            data = json.dumps({k: v for k, v in cell.items() if k != "transfer"}).encode()
            info = tarfile.TarInfo(f"cells/{stem}.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    changed = {**cells, "c1": {**cells["c1"], "evals": [9]}}
    assert mechanism.archive_differences(changed, archive) == {"c0": [], "c1": ["evals"], "c2": []}
