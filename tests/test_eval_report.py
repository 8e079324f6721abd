"""``rspo-gym eval``'s published tables: success per ALFWorld task type (real games and generated
tasks), WebShop's score and success, ``--json``, and the one line for a run that has no policy yet.

The pure functions are checked on hand-counted episodes; the command runs the untrained ``drrn``
scorer for a turn or two (a second or so of play), since what is checked is where each episode is
counted, not how well it plays."""

from __future__ import annotations

import json
import shutil

import pytest

from rspo_gym.cli import main
from rspo_gym.training.eval_report import ALFWORLD_COLUMNS, Tally, alfworld_table, eval_report, tally_by_type, webshop_result

TYPES = [task_type for task_type, _ in ALFWORLD_COLUMNS]


# -- the pure functions

def test_alfworld_table_has_the_published_columns_in_percent_with_the_games_behind_them():
    # valid_seen's counts per type (35/13/27/16/25/24) and hand-picked wins
    counts, wins = (35, 13, 27, 16, 25, 24), (30, 7, 27, 0, 20, 12)
    tallies = {t: Tally(n, w) for t, n, w in zip(TYPES, counts, wins)}
    assert alfworld_table(tallies).splitlines() == [
        "            Pick   Look  Clean   Heat   Cool  Pick2    All",
        "success     85.7   53.8  100.0    0.0   80.0   50.0   68.6",  # All: 96 / 140
        "games         35     13     27     16     25     24    140",
    ]


def test_a_type_without_games_is_a_dash_and_unknown_types_count_in_all_only():
    tallies = tally_by_type([("pick_heat_then_place_in_recep", True), (None, True), ("pick_heat_then_place_in_recep", False)])
    assert tallies == {"pick_heat_then_place_in_recep": Tally(2, 1), "unknown": Tally(1, 1)}
    rates = alfworld_table(tallies).splitlines()[1].split()
    assert rates == ["success", "-", "-", "-", "50.0", "-", "-", "66.7"]


def test_webshop_score_is_100_times_the_mean_reward_and_success_is_reward_one():
    result = webshop_result([1.0, 0.75, 0.0, 0.5, 1.0])
    assert (result.episodes, result.score, result.success) == (5, 65.0, 40.0)
    assert result.line() == "score 65.0  success 40.0 %  (5 goals)"
    assert webshop_result([0.9999]).success == 0.0  # a near miss is not a success
    with pytest.raises(ValueError):
        webshop_result([])


def test_eval_report_counts_every_type_and_webshop_numbers():
    episodes = [("pick_and_place_simple", True, 1.0), ("pick_two_obj_and_place", False, 0.0), ("pick_and_place_simple", False, 0.0)]
    report = eval_report(episodes, family="alfworld", settings={"env": "rspo/ALFWorld-v0", "seed": 7})
    assert (report["env"], report["seed"], report["episodes"]) == ("rspo/ALFWorld-v0", 7, 3)
    assert list(report["task_types"]) == TYPES
    assert report["task_types"]["pick_and_place_simple"] == {"episodes": 2, "successes": 1, "success_percent": 50.0}
    assert report["task_types"]["look_at_obj_in_light"] == {"episodes": 0, "successes": 0, "success_percent": None}
    assert report["overall"]["successes"] == 1 and "webshop" not in report
    shop = eval_report([("webshop", True, 1.0), ("webshop", False, 0.5)], family="webshop", settings={})
    assert shop["webshop"] == {"score": 75.0, "success_percent": 50.0} and "task_types" not in shop


# -- the command

def _table(out: str) -> dict[str, list[str]]:
    """The printed table's rows by their first word."""
    lines = out[out.index("success (%) by task type"):].splitlines()[1:4]
    assert lines[0].split() == ["Pick", "Look", "Clean", "Heat", "Cool", "Pick2", "All"]
    return {line.split()[0]: line.split()[1:] for line in lines[1:]}


@pytest.fixture(scope="module")
def six_games(alfworld_data, tmp_path_factory):
    """One real valid_seen game of each task type, in folders whose names do not say the type
    (the table must read it from the game), in the reverse of ALFWorld's type order."""
    source = alfworld_data / "json_2.1.1" / "valid_seen"
    folder = tmp_path_factory.mktemp("games")
    for i, task_type in enumerate(reversed(TYPES)):
        game = next(p for p in sorted(source.glob(f"{task_type}-*/*/game.tw-pddl")))
        (folder / f"g{i}").mkdir()
        shutil.copy(game, folder / f"g{i}" / "game.tw-pddl")
    return folder


