"""Procedural ALFWorld household tasks: canonical train / valid_seen / valid_unseen splits.

- ``SPLIT_SIZES``: tasks per split (``None``: unbounded ``train``; the valid sizes are ALFWorld's).
- ``generate_world(split, index)``: the ``World`` of task ``index`` of ``split``.
- ``scene_layout(scene)``: the receptacles of an ALFRED floor plan number (a ``Layout``).
- ``split_scenes(split)``: the floor plans a split draws from, per room type.
- ``HELD_OUT_COMBOS``: the (task type, object, parent) combinations only ``valid_unseen`` uses.
- ``TASK_TYPE_COUNTS``: the task-type mix of each split.

Design decisions:

- **Canonical.** All randomness comes from ``_Rng``, seeded by SHA-256 of the split and index (or
  of the scene number for layouts) and drawing only ``random.Random.random()``, the one stream
  Python guarantees across versions (``randrange``/``choice``/``shuffle`` are not). So task k of a
  split is the same world on every machine, process and Python version; nothing is module state.
- **Layouts.** A layout is a floor plan of ``vocab.SCENES``; its receptacles, their counts,
  openability and shared locations depend on the scene number only, so a layout recurs across
  tasks as ALFRED floor plans do. Each receptacle type of ``vocab.ROOM_RECEPTACLES`` is present
  with its share of scenes; its count is ``lo + floor((hi - lo + 1) * u**2)``, skewed to the low
  end as real counts are (most kitchens have 4 burners, one has 6). **Cap:** scenes keep
  ``MIN_RECEPTACLES``..``MAX_RECEPTACLES`` (7..40; real games: 6..54) receptacles: the most
  numerous type is trimmed one at a time, extra drawers fill small scenes. Openable-class
  instances are openable with ``vocab.OPENABLE_PROB``. Shared locations (calibrated on 340 real
  games, 4.3 receptacles per game share a location): consecutive instances of stacked types pair
  up (``_PAIR_SHARE``, e.g. 68 % of burner pairs) and some types stand at another's spot
  (``_JOIN_SHARE``, e.g. a toaster on a countertop).
- **Splits.** ``train`` and ``valid_seen`` draw from every floor plan but ALFWorld's held-out
  ones (``vocab.UNSEEN_SCENES``: FloorPlan10, 219, 308, 424) and never use ``HELD_OUT_COMBOS``;
  ``valid_unseen`` uses only those four floor plans *and* only held-out combinations. Train and
  valid_seen tasks come from distinct seed streams. Valid splits have ALFWorld's exact per-type
  counts in a fixed shuffled order; train draws types with ALFWorld's train mix.
- **Tasks.** Task type -> room (with the real rooms' shares) -> floor plan -> (object, parent)
  among those the room holds: the parent type is in the layout and can contain the object, and
  some other receptacle can hold enough instances. Instances of the target type: 1-4 (pick-two
  2-4) with the measured frequencies, following ``vocab.TARGET_COUNT`` (real games have 1-4, not
  the 2-6 the reference says). Targets start in no receptacle of the parent type (so the goal is
  never met initially), never loose, never hot or clean; those in a fridge start cool, as in
  ALFWorld. Look tasks put one desk lamp in a lamp host (desk, side table, dresser, shelf, rarely a
  coffee table). The agent starts at a location of its own, with no receptacle.
- **Objects.** Other objects and fixtures follow ``vocab.ROOM_OBJECTS`` / ``ROOM_FIXTURES``
  shares (1-4 instances per present type, measured frequencies); each goes to a receptacle that
  can hold it (``canContain``, plus ``vocab.INITIAL_EXTRA`` for non-targets, as real scenes do),
  picked with weight = the mean load of its type in real games, within ``vocab.MAX_ITEMS``.
  ``vocab.LOOSE_PROB`` instances, loose pickupables and fixtures lie in no receptacle; desk
  lamps, house plants and televisions sit in a host receptacle with ``vocab.FIXTURE_HOSTS``.
- **Deviations from real data.** No object is in two receptacles at once (real: 2.5 %), loose
  objects have no location (invisible either way), look tasks have exactly one desk lamp, target
  instances are never loose, and scene sizes are capped as above.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from rspo_gym.envs.alfworld import vocab
from rspo_gym.envs.alfworld.scenes import SceneBuilder
from rspo_gym.envs.alfworld.world import Task, World
from rspo_gym.envs.core import check_task_id

__all__ = [
    "HELD_OUT_COMBOS",
    "Layout",
    "MAX_RECEPTACLES",
    "MIN_RECEPTACLES",
    "SPLIT_SIZES",
    "TASK_TYPE_COUNTS",
    "generate_world",
    "scene_layout",
    "split_scenes",
]

T = TypeVar("T")

SPLIT_SIZES: Mapping[str, int | None] = MappingProxyType(
    {"train": None, "valid_seen": 140, "valid_unseen": 134}
)

# Tasks per type (vocab.TASK_TYPES order): ALFWorld's valid splits exactly; train's 3,553 games
# give the train mix.
TASK_TYPE_COUNTS: Mapping[str, tuple[int, ...]] = MappingProxyType({
    "train": (790, 308, 650, 459, 533, 813),
    "valid_seen": (35, 13, 27, 16, 25, 24),
    "valid_unseen": (24, 18, 31, 23, 21, 17),
})

MIN_RECEPTACLES = 7
MAX_RECEPTACLES = 40

# (task type, object type, parent type; the lamp type for look tasks) used by valid_unseen only.
# Parents are receptacles every layout of the room has, so each combination can occur in the
# held-out floor plan of its room.
HELD_OUT_COMBOS: frozenset[tuple[str, str, str]] = frozenset({
    ("pick_and_place_simple", "keychain", "armchair"),
    ("pick_and_place_simple", "cellphone", "bed"),
    ("pick_and_place_simple", "soapbar", "toilet"),
    ("pick_and_place_simple", "peppershaker", "cabinet"),
    ("look_at_obj_in_light", "creditcard", "desklamp"),
    ("look_at_obj_in_light", "cd", "desklamp"),
    ("pick_clean_then_place_in_recep", "kettle", "cabinet"),
    ("pick_clean_then_place_in_recep", "spatula", "countertop"),
    ("pick_clean_then_place_in_recep", "cloth", "toilet"),
    ("pick_heat_then_place_in_recep", "potato", "garbagecan"),
    ("pick_heat_then_place_in_recep", "cup", "countertop"),
    ("pick_heat_then_place_in_recep", "mug", "cabinet"),
    ("pick_cool_then_place_in_recep", "bread", "countertop"),
    ("pick_cool_then_place_in_recep", "pan", "stoveburner"),
    ("pick_cool_then_place_in_recep", "winebottle", "garbagecan"),
    ("pick_two_obj_and_place", "keychain", "sofa"),
    ("pick_two_obj_and_place", "pencil", "garbagecan"),
    ("pick_two_obj_and_place", "toiletpaper", "toilet"),
    ("pick_two_obj_and_place", "pan", "countertop"),
})

# ---------------------------------------------------------------------------------------------
# Calibration, measured on 340 real json_2.1.1 games (valid_seen 140 + 200 train games)
# ---------------------------------------------------------------------------------------------

# Exponent of the count skew: lo + floor((hi - lo + 1) * u**2) puts half the draws in the lowest
# quarter of [lo, hi], as real counts are; it gives 24 receptacles per game (real: 23.7).
_COUNT_SKEW = 2.0

# Stacked types: instances (1, 2), (3, 4), ... share a location with this probability.
_PAIR_SHARE: Mapping[str, float] = MappingProxyType({
    "stoveburner": 0.68,
    "drawer": 0.22,
    "cabinet": 0.18,
    "shelf": 0.13,
})

# (type, host type, probability): an instance of ``type`` stands at the spot of a random host.
_JOIN_SHARE: tuple[tuple[str, str, float], ...] = (
    ("toaster", "countertop", 0.30),
    ("coffeemachine", "countertop", 0.22),
    ("tvstand", "shelf", 0.40),
    ("dresser", "drawer", 0.20),
    ("safe", "drawer", 0.17),
    ("desk", "drawer", 0.05),
    ("handtowelholder", "towelholder", 0.10),
    ("toiletpaperhanger", "garbagecan", 0.10),
)

# Rooms of each task type, weighted by the real games (bathroom, bedroom, kitchen, livingroom
# counts; look: 29 bedroom, 3 living room).
_ROOM_WEIGHTS: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "pick_and_place_simple": {"kitchen": 13, "livingroom": 21, "bedroom": 20, "bathroom": 27},
    "look_at_obj_in_light": {"livingroom": 3, "bedroom": 29},
    "pick_clean_then_place_in_recep": {"kitchen": 46, "bathroom": 18},
    "pick_heat_then_place_in_recep": {"kitchen": 1},
    "pick_cool_then_place_in_recep": {"kitchen": 1},
    "pick_two_obj_and_place": {"kitchen": 5, "livingroom": 21, "bedroom": 20, "bathroom": 23},
})

# Mean objects per instance of a receptacle type: how likely an object lands there.
_PLACE_WEIGHT: Mapping[str, float] = MappingProxyType({
    "diningtable": 8.3, "desk": 5.9, "countertop": 5.4, "dresser": 4.6, "bed": 4.1,
    "tvstand": 4.1, "fridge": 4.1, "coffeetable": 4.0, "sofa": 3.0, "cart": 3.0, "toilet": 2.4,
    "sidetable": 2.4, "sinkbasin": 1.3, "bathtubbasin": 1.3, "armchair": 1.1, "microwave": 1.1,
    "shelf": 1.0, "ottoman": 1.0, "towelholder": 0.9, "handtowelholder": 0.8, "garbagecan": 0.6,
    "stoveburner": 0.6, "safe": 0.5, "drawer": 0.5, "cabinet": 0.4, "coffeemachine": 0.3,
    "toiletpaperhanger": 0.25, "toaster": 0.0, "laundryhamper": 0.0,
})

# Frequencies of 1, 2, 3, 4 instances: of a present object type; of the target type (games with
# that many, other tasks and pick-two); of fixtures that come in numbers (windows, chairs, ...).
_INSTANCE_WEIGHTS: tuple[float, ...] = (0.40, 0.30, 0.27, 0.03)
_TARGET_WEIGHTS: tuple[float, ...] = (97, 73, 57, 44)
_PICK_TWO_TARGET_WEIGHTS: tuple[float, ...] = (0, 29, 17, 23)
_FIXTURE_WEIGHTS: tuple[float, ...] = (0.60, 0.25, 0.10, 0.05)
_MULTI_FIXTURES: frozenset[str] = frozenset({"window", "chair", "painting", "blinds", "curtains", "poster"})
# Fixtures counted like the receptacle they belong to: a stove knob per burner, a sink per basin.
_FIXTURE_PER_RECEPTACLE: Mapping[str, str] = MappingProxyType({"stoveknob": "stoveburner", "sink": "sinkbasin"})

# Appliance a treated task needs in its layout.
_APPLIANCE: Mapping[str, frozenset[str]] = MappingProxyType({
    "pick_clean_then_place_in_recep": vocab.CLEAN_RECEPTACLES,
    "pick_heat_then_place_in_recep": vocab.HEAT_RECEPTACLES,
    "pick_cool_then_place_in_recep": vocab.COOL_RECEPTACLES,
})

_CAN_CONTAIN: frozenset[tuple[str, str]] = frozenset(
    (rtype, otype) for rtype, otypes in vocab.CAN_CONTAIN.items() for otype in otypes
)
_INITIAL_CAN_CONTAIN: frozenset[tuple[str, str]] = _CAN_CONTAIN | frozenset(
    (rtype, otype) for rtype, otypes in vocab.INITIAL_EXTRA.items() for otype in otypes
)
_ROOM_OF_SCENE: Mapping[int, str] = MappingProxyType(
    {scene: room for room, scenes in vocab.SCENES.items() for scene in scenes}
)
_ROOM_SHARES: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {room: MappingProxyType(dict(shares)) for room, shares in vocab.ROOM_OBJECTS.items()}
)
_SETUP_TRIES = 200


def _max_items(rtype: str) -> int:
    return vocab.MAX_ITEMS.get(rtype, vocab.DEFAULT_MAX_ITEMS)


def _start_weights(allowed: frozenset[tuple[str, str]]) -> Mapping[str, Mapping[str, float]]:
    """Object type -> the receptacle types it may start in, weighted by their real mean load."""
    return MappingProxyType({
        otype: MappingProxyType({
            rtype: weight for rtype, weight in _PLACE_WEIGHT.items()
            if weight > 0 and _max_items(rtype) > 0 and (rtype, otype) in allowed
        })
        for otype in sorted(vocab.OBJECT_TYPES)
    })


# Targets start only where they could be put back; other objects also where real scenes put them.
_TARGET_STARTS = _start_weights(_CAN_CONTAIN)
_OBJECT_STARTS = _start_weights(_INITIAL_CAN_CONTAIN)


# ---------------------------------------------------------------------------------------------
# A version-stable random stream
# ---------------------------------------------------------------------------------------------


class _Rng:
    """Random draws built on ``random.Random.random()`` alone, whose sequence for an integer seed
    Python guarantees across versions (the other ``random`` methods may change between releases)."""

    __slots__ = ("random",)

    def __init__(self, *key: object) -> None:
        digest = hashlib.sha256("/".join(map(str, ("rspo_gym.alfworld.generator", *key))).encode()).digest()
        self.random = random.Random(int.from_bytes(digest[:16], "big")).random

    def chance(self, p: float) -> bool:
        return p >= 1.0 or self.random() < p

    def below(self, n: int) -> int:
        return min(int(self.random() * n), n - 1)

    def choice(self, options: Sequence[T]) -> T:
        return options[self.below(len(options))]

    def weighted_index(self, weights: Sequence[float]) -> int:
        """An index drawn with probability proportional to ``weights`` (some must be positive)."""
        x = self.random() * sum(weights)
        last = 0
        for i, w in enumerate(weights):
            if w > 0:
                last = i
                x -= w
                if x < 0:
                    return i
        return last

    def shuffle(self, values: list[T]) -> None:
        for i in range(len(values) - 1, 0, -1):
            j = self.below(i + 1)
            values[i], values[j] = values[j], values[i]


# ---------------------------------------------------------------------------------------------
# Layouts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """The receptacles of one floor plan, in build order: ``(type, location, openable)``.

    Locations are ``0..n-1``; receptacles sharing one stand at the same spot.
    """

    room: str
    scene: int
    receptacles: tuple[tuple[str, int, bool], ...]
    by_type: Mapping[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_type: dict[str, list[int]] = {}
        for i, (rtype, _, _) in enumerate(self.receptacles):
            by_type.setdefault(rtype, []).append(i)
        # A derived lookup table of a frozen dataclass, hence object.__setattr__.
        object.__setattr__(self, "by_type", MappingProxyType({t: tuple(v) for t, v in by_type.items()}))

    def count(self, rtype: str) -> int:
        return len(self.by_type.get(rtype, ()))


def scene_layout(scene: int) -> Layout:
    """The layout of ALFRED floor plan ``scene``: the same receptacles every time it is used."""
    room = _ROOM_OF_SCENE.get(scene)
    if room is None:
        raise ValueError(f"Unknown scene {scene!r}; expected an ALFRED floor plan of vocab.SCENES")
    rng = _Rng("layout", scene)
    counts = _cap_counts(_receptacle_counts(rng, room))
    types = [rtype for rtype, n in counts.items() for _ in range(n)]
    locations = _share_locations(rng, types)
    receptacles = tuple(
        (rtype, location, rtype in vocab.OPENABLE and rng.chance(vocab.OPENABLE_PROB[rtype]))
        for rtype, location in zip(types, locations)
    )
    return Layout(room, scene, receptacles)


def _receptacle_counts(rng: _Rng, room: str) -> dict[str, int]:
    """Present types with their counts, skewed low (real rooms rarely reach their maxima)."""
    counts = {}
    for rtype, share, lo, hi in vocab.ROOM_RECEPTACLES[room]:
        if rng.chance(share):
            counts[rtype] = min(hi, lo + int((hi - lo + 1) * rng.random() ** _COUNT_SKEW))
    return counts


def _cap_counts(counts: dict[str, int]) -> dict[str, int]:
    """Trim the most numerous type until the scene fits MAX_RECEPTACLES; pad with drawers."""
    counts = dict(counts)
    while sum(counts.values()) > MAX_RECEPTACLES:
        largest = max(counts, key=counts.__getitem__)
        counts[largest] -= 1
    missing = MIN_RECEPTACLES - sum(counts.values())
    if missing > 0:
        counts["drawer"] = counts.get("drawer", 0) + missing
    return counts


def _share_locations(rng: _Rng, types: Sequence[str]) -> list[int]:
    """One location per receptacle, numbered 0.. in order; stacked and joined ones share."""
    spot = list(range(len(types)))
    instances: dict[str, list[int]] = {}
    for i, rtype in enumerate(types):
        instances.setdefault(rtype, []).append(i)
    for rtype, p in _PAIR_SHARE.items():
        members = instances.get(rtype, [])
        for first, second in zip(members[::2], members[1::2]):
            if rng.chance(p):
                spot[second] = spot[first]
    for rtype, host, p in _JOIN_SHARE:
        hosts = instances.get(host)
        for i in instances.get(rtype, []) if hosts else ():
            if rng.chance(p):
                spot[i] = spot[rng.choice(hosts)]
    renumber: dict[int, int] = {}
    return [renumber.setdefault(s, len(renumber)) for s in spot]


# ---------------------------------------------------------------------------------------------
# Splits
# ---------------------------------------------------------------------------------------------


def split_scenes(split: str) -> Mapping[str, tuple[int, ...]]:
    """The floor plans of each room type a split uses (held-out ones for valid_unseen only)."""
    _check_split(split)
    unseen = split == "valid_unseen"
    return MappingProxyType({
        room: tuple(s for s in scenes if (s in vocab.UNSEEN_SCENES) == unseen)
        for room, scenes in vocab.SCENES.items()
    })


def _schedule(split: str) -> tuple[str, ...]:
    """A valid split's task types: ALFWorld's exact counts in a fixed shuffled order."""
    types = [t for t, n in zip(vocab.TASK_TYPES, TASK_TYPE_COUNTS[split]) for _ in range(n)]
    _Rng("schedule", split).shuffle(types)
    return tuple(types)


_SCHEDULES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {split: _schedule(split) for split, size in SPLIT_SIZES.items() if size is not None}
)


def _task_type(rng: _Rng, split: str, index: int) -> str:
    schedule = _SCHEDULES.get(split)
    if schedule is not None:
        return schedule[index]
    return vocab.TASK_TYPES[rng.weighted_index(TASK_TYPE_COUNTS[split])]


# ---------------------------------------------------------------------------------------------
# Task choice
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Setup:
    layout: Layout
    task_type: str
    object_type: str
    parent_type: str | None  # the goal receptacle; None for look tasks
    targets: int


def _combos(layout: Layout, task_type: str, split: str) -> list[tuple[str, str | None, int]]:
    """(object, parent, room for targets) triples a task of this type can use here.

    The room must hold the object, the appliance and (look) a lamp host or (others) the parent,
    and other receptacles must hold enough targets for the task.
    """
    capacity = {rtype: len(members) * _max_items(rtype) for rtype, members in layout.by_type.items()}
    types = capacity.keys()
    if task_type in _APPLIANCE and not _APPLIANCE[task_type] & types:
        return []
    if task_type == "look_at_obj_in_light":
        if not any(host in types for host, _ in vocab.LAMP_RECEPTACLES):
            return []
        parents: list[str | None] = [None]
    else:
        parents = sorted(vocab.TASK_PARENTS[task_type] & types)
    needed = 2 if task_type == "pick_two_obj_and_place" else 1
    unseen = split == "valid_unseen"
    combos = []
    for otype in sorted(vocab.TASK_OBJECTS[task_type] & _ROOM_SHARES[layout.room].keys()):
        starts = _TARGET_STARTS[otype]
        total = sum(capacity.get(rtype, 0) for rtype in starts)
        for parent in parents:
            if ((task_type, otype, parent or vocab.LOOK_LAMPS[0]) in HELD_OUT_COMBOS) != unseen:
                continue
            if parent is not None and (parent, otype) not in _CAN_CONTAIN:
                continue
            room = total - capacity[parent] if parent in starts else total
            if room >= needed:
                combos.append((otype, parent, room))
    return combos


def _draw_setup(rng: _Rng, split: str, task_type: str) -> _Setup:
    """Room, floor plan, then (object, parent); redraw the room when the plan cannot host it."""
    rooms = _ROOM_WEIGHTS[task_type]
    room_names = list(rooms)
    scenes = split_scenes(split)
    for _ in range(_SETUP_TRIES):
        room = room_names[rng.weighted_index([rooms[r] for r in room_names])]
        layout = scene_layout(rng.choice(scenes[room]))
        combos = _combos(layout, task_type, split)
        if not combos:
            continue
        shares = _ROOM_SHARES[layout.room]
        objects = sorted({otype for otype, _, _ in combos})
        otype = objects[rng.weighted_index([shares[o] for o in objects])]
        _, parent, capacity = rng.choice([c for c in combos if c[0] == otype])
        weights = _PICK_TWO_TARGET_WEIGHTS if task_type == "pick_two_obj_and_place" else _TARGET_WEIGHTS
        targets = min(capacity, 1 + rng.weighted_index(weights))
        return _Setup(layout, task_type, otype, parent, targets)
    raise RuntimeError(f"No layout of split {split!r} can host a {task_type} task")  # pragma: no cover


# ---------------------------------------------------------------------------------------------
# Populating the scene
# ---------------------------------------------------------------------------------------------


class _Scene:
    """A SceneBuilder over a layout that tracks the room left in each receptacle (MAX_ITEMS)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.builder = SceneBuilder()
        for rtype, location, openable in layout.receptacles:
            self.builder.add_receptacle(rtype, location=location, openable=openable)
        self.free = [_max_items(rtype) for rtype, _, _ in layout.receptacles]

    def hosts(self, weights: Mapping[str, float], exclude: str | None = None) -> tuple[list[int], list[float]]:
        """The receptacles of the types ``weights`` weighs (but ``exclude``), with their weight."""
        by_type = self.layout.by_type
        pairs = [(i, w) for rtype, w in weights.items() if rtype != exclude for i in by_type.get(rtype, ())]
        return [i for i, _ in pairs], [w for _, w in pairs]

    def slot(self, rng: _Rng, candidates: Sequence[int], weights: Sequence[float]) -> int | None:
        """Take a place in one of ``candidates`` with room left, chosen by ``weights``."""
        free = [(r, w) for r, w in zip(candidates, weights) if self.free[r] > 0]
        if not free:
            return None
        r = free[rng.weighted_index([w for _, w in free])][0]
        self.free[r] -= 1
        return r


