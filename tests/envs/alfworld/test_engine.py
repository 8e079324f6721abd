"""The engine reproduces ALFWorld 0.4's rules and texts on small hand-written scenes."""

import random

import pytest

from rspo_gym.envs.alfworld.engine import Game
from rspo_gym.envs.alfworld.scenes import tiny_kitchen
from rspo_gym.envs.alfworld.text import HELP_TEXT, NOTHING_HAPPENS

from .scenes_for_tests import bedroom_look, shared_cabinets, two_receptacle_watch


def test_intro_lists_every_receptacle_with_banner_and_task():
    game = Game(tiny_kitchen())
    assert game.reset() == (
        "-= Welcome to TextWorld, ALFRED! =-\n\n"
        "You are in the middle of a room. Looking quickly around you, you see "
        "a countertop 1, a fridge 1, and a microwave 1.\n\n"
        "Your task is to: put a hot apple in fridge."
    )
    assert game.admissible_commands() == [
        "go to countertop 1", "go to fridge 1", "go to microwave 1", "help", "inventory", "look",
    ]


def test_heat_task_texts_and_win():
    game = Game(tiny_kitchen())
    game.reset()
    expected = [
        ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1."),
        ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
        ("examine apple 1", "There's nothing special about apple 1."),
        ("go to microwave 1", "You arrive at microwave 1. On the microwave 1, you see nothing."),
        ("heat apple 1 with microwave 1", "You heat the apple 1 using the microwave 1."),
        ("examine apple 1", "This is a hot apple 1."),
        ("inventory", "You are carrying: a apple 1."),
        ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed."),
        ("move apple 1 to fridge 1", NOTHING_HAPPENS),  # closed
        ("open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see nothing."),
        ("cool apple 1 with fridge 1", "You cool the apple 1 using the fridge 1."),
        ("examine apple 1", "This is a cold apple 1."),
        ("go to microwave 1", "You arrive at microwave 1. On the microwave 1, you see nothing."),
        ("heat apple 1 with microwave 1", "You heat the apple 1 using the microwave 1."),
        ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is open. In it, you see nothing."),
    ]
    for command, feedback in expected:
        assert game.step(command)[0] == feedback, command
        assert not game.won
    assert game.step("move apple 1 to fridge 1") == ("You move the apple 1 to the fridge 1.", True)
    assert game.won
    assert game.step("inventory")[0] == "You are not carrying anything."
    assert game.step("close fridge 1")[0] == "You close the fridge 1."


def test_anything_not_admissible_prints_nothing_happens_and_changes_nothing():
    game = Game(tiny_kitchen())
    game.reset()
    before = game.state.key()
    for command in ["", "jump", "go to fridge 2", "take apple 1 from countertop 1", "GO TO FRIDGE 1",
                    "go  to fridge 1", "put apple 1 in/on fridge 1", "é" * 10_000, "go to fridge 1\x00"]:
        assert game.step(command) == (NOTHING_HAPPENS, False)
    assert game.state.key() == before
    assert game.step("  go to fridge 1 \n")[1] is True  # surrounding whitespace is stripped, as upstream


def test_go_to_current_location_is_not_admissible_and_shared_locations():
    game = Game(shared_cabinets())
    game.reset()
    assert game.step("go to cabinet 1")[0] == "You arrive at cabinet 1. The cabinet 1 is closed."
    commands = game.admissible_commands()
    assert "go to cabinet 1" not in commands and "go to cabinet 2" not in commands
    assert {"examine cabinet 1", "examine cabinet 2", "open cabinet 1"} <= set(commands)
    assert game.step("look")[0] == "You are facing the cabinet 2, and cabinet 1. Next to it, you see nothing."


def test_moving_between_receptacles_at_one_location_shows_next_to_it():
    game = Game(shared_cabinets())
    game.reset()
    for command in ["go to cabinet 1", "open cabinet 1", "take cup 1 from cabinet 1", "move cup 1 to cabinet 2"]:
        assert game.step(command)[1], command
    assert game.step("look")[0] == (
        "You are facing the cabinet 2, and cabinet 1. Next to it, you see a cup 1."
    )
    game.step("take cup 1 from cabinet 2")
    assert game.step("look")[0].endswith("Next to it, you see nothing.")


def test_object_in_two_receptacles_stays_listed_in_the_other():
    game = Game(two_receptacle_watch())
    game.reset()
    game.step("go to drawer 1")
    assert game.step("take watch 1 from drawer 1")[1]
    feedback, _ = game.step("go to sidetable 1")
    assert feedback == "You arrive at sidetable 1. On the sidetable 1, you see a watch 1."
    assert "take watch 1 from sidetable 1" not in game.admissible_commands()  # hands are full


def test_look_in_middle_of_room_sees_nothing_and_help_text():
    game = Game(tiny_kitchen())
    game.reset()
    assert game.step("look")[0] == "You are in the middle of a room. Looking quickly around you, you see nothing."
    assert game.step("help")[0] == HELP_TEXT


def test_look_task_is_won_in_either_order():
    for order in (["go to desk 1", "use desklamp 1", "go to bed 1", "take book 1 from bed 1", "go to desk 1"],
                  ["go to bed 1", "take book 1 from bed 1", "go to desk 1", "use desklamp 1"]):
        game = Game(bedroom_look())
        game.reset()
        for command in order:
            feedback, valid = game.step(command)
            assert valid, command
        assert game.won
    assert feedback == "You turn on the desklamp 1."


