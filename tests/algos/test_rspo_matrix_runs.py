"""``benchmarks/rspo_matrix.py``'s run-folder presets: cells as run folders that ``rspo-gym compare``
reads, resumed cell by cell, and the presets' settings (``learning``, ``gpu``, ``gpu-paper``)."""

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tests.algos.test_rspo_matrix import _module, _serially

pytest.importorskip("transformers")


@pytest.fixture
def threads():
    """The cells run in this process and set torch's thread count: put it back for the tests after."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _tiny_plan(m):
    """``llm-micro`` smaller still: 20 total env steps, held out at two points on the 4
    ``pick_and_place_simple`` tasks among ``valid_seen``'s first 10, two seeds of two arms."""
    (key, env_plan), = m.PLANS["llm-micro"].envs.items()
    env_plan = replace(env_plan, learner_steps=20, heldout=(("valid_seen", 10),), heldout_episodes=1)
    return replace(m.PLANS["llm-micro"], envs={key: env_plan}, cells=(("grpo", (0, 1), ("outcome", "agent-helpful")),), fractions=(0.5, 1.0))


def _records(folder: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted((folder / "evaluations").glob("*.json"))}


@pytest.mark.slow
def test_run_folder_cells_are_compared_by_compare_runs_and_resumed_cell_by_cell(tmp_path, monkeypatch, threads):
    from rspo_gym.compare import compare_runs
    from rspo_gym.compare.stats import NoiseSplit

    m = _module("rspo_matrix")
    pinned = []
    monkeypatch.setattr("rspo_gym.quickstart.pin_cpu_kernels", pinned.append)  # the workers' pin; this process keeps its kernels
    monkeypatch.setattr(m, "run_fresh", _serially)
    plan, out = _tiny_plan(m), tmp_path / "matrix"
    assert m.run_folder_matrix(plan, out, jobs=1) == 0 and pinned == ["avx2"]
    key = next(iter(plan.envs))
    start = json.loads(m.start_record_path(out, key).read_text())
    assert (start["iteration"], start["env_steps"], start["split"]) == (0, 0, "valid_seen")
    assert start["task_id"] == [1, 4, 8, 9]  # the type's tasks among the first 10
    folders = {(arm, seed): m.run_folder(out, key, "grpo", arm, seed) for arm in ("outcome", "agent-helpful") for seed in (0, 1)}
    for (arm, seed), folder in folders.items():
        assert {"config.json", "metrics.jsonl", "policy", "evaluations", "cell.json"} <= {p.name for p in folder.iterdir()}
        assert not (folder / "checkpoint.pt").exists()  # finished: nothing to resume
        cell = json.loads((folder / "cell.json").read_text())
        assert (cell["arm"], cell["seed"], cell["axis"]) == (arm, seed, "total") and cell["total_steps"] >= 20
        records = list(_records(folder).values())
        assert records[0] == start and len(records) >= 2  # the start, then each point (two may fall in one iteration)
        assert records[-1]["env_steps"] == cell["total_steps"] and records[-1]["task_id"] == start["task_id"]
    explorer = json.loads((folders[("agent-helpful", 0)] / "cell.json").read_text())
    assert explorer["kind"] == "rspo-explorer" and explorer["explorer"]["explorer_warmup_iterations"] == 1

    summary = compare_runs(groups={arm: str(out / "runs" / f"*-grpo-{arm}-seed*") for arm in ("outcome", "agent-helpful")},
                           baseline="outcome", out=tmp_path / "compare", x="total_env_steps", replicates=2000, progress=False,
                           say=lambda _: None)
    assert summary["evaluated_runs"] == [] and summary["task_ids"] == start["task_id"]  # every run read from its own records
    assert [(g["name"], g["seeds"]) for g in summary["groups"]] == [("outcome", [0, 1]), ("agent-helpful", [0, 1])]
    assert summary["total_env_steps"] >= 20 and (tmp_path / "compare" / "report.md").is_file()

    # the report's numbers are compare's: the same difference, and rows in summary.json's schema with the LLM's regime
    reported = _module("run_folder_report").report(out, tmp_path / "report")
    headline = next(d for d in reported["differences"] if d["names"] == ["agent-helpful", "outcome"] and d["metric"] == "success"
                    and d["measure"] == "equal_total_env_steps")
    final = next(d for d in summary["differences"] if d["measure"] == "final")
    assert (headline["mean"], headline["ci_low"], headline["ci_high"], headline["seeds"]) == (final["difference"], final["ci_low"], final["ci_high"], 2)
    predicted = NoiseSplit(**final["noise"]).detectable(10, final["tasks"])  # what 10 seeds would detect, from the split of this one's noise
    assert headline["detectable_at_10_seeds"] == predicted <= headline["detectable"]
    assert {d["measure"] for d in reported["differences"]} == {"equal_total_env_steps", "equal_learner_env_steps"}
    assert {(r["name"], r["metric"]) for r in reported["rows"]} >= {(a, m) for a in ("outcome", "agent-helpful")
                                                                     for m in ("success", "auc_success", "gain_success")}
    assert all(r["regime"] == {"start": "expert-clone", "policy": "tiny-alfworld"} for r in reported["rows"])
    assert any(d["names"] == ["outcome", "start"] for d in reported["differences"])
    assert (tmp_path / "report" / "tables.md").is_file() and (tmp_path / "report" / "grpo" / "report.md").is_file()

    def refuse(jobs, workers, keep, stop) -> int:
        assert list(jobs) == [], "a finished cell or start was run again"
        return 0

    monkeypatch.setattr(m, "run_fresh", refuse)
    assert m.run_folder_matrix(plan, out, jobs=1) == 0

    interrupted = folders[("outcome", 1)]  # killed before its cell.json: its folder is removed and the cell run again
    finished = _records(interrupted)
    (interrupted / "cell.json").unlink()
    (interrupted / "evaluations" / "000000.json").unlink()
    (interrupted / "leftover.tmp").write_text("from the killed run")
    ran = []

    def record(jobs, workers, keep, stop) -> int:
        jobs = list(jobs)
        ran.extend(key for key, _, _ in jobs)
        return _serially(jobs, workers, keep, stop)

    monkeypatch.setattr(m, "run_fresh", record)
    assert m.run_folder_matrix(plan, out, jobs=1) == 0
    assert ran == [("cell", (key, "grpo", "outcome", 1))]
    assert m.is_done(interrupted) and not (interrupted / "leftover.tmp").exists()
    assert _records(interrupted) == finished  # the rerun's records are the uninterrupted run's


