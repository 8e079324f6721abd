"""The ``rspo-gym`` command line runs its demo offline."""

import io

import pytest

from rspo_gym.cli import main


def test_demo_expert_wins_generated_tasks(capsys):
    assert main(["demo", "--episodes", "2", "--split", "valid_unseen"]) == 0
    out = capsys.readouterr().out
    assert "-= Welcome to TextWorld, ALFRED! =-" in out
    assert out.rstrip().endswith("2/2 tasks won by the explorer expert.")


def test_demo_optimal_expert_on_real_games(alfworld_data, capsys):
    assert main(["demo", "--games", str(alfworld_data / "json_2.1.1" / "valid_seen"), "--expert", "optimal",
                 "--episodes", "1"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("1/1 tasks won by the optimal expert.")


def test_play_mode_reads_commands_until_end_of_input(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("look\njump\n"))
    assert main(["demo", "--play", "--episodes", "1"]) == 0
    out = capsys.readouterr().out
    assert "> look\nYou are in the middle of a room." in out and "> jump\nNothing happens." in out
    assert out.rstrip().endswith("0/1 tasks won by the player.")


def test_play_mode_lists_commands_when_they_change_or_after_help(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("look\njump\nhelp\ngo to countertop 1\nlook\n"))
    assert main(["demo", "--play", "--episodes", "1", "--split", "valid_seen"]) == 0
    listings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("admissible: ")]
    # at the start, after help, and after the move (look and jump change nothing)
    assert len(listings) == 3
    assert "type help" in listings[0] and "go to countertop 1" in listings[1] and "go to countertop 1" not in listings[2]


def test_train_and_eval_commands_run_and_write_results(tmp_path, capsys):
    pytest.importorskip("transformers")
    out = tmp_path / "run"
    settings = ["--set", "num_groups=1", "--set", "group_size=2", "--set", "max_turns=2", "--set", "eval_tasks=1", "--set", "progress=false"]
    assert main(["train", "--algo", "gigpo", "--iterations", "1", "--output-dir", str(out), *settings]) == 0
    assert (out / "metrics.csv").exists() and (out / "policy" / "config.json").exists()
    assert main(["eval", "--model", str(out / "policy"), "--tasks", "1", "--set", "max_turns=2"]) == 0
    assert "eval/success" in capsys.readouterr().out
    assert main(["train", "--iterations", "1", "--set", "no_such_field=1"]) == 2
    assert "unknown RSPOConfig field 'no_such_field'" in capsys.readouterr().err


def test_quickstart_writes_the_results_folder(tmp_path):
    pytest.importorskip("transformers")
    from rspo_gym.quickstart import QuickstartConfig, run_quickstart

    config = QuickstartConfig(
        train_tasks=2, eval_tasks=2, iterations=1, eval_every=1, output_dir=str(tmp_path / "qs"),
        trainer_overrides={"num_groups": 1, "group_size": 2, "explorer_group_size": 1, "max_turns": 3, "progress": False},
        model="tiny", warm_start=True, history_length=2, warm_start_overrides={"episodes": 2, "epochs": 1},
    )
    summary = run_quickstart(config)
    for name in ("metrics.csv", "config.json", "checkpoint.pt", "summary.md", "learning_curve.png"):
        assert (tmp_path / "qs" / name).exists(), name
    assert 0.0 <= summary["held_out_success_after_rl"] <= 1.0 and summary["iterations"] == 1


@pytest.mark.slow
def test_quickstart_on_webshop_uses_its_clone_and_can_warm_start(tmp_path):
    """WebShop defaults to the WebShop clone and history 2; its warm start clones the shopper on
    train goals (an ALFWorld task-type filter would leave no demonstrations at all)."""
    pytest.importorskip("transformers")
    from rspo_gym.quickstart import QuickstartConfig, resolved, run_quickstart

    defaults = resolved(QuickstartConfig(env_id="rspo/WebShop-v0"))
    assert (defaults.model, defaults.history_length) == ("tiny-webshop", 2)
    assert (resolved(QuickstartConfig()).model, resolved(QuickstartConfig()).history_length) == ("tiny-alfworld", 6)
    config = QuickstartConfig(
        env_id="rspo/WebShop-v0", model="tiny", warm_start=True, warm_start_overrides={"episodes": 2, "epochs": 1},
        train_tasks=2, eval_tasks=2, iterations=1, eval_every=1, output_dir=str(tmp_path / "qs"),
        trainer_overrides={"num_groups": 1, "group_size": 2, "explorer_group_size": 1, "max_turns": 3, "progress": False},
    )
    summary = run_quickstart(config)
    assert summary["warm_start_rows"] > 0 and summary["iterations"] == 1


def _settings_line(out: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith("evaluating ")]
    return line


def test_train_without_output_dir_writes_a_run_and_eval_reads_its_settings(tmp_path, monkeypatch, capsys):
    pytest.importorskip("transformers")
    runs = tmp_path / "runs"
    monkeypatch.setenv("RSPO_GYM_RUNS_DIR", str(runs))
    settings = ["--set", "num_groups=1", "--set", "group_size=2", "--set", "max_turns=3", "--set", "history_length=4",
                "--set", "eval_temperature=0.3", "--set", "eval_task_ids=[5, 7]", "--set", "eval_every=0", "--set", "progress=false"]
    assert main(["train", "--algo", "grpo", "--iterations", "1", *settings]) == 0
    (run,) = runs.iterdir()
    assert (run / "policy" / "config.json").is_file() and (run / "learning_curve.png").is_file()
    capsys.readouterr()
    for model in (run, run / "policy"):
        assert main(["eval", "--model", str(model)]) == 0
        line = _settings_line(capsys.readouterr().out)
        for expected in ("rspo/ALFWorld-v0", "valid_seen split", "task ids [5, 7]", "max_turns 3", "history_length 4", "temperature 0.3"):
            assert expected in line, (expected, line)
    assert main(["eval", "--model", str(run), "--max-turns", "1", "--temperature", "0", "--tasks", "1"]) == 0
    line = _settings_line(capsys.readouterr().out)
    assert "max_turns 1" in line and "temperature 0.0" in line and "1 tasks" in line and "history_length 4" in line


def test_eval_task_type_and_unreadable_run_configs(tmp_path, capsys):
    pytest.importorskip("transformers")
    from rspo_gym.quickstart import alfworld_task_ids

    assert main(["eval", "--task-type", "pick_and_place_simple", "--tasks", "2", "--max-turns", "1"]) == 0
    line = _settings_line(capsys.readouterr().out)
    assert f"task ids {alfworld_task_ids('valid_seen', 'pick_and_place_simple', 2)}" in line and "max_turns 1" in line
    run = tmp_path / "run"
    (run / "policy").mkdir(parents=True)
    for text in ("{not json", '{"no_such_field": 1}', "[1, 2]"):
        (run / "config.json").write_text(text)
        assert main(["eval", "--model", str(run)]) == 2
        assert "config.json" in capsys.readouterr().err
