"""The exact texts ALFWorld 0.4 prints, rendered straight from a ``World`` and ``State``.

Each function reproduces one production of ALFWorld's ``alfred.twl2`` grammar as TextWorld 1.7
derives it (list order, separators, the indefinite article that is always ``a``, and the quirks
of the original derivation, noted where they matter). No grammar is parsed at run time.
"""

from __future__ import annotations

from collections.abc import Sequence

from rspo_gym.envs.alfworld.world import State, World

__all__ = [
    "WELCOME",
    "NOTHING_HAPPENS",
    "HELP_TEXT",
    "display_list",
    "describe_receptacle",
    "describe_item",
    "inventory_text",
    "look_text",
    "intro_text",
]

WELCOME = "-= Welcome to TextWorld, ALFRED! =-"
NOTHING_HAPPENS = "Nothing happens."
# The grammar's help text starts with "\n", which TextWorld's derivation drops.
HELP_TEXT = (
    "Available commands:\n"
    "  look:                             look around your current location\n"
    "  inventory:                        check your current inventory\n"
    "  go to (receptacle):               move to a receptacle\n"
    "  open (receptacle):                open a receptacle\n"
    "  close (receptacle):               close a receptacle\n"
    "  take (object) from (receptacle):  take an object from a receptacle\n"
    "  move (object) to (receptacle):  place an object in or on a receptacle\n"
    "  examine (something):              examine a receptacle or an object\n"
    "  use (object):                     use an object\n"
    "  heat (object) with (receptacle):  heat an object using a receptacle\n"
    "  clean (object) with (receptacle): clean an object using a receptacle\n"
    "  cool (object) with (receptacle):  cool an object using a receptacle\n"
    "  slice (object) with (object):     slice an object using a sharp object\n"
)


def display_list(names: Sequence[str], *, article: bool = True) -> str:
    """TextWorld's list rendering: ``nothing``, ``a x``, ``a x, and a y``, ``a x, a y, and a z``."""
    if not names:
        return "nothing"
    parts = [f"a {n}" for n in names] if article else list(names)
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + ", and " + parts[-1]


def describe_receptacle(world: World, state: State, index: int) -> str:
    """``examineReceptacle.feedback``: what is on/in a receptacle, or that it is closed."""
    receptacle = world.receptacles[index]
    if receptacle.openable:
        if index not in state.opened:
            return f"The {receptacle.name} is closed."
        return f"The {receptacle.name} is open. In it, you see {_contents(world, state, index)}."
    return f"On the {receptacle.name}, you see {_contents(world, state, index)}."


def _contents(world: World, state: State, index: int) -> str:
    items = world.items
    return display_list([items[i].name for i in sorted(state.contents[index])])


def describe_item(world: World, state: State, index: int) -> str:
    """``examineObject.feedback``: the first matching rule of the grammar, in grammar order.

    Receptacle objects (mugs, bowls, pots, ...) always answer "This is a normal ... In it, you
    see ...": that rule comes first, whatever the object's state, and lists the scene's
    ``inReceptacleObject`` facts (e.g. a pot "in" another pot, from THOR). ``This X is off.`` can
    never be printed: its condition needs a ``not_istoggled`` fact, which no action creates.
    """
    item = world.items[index]
    name = item.name
    if item.receptacle_object:
        inside = display_list([world.items[i].name for i in world.nested.get(index, ())])
        return f"This is a normal {name}. In it, you see {inside}."
    clean, hot, cool = index in state.clean, index in state.hot, index in state.cool
    if index in state.sliced:
        if clean and hot:
            return f"This is a hot and clean sliced {name}."
        if clean and cool:
            return f"This is a cool and clean sliced {name}."
        if clean:
            return f"This is a clean sliced {name}."
        if hot:
            return f"This is a hot sliced {name}."
        if cool:
            return f"This is a cool sliced {name}."
    if clean and hot:
        return f"This is a hot and clean {name}."
    if clean and cool:
        return f"This is a cool and clean {name}."
    if hot:
        return f"This is a hot {name}."
    if clean:
        return f"This is a clean {name}."
    if cool:
        return f"This is a cold {name}."
    if item.toggleable and index in state.toggled:
        return f"This {name} is on."
    if item.sliceable and index in state.sliced:
        return f"This is a sliced {name}."
    return f"There's nothing special about {name}."


def inventory_text(world: World, state: State) -> str:
    if state.held < 0:
        return "You are not carrying anything."
    return f"You are carrying: {display_list([world.items[state.held].name])}."


def look_text(world: World, state: State, *, intro: bool = False) -> str:
    """``look.feedback``.

    At a location with receptacles: "You are facing the A, and B. Next to it, you see ...", where
    "next to it" lists, once per matching receptacle, the objects at this location that were
    taken out of one of its receptacles (TextWorld's ``not_inreceptacle`` facts). Elsewhere the
    agent is "in the middle of a room" and sees every receptacle of the game when the text is the
    game's intro (the grammar's location variable is unbound there), but nothing after ``look``
    (it is bound to the current, receptacle-free location): an upstream quirk we keep.
    """
    here = world.receptacles_at_location(state.agent_location)
    if here:
        facing = display_list([world.receptacles[r].name for r in here], article=False)
        taken_from = state.taken_from
        next_to = [
            item.name
            for i, item in enumerate(world.items)
            if state.agent_location in state.item_locations[i]
            for r in here
            if (i, r) in taken_from
        ]
        return f"You are facing the {facing}. Next to it, you see {display_list(next_to)}."
    seen = [r.name for r in world.receptacles] if intro else []
    return f"You are in the middle of a room. Looking quickly around you, you see {display_list(seen)}."


def intro_text(world: World, state: State) -> str:
    """The reset observation: banner, the room description, and the task."""
    return f"{WELCOME}\n\n{look_text(world, state, intro=True)}\n\nYour task is to: {world.task.text}"