def test_a_stop_file_ends_the_run_between_cells_and_the_next_run_removes_it_and_goes_on(tmp_path, monkeypatch):
    m = _module("rspo_matrix")
    monkeypatch.setattr("rspo_gym.quickstart.pin_cpu_kernels", lambda isa: None)
    monkeypatch.setattr(m, "run_fresh", _serially)
    plan, out = _tiny_plan(m), tmp_path / "matrix"
    (key,) = plan.envs
    m.start_record_path(out, key).parent.mkdir(parents=True)
    m.start_record_path(out, key).write_text("{}")  # the start is measured: only cells are left
    ran = []

    def cell_then_stop(env_key, base, arm, seed, plan, out) -> dict:
        """A finished cell, after which someone asks the run to stop."""
        ran.append((arm, seed))
        folder = m.run_folder(out, env_key, base, arm, seed)
        (folder / "evaluations").mkdir(parents=True)
        (folder / "evaluations" / "000001.json").write_text(json.dumps({"success": [1.0]}))
        (folder / "cell.json").write_text(json.dumps({"seconds": 0.0}))
        (out / m.STOP_FILE).touch()
        return {"seconds": 0.0}

    monkeypatch.setattr(m, "run_folder_cell", cell_then_stop)
    assert m.run_folder_matrix(plan, out, jobs=1) == 0
    assert ran == [("outcome", 0)] and (out / m.STOP_FILE).exists()
    assert m.run_folder_matrix(plan, out, jobs=1) == 0  # the next sitting: the stop file is the last run's
    assert ran == [("outcome", 0), ("agent-helpful", 0)]


def test_a_preset_mixing_run_folder_and_json_plans_is_refused_before_the_environment_changes(tmp_path):
    m = _module("rspo_matrix")
    plan = m.PLANS["llm-micro"]
    mixed = replace(plan, envs={**plan.envs, m.WEBSHOP: m.ENVS[m.WEBSHOP]})
    before = dict(os.environ)
    with pytest.raises(ValueError, match="all run-folder plans or none"):
        m.run_folder_matrix(mixed, tmp_path, jobs=1)
    assert dict(os.environ) == before  # the kernels' pin is the workers' (later tests' subprocesses inherit this process's)


def test_the_learning_preset_is_every_combination_from_tiny_alfworld_on_alfworld():
    m = _module("rspo_matrix")
    plan = m.PLANS["learning"]
    (key, alfworld), = plan.envs.items()
    assert m.env_of(key) == m.ALFWORLD  # the tiny-webshop half is not ported: that clone does not generalise
    assert (alfworld.model, alfworld.learner_steps, alfworld.axis, alfworld.run_folders) == ("tiny-alfworld", 1_875, "total", True)
    assert (alfworld.heldout, alfworld.heldout_episodes, alfworld.trainer) == (m.LLM_ALFWORLD.heldout, 12, m.LLM_TRAINER)
    assert alfworld.explorer == ()  # the old comparison's explorer (EARLIER_EXPLORER)
    cells = {(base, arm) for base, seeds, arms in plan.cells for arm in arms}
    assert cells == {(b, a) for b in ("grpo", "ppo", "gigpo") for a in ("outcome", "dense-aligned", "explorer-aligned")} | {("grpo", "rank-aligned")}
    assert all(seeds == (0, 1) for _, seeds, _ in plan.cells) and len(plan.todo()) == 20
    assert m.ARMS["dense-aligned"].process_reward(m.ALFWORLD) == "milestones" and m.ARMS["rank-aligned"].kind == "rspo-rank"