def _place_targets(rng: _Rng, scene: _Scene, setup: _Setup) -> None:
    """Target instances, never in a receptacle of the parent type; those in a fridge start cool,
    as ALFWorld's state dump makes them. ``_combos`` checked there is room for all."""
    candidates, weights = scene.hosts(_TARGET_STARTS[setup.object_type], exclude=setup.parent_type)
    for _ in range(setup.targets):
        r = scene.slot(rng, candidates, weights)
        cool = scene.layout.receptacles[r][0] in vocab.COOL_RECEPTACLES
        scene.builder.add_item(setup.object_type, r, state=("cool",) if cool else ())


def _place_lamp(rng: _Rng, scene: _Scene) -> None:
    """The look task's desk lamp, in a lamp host (``_combos`` checked there is one; hosts take
    8 or more items, so up to 4 targets cannot fill them)."""
    candidates, weights = scene.hosts({rtype: float(n) for rtype, n in vocab.LAMP_RECEPTACLES})
    scene.builder.add_item(vocab.LOOK_LAMPS[0], scene.slot(rng, candidates, weights))


def _instances(rng: _Rng, weights: Sequence[float]) -> int:
    return 1 + rng.weighted_index(weights)


def _place_objects(rng: _Rng, scene: _Scene, target: str) -> None:
    """The room's other objects; instances that find no room are left out."""
    for otype, share in vocab.ROOM_OBJECTS[scene.layout.room]:
        if otype == target or not rng.chance(share):
            continue
        candidates, weights = scene.hosts(_OBJECT_STARTS[otype])
        loose = vocab.LOOSE_PROB.get(otype, 0.0)
        for _ in range(_instances(rng, _INSTANCE_WEIGHTS)):
            if rng.chance(loose):
                scene.builder.add_item(otype)
                continue
            r = scene.slot(rng, candidates, weights)
            if r is not None:
                scene.builder.add_item(otype, r)


