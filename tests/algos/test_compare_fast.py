"""``benchmarks/compare.py --preset fast``: its size, a cell's per-task record, intervals and paired differences."""

from dataclasses import replace

import pytest

from tests.algos.test_compare import _compare_module

pytest.importorskip("matplotlib")


def test_fast_preset_is_the_eleven_combinations_on_both_envs_with_ten_seeds():
    compare = _compare_module()
    preset = compare.PRESETS["fast"]
    assert len(preset.pairs()) == 11 and len(preset.seeds) >= 10 and preset.eval_tasks >= 200
    assert set(preset.envs) == {"rspo/ALFWorld-v0", "rspo/WebShop-v0"}
    assert preset.model == "drrn" and preset.per_task and preset.alfworld_task_type is None
    trainer = compare._trainer("rspo/ALFWorld-v0", "ppo", "rspo-explorer", 3, preset)
    assert type(trainer.policy).__name__ == "ActionScorerPolicy" and trainer.config.seed == 3
    trainer.close()


def test_a_fast_cell_records_every_held_out_task_and_its_training_curve():
    compare = _compare_module()
    preset = replace(compare.PRESETS["fast"], env_steps=40, eval_tasks=3, trainer={**compare.PRESETS["fast"].trainer, "num_groups": 2, "group_size": 2})
    cell = compare.run_cell("rspo/WebShop-v0", "grpo", "rspo-rank", 0, preset)
    assert [row[:2] for row in cell["per_task"]] == [["test", 0], ["test", 1], ["test", 2]]
    assert cell["score"] == pytest.approx(sum(row[3] for row in cell["per_task"]) / 3)
    assert cell["env_steps"] >= 40 and cell["train_curve"][-1][0] == cell["env_steps"]


def _cell(env, base, variant, seed, won):
    per_task = [["valid_seen", k, w, float(w)] for k, w in enumerate(won)]
    return {"env": env, "base": base, "variant": variant, "seed": seed, "per_task": per_task, "env_steps": 100,
            "seconds": 60.0, "train_curve": [[50, 0.0, 0.0], [100, 0.5, 0.5]]}


def test_paired_differences_say_better_only_when_the_interval_excludes_zero(tmp_path):
    compare = _compare_module()
    env = "rspo/ALFWorld-v0"
    cells = []
    for seed in range(4):
        cells.append(_cell(env, "grpo", "outcome", seed, [0, 0, 0, 0, 1, 0, 0, 0]))
        cells.append(_cell(env, "grpo", "rspo-explorer", seed, [1, 1, 1, 1, 1, 1, 0, 1]))  # better on every seed
        cells.append(_cell(env, "grpo", "dense", seed, [seed % 2, 0, 0, 0, 1, 0, 0, 0]))  # better on half the seeds
        cells.append(_cell(env, compare.START, compare.START, seed, [0, 0, 0, 0, 0, 0, 0, 0]))  # the seed's start
    diffs = {d["variant"]: d for d in compare.paired_differences(compare._matrices(cells))}
    assert diffs["outcome"]["against"] == compare.START and diffs["outcome"]["difference"] == pytest.approx(0.125)
    assert diffs["rspo-explorer"]["difference"] == pytest.approx(0.75) and diffs["rspo-explorer"]["verdict"] == "better"
    assert diffs["dense"]["difference"] == pytest.approx(1 / 16) and diffs["dense"]["verdict"] == "no difference shown"
    table = compare.interval_tables(cells, {})
    assert "| rspo/ALFWorld-v0 | grpo | outcome | 4 | 8 | 0.125 [" in table
    assert "| rspo/ALFWorld-v0 | grpo rspo-explorer − grpo outcome | success | 4 | 0.750 [" in table
    assert "| rspo/ALFWorld-v0 | – | start (no training) | 4 | 8 | 0.000 [0.000, 0.000] |" in table
    assert "| rspo/ALFWorld-v0 | grpo outcome − start | success | 4 | 0.125 [" in table
    compare._plot_intervals(cells, {env: {"success": 0.1, "score": 0.1}}, tmp_path)
    assert (tmp_path / "intervals_ALFWorld-v0.png").is_file() and (tmp_path / "curves_ALFWorld-v0.png").is_file()
