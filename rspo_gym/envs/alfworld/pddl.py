"""Load ALFWorld ``game.tw-pddl`` files (json_2.1.1, 2.1.2, 2.1.3) into a ``World``.

- ``load_game(path)``: read, validate and convert one game file.
- ``demangle(ids)``: ALFWorld's ``AlfredDemangler`` naming (``Cabinet_bar__plus_00...`` ->
  ``cabinet 3``).
- ``find_games(path)``: the game files under a directory (or a list), sorted by path.

The problem's ``:init`` uses a dozen predicates; they map one to one onto ``World``/``State``.
The task sentence is the one baked into the game's grammar; the task type and target types come
from the ``:goal``. The grammar's other texts are ignored: every game prints ALFWorld 0.4 text
(``move X to Y``, ``You arrive at cabinet 1.``), whatever its format version, as ALFWorld's own
``patch_tw-pddl.py`` makes old games do.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from rspo_gym.envs.alfworld.world import Item, Receptacle, State, Task, World

__all__ = ["GameFileError", "load_game", "load_game_data", "demangle", "find_games"]

GAME_FILENAME = "game.tw-pddl"
_FACT = re.compile(r"\(\s*([A-Za-z][\w-]*)((?:\s+[^\s()]+)*)\s*\)")
_TASK = re.compile(r'"rhs"\s*:\s*"Your task is to: (.*?)"')
_GOAL_TYPE = re.compile(r"\((objectType|receptacleType)\s+\?(\w+)\s+(\w+?)Type\s*\)", re.IGNORECASE)

_ITEM_FLAGS = {
    "pickupable": "pickupable",
    "cleanable": "cleanable",
    "heatable": "heatable",
    "coolable": "coolable",
    "toggleable": "toggleable",
    "sliceable": "sliceable",
    "isreceptacleobject": "receptacle_object",
}
_STATE_FLAGS = {"ishot": "hot", "iscool": "cool", "isclean": "clean", "issliced": "sliced", "istoggled": "toggled"}


class GameFileError(ValueError):
    """A game file that cannot be read as an ALFWorld game; the message says what is wrong."""


def demangle(ids: Iterable[str]) -> dict[str, str]:
    """Display names of ALFWorld entity ids, exactly as ``alfworld.agents.utils.misc.Demangler``.

    The type is the text before the first ``_bar_`` (+ ``basin`` when the id contains "basin").
    Instances of a type are numbered 1..n in *reverse* sorted-id order, so the first id in sorted
    order gets the highest number. Ids without ``_bar_`` keep their id as name.

    >>> demangle(["mug_bar__plus_01", "mug_bar__minus_02", "sink_bar_1_bar_sinkbasin", "agent1"])
    {'agent1': 'agent1', 'mug_bar__minus_02': 'mug 2', 'mug_bar__plus_01': 'mug 1', 'sink_bar_1_bar_sinkbasin': 'sinkbasin 1'}
    """
    ordered = sorted(set(ids))
    counts: Counter[str] = Counter()
    for entity in ordered:
        kind = _kind(entity)
        if kind is not None:
            counts[kind] += 1
    names = {}
    for entity in ordered:
        kind = _kind(entity)
        if kind is None:
            names[entity] = entity
        else:
            names[entity] = f"{kind} {counts[kind]}"
            counts[kind] -= 1
    return names


def _kind(entity: str) -> str | None:
    head, sep, _ = entity.partition("_bar_")
    if not sep:
        return None
    return head + "basin" if "basin" in entity else head


def find_games(source: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    """Game files from a directory (searched recursively), a file, or a list of either; sorted."""
    sources = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    found: list[Path] = []
    for entry in sources:
        path = Path(entry)
        if path.is_dir():
            found.extend(path.rglob(GAME_FILENAME))
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"No ALFWorld game file or directory at {str(path)!r}")
    if not found:
        raise FileNotFoundError(f"No {GAME_FILENAME} files found under {source!r}")
    return sorted(found)


def load_game(path: str | os.PathLike) -> World:
    """Read one ``game.tw-pddl`` file; raises ``GameFileError`` on anything malformed."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise GameFileError(f"{path}: not a readable game.tw-pddl JSON file ({error})") from error
    return load_game_data(data, name=str(path))


def load_game_data(data: dict, name: str = "") -> World:
    """Convert the parsed JSON of a game file into a ``World``."""
    if not isinstance(data, dict) or not isinstance(data.get("pddl_problem"), str):
        raise GameFileError(f"{name}: expected a JSON object with a 'pddl_problem' string")
    problem = data["pddl_problem"]
    init_start = problem.find("(:init")
    goal_start = problem.find("(:goal")
    if init_start < 0 or goal_start < init_start:
        raise GameFileError(f"{name}: the PDDL problem has no (:init ...) followed by (:goal ...)")
    facts = [
        (match.group(1).lower(), tuple(arg.lower() for arg in match.group(2).split()))
        for match in _FACT.finditer(problem, init_start + len("(:init"), goal_start)
    ]
    task = _task(data.get("grammar", ""), problem[goal_start:], name)
    try:
        return _build_world(facts, task, name)
    except (KeyError, IndexError, ValueError) as error:
        raise GameFileError(f"{name}: inconsistent PDDL problem ({error!r})") from error


