"""Tests of ``expert.ExploringExpert``: solves every task type, only admissible commands, no peeking."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rspo_gym.envs.alfworld.engine import Game
from rspo_gym.envs.alfworld.expert import ExploringExpert
from rspo_gym.envs.alfworld.world import World

from .test_planner import (
    CLEAN,
    COOL,
    DATA,
    HEAT,
    SIMPLE,
    TWO_COUNTER,
    TWO_MICROWAVE,
    bedroom,
    kitchen,
)


def play(world: World, seed: int = 0, limit: int = 50) -> tuple[list[str], bool]:
    """Run the expert on a fresh game; every command must be admissible when issued."""
    game = Game(world)
    game.reset()
    expert = ExploringExpert(world, seed)
    commands: list[str] = []
    while len(commands) < limit and not game.won:
        command = expert.act(game)
        assert command in game.admissible_commands(), (command, commands)
        game.step(command)
        commands.append(command)
    return commands, game.won


SCENES = [
    kitchen(SIMPLE),
    kitchen(HEAT),
    kitchen(COOL),
    kitchen(CLEAN),
    kitchen(TWO_COUNTER, apples=(("countertop 1",), ("fridge 1",))),
    kitchen(TWO_MICROWAVE, apples=(("countertop 1",), ("fridge 1",))),
    bedroom(),
]


@pytest.mark.parametrize("world", SCENES, ids=[f"{w.task.task_type}/{i}" for i, w in enumerate(SCENES)])
def test_solves_tiny_scenes(world: World) -> None:
    commands, won = play(world)
    assert won, commands
    assert play(world)[0] == commands  # deterministic for a seed


def test_heat_trajectory_in_kitchen() -> None:
    """Food is looked for in the fridge first; the fridge, opened then, needs no second ``open``."""
    commands, won = play(kitchen(HEAT))
    assert won
    assert commands == [
        "go to fridge 1", "open fridge 1", "go to countertop 1", "take apple 1 from countertop 1",
        "go to microwave 1", "heat apple 1 with microwave 1", "go to fridge 1", "move apple 1 to fridge 1"]


def test_does_not_peek_into_unvisited_receptacles() -> None:
    """Moving the target between two receptacles changes nothing until the expert looks at one."""
    in_sink = kitchen(COOL, apples=())
    in_sink.initial.contents[0].clear()  # the mug leaves the cabinet for the sinkbasin
    in_sink.initial.contents[4].add(0)
    in_microwave = kitchen(COOL, apples=())
    in_microwave.initial.contents[0].clear()  # ... or for the microwave
    in_microwave.initial.contents[3].add(0)
    first, won = play(in_sink)
    assert won
    reveal = next(i for i, c in enumerate(first) if c.endswith(("sinkbasin 1", "microwave 1")))
    assert play(in_microwave)[0][: reveal + 1] == first[: reveal + 1]


def test_reset_forgets_the_episode() -> None:
    world = kitchen(SIMPLE)
    expert = ExploringExpert(world, seed=1)
    runs = []
    for _ in range(2):
        game = Game(world)
        game.reset()
        expert.reset()
        commands: list[str] = []
        while not game.won and len(commands) < 50:
            commands.append(expert.act(game))
            game.step(commands[-1])
        runs.append(commands)
    assert runs[0] == runs[1]


def test_real_games_success_rate() -> None:
    root = DATA / "json_2.1.1"
    if not root.is_dir():
        pytest.skip(f"real ALFWorld games not found at {root}")
    from rspo_gym.envs.alfworld.pddl import find_games, load_game

    wins: Counter[str] = Counter()
    games = find_games([root / "valid_seen", root / "valid_train"])
    for path in games:
        world = load_game(Path(path))
        wins[world.task.task_type] += play(world)[1]
    assert sum(wins.values()) >= 0.9 * len(games)


def test_generated_tasks_success_rate() -> None:
    from rspo_gym.envs.alfworld.generator import generate_world

    tasks = [("train", i) for i in range(200)] + [("valid_seen", i) for i in range(0, 140, 3)]
    tasks += [("valid_unseen", i) for i in range(0, 134, 3)]
    wins: Counter[str] = Counter()
    for split, index in tasks:
        world = generate_world(split, index)
        wins[world.task.task_type] += play(world)[1]
    assert len(wins) == 6
    assert sum(wins.values()) >= 0.9 * len(tasks)