class _Validated(Exception):
    """Raised where a trainer would look for vLLM: its config is built and checked by then."""


def _stopped_before_the_engine(cls):
    """``cls`` whose construction ends once its config is validated, keeping the config."""

    class Probe(cls):
        def __init__(self, *args, **kwargs):
            try:
                super().__init__(*args, **kwargs)
            except _Validated:
                pass

    return Probe


def _configs(m, preset: str) -> dict[tuple[str, str, str], object]:
    """Each cell's trainer config (seed 0's), built and validated as ``make_trainer`` builds it."""
    plan = m.PLANS[preset]
    return {(m.env_of(key), base, arm): m.make_trainer(m.env_of(key), base, m.ARMS[arm], 0, plan.envs[key].for_base(base)).config
            for key, base, arm, seed in plan.todo() if seed == 0}


@pytest.fixture
def probes(monkeypatch):
    """The trainers, stopped where they would look for vLLM (no GPU, no model, no envs needed)."""
    import rspo_gym.algos as algos
    import rspo_gym.training.trainer as trainer_module

    def stop(backend: str) -> None:
        assert backend == "vllm"
        raise _Validated

    monkeypatch.setattr(trainer_module, "check_generation_backend", stop)
    for name in ("GRPOTrainer", "PPOTrainer", "GiGPOTrainer", "RSPOTrainer"):
        monkeypatch.setattr(algos, name, _stopped_before_the_engine(getattr(algos, name)))


def test_the_gpu_preset_is_the_old_device_check_with_the_paper_presets_explorer(probes):
    m = _module("rspo_matrix")
    plan = m.PLANS["gpu"]
    (alfworld,) = plan.envs.values()
    assert (list(plan.envs), alfworld.model, alfworld.task_type, alfworld.axis, alfworld.run_folders) == ([m.ALFWORLD], "smollm2-135m", None, "total", True)
    assert plan.fractions == (1.0,) and plan.cells == (("grpo", (0,), ("outcome", "agent-helpful")),)
    configs = _configs(m, "gpu")
    for config in configs.values():
        assert (config.generation_backend, config.think, config.constrained, config.max_new_tokens, config.max_prompt_length) == ("vllm", True, False, 256, 2048)
        assert (config.learning_rate, config.max_turns, config.num_groups, config.group_size, config.eval_temperature) == (1e-5, 30, 4, 4, 0.4)
        assert (config.eval_split, config.eval_task_ids, config.eval_every, config.checkpoint_every) == ("valid_seen", list(range(60)), 0, 0)
    explorer = configs[(m.ALFWORLD, "grpo", "agent-helpful")]
    assert (explorer.swap, explorer.explorer_lora, explorer.explorer_warmup_iterations, explorer.explorer_group_size) == ("explorer", True, 1, 2)
    assert (explorer.process_reward, explorer.process_once) == ("events", True)


def test_the_gpu_paper_preset_is_verl_agents_scale_per_env_at_equal_total_steps(probes):
    m = _module("rspo_matrix")
    plan = m.PLANS["gpu-paper"]
    assert list(plan.envs) == [m.ALFWORLD, m.WEBSHOP_V1]
    assert plan.cells == (("grpo", (0, 1, 2), ("outcome", "agent-helpful")), ("gigpo", (0, 1, 2), ("outcome", "agent-helpful")))
    assert len(plan.todo()) == 2 * 2 * 2 * 3 and plan.fractions[-1] == 1.0
    for env_plan in plan.envs.values():
        assert (env_plan.model, env_plan.axis, env_plan.run_folders, env_plan.clone) == (m.PAPER_MODEL, "total", True, (0, 0))
    assert os.environ.get("RSPO_GYM_PAPER_MODEL") or m.PAPER_MODEL == "Qwen/Qwen2.5-1.5B-Instruct"
    assert plan.envs[m.ALFWORLD].learner_steps > plan.envs[m.WEBSHOP_V1].learner_steps >= 150 * 128 * 5
    configs = _configs(m, "gpu-paper")
    per_env = {m.ALFWORLD: (50, 2048, 256, "valid_seen", 140, {}), m.WEBSHOP_V1: (15, 4096, 64, "test", 200, {"split": "train"})}
    for (env_id, base, arm), config in configs.items():
        turns, prompt, mini_batch, split, tasks, env_kwargs = per_env[env_id]
        assert (config.max_turns, config.max_prompt_length, config.mini_batch_size, config.eval_split) == (turns, prompt, mini_batch, split)
        assert (config.eval_task_ids, config.env_kwargs) == (list(range(tasks)), env_kwargs)
        assert (config.num_groups, config.group_size, config.max_new_tokens, config.learning_rate, config.kl_coef) == (16, 8, 512, 1e-6, 0.01)
        assert (config.generation_backend, config.think, config.constrained, config.gradient_checkpointing) == ("vllm", True, False, True)
        assert (config.max_tokens_per_micro_batch, config.eval_temperature, config.reward, config.checkpoint_every) == (16_384, 0.4, "outcome", 0)
        if arm == "agent-helpful":
            assert (config.base, config.swap, config.explorer_lora, config.explorer_warmup_iterations) == (base, "explorer", True, 75)
            assert config.explorer_group_size == 4 and config.process_reward == m.HELPFUL[env_id].name
        if base == "gigpo":
            assert config.gigpo_norm == {m.ALFWORLD: "mean_std_norm", m.WEBSHOP_V1: "mean_norm"}[env_id]


