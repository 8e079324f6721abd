"""The ``rspo-gym`` command line runs its demo offline."""

import io

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
