"""The ALFWorld 0.4 rules: admissible commands, their effects, and their feedback.

``Game`` plays one ``World``. It replaces TextWorld's ``PddlEnv`` + Fast-Downward + tatsu grammar
for the ``alfred`` domain with direct code: the preconditions and effects of every action of
``alfred.pddl`` and the feedback of ``alfred.twl2``, as the original engine applies them
(see ``text.py`` for the texts). Behaviour matched on purpose, quirks included:

- A command is understood only if it is exactly one of the admissible commands (after stripping
  surrounding whitespace); anything else prints ``Nothing happens.`` and changes nothing.
- ``go to`` a receptacle at the agent's current location is not admissible (several receptacles
  can share a location; the others there can still be opened, examined, taken from).
- Objects the scene lists in two receptacles stay listed in the other one after a pickup.
- ``examine`` an object is admissible only while holding it (the original engine never grounds the
  other branch of ``examineObject``'s precondition); heat/cool need no open appliance; ``use`` needs
  the lamp in a receptacle at the agent's location, open or not.
- ``slice`` is admissible with a knife in hand, as in the original, though no task needs it.
- ``help`` (ALFWorld >= 0.4) is always admissible.

Admissible commands are computed once per state change and cached, so invalid commands, which
leave the state unchanged, cost a dictionary lookup.
"""

from __future__ import annotations

from rspo_gym.envs.alfworld import text
from rspo_gym.envs.alfworld.goals import goal_satisfied
from rspo_gym.envs.alfworld.world import State, World

__all__ = ["Game", "CLEANING_RECEPTACLES", "HEATING_RECEPTACLES", "COOLING_RECEPTACLES", "SHARP_TYPES"]

# ``CleanObject`` accepts Sink or SinkBasin receptacles (the 2.1.1 domain; 0.4 kept SinkBasin,
# and no game has a receptacle of type Sink, so both domains behave the same).
CLEANING_RECEPTACLES = frozenset({"sinkbasin", "sink"})
HEATING_RECEPTACLES = frozenset({"microwave"})
COOLING_RECEPTACLES = frozenset({"fridge"})
SHARP_TYPES = frozenset({"knife", "butterknife"})

# Action tuples: (kind, *entity indices). Kinds are the PDDL action names, shortened.
Action = tuple