def test_receptacle_objects_examine_as_normal_and_can_contain_is_enforced():
    game = Game(shared_cabinets())
    game.reset()
    game.step("go to countertop 1")
    game.step("take mug 1 from countertop 1")
    assert game.step("examine mug 1")[0] == "This is a normal mug 1. In it, you see nothing."
    game.step("go to cabinet 2")
    assert "move mug 1 to cabinet 2" in game.admissible_commands()
    game.step("move mug 1 to cabinet 2")
    game.step("go to countertop 1")
    game.step("take apple 1 from countertop 1")
    game.step("go to cabinet 2")
    assert game.step("move apple 1 to cabinet 2") == (NOTHING_HAPPENS, False)  # no canContain(cabinet, apple)


def test_random_and_malformed_commands_never_raise_or_change_state_when_invalid():
    rng = random.Random(0)
    junk = ["", " ", "jump", "go to", "go to nowhere 3", "take", "ü∂ƒ", "x" * 5000, "open drawer 99", "\n\t"]
    for world in (tiny_kitchen(), shared_cabinets(), two_receptacle_watch(), bedroom_look()):
        game = Game(world)
        game.reset()
        for _ in range(2_000):
            commands = game.admissible_commands()
            if rng.random() < 0.3:
                command = rng.choice(junk) if rng.random() < 0.5 else rng.choice(commands)[:-1]
                before = game.state.key()
                feedback, valid = game.step(command)
                assert (feedback, valid) == (NOTHING_HAPPENS, False)
                assert game.state.key() == before
            else:
                assert game.step(rng.choice(commands))[1]


@pytest.mark.parametrize("bad", [None, 3, b"look", ["look"]])
def test_non_string_commands_are_invalid_not_errors(bad):
    game = Game(tiny_kitchen())
    game.reset()
    assert game.step(bad) == (NOTHING_HAPPENS, False)


def _near_miss(command: str, rng: random.Random) -> str:
    """A command one small edit away from an admissible one (usually not admissible itself)."""
    kind = rng.randrange(5)
    if kind == 0:
        return command.upper()
    if kind == 1:
        return command.replace(" ", "  ", 1)
    if kind == 2:
        return command[:-1] + str((int(command[-1]) + 1) % 10) if command[-1].isdigit() else command + " 1"
    if kind == 3:
        return command.replace("to", "into", 1) if "to" in command else "put " + command
    return command[: rng.randrange(len(command))]


def test_hundred_thousand_random_and_malformed_actions():
    from rspo_gym.envs.alfworld.generator import generate_world

    rng = random.Random(2024)
    junk = ["", " " * 7, "\x00", "💥" * 3, "ж" * 100_000, "go to " + "9" * 400, "look look", "help me"]
    invalid = valid = 0
    for task_id in range(100):
        game = Game(generate_world("valid_seen", task_id))
        game.reset()
        for _ in range(1_000):
            commands = game.admissible_commands()
            roll = rng.random()
            if roll < 0.5:
                command = rng.choice(commands)
            elif roll < 0.6:
                command = rng.choice(junk)
            else:
                command = _near_miss(rng.choice(commands), rng)
            if command.strip() in commands:
                assert game.step(command)[1]
                valid += 1
                continue
            before = game.state.key()
            assert game.step(command) == (NOTHING_HAPPENS, False)
            assert game.state.key() == before and game.admissible_commands() == commands
            invalid += 1
    assert valid + invalid == 100_000 and invalid > 30_000


def test_goal_tables_agree_with_the_per_object_definitions_on_played_states():
    """``placed_targets`` (set intersections over ``World.targets``) and the milestone potential
    (placed targets counted once) against their per-object definitions, on expert and random
    states of every task type, goals reached included."""
    from rspo_gym.envs.alfworld.generator import generate_world
    from rspo_gym.envs.alfworld.goals import goal_satisfied, lamp_on_here, placed_targets, target_ok
    from rspo_gym.envs.alfworld.planner import optimal_plan
    from rspo_gym.envs.alfworld.process import milestone_potential

    def placed_reference(world, state):
        return max((sum(target_ok(world, state, o) for o in state.contents[r]) for r in world.destinations), default=0)

    def milestone_reference(world, state):
        if goal_satisfied(world, state):
            return 1.0
        kind, held = world.task.task_type, state.held
        holding = held >= 0 and world.items[held].otype == world.task.object_type
        if kind == "look_at_obj_in_light":
            return (holding + lamp_on_here(world, state)) / 2
        if kind == "pick_two_obj_and_place":
            return (2 * placed_reference(world, state) + holding) / 4
        if kind == "pick_and_place_simple":
            return holding / 2
        treated = any(target_ok(world, state, o) for o in range(len(world.items)))
        return max(int(holding), 2 * treated) / 3

    rng, kinds, wins = random.Random(0), set(), 0
    for task in range(60):
        world = generate_world("train", task)
        kinds.add(world.task.task_type)
        game = Game(world)
        game.reset()
        plan = optimal_plan(world, game.state) or []
        for _ in range(40):
            state = game.state
            assert placed_targets(world, state) == placed_reference(world, state)
            assert milestone_potential(world, state) == milestone_reference(world, state)
            if game.won:
                wins += 1
                break
            game.step(plan.pop(0) if plan and rng.random() < 0.8 else rng.choice(game.admissible_commands()))
    assert len(kinds) == 6 and wins > 10
