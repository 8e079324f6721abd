"""A partially-observable ALFWorld expert that searches the room like ALFWorld's handcoded one.

- ``ExploringExpert(world, seed)``: ``reset()``, then ``act(game)`` for each next command.

Why: ``planner.optimal_plan`` knows where everything is, so its demonstrations never search.
Realistic demonstrations (SFT, DAgger, reference trajectories) must find things first. This expert
sees only what an agent sees: the task and the receptacle list of the intro, the contents of a
receptacle when its text shows them (``go to``/``open``/``examine`` while it is open or has no
door, remembered as of then and updated by its own takes and moves), the admissible commands, and
what it holds with its flags. It never reads an unvisited receptacle's contents.

Policy, per task type (ALFWorld's subgoal lists): find a target -> take it -> [heat/cool/clean it
at the appliance] -> put it into a receptacle of the destination type (pick-two: twice, into the
same instance; look: take it, then ``use`` a lamp seen somewhere). Searching visits the
receptacles not yet seen, most plausible first (``_tier``: specialised holders and the fridge for
food, then open surfaces, then any type that can contain the target, then the rest), opening the
closed ones. Every search step sees a new receptacle and every other step completes a subgoal, so
the expert always makes progress; ``random.Random(seed)`` only breaks ties between equally
plausible receptacles.
"""

from __future__ import annotations

import random

from rspo_gym.envs.alfworld.engine import CLEANING_RECEPTACLES, COOLING_RECEPTACLES, HEATING_RECEPTACLES, Game
from rspo_gym.envs.alfworld.goals import target_ok
from rspo_gym.envs.alfworld.world import World

__all__ = ["ExploringExpert"]

# task type -> (treatment verb, appliance types, Item flag of treatable objects)
_TREATMENTS = {
    "pick_heat_then_place_in_recep": ("heat", HEATING_RECEPTACLES, "heatable"),
    "pick_cool_then_place_in_recep": ("cool", COOLING_RECEPTACLES, "coolable"),
    "pick_clean_then_place_in_recep": ("clean", CLEANING_RECEPTACLES, "cleanable"),
}
# Where loose things lie in AI2-THOR rooms; searched before closed or specialised receptacles.
_SURFACES = frozenset(
    {"countertop", "diningtable", "sidetable", "desk", "coffeetable", "dresser", "shelf", "cart", "tvstand"}
)
# Receptacles made for one kind of object: if they can hold the target, it is probably there.
_HOLDERS = frozenset({"towelholder", "handtowelholder", "toiletpaperhanger", "coffeemachine", "stoveburner"})
# Food lives in the fridge as often as on the counter.
_FOOD = frozenset({"apple", "bread", "egg", "lettuce", "potato", "tomato"})
# Lamps are fixtures (no canContain facts); these are the furniture they stand on.
_LAMP_HOSTS = frozenset({"desk", "sidetable", "dresser", "nightstand", "shelf", "coffeetable", "diningtable"})
# Types that usually have a door: the first visit costs an extra ``open``.
_DOORS = frozenset({"cabinet", "drawer", "fridge", "microwave", "safe"})


