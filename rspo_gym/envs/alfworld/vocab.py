"""ALFRED/ALFWorld domain constants for the procedural task generator (types, affordances, rooms).

Facts come from upstream ALFWorld ``alfworld/gen/constants.py`` and ``gen/goal_library.py``.
Room statistics come from docs/reference/alfworld.md section 3.3, checked on real json_2.1.1 games.
Values marked "measured" we counted on 340 real games (98 scenes); nothing reads games at run time.

All type names are the lower-case names printed in the game text ("sinkbasin", "desklamp", "cd").
Every dict is a read-only ``MappingProxyType``; every collection is a tuple or a frozenset.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "CAN_CONTAIN",
    "CLEANABLE",
    "CLEAN_RECEPTACLES",
    "COOLABLE",
    "COOL_RECEPTACLES",
    "DEFAULT_MAX_ITEMS",
    "FIXTURE_HOSTS",
    "GOAL_TEMPLATES",
    "HEATABLE",
    "HEAT_RECEPTACLES",
    "INITIAL_EXTRA",
    "LAMP_RECEPTACLES",
    "LOOK_LAMPS",
    "LOOSE_PICKUPABLE",
    "LOOSE_PROB",
    "MAX_ITEMS",
    "OBJECT_TYPES",
    "OPENABLE",
    "OPENABLE_PROB",
    "PICKUPABLE",
    "RECEPTACLE_OBJECTS",
    "RECEPTACLE_TYPES",
    "ROOM_FIXTURES",
    "ROOM_OBJECTS",
    "ROOM_RECEPTACLES",
    "ROOM_TYPES",
    "SCENES",
    "SHARP",
    "SLICEABLE",
    "TARGET_COUNT",
    "TASK_OBJECTS",
    "TASK_PARENTS",
    "TASK_ROOMS",
    "TASK_TYPES",
    "TASK_TYPE_ID",
    "TOGGLEABLE",
    "UNSEEN_SCENES",
    "can_contain",
]

# --------------------------------------------------------------------------------------------------
# Task types and goal text
# --------------------------------------------------------------------------------------------------

TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

# ALFWorld's numeric task-type ids (1..6, the order above).
TASK_TYPE_ID: Mapping[str, int] = MappingProxyType({t: i + 1 for i, t in enumerate(TASK_TYPES)})

# The two templates of each goal; one is picked at random per game. No trailing period: the game
# text appends "." after the goal ("Your task is to: put some watch on safe.").
GOAL_TEMPLATES: Mapping[str, tuple[str, str]] = MappingProxyType({
    "pick_and_place_simple": ("put a {obj} in {recep}", "put some {obj} on {recep}"),
    "look_at_obj_in_light": (
        "look at {obj} under the {toggle}",
        "examine the {obj} with the {toggle}",
    ),
    "pick_clean_then_place_in_recep": (
        "put a clean {obj} in {recep}",
        "clean some {obj} and put it in {recep}",
    ),
    "pick_heat_then_place_in_recep": (
        "put a hot {obj} in {recep}",
        "heat some {obj} and put it in {recep}",
    ),
    "pick_cool_then_place_in_recep": (
        "put a cool {obj} in {recep}",
        "cool some {obj} and put it in {recep}",
    ),
    "pick_two_obj_and_place": (
        "put two {obj} in {recep}",
        "find two {obj} and put them in {recep}",
    ),
})

# --------------------------------------------------------------------------------------------------
# Rooms and scenes
# --------------------------------------------------------------------------------------------------

ROOM_TYPES: tuple[str, ...] = ("kitchen", "livingroom", "bedroom", "bathroom")

# ALFRED FloorPlan numbers per room type.
SCENES: Mapping[str, tuple[int, ...]] = MappingProxyType({
    "kitchen": tuple(range(1, 31)),
    "livingroom": tuple(range(201, 231)),
    "bedroom": tuple(range(301, 331)),
    "bathroom": tuple(range(401, 431)),
})

# The four floor plans of ALFWorld's valid_unseen split (one per room); hold them out likewise.
UNSEEN_SCENES: tuple[int, ...] = (10, 219, 308, 424)

# Rooms each task type may be generated in (upstream GOALS_VALID).
TASK_ROOMS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "pick_and_place_simple": ROOM_TYPES,
    "look_at_obj_in_light": ("livingroom", "bedroom"),
    "pick_clean_then_place_in_recep": ("kitchen", "bathroom"),
    "pick_heat_then_place_in_recep": ("kitchen",),
    "pick_cool_then_place_in_recep": ("kitchen",),
    "pick_two_obj_and_place": ROOM_TYPES,
})

# --------------------------------------------------------------------------------------------------
# Type vocabulary and affordances
# --------------------------------------------------------------------------------------------------

# Static receptacle types (entities with a ``receptacleType`` fact), "sinkbasin"/"bathtubbasin"
# being the basins of Sink/Bathtub. Upstream also lists movable receptacles (bowl, mug, ...) and
# "paintinghanger"; ALFWorld never puts anything into the former and no scene has the latter.
RECEPTACLE_TYPES: frozenset[str] = frozenset({
    "armchair", "bathtubbasin", "bed", "cabinet", "cart", "coffeemachine", "coffeetable",
    "countertop", "desk", "diningtable", "drawer", "dresser", "fridge", "garbagecan",
    "handtowelholder", "laundryhamper", "microwave", "ottoman", "safe", "shelf", "sidetable",
    "sinkbasin", "sofa", "stoveburner", "toaster", "toilet", "toiletpaperhanger", "towelholder",
    "tvstand",
})

# Object types carrying a ``pickupable`` fact in real games (measured). Upstream's "papertowel" and
# "toiletpaperroll" never occur in ALFWorld scenes and are left out. "footstool" is pickupable in
# some scenes only; we keep it here and place it loose like the other LOOSE_PICKUPABLE types.
PICKUPABLE: frozenset[str] = frozenset({
    "alarmclock", "apple", "baseballbat", "basketball", "book", "boots", "bowl", "box", "bread",
    "butterknife", "candle", "cd", "cellphone", "cloth", "creditcard", "cup", "dishsponge", "egg",
    "footstool", "fork", "glassbottle", "handtowel", "kettle", "keychain", "knife", "ladle",
    "laptop", "lettuce", "mug", "newspaper", "pan", "papertowelroll", "pen", "pencil",
    "peppershaker", "pillow", "plate", "plunger", "pot", "potato", "remotecontrol", "saltshaker",
    "scrubbrush", "soapbar", "soapbottle", "spatula", "spoon", "spraybottle", "statue",
    "teddybear", "tennisracket", "tissuebox", "toiletpaper", "tomato", "towel", "vase", "watch",
    "wateringcan", "winebottle",
})

# Pickupable types that real games never put in a receptacle (measured, 0 of 201 instances).
# "take" needs ``inReceptacle``, so these can never be taken: generate them loose, like fixtures.
LOOSE_PICKUPABLE: frozenset[str] = frozenset({
    "baseballbat", "basketball", "boots", "footstool", "plunger", "scrubbrush", "tennisracket",
})

# Non-pickupable scene objects (fixtures); mostly loose, a few sit in receptacles (FIXTURE_HOSTS).
_FIXTURE_TYPES: frozenset[str] = frozenset({
    "bathtub", "blinds", "chair", "curtains", "desklamp", "floorlamp", "houseplant",
    "laundryhamperlid", "lightswitch", "mirror", "painting", "poster", "showerdoor", "showerglass",
    "sink", "stoveknob", "television", "window",
})

# Every object type (non-receptacle entity with an ``objectType`` fact) seen in real games.
OBJECT_TYPES: frozenset[str] = PICKUPABLE | _FIXTURE_TYPES

# Openable receptacle classes (upstream OPENABLE_CLASS_LIST minus "box": no box is openable in
# ALFWorld games). All start closed.
OPENABLE: frozenset[str] = frozenset({"cabinet", "drawer", "fridge", "microwave", "safe"})

# Share of instances that really get an ``openable`` fact (only those with a precomputed open pose
# in THOR); the rest behave like open shelves.
OPENABLE_PROB: Mapping[str, float] = MappingProxyType({
    "cabinet": 0.756,
    "drawer": 0.824,
    "microwave": 0.907,
    "fridge": 0.914,
    "safe": 0.76,
})

# Upstream VAL_ACTION_OBJECTS, without the *Sliced variants (sliced tasks are excluded).
HEATABLE: frozenset[str] = frozenset({
    "apple", "bread", "cup", "egg", "mug", "plate", "potato", "tomato",
})
COOLABLE: frozenset[str] = frozenset({
    "apple", "bowl", "bread", "cup", "egg", "lettuce", "mug", "pan", "plate", "pot", "potato",
    "tomato", "winebottle",
})
CLEANABLE: frozenset[str] = frozenset({
    "apple", "bowl", "butterknife", "cloth", "cup", "dishsponge", "egg", "fork", "kettle", "knife",
    "ladle", "lettuce", "mug", "pan", "plate", "pot", "potato", "soapbar", "spatula", "spoon",
    "tomato",
})
TOGGLEABLE: frozenset[str] = frozenset({"desklamp", "floorlamp"})
SLICEABLE: frozenset[str] = frozenset({"apple", "bread", "egg", "lettuce", "potato", "tomato"})

# Objects that get ``isReceptacleObject`` (upstream MOVABLE_RECEPTACLES; same set in real games).
RECEPTACLE_OBJECTS: frozenset[str] = frozenset({"bowl", "box", "cup", "mug", "pan", "plate", "pot"})

# Tools that can slice (unused by the six task types, kept for the SliceObject action).
SHARP: frozenset[str] = frozenset({"knife", "butterknife"})

# Appliances of the clean / heat / cool actions (the 2.1.1 PDDL domain also accepts "sink" for
# cleaning, but no real game has a "sink" receptacle: Sink objects are fixtures).
CLEAN_RECEPTACLES: frozenset[str] = frozenset({"sinkbasin"})
HEAT_RECEPTACLES: frozenset[str] = frozenset({"microwave"})
COOL_RECEPTACLES: frozenset[str] = frozenset({"fridge"})

# --------------------------------------------------------------------------------------------------
# canContain: which object types each receptacle type accepts (generation and "move/put")
# --------------------------------------------------------------------------------------------------
# Upstream VAL_RECEPTACLE_OBJECTS with these changes: *Sliced types dropped (sliced tasks are
# excluded); entries keyed by movable receptacles (pot, pan, bowl, mug, plate, cup, box) dropped
# (ALFWorld comments out the put-into-movable-receptacle actions and real games carry no such
# canContain facts); "papertowel" and "toiletpaperroll" dropped (never in ALFWorld scenes);
# toaster keeps an empty set (upstream allows only BreadSliced). Real games' canContain facts are
# exactly this table restricted to the types present.

# Shared by countertop, diningtable, coffeetable and sidetable.
_TABLE: frozenset[str] = frozenset({
    "alarmclock", "apple", "baseballbat", "basketball", "book", "bowl", "box", "bread",
    "butterknife", "candle", "cd", "cellphone", "cloth", "creditcard", "cup", "dishsponge", "egg",
    "fork", "glassbottle", "handtowel", "kettle", "keychain", "knife", "ladle", "laptop", "lettuce",
    "mug", "newspaper", "pan", "pen", "pencil", "peppershaker", "plate", "pot", "potato",
    "remotecontrol", "saltshaker", "soapbar", "soapbottle", "spatula", "spoon", "spraybottle",
    "statue", "tennisracket", "tissuebox", "toiletpaper", "tomato", "vase", "watch", "wateringcan",
    "winebottle",
})

# Shared by sofa, armchair and ottoman.
_SEAT: frozenset[str] = frozenset({
    "basketball", "book", "box", "cellphone", "cloth", "creditcard", "keychain", "laptop",
    "newspaper", "pillow", "remotecontrol",
})

# Desk and dresser hold the same things, except that only a desk takes a soapbottle.
_DRESSER: frozenset[str] = frozenset({
    "alarmclock", "basketball", "book", "bowl", "box", "candle", "cd", "cellphone", "cloth",
    "creditcard", "cup", "glassbottle", "keychain", "laptop", "mug", "newspaper", "pen", "pencil",
    "plate", "remotecontrol", "spraybottle", "statue", "tennisracket", "tissuebox", "toiletpaper",
    "vase", "watch", "wateringcan", "winebottle",
})

CAN_CONTAIN: Mapping[str, frozenset[str]] = MappingProxyType({
    "countertop": _TABLE,
    "diningtable": _TABLE,
    "coffeetable": _TABLE,
    "sidetable": _TABLE,
    "sofa": _SEAT,
    "armchair": _SEAT,
    "ottoman": _SEAT,
    "dresser": _DRESSER,
    "desk": _DRESSER | {"soapbottle"},
    "shelf": frozenset({
        "alarmclock", "book", "bowl", "box", "candle", "cd", "cellphone", "cloth", "creditcard",
        "cup", "dishsponge", "glassbottle", "handtowel", "kettle", "keychain", "mug", "newspaper",
        "pen", "pencil", "peppershaker", "plate", "pot", "remotecontrol", "saltshaker", "soapbar",
        "soapbottle", "spraybottle", "statue", "tissuebox", "toiletpaper", "vase", "watch",
        "wateringcan", "winebottle",
    }),
    "cabinet": frozenset({
        "book", "bowl", "box", "candle", "cd", "cloth", "cup", "dishsponge", "glassbottle",
        "handtowel", "kettle", "ladle", "mug", "newspaper", "pan", "peppershaker", "plate",
        "plunger", "pot", "saltshaker", "soapbar", "soapbottle", "spraybottle", "tissuebox",
        "toiletpaper", "vase", "wateringcan", "winebottle",
    }),
    "drawer": frozenset({
        "book", "butterknife", "candle", "cd", "cellphone", "cloth", "creditcard", "dishsponge",
        "fork", "handtowel", "keychain", "knife", "ladle", "newspaper", "pen", "pencil",
        "peppershaker", "remotecontrol", "saltshaker", "soapbar", "soapbottle", "spatula", "spoon",
        "spraybottle", "tissuebox", "toiletpaper", "watch", "wateringcan",
    }),
    "bed": frozenset({
        "baseballbat", "basketball", "book", "cellphone", "laptop", "newspaper", "pillow",
        "tennisracket",
    }),
    "fridge": frozenset({
        "apple", "bowl", "bread", "cup", "egg", "glassbottle", "lettuce", "mug", "pan", "plate",
        "pot", "potato", "tomato", "winebottle",
    }),
    "microwave": frozenset({
        "apple", "bowl", "bread", "cup", "egg", "glassbottle", "mug", "plate", "potato", "tomato",
    }),
    "sinkbasin": frozenset({
        "apple", "bowl", "butterknife", "cloth", "cup", "dishsponge", "egg", "fork", "glassbottle",
        "handtowel", "kettle", "knife", "ladle", "lettuce", "mug", "pan", "plate", "pot", "potato",
        "soapbar", "spatula", "spoon", "tomato",
    }),
    "bathtubbasin": frozenset({"cloth", "dishsponge", "handtowel", "soapbar"}),
    "garbagecan": frozenset({
        "apple", "bread", "cd", "cloth", "dishsponge", "egg", "handtowel", "lettuce", "newspaper",
        "pen", "pencil", "potato", "soapbar", "soapbottle", "spraybottle", "tissuebox",
        "toiletpaper", "tomato", "winebottle",
    }),
    "toilet": frozenset({
        "candle", "cloth", "dishsponge", "handtowel", "newspaper", "soapbar", "soapbottle",
        "spraybottle", "tissuebox", "toiletpaper",
    }),
    "cart": frozenset({
        "candle", "cloth", "dishsponge", "handtowel", "mug", "plunger", "soapbar", "soapbottle",
        "spraybottle", "statue", "tissuebox", "toiletpaper", "vase",
    }),
    "safe": frozenset({"cd", "cellphone", "creditcard", "keychain", "statue", "vase", "watch"}),
    "stoveburner": frozenset({"kettle", "pan", "pot"}),
    "coffeemachine": frozenset({"mug"}),
    "toaster": frozenset(),
    "laundryhamper": frozenset({"cloth"}),
    "towelholder": frozenset({"towel"}),
    "handtowelholder": frozenset({"handtowel"}),
    "toiletpaperhanger": frozenset({"toiletpaper"}),
    "tvstand": frozenset({"tissuebox"}),
})


def can_contain(rtype: str, otype: str) -> bool:
    """Whether an object of type ``otype`` may be put into a receptacle of type ``rtype``."""
    return otype in CAN_CONTAIN.get(rtype, ())


# Initial placements that real games contain although canContain forbids them (THOR physics put
# the object there; measured: pairs seen at least twice, plus every tvstand pair, since upstream
# lets a tvstand hold only a tissuebox). Left out as one-offs: countertop/towel, toaster/
# spraybottle. Such objects can be taken but never put back there. Use only when populating a
# scene, never for "move".
INITIAL_EXTRA: Mapping[str, frozenset[str]] = MappingProxyType({
    "armchair": frozenset({"cd"}),
    "bed": frozenset({"teddybear"}),
    "cabinet": frozenset({"keychain"}),
    "countertop": frozenset({"papertowelroll"}),
    "diningtable": frozenset({"papertowelroll"}),
    "dresser": frozenset({"soapbottle"}),
    "garbagecan": frozenset({"glassbottle", "papertowelroll"}),
    "shelf": frozenset({"papertowelroll"}),
    "sidetable": frozenset({"papertowelroll"}),
    "stoveburner": frozenset({"spatula"}),
    "toilet": frozenset({"papertowelroll"}),
    "tvstand": frozenset({
        "book", "bowl", "box", "cellphone", "creditcard", "keychain", "laptop", "pen", "plate",
        "remotecontrol", "statue", "vase", "watch",
    }),
})

# Share of instances of a type that real games leave outside every receptacle (measured; types
# with at least 5 %). Such instances cannot be taken; LOOSE_PICKUPABLE types are always loose.
LOOSE_PROB: Mapping[str, float] = MappingProxyType({
    "box": 0.38,
    "wateringcan": 0.81,
    "teddybear": 0.25,
    "toiletpaper": 0.19,
    "cd": 0.14,
    "keychain": 0.10,
    "soapbar": 0.10,
    "candle": 0.09,
    "cloth": 0.08,
    "remotecontrol": 0.07,
    "vase": 0.07,
    "knife": 0.06,
    "mug": 0.05,
    "plate": 0.05,
})

# --------------------------------------------------------------------------------------------------
# Scene composition per room type
# --------------------------------------------------------------------------------------------------

# (receptacle type, share of scenes that have it, min count, max count), reference section 3.3
# (one game per scene, 102 scenes). Counts the reference leaves out are measured (98 scenes).
# The maxima are faithful: kitchens really have 2-27 cabinets (median 13) and one has 27 drawers.
ROOM_RECEPTACLES: Mapping[str, tuple[tuple[str, float, int, int], ...]] = MappingProxyType({
    "kitchen": (
        ("cabinet", 1.0, 2, 27),
        ("coffeemachine", 1.0, 1, 2),
        ("countertop", 1.0, 1, 5),
        ("fridge", 1.0, 1, 2),
        ("garbagecan", 1.0, 1, 2),
        ("microwave", 1.0, 1, 2),
        ("sinkbasin", 1.0, 1, 1),
        ("stoveburner", 1.0, 4, 6),
        ("toaster", 1.0, 1, 1),
        ("drawer", 0.96, 1, 28),
        ("diningtable", 0.53, 1, 3),
        ("shelf", 0.17, 3, 4),
        ("sidetable", 0.10, 1, 2),
        ("safe", 0.03, 1, 1),
    ),
    "livingroom": (
        ("armchair", 1.0, 1, 3),
        ("garbagecan", 1.0, 1, 1),
        ("sofa", 1.0, 1, 3),
        ("coffeetable", 0.76, 1, 3),
        ("drawer", 0.76, 1, 22),
        ("sidetable", 0.76, 1, 5),
        ("diningtable", 0.47, 1, 2),
        ("shelf", 0.42, 1, 14),
        ("tvstand", 0.42, 1, 2),
        ("dresser", 0.38, 1, 2),
        ("ottoman", 0.19, 1, 1),
        ("cabinet", 0.14, 1, 8),
        ("safe", 0.09, 1, 1),
        ("desk", 0.04, 1, 1),
    ),
    "bedroom": (
        ("bed", 1.0, 1, 2),
        ("garbagecan", 1.0, 1, 1),
        ("drawer", 0.96, 2, 17),
        ("desk", 0.70, 1, 2),
        ("shelf", 0.66, 1, 12),
        ("sidetable", 0.62, 1, 3),
        ("dresser", 0.48, 1, 3),
        ("laundryhamper", 0.29, 1, 1),
        ("armchair", 0.22, 1, 3),
        ("safe", 0.18, 1, 1),
        ("cabinet", 0.14, 1, 4),
        ("diningtable", 0.11, 1, 1),
        ("countertop", 0.03, 1, 1),
    ),
    "bathroom": (
        ("garbagecan", 1.0, 1, 2),
        ("handtowelholder", 1.0, 1, 4),
        ("sinkbasin", 1.0, 1, 2),
        ("toilet", 1.0, 1, 2),
        ("toiletpaperhanger", 1.0, 1, 2),
        ("towelholder", 1.0, 1, 2),
        ("countertop", 0.84, 1, 2),
        ("bathtubbasin", 0.69, 1, 1),
        ("cabinet", 0.50, 2, 10),
        ("drawer", 0.50, 1, 9),
        ("shelf", 0.23, 1, 4),
        ("cart", 0.07, 1, 1),
        ("dresser", 0.07, 1, 1),
        ("sidetable", 0.07, 1, 1),
    ),
})

# (object type, share of scenes that have it) for objects placed in receptacles: reference section
# 3.3 first; entries after the "measured" comment are types the reference's list leaves out
# (per-scene shares from one game per scene in our 98 scenes). Loose types are in ROOM_FIXTURES.
ROOM_OBJECTS: Mapping[str, tuple[tuple[str, float], ...]] = MappingProxyType({
    "kitchen": (
        ("apple", 1.0), ("bowl", 1.0), ("bread", 1.0), ("cup", 1.0), ("dishsponge", 1.0),
        ("egg", 1.0), ("fork", 1.0), ("knife", 1.0), ("lettuce", 1.0), ("mug", 1.0), ("pan", 1.0),
        ("peppershaker", 1.0), ("plate", 1.0), ("pot", 1.0), ("potato", 1.0), ("saltshaker", 1.0),
        ("soapbottle", 1.0), ("spatula", 1.0), ("spoon", 1.0), ("tomato", 1.0),
        ("butterknife", 0.96), ("kettle", 0.46), ("ladle", 0.35), ("papertowelroll", 0.35),
        ("winebottle", 0.35), ("glassbottle", 0.25),
        # measured
        ("cellphone", 0.11), ("statue", 0.11), ("vase", 0.11), ("book", 0.07),
        ("creditcard", 0.07), ("pen", 0.07), ("pencil", 0.07), ("spraybottle", 0.07),
    ),
    "livingroom": (
        ("box", 1.0), ("creditcard", 1.0), ("keychain", 1.0), ("laptop", 1.0), ("pillow", 1.0),
        ("remotecontrol", 1.0), ("statue", 0.95), ("vase", 0.61), ("newspaper", 0.57),
        ("watch", 0.57), ("tissuebox", 0.38), ("wateringcan", 0.38), ("book", 0.33),
        # measured
        ("plate", 0.25), ("cellphone", 0.20), ("bowl", 0.15), ("pen", 0.15), ("pencil", 0.15),
        ("candle", 0.10),
    ),
    "bedroom": (
        ("alarmclock", 1.0), ("book", 1.0), ("cd", 1.0), ("cellphone", 1.0), ("creditcard", 1.0),
        ("keychain", 1.0), ("laptop", 1.0), ("pen", 1.0), ("pencil", 1.0), ("pillow", 1.0),
        ("mug", 0.51), ("bowl", 0.44), ("box", 0.44),
        # measured
        ("teddybear", 0.31), ("cloth", 0.15), ("statue", 0.15), ("tissuebox", 0.15),
        ("remotecontrol", 0.12), ("vase", 0.08), ("watch", 0.04),
    ),
    "bathroom": (
        ("candle", 1.0), ("cloth", 1.0), ("handtowel", 1.0), ("soapbar", 1.0), ("soapbottle", 1.0),
        ("spraybottle", 1.0), ("toiletpaper", 1.0), ("towel", 1.0), ("tissuebox", 0.23),
        ("dishsponge", 0.19),
        # measured
        ("papertowelroll", 0.16),
    ),
})

# (object type, share of scenes) for objects that sit at a location in no receptacle: fixtures and
# LOOSE_PICKUPABLE types ("Next to it, you see ..."). Desklamp, houseplant and television usually
# sit in a receptacle instead (FIXTURE_HOSTS). Reference shares first, then measured ones.
ROOM_FIXTURES: Mapping[str, tuple[tuple[str, float], ...]] = MappingProxyType({
    "kitchen": (
        ("lightswitch", 1.0), ("sink", 1.0), ("stoveknob", 1.0), ("window", 0.89), ("chair", 0.82),
        ("houseplant", 0.35),
        # measured
        ("blinds", 0.19), ("curtains", 0.07), ("mirror", 0.07),
    ),
    "livingroom": (
        ("floorlamp", 1.0), ("houseplant", 1.0), ("lightswitch", 1.0), ("painting", 1.0),
        ("television", 1.0), ("desklamp", 0.23),
        # measured
        ("window", 0.95), ("chair", 0.70), ("curtains", 0.30), ("boots", 0.20), ("mirror", 0.10),
    ),
    "bedroom": (
        ("lightswitch", 1.0), ("mirror", 1.0), ("window", 1.0), ("desklamp", 0.70),
        ("baseballbat", 0.40), ("basketball", 0.37), ("tennisracket", 0.33),
        # measured
        ("blinds", 0.88), ("chair", 0.77), ("painting", 0.46), ("houseplant", 0.27),
        ("laundryhamperlid", 0.27), ("poster", 0.19), ("boots", 0.12), ("television", 0.12),
        ("curtains", 0.08), ("footstool", 0.04),
    ),
    "bathroom": (
        ("lightswitch", 1.0), ("mirror", 1.0), ("plunger", 1.0), ("scrubbrush", 1.0), ("sink", 1.0),
        ("bathtub", 0.73),
        # measured
        ("window", 0.68), ("showerdoor", 0.56), ("showerglass", 0.40), ("floorlamp", 0.08),
        ("painting", 0.04), ("footstool", 0.04), ("houseplant", 0.04),
    ),
})

# Fixtures that usually sit in a receptacle (measured): type -> (share of instances in a
# receptacle, ((host receptacle type, instances seen), ...)). Rarer THOR-parent quirks (a sink or
# window "in" a countertop) are not reproduced.
FIXTURE_HOSTS: Mapping[str, tuple[float, tuple[tuple[str, int], ...]]] = MappingProxyType({
    "desklamp": (1.0, (("sidetable", 31), ("desk", 22), ("dresser", 13), ("shelf", 3),
                       ("coffeetable", 1))),
    "houseplant": (0.84, (("countertop", 51), ("sidetable", 17), ("diningtable", 16),
                          ("shelf", 11), ("coffeetable", 11), ("cabinet", 5), ("desk", 4),
                          ("dresser", 2), ("tvstand", 2))),
    "television": (0.67, (("tvstand", 16), ("dresser", 15), ("coffeetable", 5))),
})

# Most objects placed in one receptacle instance initially (reference section 3.3; the types the
# reference does not give are measured). Toaster is 0: nothing in our vocabulary may go in it.
MAX_ITEMS: Mapping[str, int] = MappingProxyType({
    "countertop": 23,
    "diningtable": 29,
    "desk": 13,
    "fridge": 11,
    "dresser": 11,
    "sidetable": 9,
    "shelf": 8,
    "coffeetable": 8,
    "tvstand": 8,
    "bed": 7,
    "sinkbasin": 7,
    "toilet": 7,
    "sofa": 6,
    "cart": 6,
    "cabinet": 5,
    "drawer": 5,
    "garbagecan": 5,
    "armchair": 5,
    "microwave": 5,
    "bathtubbasin": 4,
    "ottoman": 3,
    "safe": 2,
    "stoveburner": 2,
    "coffeemachine": 1,
    "handtowelholder": 1,
    "towelholder": 1,
    "toiletpaperhanger": 1,
    "toaster": 0,
    "laundryhamper": 0,
})
DEFAULT_MAX_ITEMS: int = 6

# --------------------------------------------------------------------------------------------------
# Task parameter space observed in real games
# --------------------------------------------------------------------------------------------------

# Target object types per task type: measured on 340 real games, united with the reference's
# lists (474 games) and public valid_unseen task ids (see the per-type comments).
TASK_OBJECTS: Mapping[str, frozenset[str]] = MappingProxyType({
    "pick_and_place_simple": frozenset({
        "alarmclock", "book", "bowl", "box", "candle", "cd", "cellphone", "cloth", "creditcard",
        "egg", "fork", "glassbottle", "handtowel", "keychain", "knife", "mug", "newspaper", "pan",
        "pen", "pencil", "peppershaker", "pillow", "remotecontrol", "soapbar", "soapbottle",
        "spraybottle", "statue", "tissuebox", "toiletpaper", "tomato", "vase", "watch",
        "winebottle",
        # valid_unseen pick_and_place_simple-SaltShaker-None-Drawer-10 (reference counts 34 types)
        "saltshaker",
        # train pick_and_place_simple-Laptop-None-Desk-306
        "laptop",
    }),
    "look_at_obj_in_light": frozenset({
        "alarmclock", "book", "bowl", "box", "cd", "creditcard", "keychain", "laptop", "mug",
        "pen", "pencil", "pillow", "statue", "tissuebox", "vase",
    }),
    "pick_clean_then_place_in_recep": frozenset({
        "bowl", "butterknife", "cloth", "dishsponge", "egg", "fork", "kettle", "knife", "ladle",
        "lettuce", "mug", "pan", "plate", "pot", "potato", "soapbar", "spatula", "tomato",
    }),
    "pick_heat_then_place_in_recep": frozenset({
        "apple", "cup", "egg", "mug", "plate", "potato", "tomato",
    }),
    "pick_cool_then_place_in_recep": frozenset({
        "apple", "bowl", "bread", "cup", "egg", "lettuce", "mug", "pan", "plate", "pot", "potato",
        "tomato", "winebottle",
    }),
    "pick_two_obj_and_place": frozenset({
        "alarmclock", "book", "box", "candle", "cd", "cellphone", "cloth", "creditcard", "cup",
        "glassbottle", "keychain", "knife", "newspaper", "pan", "pencil", "pillow",
        "remotecontrol", "soapbar", "soapbottle", "spatula", "spraybottle", "statue", "tissuebox",
        "toiletpaper", "vase", "watch",
        # valid_unseen pick_two_obj_and_place-PepperShaker-None-Drawer-10 (reference: 27 types)
        "peppershaker",
    }),
})

# Goal receptacle types per task type (reference lists united with measured ones). Look tasks have
# no goal receptacle: their "parent" slot is the lamp (LOOK_LAMPS).
TASK_PARENTS: Mapping[str, frozenset[str]] = MappingProxyType({
    "pick_and_place_simple": frozenset({
        "armchair", "bed", "cabinet", "cart", "coffeetable", "countertop", "desk", "diningtable",
        "drawer", "dresser", "garbagecan", "microwave", "ottoman", "safe", "shelf", "sidetable",
        "sofa", "toilet", "toiletpaperhanger",
    }),
    "look_at_obj_in_light": frozenset(),
    "pick_clean_then_place_in_recep": frozenset({
        "cabinet", "cart", "coffeemachine", "countertop", "diningtable", "drawer", "fridge",
        "garbagecan", "microwave", "shelf", "sidetable", "stoveburner", "toilet",
    }),
    "pick_heat_then_place_in_recep": frozenset({
        "cabinet", "coffeemachine", "countertop", "diningtable", "fridge", "garbagecan", "shelf",
        "sidetable",
    }),
    "pick_cool_then_place_in_recep": frozenset({
        "cabinet", "coffeemachine", "countertop", "diningtable", "garbagecan", "microwave",
        "shelf", "sidetable", "stoveburner",
    }),
    "pick_two_obj_and_place": frozenset({
        "armchair", "cabinet", "cart", "coffeetable", "countertop", "desk", "diningtable",
        "drawer", "dresser", "garbagecan", "ottoman", "safe", "shelf", "sidetable", "sofa",
        "toilet",
    }),
})

# Lamp types of look tasks. Upstream also allows floorlamp, but floor lamps are never in a
# receptacle in json_2.1.1, so every solvable real look task uses a desklamp.
LOOK_LAMPS: tuple[str, ...] = ("desklamp",)

# Where desk lamps sit (measured instance counts; see FIXTURE_HOSTS).
LAMP_RECEPTACLES: tuple[tuple[str, int], ...] = FIXTURE_HOSTS["desklamp"][1]

# Instances of the target type per game, (min, max) (measured: 1-4, pick-two 2-4; upstream
# PICKUP_REPEAT_MAX is 4). The reference's "2-6" does not match the 340 games we counted.
TARGET_COUNT: Mapping[str, tuple[int, int]] = MappingProxyType({
    t: ((2, 4) if t == "pick_two_obj_and_place" else (1, 4)) for t in TASK_TYPES
})