class Game:
    """One ALFWorld game in play.

    >>> from rspo_gym.envs.alfworld.scenes import tiny_kitchen
    >>> game = Game(tiny_kitchen())
    >>> game.reset().splitlines()[2]
    'You are in the middle of a room. Looking quickly around you, you see a countertop 1, a fridge 1, and a microwave 1.'
    >>> game.step("go to countertop 1")
    ('You arrive at countertop 1. On the countertop 1, you see a apple 1.', True)
    >>> game.step("fly away")
    ('Nothing happens.', False)
    """

    def __init__(self, world: World) -> None:
        self.world = world
        self.state: State = world.initial.copy()
        self._commands: dict[str, Action] | None = None
        self._sorted: list[str] | None = None
        self._won: bool | None = None
        self.derived: dict = {}
        """Values computed from the current state (the env's process potentials), kept until it
        changes: read-only and invalid commands, most of a weak policy's, leave it as it is."""
        self.last_action: Action | None = None
        """The action the last ``step`` applied (None after ``reset`` or a command not understood):
        what per-event process rewards (``events.py``) read."""

    # ----------------------------------------------------------------------------------- play
    def reset(self, state: State | None = None) -> str:
        """Restart from the initial state (or from ``state``) and return the intro text."""
        self.state = (state or self.world.initial).copy()
        self.last_action = None
        self._invalidate()
        return text.intro_text(self.world, self.state)

    def step(self, command: str) -> tuple[str, bool]:
        """Apply a command; returns ``(feedback, valid)``. Never raises for any string."""
        action = self.commands().get(command.strip()) if isinstance(command, str) else None
        self.last_action = action
        if action is None:
            return text.NOTHING_HAPPENS, False
        feedback = self._apply(action)
        return feedback, True

    @property
    def won(self) -> bool:
        if self._won is None:
            self._won = goal_satisfied(self.world, self.state)
        return self._won

    def admissible_commands(self) -> list[str]:
        """The admissible commands, sorted as ALFWorld lists them (a fresh list each call)."""
        if self._sorted is None:
            self._sorted = sorted(self.commands())
        return list(self._sorted)

    def commands(self) -> dict[str, Action]:
        """Command text -> action for the current state (cached until the state changes)."""
        if self._commands is None:
            self._commands = _admissible(self.world, self.state)
        return self._commands

    def set_state(self, state: State) -> None:
        """Jump to ``state`` (a copy is taken); used by planners and tests."""
        self.state = state.copy()
        self._invalidate()

    def _invalidate(self) -> None:
        self._commands = None
        self._sorted = None
        self._won = None
        self.derived.clear()

    # -------------------------------------------------------------------------------- effects
    def _apply(self, action: Action) -> str:
        world, state = self.world, self.state
        kind = action[0]
        # Read-only actions leave the state, hence the cached commands, as they are.
        if kind == "examine_receptacle":
            return text.describe_receptacle(world, state, action[1])
        if kind == "examine_item":
            return text.describe_item(world, state, action[1])
        if kind == "inventory":
            return text.inventory_text(world, state)
        if kind == "look":
            return text.look_text(world, state)
        if kind == "help":
            return text.HELP_TEXT
        self._invalidate()
        if kind == "goto":
            r = action[1]
            state.agent_location = world.receptacles[r].location
            name = world.receptacles[r].name
            return f"You arrive at {name}. {text.describe_receptacle(world, state, r)}"
        if kind == "open":
            r = action[1]
            state.opened.add(r)
            name = world.receptacles[r].name
            return f"You open the {name}. {text.describe_receptacle(world, state, r)}"
        if kind == "close":
            state.opened.discard(action[1])
            return f"You close the {world.receptacles[action[1]].name}."
        if kind == "take":
            o, r = action[1], action[2]
            state.contents[r].discard(o)
            state.held = o
            state.item_locations[o].discard(state.agent_location)
            state.taken_from.add((o, r))
            return f"You pick up the {world.items[o].name} from the {world.receptacles[r].name}."
        if kind == "move":
            o, r = action[1], action[2]
            state.contents[r].add(o)
            state.item_locations[o].add(state.agent_location)
            state.taken_from.discard((o, r))
            state.held = -1
            return f"You move the {world.items[o].name} to the {world.receptacles[r].name}."
        if kind in ("heat", "cool", "clean"):
            o, r = action[1], action[2]
            if kind == "heat":
                state.hot.add(o)
                state.cool.discard(o)
            elif kind == "cool":
                state.cool.add(o)
                state.hot.discard(o)
            else:
                state.clean.add(o)
            return f"You {kind} the {world.items[o].name} using the {world.receptacles[r].name}."
        if kind == "use":
            # ToggleObject flips isOn but sets isToggled for good; the text reads isToggled.
            state.toggled.add(action[1])
            return f"You turn on the {world.items[action[1]].name}."
        state.sliced.add(action[1])
        return f"You sliced the {world.items[action[1]].name} with the {world.items[action[2]].name}."


def _admissible(world: World, state: State) -> dict[str, Action]:
    """Every applicable grounded action of ``alfred.pddl``, keyed by its 0.4 command text."""
    receptacles, items = world.receptacles, world.items
    location = state.agent_location
    here = world.receptacles_at_location(location)
    commands: dict[str, Action] = {"look": ("look",), "inventory": ("inventory",), "help": ("help",)}
    for command, action, at in world.goto_commands:
        if at != location:
            commands[command] = action
    held = state.held
    hands_empty = held < 0
    held_item = items[held] if not hands_empty else None
    opened = state.opened
    for r in here:
        receptacle = receptacles[r]
        name = receptacle.name
        commands[f"examine {name}"] = ("examine_receptacle", r)
        accessible = True
        if receptacle.openable:
            if r in opened:
                commands[f"close {name}"] = ("close", r)
            else:
                commands[f"open {name}"] = ("open", r)
                accessible = False
        contents = state.contents[r]
        for o in contents:
            item = items[o]
            if item.toggleable:
                commands[f"use {item.name}"] = ("use", o)
            if hands_empty and accessible and item.pickupable:
                commands[f"take {item.name} from {name}"] = ("take", o, r)
        if held_item is not None:
            rtype = receptacle.rtype
            if accessible and (rtype, held_item.otype) in world.can_contain:
                commands[f"move {held_item.name} to {name}"] = ("move", held, r)
            if held_item.heatable and rtype in HEATING_RECEPTACLES:
                commands[f"heat {held_item.name} with {name}"] = ("heat", held, r)
            if held_item.coolable and rtype in COOLING_RECEPTACLES:
                commands[f"cool {held_item.name} with {name}"] = ("cool", held, r)
            if held_item.cleanable and rtype in CLEANING_RECEPTACLES:
                commands[f"clean {held_item.name} with {name}"] = ("clean", held, r)
    if held_item is not None:
        commands[f"examine {held_item.name}"] = ("examine_item", held)
        if held_item.otype in SHARP_TYPES:
            for o, item in enumerate(items):
                if item.sliceable and o != held and location in state.item_locations[o]:
                    commands[f"slice {item.name} with {held_item.name}"] = ("slice", o, held)
    return commands
