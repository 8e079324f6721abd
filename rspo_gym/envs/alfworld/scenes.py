"""Build ``World`` objects by hand or by program, named and ordered as ALFWorld would.

- ``SceneBuilder``: add receptacles and objects by type; ``build`` numbers instances per type and
  orders every entity as ALFWorld lists it (by type, then descending number, the order its
  demangler produces), so generated scenes read exactly like real ones.
- ``tiny_kitchen()``: a four-receptacle kitchen used by examples and tests.

Object affordances and the ``canContain`` table default to ALFRED's (``vocab.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rspo_gym.envs.alfworld import vocab
from rspo_gym.envs.alfworld.world import Item, Receptacle, State, Task, World

__all__ = ["SceneBuilder", "tiny_kitchen"]


@dataclass
class _Placement:
    otype: str
    receptacles: tuple[int, ...]
    flags: dict[str, bool]
    state: frozenset[str]


@dataclass
class SceneBuilder:
    """Accumulates a scene; handles returned by ``add_*`` are build-order indices.

    >>> scene = SceneBuilder()
    >>> table = scene.add_receptacle("countertop")
    >>> _ = scene.add_item("apple", table)
    >>> world = scene.build(Task("pick_and_place_simple", "apple", "fridge", None, "put a apple in fridge."))
    >>> [r.name for r in world.receptacles], [o.name for o in world.items]
    (['countertop 1'], ['apple 1'])
    """

    receptacles: list[tuple[str, int | None, bool]] = field(default_factory=list)
    items: list[_Placement] = field(default_factory=list)

    def add_receptacle(self, rtype: str, *, location: int | None = None, openable: bool | None = None) -> int:
        """Add a receptacle; ``location=None`` gives it a location of its own.

        ``openable`` defaults to whether the type is openable in ALFRED.
        """
        if openable is None:
            openable = rtype in vocab.OPENABLE
        self.receptacles.append((rtype, location, openable))
        return len(self.receptacles) - 1

    def add_item(self, otype: str, *receptacles: int, state: tuple[str, ...] = (), **flags: bool) -> int:
        """Add an object inside ``receptacles`` (none: a fixture lying at no receptacle).

        ``state`` may hold "hot", "cool", "clean", "sliced", "toggled"; ``flags`` override the
        ALFRED affordances (``pickupable=False`` ...).
        """
        defaults = {
            "pickupable": otype in vocab.PICKUPABLE,
            "cleanable": otype in vocab.CLEANABLE,
            "heatable": otype in vocab.HEATABLE,
            "coolable": otype in vocab.COOLABLE,
            "toggleable": otype in vocab.TOGGLEABLE,
            "sliceable": otype in vocab.SLICEABLE,
            "receptacle_object": otype in vocab.RECEPTACLE_OBJECTS,
        }
        unknown = set(flags) - set(defaults)
        if unknown:
            raise TypeError(f"Unknown object flags {sorted(unknown)}; expected some of {sorted(defaults)}")
        defaults.update(flags)
        self.items.append(_Placement(otype, tuple(receptacles), defaults, frozenset(state)))
        return len(self.items) - 1

    def build(
        self,
        task: Task,
        *,
        agent_location: int | None = None,
        opened: tuple[int, ...] = (),
        can_contain: frozenset[tuple[str, str]] | None = None,
        name: str = "",
    ) -> World:
        """Number, order and freeze the scene. The agent starts at a location of its own by default."""
        next_location = 0
        locations: list[int] = []
        for _, location, _ in self.receptacles:
            if location is None:
                location = next_location
            locations.append(location)
            next_location = max(next_location, location + 1)
        if agent_location is None:
            agent_location = next_location

        receptacle_order = _listing_order([rtype for rtype, _, _ in self.receptacles])
        item_order = _listing_order([p.otype for p in self.items])
        receptacle_names = _names([rtype for rtype, _, _ in self.receptacles])
        item_names = _names([p.otype for p in self.items])
        new_receptacle = {old: new for new, old in enumerate(receptacle_order)}
        new_item = {old: new for new, old in enumerate(item_order)}

        receptacles = tuple(
            Receptacle(receptacle_names[i], self.receptacles[i][0], locations[i], self.receptacles[i][2])
            for i in receptacle_order
        )
        items = tuple(Item(item_names[i], self.items[i].otype, **self.items[i].flags) for i in item_order)
        state = State(
            agent_location=agent_location,
            contents=[set() for _ in receptacles],
            item_locations=[set() for _ in items],
            opened={new_receptacle[r] for r in opened},
        )
        for old, placement in enumerate(self.items):
            o = new_item[old]
            for r in placement.receptacles:
                state.contents[new_receptacle[r]].add(o)
                state.item_locations[o].add(locations[r])
            for flag in placement.state:
                getattr(state, flag).add(o)
        if can_contain is None:
            can_contain = frozenset(
                (rtype, otype) for rtype, otypes in vocab.CAN_CONTAIN.items() for otype in otypes
            )
        return World(receptacles, items, can_contain, task, state, name=name)


def _names(types: list[str]) -> dict[int, str]:
    """Number instances 1..n per type in the order they were added."""
    counts: dict[str, int] = {}
    names = {}
    for i, t in enumerate(types):
        counts[t] = counts.get(t, 0) + 1
        names[i] = f"{t} {counts[t]}"
    return names


def _listing_order(types: list[str]) -> list[int]:
    """Build indices sorted by type, then by descending instance number (ALFWorld's order)."""
    seen: dict[str, int] = {}
    keyed = []
    for i, t in enumerate(types):
        seen[t] = seen.get(t, 0) + 1
        keyed.append((t, -seen[t], i))
    return [i for _, _, i in sorted(keyed)]


def tiny_kitchen() -> World:
    """Heat an apple and put it in the fridge: a countertop, a closed fridge, a microwave."""
    scene = SceneBuilder()
    counter = scene.add_receptacle("countertop")
    scene.add_receptacle("fridge")
    scene.add_receptacle("microwave", openable=False)
    scene.add_item("apple", counter)
    task = Task("pick_heat_then_place_in_recep", "apple", "fridge", None, "put a hot apple in fridge.")
    return scene.build(task, name="tiny_kitchen")
