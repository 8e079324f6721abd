"""Exact shortest plans for ALFWorld goals under full knowledge of the state.

- ``optimal_plan(world, state)``: the fewest admissible commands that reach ``goal_satisfied``.
- ``distance_to_goal(world, state)``: the length of that plan, without rendering it (a potential
  for reward shaping, a solvability check for generated tasks).

Why not a search over the engine: a breadth-first search over ``Game`` successors branches ~50
ways per step and real plans are 3-10 steps long. The goals are simple, though, so every shortest
plan is a short chain of *visits* - receptacles where one useful action happens: [put away what is
held] -> take a target -> [heat/cool/clean it at an appliance] -> put it into a destination (twice
for pick-two; take a target -> turn on a lamp for look). Between visits the cost is exact and
local: one ``go to`` when the next receptacle is at another location (receptacles can share one),
one ``open`` when a closed openable receptacle is taken from or put into for the first time, one
step for the action. We enumerate every chain of useful choices (target instance, source
receptacle, appliance, destination, where to put a useless held object) and keep the cheapest.
Receptacles that play the same role in a chain (same location class, same need to be opened, not
otherwise used by the chain) are interchangeable, so only one representative of each is tried;
that keeps a call well under 2 ms on real games. Exactness is checked against breadth-first search
over the engine in ``tests/envs/alfworld/test_planner.py``.

Semantics the chains account for, all from ``alfred.pddl`` as ``engine.py`` implements it: an
object can be listed in two receptacles and taking it from one leaves it in the other (so a held
or just-taken object may already count as being in a destination); heat/cool/clean and ``use``
need no open receptacle; ``use`` works on a lamp in any receptacle at the agent's location and the
look goal needs the lit lamp at the agent's final location; hands must be empty to take.
Never-useful actions (close, examine, look, inventory, slice, help) never appear in a plan.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from rspo_gym.envs.alfworld.engine import CLEANING_RECEPTACLES, COOLING_RECEPTACLES, HEATING_RECEPTACLES
from rspo_gym.envs.alfworld.goals import goal_satisfied, target_ok
from rspo_gym.envs.alfworld.world import State, World

__all__ = ["optimal_plan", "distance_to_goal"]

# A visit: (receptacle, verb, object). Verbs: take, move, heat, cool, clean, use, and "go" (just be
# at the receptacle's location; the object is -1).
Visit = tuple[int, str, int]

_INF = 1 << 30

# task type -> (treatment verb, appliance types, Item flag that makes an object treatable)
_TREATMENTS = {
    "pick_heat_then_place_in_recep": ("heat", HEATING_RECEPTACLES, "heatable"),
    "pick_cool_then_place_in_recep": ("cool", COOLING_RECEPTACLES, "coolable"),
    "pick_clean_then_place_in_recep": ("clean", CLEANING_RECEPTACLES, "cleanable"),
}


def optimal_plan(world: World, state: State) -> list[str] | None:
    """The shortest list of admissible commands from ``state`` to the goal.

    ``[]`` when the goal already holds, ``None`` when no command sequence reaches it.
    """
    found = _search(world, state)
    if found is None:
        return None
    return _render(world, state, found[1])


def distance_to_goal(world: World, state: State) -> int | None:
    """``len(optimal_plan(world, state))`` without building the command strings."""
    found = _search(world, state)
    return None if found is None else found[0]


# ------------------------------------------------------------------------------ static tables
@dataclass(frozen=True)
class _Tables:
    """What never changes in a world, precomputed once per ``World`` (see ``_tables``)."""

    loc: tuple[int, ...]
    openable: tuple[bool, ...]
    targets: tuple[int, ...]  # objects of the target type
    takeable: frozenset[int]  # ... that can be picked up
    treatable: frozenset[int]  # ... that the task's treatment applies to
    appliances: tuple[int, ...]  # receptacles of the treatment
    parents: frozenset[int]  # receptacles of the destination type
    dests: tuple[int, ...]  # ... that accept the target type (``move`` is admissible)
    lamps: tuple[int, ...]  # toggleable objects of the look task's lamp type
    hosts: dict[str, tuple[int, ...]]  # object type -> receptacles that accept it


_CACHE: dict[int, tuple[weakref.ref, _Tables]] = {}


def _tables(world: World) -> _Tables:
    """The static tables of ``world``, cached by identity (``World`` hashing walks every field)."""
    entry = _CACHE.get(id(world))
    if entry is not None and entry[0]() is world:
        return entry[1]
    task, receptacles, items = world.task, world.receptacles, world.items
    targets = tuple(o for o, item in enumerate(items) if item.otype == task.object_type)
    treatment = _TREATMENTS.get(task.task_type)
    if treatment is None:
        treatable: frozenset[int] = frozenset()
        appliances: tuple[int, ...] = ()
    else:
        _, kinds, flag = treatment
        treatable = frozenset(o for o in targets if getattr(items[o], flag))
        appliances = tuple(r for r, rec in enumerate(receptacles) if rec.rtype in kinds)
    parents = frozenset(r for r, rec in enumerate(receptacles) if rec.rtype == task.parent_type)
    hosts: dict[str, tuple[int, ...]] = {}
    for otype in {item.otype for item in items}:
        hosts[otype] = tuple(r for r, rec in enumerate(receptacles) if (rec.rtype, otype) in world.can_contain)
    tables = _Tables(
        loc=tuple(rec.location for rec in receptacles),
        openable=tuple(rec.openable for rec in receptacles),
        targets=targets,
        takeable=frozenset(o for o in targets if items[o].pickupable),
        treatable=treatable,
        appliances=appliances,
        parents=parents,
        dests=tuple(r for r in hosts.get(task.object_type, ()) if r in parents),
        lamps=tuple(
            o for o, item in enumerate(items) if task.toggle_type and item.otype == task.toggle_type and item.toggleable
        ),
        hosts=hosts,
    )
    key = id(world)
    _CACHE[key] = (weakref.ref(world, lambda _, key=key: _CACHE.pop(key, None)), tables)
    return tables


# ------------------------------------------------------------------------------------ search
class _Ctx:
    """One search: the state's fluents in the shapes the chain costs need."""

    def __init__(self, world: World, state: State, tables: _Tables) -> None:
        self.world, self.state, self.t = world, state, tables
        self.cur = state.agent_location
        self.held = state.held
        opened = state.opened
        self.closed = tuple(o and r not in opened for r, o in enumerate(tables.openable))
        watched = set(tables.targets) | set(tables.lamps)
        self.where: dict[int, list[int]] = {o: [] for o in watched}
        for r, contents in enumerate(state.contents):
            for o in contents & watched:
                self.where[o].append(r)
        self.ok = {o: target_ok(world, state, o) for o in tables.targets}

    def disposals(self, then: tuple[int, ...], specials: tuple[int, ...]) -> list[tuple[int, int, tuple[int, ...]]]:
        """Ways to empty the hands before the first take: ``(steps, J, receptacles opened)``.

        ``then``: receptacles the next visit may be at; for each, the cheapest receptacle J to put
        the held object into (only J's location class and whether it must be opened matter).
        ``specials``: closed receptacles the chain opens later anyway; opening one of them now
        to put the object in saves that later ``open``, so each is also tried. ``[(0, -1, ())]``
        when the hands are already empty; ``[]`` when the held object fits nowhere.
        """
        if self.held < 0:
            return [(0, -1, ())]
        loc, closed, cur = self.t.loc, self.closed, self.cur
        hosts = self.t.hosts[self.world.items[self.held].otype]
        best_at: dict[int, tuple[int, int]] = {}
        best_any = (_INF, -1)
        for j in hosts:
            cost = (loc[j] != cur) + closed[j] + 1
            at = best_at.get(loc[j])
            if at is None or cost < at[0]:
                best_at[loc[j]] = (cost, j)
            if cost < best_any[0]:
                best_any = (cost, j)
        if best_any[1] < 0:
            return []
        chosen: list[int] = []
        for r in then:
            at = best_at.get(loc[r])
            j = at[1] if at is not None and at[0] <= best_any[0] + 1 else best_any[1]
            if j not in chosen:
                chosen.append(j)
        host_set = set(hosts)
        for j in specials:
            if closed[j] and j in host_set and j not in chosen:
                chosen.append(j)
        return [((loc[j] != cur) + closed[j] + 1, j, (j,) if closed[j] else ()) for j in chosen]


