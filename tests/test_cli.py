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


def test_train_and_eval_commands_run_and_write_results(tmp_path, capsys):
    pytest.importorskip("transformers")
    out = tmp_path / "run"
    settings = ["--set", "num_groups=1", "--set", "group_size=2", "--set", "max_turns=2", "--set", "eval_tasks=1", "--set", "progress=false"]
    assert main(["train", "--algo", "gigpo", "--iterations", "1", "--output-dir", str(out), *settings]) == 0
    assert (out / "metrics.csv").exists() and (out / "policy" / "config.json").exists()
    assert main(["eval", "--model", str(out / "policy"), "--tasks", "1", "--set", "max_turns=2"]) == 0
    assert "eval/success" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="unknown"):
        main(["train", "--iterations", "1", "--set", "no_such_field=1"])


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