def _fixture_count(rng: _Rng, layout: Layout, ftype: str) -> int:
    if ftype in _FIXTURE_PER_RECEPTACLE:
        return max(1, layout.count(_FIXTURE_PER_RECEPTACLE[ftype]))
    if ftype in _MULTI_FIXTURES:
        return _instances(rng, _FIXTURE_WEIGHTS)
    return 1


def _place_fixtures(rng: _Rng, scene: _Scene, task_type: str) -> None:
    """Fixtures and loose pickupables; lamps, plants and TVs often stand in a host receptacle."""
    for ftype, share in vocab.ROOM_FIXTURES[scene.layout.room]:
        if ftype in vocab.LOOK_LAMPS and task_type == "look_at_obj_in_light":
            continue  # the task's own lamp is placed already
        if not rng.chance(share):
            continue
        hosted, host_counts = vocab.FIXTURE_HOSTS.get(ftype, (0.0, ()))
        candidates, weights = scene.hosts({rtype: float(n) for rtype, n in host_counts})
        for _ in range(_fixture_count(rng, scene.layout, ftype)):
            r = scene.slot(rng, candidates, weights) if rng.chance(hosted) else None
            if r is None:
                scene.builder.add_item(ftype)
            else:
                scene.builder.add_item(ftype, r)