def _task(grammar: object, goal: str, name: str) -> Task:
    match = _TASK.search(grammar) if isinstance(grammar, str) else None
    if match is None:
        raise GameFileError(f"{name}: the grammar has no 'Your task is to: ...' sentence")
    types = {(kind.lower(), var): value.lower() for kind, var, value in _GOAL_TYPE.findall(goal)}
    lowered = goal.lower()
    object_type = types.get(("objecttype", "o")) or types.get(("objecttype", "o1"))
    if object_type is None:
        raise GameFileError(f"{name}: cannot find the target object type in the goal")
    parent_type = types.get(("receptacletype", "r"))
    toggle_type = types.get(("objecttype", "ot"))
    if "istoggled" in lowered:
        task_type = "look_at_obj_in_light"
    elif "?o2" in lowered:
        task_type = "pick_two_obj_and_place"
    elif "isclean" in lowered:
        task_type = "pick_clean_then_place_in_recep"
    elif "ishot" in lowered:
        task_type = "pick_heat_then_place_in_recep"
    elif "iscool" in lowered:
        task_type = "pick_cool_then_place_in_recep"
    else:
        task_type = "pick_and_place_simple"
    if task_type != "look_at_obj_in_light" and parent_type is None:
        raise GameFileError(f"{name}: cannot find the destination receptacle type in the goal")
    return Task(task_type, object_type, None if toggle_type else parent_type, toggle_type, match.group(1))


def _build_world(facts: list[tuple[str, tuple[str, ...]]], task: Task, name: str) -> World:
    names = demangle(arg for _, args in facts for arg in args)
    by_predicate: dict[str, list[tuple[str, ...]]] = {}
    for predicate, args in facts:
        by_predicate.setdefault(predicate, []).append(args)

    receptacle_ids = sorted({args[0] for args in by_predicate.get("receptacletype", [])})
    item_ids = sorted({args[0] for args in by_predicate.get("objecttype", [])})
    location_ids = sorted(
        {args[1] for args in by_predicate.get("receptacleatlocation", [])}
        | {args[1] for args in by_predicate.get("atlocation", [])}
        | {args[1] for args in by_predicate.get("objectatlocation", [])}
    )
    location_of = {loc: i for i, loc in enumerate(location_ids)}
    receptacle_of = {rid: i for i, rid in enumerate(receptacle_ids)}
    item_of = {oid: i for i, oid in enumerate(item_ids)}

    rtype = {r: t.removesuffix("type") for r, t in by_predicate.get("receptacletype", [])}
    otype = {o: t.removesuffix("type") for o, t in by_predicate.get("objecttype", [])}
    where = {r: loc for r, loc in by_predicate.get("receptacleatlocation", [])}
    openable = {args[0] for args in by_predicate.get("openable", [])}
    receptacles = tuple(
        Receptacle(names[r], rtype[r], location_of[where[r]], r in openable) for r in receptacle_ids
    )
    flags = {field: {args[0] for args in by_predicate.get(pred, [])} for pred, field in _ITEM_FLAGS.items()}
    items = tuple(
        Item(names[o], otype[o], **{field: o in members for field, members in flags.items()}) for o in item_ids
    )

    starts = by_predicate.get("atlocation", [])
    if len(starts) != 1:
        raise GameFileError(f"{name}: expected one (atLocation agent ...) fact, found {len(starts)}")
    state = State(
        agent_location=location_of[starts[0][1]],
        contents=[set() for _ in receptacles],
        item_locations=[set() for _ in items],
    )
    for o, r in by_predicate.get("inreceptacle", []):
        state.contents[receptacle_of[r]].add(item_of[o])
    for o, loc in by_predicate.get("objectatlocation", []):
        state.item_locations[item_of[o]].add(location_of[loc])
    for (r,) in by_predicate.get("opened", []):
        state.opened.add(receptacle_of[r])
    for predicate, attribute in _STATE_FLAGS.items():
        for (o,) in by_predicate.get(predicate, []):
            getattr(state, attribute).add(item_of[o])
    for _, o in by_predicate.get("holds", []):
        state.held = item_of[o]
    can_contain = frozenset(
        (r.removesuffix("type"), o.removesuffix("type")) for r, o in by_predicate.get("cancontain", [])
    )
    nested: dict[int, list[int]] = {}
    for inner, outer in by_predicate.get("inreceptacleobject", []):
        nested.setdefault(item_of[outer], []).append(item_of[inner])
    nested_sorted = {outer: tuple(sorted(inner)) for outer, inner in nested.items()}
    return World(receptacles, items, can_contain, task, state, name=name, nested=nested_sorted)