class ExploringExpert:
    """Searches, takes, treats and places like ALFWorld's handcoded expert, from observations only.

    ``act`` assumes the command it returned last was executed on the same game (it records what
    that command showed); call ``reset`` whenever the game is reset.
    """

    def __init__(self, world: World, seed: int = 0) -> None:
        self.world = world
        self.seed = seed
        task = world.task
        self._treatment = _TREATMENTS.get(task.task_type)
        self.reset()

    def reset(self) -> None:
        """Forget everything seen: a new episode of the same world."""
        rng = random.Random(self.seed)
        count = len(self.world.receptacles)
        self._tiebreak = rng.sample(range(count), count)  # a fixed random rank per receptacle
        self._known: list[set[int]] = [set() for _ in range(count)]  # objects known to be inside
        self._seen: set[int] = set()  # receptacles whose whole contents were shown
        self._dest = -1  # pick-two: the destination instance, once chosen
        self._last: tuple | None = None

    # ------------------------------------------------------------------------------ observing
    def _observe(self, game: Game) -> None:
        """Record what the last command showed (the feedback text holds exactly this)."""
        action, self._last = self._last, None
        if action is None:
            return
        kind, state = action[0], game.state
        if kind in ("goto", "open", "examine_receptacle"):
            r = action[1]
            if not self.world.receptacles[r].openable or r in state.opened:
                self._seen.add(r)
                self._known[r] = set(state.contents[r])
        elif kind == "take":
            self._known[action[2]].discard(action[1])
        elif kind == "move":
            self._known[action[2]].add(action[1])

    # ------------------------------------------------------------------------------- deciding
    def act(self, game: Game) -> str:
        """The next command: always one of ``game``'s admissible commands."""
        self._observe(game)
        commands = game.commands()
        command = self._decide(game, commands)
        if command not in commands:
            command = self._search(game, commands, self.world.task.object_type)
        if command not in commands:
            command = "look"  # everything is seen and nothing else helps: wait harmlessly
        self._last = commands[command]
        return command

    def _decide(self, game: Game, commands: dict) -> str:
        """The next step of the task's subgoal list, given what is held and what was seen."""
        world, state = self.world, game.state
        task, held = world.task, state.held
        dests = self._dests()
        # Holding a target that can still serve (treatable if it must be treated)?
        useful = held >= 0 and world.items[held].otype == task.object_type and self._can_serve(held)
        if task.task_type == "look_at_obj_in_light":
            if useful:
                sites = [r for r in range(len(world.receptacles)) if self._lamps_in(r)]
                if sites:
                    site = self._nearest(game, sites)
                    lamp = min(self._lamps_in(site))
                    return self._at(game, commands, site, f"use {world.items[lamp].name}", access=False)
                return self._search(game, commands, task.toggle_type or "")
            return self._fetch(game, commands, exclude=())
        if task.task_type == "pick_two_obj_and_place":
            if self._dest < 0:
                with_one = [d for d in dests if d in self._seen and self._targets_in(d)]
                if with_one:
                    self._dest = self._nearest(game, with_one)
            if useful and dests and not (self._dest >= 0 and held in self._known[self._dest]):
                if self._dest < 0:
                    self._dest = self._nearest(game, dests)
                return self._put(game, commands, self._dest)
            exclude = tuple(self._known[self._dest]) if self._dest >= 0 else ()
            return self._fetch(game, commands, exclude=exclude)
        if useful and self._treatment and not target_ok(world, state, held):
            verb, kinds, _ = self._treatment
            appliances = [r for r, rec in enumerate(world.receptacles) if rec.rtype in kinds]
            if appliances:
                appliance = self._nearest(game, appliances)
                name = world.receptacles[appliance].name
                return self._at(game, commands, appliance, f"{verb} {world.items[held].name} with {name}", access=False)
        if useful and dests:
            return self._put(game, commands, self._nearest(game, dests))
        return self._fetch(game, commands, exclude=())

    def _fetch(self, game: Game, commands: dict, exclude: tuple[int, ...]) -> str:
        """Hands free -> take the nearest known target (not in ``exclude``), else search."""
        world, state = self.world, game.state
        if state.held >= 0:
            return self._drop(game, commands)
        spots = [
            (r, o)
            for r in range(len(world.receptacles))
            for o in sorted(self._targets_in(r))
            if o not in exclude and world.items[o].pickupable and self._can_serve(o)
        ]
        if not spots:
            return self._search(game, commands, world.task.object_type)
        r = self._nearest(game, [r for r, _ in spots])
        o = min(o for s, o in spots if s == r)
        return self._at(game, commands, r, f"take {world.items[o].name} from {world.receptacles[r].name}")

    def _put(self, game: Game, commands: dict, r: int) -> str:
        """Put the held object into ``r``."""
        name = self.world.items[game.state.held].name
        return self._at(game, commands, r, f"move {name} to {self.world.receptacles[r].name}")

    def _drop(self, game: Game, commands: dict) -> str:
        """Put a useless held object into the nearest receptacle that takes it."""
        world, state = self.world, game.state
        otype = world.items[state.held].otype
        hosts = [r for r, rec in enumerate(world.receptacles) if (rec.rtype, otype) in world.can_contain]
        if not hosts:
            return self._search(game, commands, world.task.object_type)
        return self._put(game, commands, self._nearest(game, hosts))

    def _search(self, game: Game, commands: dict, wanted: str) -> str:
        """Go to / open / examine the most plausible receptacle not seen yet."""
        world = self.world
        unseen = [r for r in range(len(world.receptacles)) if r not in self._seen]
        if not unseen:
            return "look"
        here = game.state.agent_location

        def rank(r: int) -> tuple:
            rec = world.receptacles[r]
            return (self._tier(rec.rtype, wanted), rec.rtype in _DOORS, rec.location != here, self._tiebreak[r])

        r = min(unseen, key=rank)
        name = world.receptacles[r].name
        if world.receptacles[r].location != here:
            return f"go to {name}"
        return f"open {name}" if f"open {name}" in commands else f"examine {name}"

    def _tier(self, rtype: str, wanted: str) -> int:
        """How early to search a receptacle type for an object type (0 first)."""
        world = self.world
        if wanted == world.task.toggle_type:
            return 1 if rtype in _LAMP_HOSTS else 3
        if (rtype, wanted) not in world.can_contain:
            return 3
        if rtype in _HOLDERS or (wanted in _FOOD and rtype in COOLING_RECEPTACLES):
            return 0
        return 1 if rtype in _SURFACES else 2

    # --------------------------------------------------------------------------------- helpers
    def _at(self, game: Game, commands: dict, r: int, command: str, *, access: bool = True) -> str:
        """``command`` at receptacle ``r``: go there first, and open it first when ``access``."""
        name = self.world.receptacles[r].name
        if self.world.receptacles[r].location != game.state.agent_location:
            return f"go to {name}"
        if access and f"open {name}" in commands:
            return f"open {name}"
        return command

    def _nearest(self, game: Game, receptacles: list[int]) -> int:
        """Prefer the current location, then ones seen open, then the tie-break rank."""
        here = game.state.agent_location
        recs = self.world.receptacles

        def rank(r: int) -> tuple:
            return (recs[r].location != here, recs[r].rtype in _DOORS and r not in self._seen, self._tiebreak[r])

        return min(receptacles, key=rank)

    def _can_serve(self, o: int) -> bool:
        """Whether object ``o`` can be given the task's treatment (a property of its type)."""
        return self._treatment is None or getattr(self.world.items[o], self._treatment[2])

    def _dests(self) -> list[int]:
        """Receptacles of the destination type (known from the intro's list)."""
        parent = self.world.task.parent_type
        return [r for r, rec in enumerate(self.world.receptacles) if rec.rtype == parent]

    def _targets_in(self, r: int) -> set[int]:
        items, otype = self.world.items, self.world.task.object_type
        return {o for o in self._known[r] if items[o].otype == otype}

    def _lamps_in(self, r: int) -> set[int]:
        items, ltype = self.world.items, self.world.task.toggle_type
        return {o for o in self._known[r] if items[o].otype == ltype and items[o].toggleable}