def _task(rng: _Rng, setup: _Setup) -> Task:
    """The instruction: one of the type's two templates, lower-case type names, final period."""
    toggle = vocab.LOOK_LAMPS[0] if setup.task_type == "look_at_obj_in_light" else None
    template = rng.choice(vocab.GOAL_TEMPLATES[setup.task_type])
    text = template.format(obj=setup.object_type, recep=setup.parent_type, toggle=toggle) + "."
    return Task(setup.task_type, setup.object_type, setup.parent_type, toggle, text)


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def generate_world(split: str, index: int) -> World:
    """Task ``index`` of ``split``: the same ``World`` on every machine, process and run.

    Its name reads like an ALFWorld trial directory: ``"generated/train/7/pick_two_obj_and_place-
    pencil-None-garbagecan-312"`` (the last slot before the floor plan is the lamp for look tasks).
    """
    _check_split(split)
    index = check_task_id(index, SPLIT_SIZES[split])
    rng = _Rng("task", split, index)
    task_type = _task_type(rng, split, index)
    setup = _draw_setup(rng, split, task_type)
    scene = _Scene(setup.layout)
    _place_targets(rng, scene, setup)
    if task_type == "look_at_obj_in_light":
        _place_lamp(rng, scene)
    _place_objects(rng, scene, setup.object_type)
    _place_fixtures(rng, scene, task_type)
    task = _task(rng, setup)
    slot = task.parent_type or task.toggle_type
    name = f"generated/{split}/{index}/{task_type}-{task.object_type}-None-{slot}-{setup.layout.scene}"
    return scene.builder.build(task, can_contain=_CAN_CONTAIN, name=name)


def _check_split(split: object) -> None:
    if not isinstance(split, str) or split not in SPLIT_SIZES:
        raise ValueError(f"Unknown split {split!r}; expected one of {sorted(SPLIT_SIZES)}")

