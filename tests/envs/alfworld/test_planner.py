"""Tests of ``planner``: hand-computed optimal plans, agreement with breadth-first search, real games.

The tiny scenes are built directly from ``World``/``State`` so that every expected plan can be
checked by hand; breadth-first search over the engine's own successor states is the ground truth
the closed-form chains must match, from the scenes' initial states and from random states.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path

import pytest

from rspo_gym.envs.alfworld.engine import Game
from rspo_gym.envs.alfworld.goals import goal_satisfied
from rspo_gym.envs.alfworld.planner import distance_to_goal, optimal_plan
from rspo_gym.envs.alfworld.world import Item, Receptacle, State, Task, World

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "alfworld"
_READ_ONLY = ("look", "inventory", "help", "examine")

# Kitchen: (name, type, location, openable); the agent starts at location 0, the middle of the room.
KITCHEN = (
    ("cabinet 1", "cabinet", 1, True),
    ("countertop 1", "countertop", 2, False),
    ("fridge 1", "fridge", 3, True),
    ("microwave 1", "microwave", 4, True),
    ("sinkbasin 1", "sinkbasin", 5, False),
)
FOOD = {"pickupable": True, "heatable": True, "coolable": True, "cleanable": True}
TREATMENTS = ("pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_clean_then_place_in_recep")
KITCHEN_CAN_CONTAIN = frozenset(
    (rtype, otype)
    for otype in ("apple", "mug")
    for rtype in ("countertop", "fridge", "microwave", "sinkbasin")
) | {("cabinet", "mug")}


def make_world(
    receptacles: tuple[tuple[str, str, int, bool], ...],
    items: list[tuple[str, dict, tuple[str, ...]]],
    task: Task,
    *,
    can_contain: frozenset[tuple[str, str]] = KITCHEN_CAN_CONTAIN,
    agent: int = 0,
) -> World:
    """A world from (name, type, location, openable) receptacles and (name, flags, inside) items."""
    recs = tuple(Receptacle(name, rtype, loc, openable) for name, rtype, loc, openable in receptacles)
    index = {r.name: i for i, r in enumerate(recs)}
    objs = tuple(Item(name, name.split()[0], **flags) for name, flags, _ in items)
    state = State(agent_location=agent, contents=[set() for _ in recs], item_locations=[set() for _ in objs])
    for o, (_, _, inside) in enumerate(items):
        for name in inside:
            state.contents[index[name]].add(o)
            state.item_locations[o].add(recs[index[name]].location)
    return World(recs, objs, can_contain, task, state, name=task.text)


def kitchen(task: Task, *, apples: tuple[tuple[str, ...], ...] = (("countertop 1",),), agent: int = 0) -> World:
    """The kitchen with a mug in the (closed) cabinet and one apple per entry of ``apples``.

    Objects can be heated, cooled and cleaned only where the task needs it (fewer states to search).
    """
    flags = FOOD if task.task_type in TREATMENTS else {"pickupable": True}
    items = [(f"apple {i + 1}", flags, inside) for i, inside in enumerate(apples)]
    items.append(("mug 1", flags, ("cabinet 1",)))
    return make_world(KITCHEN, items, task, agent=agent)


def bedroom(*, lamp_on: bool = False, movable_lamp: bool = False) -> World:
    """A book in a closed drawer, a desklamp on the desk: look at the book under the desklamp.

    ``movable_lamp``: the lamp can be picked up and put on the bed or the desk (never in ALFWorld's
    games, but the planner must stay exact if a generator allows it).
    """
    receptacles = (("bed 1", "bed", 1, False), ("desk 1", "desk", 2, False), ("drawer 1", "drawer", 3, True))
    items = [
        ("book 1", {"pickupable": True}, ("drawer 1",)),
        ("desklamp 1", {"toggleable": True, "pickupable": movable_lamp}, ("desk 1",)),
    ]
    task = Task("look_at_obj_in_light", "book", None, "desklamp", "look at book under the desklamp.")
    can_contain = {("drawer", "book"), ("bed", "book"), ("bed", "desklamp"), ("desk", "desklamp")}
    world = make_world(receptacles, items, task, can_contain=frozenset(can_contain))
    if lamp_on:
        world.initial.toggled.add(1)
    return world


SIMPLE = Task("pick_and_place_simple", "apple", "fridge", None, "put a apple in fridge.")
HEAT = Task("pick_heat_then_place_in_recep", "apple", "fridge", None, "put a hot apple in fridge.")
COOL = Task("pick_cool_then_place_in_recep", "mug", "cabinet", None, "put a cool mug in cabinet.")
CLEAN = Task("pick_clean_then_place_in_recep", "apple", "countertop", None, "put a clean apple in countertop.")
TWO_COUNTER = Task("pick_two_obj_and_place", "apple", "countertop", None, "put two apple in countertop.")
TWO_MICROWAVE = Task("pick_two_obj_and_place", "apple", "microwave", None, "put two apple in microwave.")


def bfs_distance(world: World, state: State, limit: int = 14) -> int | None:
    """Fewest state-changing commands to the goal by breadth-first search over ``Game``.

    ``None`` when the reachable state space holds no goal state (searched exhaustively).
    """
    if goal_satisfied(world, state):
        return 0
    game = Game(world)
    frontier, seen = [state.copy()], {state.key()}
    for depth in range(1, limit + 1):
        following = []
        for parent in frontier:
            game.set_state(parent)
            for command in [c for c in game.commands() if not c.startswith(_READ_ONLY)]:
                game.set_state(parent)
                game.step(command)
                key = game.state.key()
                if key in seen:
                    continue
                if game.won:
                    return depth
                seen.add(key)
                following.append(game.state)
        if not following:
            return None
        frontier = following
    raise AssertionError(f"no goal within {limit} steps and the search is not exhausted")


def replay(world: World, state: State, plan: list[str]) -> Game:
    """Play ``plan`` from ``state``, asserting every command is admissible when issued."""
    game = Game(world)
    game.set_state(state)
    for command in plan:
        assert command in game.admissible_commands(), (command, plan)
        game.step(command)
    return game


def random_state(world: World, rng: random.Random, steps: int) -> State:
    """A state reached by a random walk of state-changing commands that stops at a goal."""
    game = Game(world)
    for _ in range(steps):
        if game.won:
            break
        game.step(rng.choice([c for c in game.commands() if not c.startswith(_READ_ONLY)]))
    return game.state.copy()


# ------------------------------------------------------------------------------- hand-made scenes
EXPECTED = [
    (
        kitchen(SIMPLE),
        ["go to countertop 1", "take apple 1 from countertop 1", "go to fridge 1", "open fridge 1",
         "move apple 1 to fridge 1"],
    ),
    (
        kitchen(HEAT),
        ["go to countertop 1", "take apple 1 from countertop 1", "go to microwave 1", "heat apple 1 with microwave 1",
         "go to fridge 1", "open fridge 1", "move apple 1 to fridge 1"],
    ),
    (
        kitchen(COOL),
        ["go to cabinet 1", "open cabinet 1", "take mug 1 from cabinet 1", "go to fridge 1", "cool mug 1 with fridge 1",
         "go to cabinet 1", "move mug 1 to cabinet 1"],
    ),
    (
        kitchen(CLEAN),
        ["go to countertop 1", "take apple 1 from countertop 1", "go to sinkbasin 1", "clean apple 1 with sinkbasin 1",
         "go to countertop 1", "move apple 1 to countertop 1"],
    ),
    (  # one apple is already in place: fetch the other from the closed fridge
        kitchen(TWO_COUNTER, apples=(("countertop 1",), ("fridge 1",))),
        ["go to fridge 1", "open fridge 1", "take apple 2 from fridge 1", "go to countertop 1",
         "move apple 2 to countertop 1"],
    ),
    (
        bedroom(),
        ["go to drawer 1", "open drawer 1", "take book 1 from drawer 1", "go to desk 1", "use desklamp 1"],
    ),
    (  # the apple is listed on the countertop and in the fridge: heating it is enough
        kitchen(HEAT, apples=(("countertop 1", "fridge 1"),)),
        ["go to countertop 1", "take apple 1 from countertop 1", "go to microwave 1", "heat apple 1 with microwave 1"],
    ),
]


@pytest.mark.parametrize(
    "world, expected", EXPECTED, ids=[f"{w.task.task_type}/{i}" for i, (w, _) in enumerate(EXPECTED)]
)
def test_hand_computed_plans(world: World, expected: list[str]) -> None:
    assert optimal_plan(world, world.initial) == expected
    assert distance_to_goal(world, world.initial) == len(expected)
    assert replay(world, world.initial, expected).won


def test_pick_two_from_scratch_needs_ten_steps() -> None:
    world = kitchen(TWO_MICROWAVE, apples=(("countertop 1",), ("fridge 1",)))
    plan = optimal_plan(world, world.initial)
    assert plan is not None and len(plan) == 10
    assert replay(world, world.initial, plan).won


def test_shared_location_needs_no_go_to() -> None:
    """Two cabinets share the agent's location: open the other one in place (``go to`` is inadmissible)."""
    receptacles = (("cabinet 2", "cabinet", 1, True), ("cabinet 1", "cabinet", 1, True), *KITCHEN[1:])
    world = make_world(receptacles, [("mug 1", FOOD, ("cabinet 2",))], Task(
        "pick_and_place_simple", "mug", "countertop", None, "put a mug in countertop."), agent=1)
    assert optimal_plan(world, world.initial) == [
        "open cabinet 2", "take mug 1 from cabinet 2", "go to countertop 1", "move mug 1 to countertop 1"]


