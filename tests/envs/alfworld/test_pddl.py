"""Real ALFWorld game files load into the engine and replay the original engine's traces exactly."""

import json

import pytest

from rspo_gym.envs.alfworld.engine import Game
from rspo_gym.envs.alfworld.pddl import GameFileError, demangle, find_games, load_game, load_game_data

MINIMAL_PROBLEM = """(define (problem p) (:domain alfred)
(:init
 (atLocation agent1 loc_bar_1_bar_1)
 (receptacleType Fridge_bar__plus_01 FridgeType)
 (receptacleAtLocation Fridge_bar__plus_01 loc_bar_2_bar_2)
 (openable Fridge_bar__plus_01)
 (objectType Egg_bar__minus_01 EggType)
 (objectType Egg_bar__plus_02 EggType)
 (pickupable Egg_bar__minus_01) (pickupable Egg_bar__plus_02)
 (inReceptacle Egg_bar__minus_01 Fridge_bar__plus_01)
 (objectAtLocation Egg_bar__minus_01 loc_bar_2_bar_2)
 (isCool Egg_bar__minus_01)
)
(:goal (and (exists (?r - receptacle) (exists (?o - object) (and (inReceptacle ?o ?r)
 (objectType ?o EggType) (receptacleType ?r FridgeType)))))))"""
MINIMAL_GRAMMAR = '"task": [{"rhs": "Your task is to: put some egg on fridge."}]'


def test_demangler_numbers_in_reverse_sorted_id_order():
    names = demangle(["cabinet_bar__minus_01", "cabinet_bar__plus_01", "cabinet_bar_00", "loc_bar_3", "agent1",
                      "sink_bar__plus_01_bar_sinkbasin", "sink_bar__plus_02"])
    # sorted ids: cabinet_bar_00 < cabinet_bar__minus_01 < cabinet_bar__plus_01 -> numbers 3, 2, 1
    assert names["cabinet_bar_00"] == "cabinet 3"
    assert names["cabinet_bar__minus_01"] == "cabinet 2"
    assert names["cabinet_bar__plus_01"] == "cabinet 1"
    assert names["sink_bar__plus_01_bar_sinkbasin"] == "sinkbasin 1"
    assert names["sink_bar__plus_02"] == "sink 1"
    assert names["loc_bar_3"] == "loc 1" and names["agent1"] == "agent1"


def test_minimal_problem_loads_with_names_flags_and_task():
    world = load_game_data({"pddl_problem": MINIMAL_PROBLEM, "grammar": MINIMAL_GRAMMAR}, name="mini")
    assert [o.name for o in world.items] == ["egg 2", "egg 1"]
    assert world.task.task_type == "pick_and_place_simple"
    assert (world.task.object_type, world.task.parent_type) == ("egg", "fridge")
    game = Game(world)
    assert game.reset().endswith("you see a fridge 1.\n\nYour task is to: put some egg on fridge.")
    game.step("go to fridge 1")
    game.step("open fridge 1")
    game.step("take egg 2 from fridge 1")
    assert game.step("examine egg 2")[0] == "This is a cold egg 2."


@pytest.mark.parametrize(
    "data, message",
    [
        ([], "expected a JSON object"),
        ({"grammar": MINIMAL_GRAMMAR}, "expected a JSON object"),
        ({"pddl_problem": "(define)", "grammar": MINIMAL_GRAMMAR}, "no (:init"),
        ({"pddl_problem": MINIMAL_PROBLEM, "grammar": "{}"}, "Your task is to"),
        ({"pddl_problem": MINIMAL_PROBLEM.replace("(atLocation agent1 loc_bar_1_bar_1)", ""), "grammar": MINIMAL_GRAMMAR},
         "atLocation"),
        ({"pddl_problem": MINIMAL_PROBLEM.replace("(objectType Egg_bar__minus_01 EggType)", ""),
          "grammar": MINIMAL_GRAMMAR}, "inconsistent"),
    ],
)
def test_malformed_games_raise_a_clear_error(data, message):
    with pytest.raises(GameFileError, match=message.replace("(", r"\(")):
        load_game_data(data, name="bad")


def test_corrupt_file_and_missing_paths(tmp_path):
    corrupt = tmp_path / "game.tw-pddl"
    corrupt.write_bytes(b"\x00\xffnot json")
    with pytest.raises(GameFileError, match="not a readable"):
        load_game(corrupt)
    with pytest.raises(FileNotFoundError):
        find_games(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="No game.tw-pddl"):
        find_games(empty)


def test_every_recorded_trace_step_is_reproduced(alfworld_data):
    """6,880 steps recorded from TextWorld 1.7.0 + ALFWorld 0.4.2: text, admissible set, won."""
    traces = json.loads((alfworld_data / "tw_traces_valid_seen.json").read_text())["traces"]
    root = alfworld_data / "json_2.1.1" / "valid_seen"
    games, checked = {}, 0
    for trace in traces:
        game = games.get(trace["game"]) or games.setdefault(trace["game"], Game(load_game(root / trace["game"])))
        for step in trace["steps"]:
            obs = game.reset() if step["cmd"] is None else game.step(step["cmd"])[0]
            assert obs == step["obs"], (trace["game"], step["cmd"])
            assert [c for c in game.admissible_commands() if c != "help"] == step["admissible"]
            assert game.won == step["won"]
            checked += 1
    assert checked == 6880


def test_later_format_games_load_the_same(alfworld_data):
    """json_2.1.2/2.1.3 games differ only in grammar text (0.4 strings, help); the world is the same."""
    path = find_games(alfworld_data / "json_2.1.1" / "valid_seen")[0]
    data = json.loads(path.read_text())
    patched = dict(data)
    patched["grammar"] = (
        data["grammar"].replace("You arrive at {lend.name}.", "You arrive at {r.name}.")
        .replace("put {o} in/on {r}", "move {o} to {r}")
        .replace("You put the {o.name} in/on the {r.name}.", "You move the {o.name} to the {r.name}.")
    )
    old, new = Game(load_game_data(data)), Game(load_game_data(patched))
    assert old.reset() == new.reset()
    assert old.admissible_commands() == new.admissible_commands()


def test_objects_inside_receptacle_objects_show_when_examined():
    problem = MINIMAL_PROBLEM.replace(
        "(isCool Egg_bar__minus_01)",
        "(isCool Egg_bar__minus_01)\n (objectType Pot_bar__plus_01 PotType) (pickupable Pot_bar__plus_01)"
        "\n (isReceptacleObject Pot_bar__plus_01) (inReceptacle Pot_bar__plus_01 Fridge_bar__plus_01)"
        "\n (inReceptacleObject Egg_bar__plus_02 Pot_bar__plus_01)",
    )
    world = load_game_data({"pddl_problem": problem, "grammar": MINIMAL_GRAMMAR})
    game = Game(world)
    game.reset()
    for command in ["go to fridge 1", "open fridge 1", "take pot 1 from fridge 1"]:
        assert game.step(command)[1], command
    assert game.step("examine pot 1")[0] == "This is a normal pot 1. In it, you see a egg 1."