def _search(world: World, state: State) -> tuple[int, list[Visit]] | None:
    """``(steps, visits)`` of a shortest plan, or ``None`` if the goal is unreachable."""
    if goal_satisfied(world, state):
        return 0, []
    ctx = _Ctx(world, state, _tables(world))
    kind = world.task.task_type
    if kind == "look_at_obj_in_light":
        return _look(ctx)
    if kind == "pick_two_obj_and_place":
        return _pick_two(ctx)
    return _place_one(ctx)


def _sources(ctx: _Ctx) -> list[tuple[int, int]]:
    """``(object, receptacle)`` pairs a target other than the held object can be taken from."""
    return [(o, r) for o in ctx.t.targets if o != ctx.held and o in ctx.t.takeable for r in ctx.where[o]]


def _place_one(ctx: _Ctx) -> tuple[int, list[Visit]] | None:
    """Pick-and-place and its heat/cool/clean variants: one suitable target in a destination."""
    t, loc, closed, cur, held = ctx.t, ctx.t.loc, ctx.closed, ctx.cur, ctx.held
    verb = _TREATMENTS[ctx.world.task.task_type][0] if t.appliances else ""
    best_place: dict[int, tuple[int, int]] = {}

    def place(at: int, opened: tuple[int, ...]) -> tuple[int, int]:
        """Cheapest ``(steps, D)`` to put the held target into a destination, from location ``at``."""
        found = best_place.get(at)
        if found is None:
            found = (_INF, -1)
            for d in t.dests:
                cost = (loc[d] != at) + closed[d] + 1
                if cost < found[0]:
                    found = (cost, d)
            best_place[at] = found
        for d in opened:
            if closed[d] and d in t.dests:
                cost = (loc[d] != at) + 1
                if cost < found[0]:
                    found = (cost, d)
        return found

    best: tuple[int, list[Visit]] | None = None

    def finish(cost: int, at: int, o: int, kept: bool, opened: tuple[int, ...], visits: list[Visit]) -> None:
        """Complete a chain holding ``o`` at location ``at``: treat it if needed, then place it.

        ``kept``: ``o`` is still listed in a destination (taken from its other receptacle).
        """
        nonlocal best
        steps: list[tuple[int, int, list[Visit]]] = []
        if ctx.ok[o]:
            steps.append((cost, at, visits))
        elif o in t.treatable:
            for a in t.appliances:
                steps.append((cost + (loc[a] != at) + 1, loc[a], [*visits, (a, verb, o)]))
        for total, where, chain in steps:
            if not kept:
                extra, d = place(where, opened)
                if d < 0:
                    return
                total += extra
                chain = [*chain, (d, "move", o)]
            if best is None or total < best[0]:
                best = (total, chain)

    if held >= 0 and held in ctx.ok:
        finish(0, cur, held, any(r in t.parents for r in ctx.where[held]), (), [])
    sources = [(o, r) for o, r in _sources(ctx) if ctx.ok[o] or o in t.treatable]
    specials = tuple({r for _, r in sources} | set(t.dests))
    for cost0, j, opened0 in ctx.disposals(tuple(r for _, r in sources), specials):
        at0 = loc[j] if j >= 0 else cur
        start: list[Visit] = [(j, "move", held)] if j >= 0 else []
        for o, r in sources:
            opened = opened0 if r in opened0 or not closed[r] else (*opened0, r)
            cost = cost0 + (loc[r] != at0) + (closed[r] and r not in opened0) + 1
            kept = any(x in t.parents for x in ctx.where[o] if x != r)
            finish(cost, loc[r], o, kept, opened, [*start, (r, "take", o)])
    return best