def test_held_object_is_put_away_where_the_target_is() -> None:
    world = kitchen(SIMPLE)
    state = world.initial.copy()
    state.agent_location = 2  # at the countertop, holding the mug
    state.contents[0].discard(1)
    state.held = 1
    assert optimal_plan(world, state) == [
        "move mug 1 to countertop 1", "take apple 1 from countertop 1", "go to fridge 1", "open fridge 1",
        "move apple 1 to fridge 1"]


def test_look_with_lit_lamp_and_held_target_is_one_step() -> None:
    world = bedroom(lamp_on=True)
    game = replay(world, world.initial, ["go to drawer 1", "open drawer 1", "take book 1 from drawer 1"])
    assert optimal_plan(world, game.state) == ["go to desk 1"]


def test_satisfied_and_unsolvable() -> None:
    world = kitchen(SIMPLE, apples=(("fridge 1",),))
    assert optimal_plan(world, world.initial) == [] and distance_to_goal(world, world.initial) == 0
    no_target = kitchen(Task("pick_and_place_simple", "tomato", "fridge", None, "put a tomato in fridge."))
    assert optimal_plan(no_target, no_target.initial) is None
    assert distance_to_goal(no_target, no_target.initial) is None


SCENES = [world for world, _ in EXPECTED] + [
    kitchen(TWO_MICROWAVE, apples=(("countertop 1",), ("fridge 1",))),
    kitchen(COOL, apples=(("microwave 1",), ("sinkbasin 1", "cabinet 1"))),
    bedroom(lamp_on=True),
    bedroom(movable_lamp=True),
    kitchen(TWO_COUNTER, apples=(("fridge 1",), ("fridge 1",))),
    kitchen(Task("pick_and_place_simple", "apple", "microwave", None, "put a apple in microwave."),
            apples=(("fridge 1", "countertop 1"),)),
]


