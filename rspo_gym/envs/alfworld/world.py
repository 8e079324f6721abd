"""The static scene of an ALFWorld game and its mutable state.

- ``Receptacle``, ``Item``: the entities of a game, named as ALFWorld prints them (``"cabinet 3"``).
- ``Task``: the goal of a game (type, target types, instruction text).
- ``World``: everything that never changes during an episode, plus the initial ``State``.
- ``State``: the fluents ALFWorld's PDDL domain changes (agent location, held object, contents,
  opened receptacles, hot/cool/clean/sliced/toggled flags, and two bookkeeping relations that the
  original engine's text depends on, see ``State``).

Entities are stored in *listing order*: TextWorld prints every list sorted by the (lower-cased)
PDDL id of its entities, and the demangler numbers instances of a type in reverse id order, so the
index of an entity in ``World.receptacles`` / ``World.items`` is exactly its position in any list
the engine prints. Both the PDDL loader and the generator build worlds in that order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Receptacle", "Item", "Task", "World", "State"]


@dataclass(frozen=True)
class Receptacle:
    """A receptacle: a place objects can be in (``cabinet 3``, ``countertop 1``)."""

    name: str
    rtype: str
    location: int
    openable: bool = False


@dataclass(frozen=True)
class Item:
    """An object (ALFWorld's PDDL type ``object``); ``Item`` avoids shadowing ``object``."""

    name: str
    otype: str
    pickupable: bool = False
    cleanable: bool = False
    heatable: bool = False
    coolable: bool = False
    toggleable: bool = False
    sliceable: bool = False
    receptacle_object: bool = False


@dataclass(frozen=True)
class Task:
    """A goal of one of ALFWorld's six task types, with the lower-case target type names.

    ``parent_type`` is the destination receptacle type (``None`` for look tasks);
    ``toggle_type`` the lamp type of look tasks (``None`` otherwise). ``text`` is the instruction
    without the ``Your task is to: `` prefix, ending with a period, as the game prints it.
    """

    task_type: str
    object_type: str
    parent_type: str | None
    toggle_type: str | None
    text: str


@dataclass
class State:
    """The mutable part of an ALFWorld game.

    Mirrors the fluents of ``alfred.pddl`` one to one, including two the text depends on:
    ``item_locations`` (``objectAtLocation``: taking an object removes only the location of the
    receptacle it was taken from, so an object listed in two receptacles keeps its other one) and
    ``taken_from`` (the ``not_inreceptacle`` facts TextWorld keeps after a pickup, which make
    ``look`` list an object "next to" the agent when it was moved between two receptacles that
    share a location).
    """

    agent_location: int
    held: int = -1
    contents: list[set[int]] = field(default_factory=list)
    item_locations: list[set[int]] = field(default_factory=list)
    opened: set[int] = field(default_factory=set)
    hot: set[int] = field(default_factory=set)
    cool: set[int] = field(default_factory=set)
    clean: set[int] = field(default_factory=set)
    sliced: set[int] = field(default_factory=set)
    toggled: set[int] = field(default_factory=set)
    taken_from: set[tuple[int, int]] = field(default_factory=set)

    def copy(self) -> State:
        return State(
            agent_location=self.agent_location,
            held=self.held,
            contents=[set(c) for c in self.contents],
            item_locations=[set(c) for c in self.item_locations],
            opened=set(self.opened),
            hot=set(self.hot),
            cool=set(self.cool),
            clean=set(self.clean),
            sliced=set(self.sliced),
            toggled=set(self.toggled),
            taken_from=set(self.taken_from),
        )

    def key(self) -> tuple:
        """A hashable canonical key: equal keys mean equal states."""
        return (
            self.agent_location,
            self.held,
            tuple(frozenset(c) for c in self.contents),
            tuple(frozenset(c) for c in self.item_locations),
            frozenset(self.opened),
            frozenset(self.hot),
            frozenset(self.cool),
            frozenset(self.clean),
            frozenset(self.sliced),
            frozenset(self.toggled),
            frozenset(self.taken_from),
        )


@dataclass(frozen=True)
class World:
    """A complete ALFWorld game: entities in listing order, placement rules, task, initial state.

    ``can_contain`` holds ``(receptacle type, object type)`` pairs (the ``canContain`` facts).
    ``nested`` maps a receptacle object to the objects the scene puts inside it
    (``inReceptacleObject`` facts, in listing order); no action of the domain changes them, and
    they only show when the outer object is examined.
    ``name`` identifies the game (a path for loaded games, a generator key for generated ones).
    """

    receptacles: tuple[Receptacle, ...]
    items: tuple[Item, ...]
    can_contain: frozenset[tuple[str, str]]
    task: Task
    initial: State
    name: str = ""
    nested: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        locations: dict[int, list[int]] = {}
        for index, receptacle in enumerate(self.receptacles):
            locations.setdefault(receptacle.location, []).append(index)
        # Derived lookup tables; frozen dataclass, hence object.__setattr__.
        object.__setattr__(self, "receptacles_at", {k: tuple(v) for k, v in locations.items()})
        object.__setattr__(self, "receptacle_index", {r.name: i for i, r in enumerate(self.receptacles)})
        object.__setattr__(self, "item_index", {o.name: i for i, o in enumerate(self.items)})
        parent = self.task.parent_type  # the goal checks (goals.py) read these at every step
        object.__setattr__(self, "destinations", tuple(i for i, r in enumerate(self.receptacles) if r.rtype == parent))
        wanted = self.task.object_type
        object.__setattr__(self, "targets", frozenset(i for i, o in enumerate(self.items) if o.otype == wanted))
        # the engine lists "go to" every receptacle not at the agent's location at every state change
        object.__setattr__(self, "goto_commands", tuple((f"go to {r.name}", ("goto", i), r.location) for i, r in enumerate(self.receptacles)))

    def receptacles_at_location(self, location: int) -> tuple[int, ...]:
        """Indices of the receptacles at ``location`` (in listing order; empty if none)."""
        return self.receptacles_at.get(location, ())