def _look(ctx: _Ctx) -> tuple[int, list[Visit]] | None:
    """Look: hold a target where a lit lamp is; acquire the target first, then light the lamp."""
    t, loc, closed, cur, held = ctx.t, ctx.t.loc, ctx.closed, ctx.cur, ctx.held
    toggled = ctx.state.toggled
    best: tuple[int, list[Visit]] | None = None

    def finish(cost: int, at: int, sites: list[tuple[int, int]], visits: list[Visit]) -> None:
        nonlocal best
        for lamp, r in sites:
            lit = lamp in toggled
            total = cost + (loc[r] != at) + (not lit)
            if best is None or total < best[0]:
                best = (total, [*visits, (r, "go" if lit else "use", lamp)])

    sites = [(lamp, r) for lamp in t.lamps for r in ctx.where[lamp]]
    if held >= 0 and held in ctx.ok:
        finish(0, cur, sites, [])
        return best
    sources = _sources(ctx)
    for cost0, j, opened0 in ctx.disposals(tuple(r for _, r in sources), tuple(r for _, r in sources)):
        at0 = loc[j] if j >= 0 else cur
        start: list[Visit] = [(j, "move", held)] if j >= 0 else []
        now_sites = [*sites, (held, j)] if j >= 0 and held in t.lamps else sites
        for o, r in sources:
            cost = cost0 + (loc[r] != at0) + (closed[r] and r not in opened0) + 1
            finish(cost, loc[r], now_sites, [*start, (r, "take", o)])
    return best


