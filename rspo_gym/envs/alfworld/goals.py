"""ALFWorld's six goals (``gen/goal_library.py``) as pure checks over a ``World`` and ``State``.

Each check is the PDDL goal of its task type, quantified over every instance of the target types:
any object of the type counts, and "in the receptacle" is ALFWorld's ``inReceptacle`` (an object
the scene lists in two receptacles counts for both). Pick-two needs two distinct objects in the
same receptacle instance; look needs a toggled lamp in a receptacle at the agent's location and
an object of the target type in hand, in either order.
"""

from __future__ import annotations

from rspo_gym.envs.alfworld.world import State, World

__all__ = ["goal_satisfied", "lamp_on_here", "placed_targets", "target_ok"]



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


def placed_targets(world: World, state: State) -> int:
    """The most suitable targets inside one receptacle of the destination type."""
    best = 0
    for r in world.destinations:
        best = max(best, sum(1 for o in state.contents[r] if target_ok(world, state, o)))
    return best


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
    needed = 2 if kind == "pick_two_obj_and_place" else 1
    return placed_targets(world, state) >= needed