def test_the_paper_model_is_a_local_folder_when_the_variable_names_one(monkeypatch):
    monkeypatch.setenv("RSPO_GYM_PAPER_MODEL", "/models/Qwen2.5-1.5B-Instruct")
    m = _module("rspo_matrix")
    assert {p.model for p in m.PLANS["gpu-paper"].envs.values()} == {"/models/Qwen2.5-1.5B-Instruct"}
    assert m.run_folder(Path("out"), m.WEBSHOP_V1, "gigpo", "outcome", 2) == Path("out/runs/WebShop-v1-gigpo-outcome-seed2")


def test_a_difference_without_a_noise_split_keeps_its_table_row():
    """An unpaired difference has no ``noise``, so no prediction at 10 seeds: its row stays, that cell empty."""
    report = _module("run_folder_report")
    row = {"base": "grpo", "name": "agent-helpful", "metric": "success", "seeds": 2, "mean": 0.4, "ci_low": 0.3, "ci_high": 0.5}
    unpaired = {"base": "grpo", "measure": "equal_total_env_steps", "b": {"arm": "outcome"}, "names": ["agent-helpful", "outcome"],
                "metric": "success", "seeds": 2, "mean": 0.1, "ci_low": -0.05, "ci_high": 0.25, "detectable": 0.3}
    table = report.tables([row, {**row, "metric": "auc_success"}], [unpaired], {"grpo": []})
    assert "| agent-helpful − outcome | success | 2 | +0.100 [-0.050, +0.250] | 0.300 |  |" in table.splitlines()


def test_an_explorer_cell_that_did_not_count_its_warm_ups_tokens_is_left_out_of_its_arms_token_mean(tmp_path):
    """Cells run before the warm-up's tokens were counted logged its env steps only: their arm's
    mean is over the cells that counted every token, and the table says how many those are."""
    report = _module("run_folder_report")

    def cell(seed: int, tokens: int, warmup: dict | None) -> "report.Cell":
        folder = tmp_path / f"seed{seed}"
        folder.mkdir()
        logged = {} if warmup is None else {"explorer/warmup_env_steps": 5, **warmup}
        rows = [{"iteration": 1, "env_steps": 10, **logged, "explorer/success_gap": -0.5},
                {"iteration": 2, "env_steps": 20, "explorer/success_gap": 0.5}]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return report.Cell(folder, {"seconds": 600.0, "generated_tokens": tokens})

    arms = {"agent-helpful": {0: cell(0, 40_000, {}), 1: cell(1, 55_000, {"explorer/warmup_generated_tokens": 15_000}),
                              2: cell(2, 57_000, {"explorer/warmup_generated_tokens": 16_000})}}
    (cost,) = report.costs(arms)
    assert (cost["seeds"], cost["token_cells"], cost["generated_tokens"], cost["minutes"]) == (3, 2, 56_000, 10.0)
    assert cost["explorer_success_gap"]["mean"] == 0.0
    row = {"base": "grpo", "name": "agent-helpful", "metric": "success", "seeds": 3, "mean": 0.4, "ci_low": 0.3, "ci_high": 0.5}
    table = report.tables([row, {**row, "metric": "auc_success"}], [], {"grpo": [cost]})
    assert "| 10.0 | 56,000 (2 of 3 cells) |" in table
    outcome = {"outcome": {0: cell(3, 50_000, None)}}  # no warm-up at all: every token counted
    assert report.costs(outcome)[0]["generated_tokens"] == 50_000