def _pick_two(ctx: _Ctx) -> tuple[int, list[Visit]] | None:
    """Pick-two: two distinct targets in one destination instance.

    Per destination D holding ``k`` targets already (``k`` < 2): bring ``2 - k`` more, the held
    target first if there is one, else after putting the held object away. Destinations without
    targets that share a location class and the need to be opened are interchangeable.
    """
    t, loc, closed, cur, held = ctx.t, ctx.t.loc, ctx.closed, ctx.cur, ctx.held
    sources = _sources(ctx)
    source_locs = {loc[r] for _, r in sources} | {cur}
    inside = {d: [o for o in t.targets if d in ctx.where[o]] for d in t.dests}
    dests: list[int] = []
    seen_class: set[tuple[int, bool]] = set()
    for d in t.dests:
        if inside[d]:
            dests.append(d)
            continue
        cls = (loc[d] if loc[d] in source_locs else -1, closed[d])
        if cls not in seen_class:
            seen_class.add(cls)
            dests.append(d)
    held_target = held >= 0 and held in ctx.ok
    best: tuple[int, list[Visit]] | None = None

    def offer(total: int, visits: list[Visit]) -> None:
        nonlocal best
        if best is None or total < best[0]:
            best = (total, visits)

    def second(d: int, first: int, cost: int, opened: tuple[int, ...], visits: list[Visit]) -> None:
        """From D (just filled with ``first``), fetch another target into D."""
        for o, r in sources:
            if o == first or o in inside[d]:
                continue
            offer(
                cost + 2 * (loc[r] != loc[d]) + (closed[r] and r not in opened) + 2,
                [*visits, (r, "take", o), (d, "move", o)],
            )

    disposals = ctx.disposals(tuple(r for _, r in sources), tuple({r for _, r in sources} | set(dests)))
    for d in dests:
        k = len(inside[d])
        if held_target and held not in inside[d]:
            cost = (loc[d] != cur) + closed[d] + 1
            if k:
                offer(cost, [(d, "move", held)])
            else:
                second(d, held, cost, (d,), [(d, "move", held)])
        for cost0, j, opened0 in disposals:
            at0 = loc[j] if j >= 0 else cur
            start: list[Visit] = [(j, "move", held)] if j >= 0 else []
            for o, r in sources:
                if o in inside[d]:
                    continue
                cost = cost0 + (loc[r] != at0) + (closed[r] and r not in opened0) + 1
                cost += (loc[d] != loc[r]) + (closed[d] and d not in opened0) + 1
                visits = [*start, (r, "take", o), (d, "move", o)]
                if k:
                    offer(cost, visits)
                else:
                    second(d, o, cost, (*opened0, r, d), visits)
    return best


# ---------------------------------------------------------------------------------- commands
def _render(world: World, state: State, visits: list[Visit]) -> list[str]:
    """The commands of a chain of visits: ``go to``/``open`` where needed, then the action."""
    receptacles, items = world.receptacles, world.items
    at = state.agent_location
    opened = set(state.opened)
    commands: list[str] = []
    for r, verb, o in visits:
        receptacle = receptacles[r]
        if receptacle.location != at:
            commands.append(f"go to {receptacle.name}")
            at = receptacle.location
        if verb in ("take", "move") and receptacle.openable and r not in opened:
            commands.append(f"open {receptacle.name}")
            opened.add(r)
        if verb == "take":
            commands.append(f"take {items[o].name} from {receptacle.name}")
        elif verb == "move":
            commands.append(f"move {items[o].name} to {receptacle.name}")
        elif verb == "use":
            commands.append(f"use {items[o].name}")
        elif verb != "go":
            commands.append(f"{verb} {items[o].name} with {receptacle.name}")
    return commands