def test_eval_on_real_games_counts_each_game_under_its_own_type(six_games, tmp_path, capsys):
    pytest.importorskip("transformers")
    report = tmp_path / "eval.json"
    assert main(["eval", "--model", "drrn", "--games", str(six_games), "--max-turns", "2", "--set", "progress=false",
                 "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert f"the games under {six_games.resolve()}, 6 tasks, max_turns 2" in out
    assert _table(out)["games"] == ["1", "1", "1", "1", "1", "1", "6"]
    saved = json.loads(report.read_text())
    assert {t: v["episodes"] for t, v in saved["task_types"].items()} == dict.fromkeys(TYPES, 1)
    assert (saved["games"], saved["split"], saved["episodes"], saved["max_turns"]) == (str(six_games.resolve()), None, 6, 2)
    assert (saved["model"], saved["env"], saved["temperature"], saved["seed"]) == ("drrn", "rspo/ALFWorld-v0", 0.0, 1000)
    assert saved["task_ids"] == list(range(6)) and saved["overall"]["episodes"] == 6
    assert saved["metrics"]["eval/success"] == saved["overall"]["success_percent"] / 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json"]  # written whole: no temporary file left
    # --set eval_task_ids names games of the folder (sorted by path: g5 is the Pick game)
    assert main(["eval", "--model", "drrn", "--games", str(six_games), "--max-turns", "1", "--set", "progress=false",
                 "--set", "eval_task_ids=[5, 5]"]) == 0
    assert _table(capsys.readouterr().out)["games"] == ["2", "0", "0", "0", "0", "0", "2"]


def test_eval_on_generated_tasks_prints_the_table_of_their_types(capsys):
    pytest.importorskip("transformers")
    from rspo_gym.quickstart import alfworld_task_ids

    assert main(["eval", "--model", "drrn", "--task-type", "pick_cool_then_place_in_recep", "--tasks", "2", "--max-turns", "1",
                 "--set", "progress=false"]) == 0
    assert _table(capsys.readouterr().out)["games"] == ["0", "0", "0", "0", "2", "0", "2"]
    # the split's first 12 tasks, counted by the generator's own type lists
    first = {t: sum(i < 12 for i in alfworld_task_ids("valid_seen", t, 140)) for t in TYPES}
    assert main(["eval", "--model", "drrn", "--tasks", "12", "--max-turns", "1", "--set", "progress=false"]) == 0
    assert _table(capsys.readouterr().out)["games"] == [str(first[t]) for t in TYPES] + ["12"]


def test_eval_on_webshop_prints_score_and_success_and_passes_env_kwargs(tmp_path, capsys):
    pytest.importorskip("transformers")
    report = tmp_path / "ws.json"
    assert main(["eval", "--env", "rspo/WebShop-v1", "--model", "drrn", "--tasks", "2", "--max-turns", "1", "--set", "progress=false",
                 "--set", 'env_kwargs={"num_products": 200}', "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "WebShop score 0.0  success 0.0 %  (2 goals)" in out and "by task type" not in out
    saved = json.loads(report.read_text())
    assert saved["webshop"] == {"score": 0.0, "success_percent": 0.0}
    assert (saved["split"], saved["env_kwargs"], saved["games"]) == ("test", {"num_products": 200}, None)
    assert main(["eval", "--env", "rspo/WebShop-v1", "--model", "drrn", "--set", 'env_kwargs={"no_such_kwarg": 1}']) == 2
    err = capsys.readouterr().err
    assert "cannot be made with env_kwargs {'no_such_kwarg': 1}" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("argv", "message"), [
    (["--games", "/no/such/folder"], "--games /no/such/folder: No ALFWorld game file or directory"),
    (["--games", ".", "--split", "valid_seen"], "--games plays the games of a folder"),
    (["--games", ".", "--env", "rspo/WebShop-v1"], "--games are ALFWorld game files; rspo/WebShop-v1 plays none"),
    (["--json", "."], "--json . is a folder"),
    (["--json", "/no/such/folder/eval.json"], "no folder /no/such/folder"),
])
def test_bad_games_and_json_flags_are_one_line(argv, message, capsys):
    pytest.importorskip("transformers")
    assert main(["eval", "--model", "drrn", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_damaged_game_file_is_one_line_before_the_model_loads(tmp_path, capsys):
    pytest.importorskip("transformers")
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "game.tw-pddl").write_text("{not json")
    assert main(["eval", "--model", "drrn", "--games", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a readable game.tw-pddl JSON file" in err and len(err.strip().splitlines()) == 1


def test_a_run_without_policy_yet_says_how_to_finish_it(tmp_path, capsys):
    """An interrupted run (checkpoint, metrics, no ``policy/``) was read as a model folder: the
    error was the tokenizer's, cut off at 'Couldn't instantiate the backend tokenizer from one of:'."""
    pytest.importorskip("transformers")  # without the [llm] extra, eval says that first
    from rspo_gym.training.config import PPOConfig, save_config

    run = tmp_path / "run"
    run.mkdir()
    save_config(PPOConfig(iterations=10), run / "config.json", env_id="rspo/ALFWorld-v0", model="tiny")
    (run / "checkpoint.pt").write_bytes(b"")
    (run / "metrics.jsonl").write_text("".join(json.dumps({"iteration": i}) + "\n" for i in (1, 2, 3)))
    expected = (f"rspo-gym eval: {run} is a run with no policy/ yet (it stopped after iteration 3): finish it with "
                f"`rspo-gym train --algo ppo --env rspo/ALFWorld-v0 --model tiny --output-dir {run} --resume` "
                f"and the other flags it was started with, then evaluate it")
    for model in (run, run / "policy"):
        assert main(["eval", "--model", str(model)]) == 2
        assert capsys.readouterr().err == f"rspo-gym: error: {expected}\n"


def test_an_env_that_needs_a_missing_package_is_one_line(tmp_path, monkeypatch, capsys):
    """WebShop on upstream's data files (``env_kwargs={"data_dir": ...}``) scores purchases with
    spaCy: without it the env refuses with an ImportError, which was a traceback."""
    pytest.importorskip("transformers")
    import rspo_gym.envs.webshop.reward as reward

    assert main(["webshop", "export", str(tmp_path / "data"), "--num-products", "20"]) == 0

    def no_spacy():
        raise ImportError("No module named 'spacy'")

    monkeypatch.setattr(reward, "_spacy_pipeline", no_spacy)
    kwargs = json.dumps({"data_dir": str(tmp_path / "data"), "num_products": None})
    assert main(["eval", "--env", "rspo/WebShop-v1", "--model", "drrn", "--set", f"env_kwargs={kwargs}"]) == 2
    err = capsys.readouterr().err
    assert "cannot be made with env_kwargs" in err and "install spacy and its en_core_web_sm model" in err
    assert len(err.strip().splitlines()) == 1