@pytest.mark.parametrize("world", SCENES, ids=[f"{w.task.task_type}/{i}" for i, w in enumerate(SCENES)])
def test_agrees_with_breadth_first_search(world: World) -> None:
    """From the initial state and from random states, the plan length is the BFS distance."""
    rng = random.Random(7)
    states = [world.initial] + [random_state(world, rng, rng.choice((3, 8, 20))) for _ in range(6)]
    for state in states:
        plan = optimal_plan(world, state)
        assert (None if plan is None else len(plan)) == bfs_distance(world, state)
        assert distance_to_goal(world, state) == (None if plan is None else len(plan))
        if plan is not None:
            assert replay(world, state, plan).won


# ---------------------------------------------------------------------------------- real games
@pytest.fixture(scope="module")
def real_worlds() -> dict[Path, World]:
    from rspo_gym.envs.alfworld.pddl import find_games, load_game

    root = DATA / "json_2.1.1"
    if not root.is_dir():
        pytest.skip(f"real ALFWorld games not found at {root}")
    return {path: load_game(path) for path in find_games([root / "valid_seen", root / "valid_train"])}


def test_real_games_solved_optimally_and_fast(real_worlds: dict[Path, World]) -> None:
    plans, times = {}, []
    for path, world in real_worlds.items():
        start = time.perf_counter()
        plan = optimal_plan(world, world.initial)
        times.append(time.perf_counter() - start)
        assert plan is not None and len(plan) <= 50, path
        assert replay(world, world.initial, plan).won, path
        plans[path] = plan
    assert len(plans) == len(real_worlds) == 340
    assert statistics.median(times) < 0.002
    traces = json.loads((DATA / "tw_traces_valid_seen.json").read_text())["traces"]
    compared = 0
    for trace in traces:
        if trace["mode"] == "plan":
            reference = [step["cmd"] for step in trace["steps"][1:]]
            assert len(plans[DATA / "json_2.1.1" / "valid_seen" / trace["game"]]) <= len(reference)
            compared += 1
    assert compared == 137


def test_real_random_states(real_worlds: dict[Path, World]) -> None:
    """Plans from random mid-episode states win; short ones have no shorter plan (BFS)."""
    rng = random.Random(3)
    worlds = rng.sample(sorted(real_worlds), 40)
    for path in worlds:
        world = real_worlds[path]
        state = random_state(world, rng, rng.choice((5, 15, 40)))
        plan = optimal_plan(world, state)
        assert plan is not None, path
        assert replay(world, state, plan).won, path
        if 0 < len(plan) <= 2:
            assert bfs_distance(world, state, limit=len(plan)) == len(plan), path
