"""ALFWorld's six goals (``gen/goal_library.py``) as pure checks over a ``World`` and ``State``.

Each check is the PDDL goal of its task type, quantified over every instance of the target types:
any object of the type counts, and "in the receptacle" is ALFWorld's ``inReceptacle`` (an object
the scene lists in two receptacles counts for both). Pick-two needs two distinct objects in the
same receptacle instance; look needs a toggled lamp in a receptacle at the agent's location and
an object of the target type in hand, in either order.
"""

from __future__ import annotations

from rspo_gym.envs.alfworld.world import State, World

__all__ = ["goal_satisfied", "lamp_on_here", "placed_targets", "suitable_targets", "target_ok", "targets_needed"]



def target_ok(world: World, state: State, index: int) -> bool:
    """Whether object ``index`` is of the target type and in the treated state the task needs."""
    item = world.items[index]
    task = world.task
    if item.otype != task.object_type:
        return False
    kind = task.task_type
    if kind == "pick_clean_then_place_in_recep":
        return item.cleanable and index in state.clean
    if kind == "pick_heat_then_place_in_recep":
        return item.heatable and index in state.hot
    if kind == "pick_cool_then_place_in_recep":
        return item.coolable and index in state.cool
    return True


_TREATMENTS = {  # task type -> (the Item flag a target needs, the State set it must be in)
    "pick_clean_then_place_in_recep": ("cleanable", "clean"),
    "pick_heat_then_place_in_recep": ("heatable", "hot"),
    "pick_cool_then_place_in_recep": ("coolable", "cool"),
}


def suitable_targets(world: World, state: State) -> frozenset[int] | set[int]:
    """The objects ``target_ok`` holds for: the target type's (``World.targets``), and for a
    clean / heat / cool task those of them that can take the treatment and have had it."""
    kind = world.task.task_type
    treatment = _TREATMENTS.get(kind)
    if treatment is None:
        return world.targets
    capable, treated = treatment
    items = world.items
    return {o for o in getattr(state, treated) if o in world.targets and getattr(items[o], capable)}


def placed_targets(world: World, state: State) -> int:
    """The most suitable targets inside one receptacle of the destination type (a set
    intersection per receptacle: this runs at every state change, twice)."""
    suitable = suitable_targets(world, state)
    contents = state.contents
    return max((len(suitable & contents[r]) for r in world.destinations), default=0)


def lamp_on_here(world: World, state: State) -> bool:
    toggle = world.task.toggle_type
    for r in world.receptacles_at_location(state.agent_location):
        for o in state.contents[r]:
            item = world.items[o]
            if item.otype == toggle and item.toggleable and o in state.toggled:
                return True
    return False


def goal_satisfied(world: World, state: State) -> bool:
    kind = world.task.task_type
    if kind == "look_at_obj_in_light":
        held = state.held
        return held >= 0 and world.items[held].otype == world.task.object_type and lamp_on_here(world, state)
    return placed_targets(world, state) >= targets_needed(kind)


def targets_needed(task_type: str) -> int:
    """Suitable targets the goal of a placing task type needs in one destination (``placed_targets``)."""
    return 2 if task_type == "pick_two_obj_and_place" else 1
