"""Dense progress signals for ALFWorld, as potentials Φ(state) in [0, 1].

- ``milestone_potential``: the fraction of the task's goal milestones reached (ALFRED's goal
  conditions, as in reference §6): pick & place: target in hand, target placed; clean/heat/cool:
  in hand, treated, treated target placed; pick two: first in hand, first placed, second in hand,
  both placed; look: target in hand, lamp on at the agent's location.
- ``distance_potential``: 1 − (optimal plan length now) / (optimal plan length at reset), from the
  full-knowledge planner; it falls when the agent undoes progress.

Both are Markov in the true state, so the shaping F = γΦ(s') − Φ(s) leaves the optimal policy
unchanged and, with γ = 1, sums over an episode to Φ(end) − Φ(start). How they can disagree with
the outcome: milestones pay for holding or treating an object in an episode that never places it
(a failed episode can earn 2/3 of the total); they ignore that a placed object must be the
*treated* one only through ``target_ok``; and the distance potential uses knowledge the agent
does not have (where unseen objects are), so it rewards "lucky" moves toward hidden objects.
"""

from __future__ import annotations

from rspo_gym.envs.alfworld.goals import goal_satisfied, lamp_on_here, placed_targets, target_ok
from rspo_gym.envs.alfworld.world import State, World

__all__ = ["milestone_potential", "distance_potential", "POTENTIALS"]


def milestone_potential(world: World, state: State) -> float:
    if goal_satisfied(world, state):
        return 1.0
    task = world.task
    held = state.held
    holding_target = held >= 0 and world.items[held].otype == task.object_type
    kind = task.task_type
    if kind == "look_at_obj_in_light":
        return (holding_target + lamp_on_here(world, state)) / 2
    if kind == "pick_two_obj_and_place":
        placed = placed_targets(world, state)
        return (2 * placed + holding_target) / 4
    if kind == "pick_and_place_simple":
        return holding_target / 2
    # clean / heat / cool: treating needs the target in hand, so "treated" subsumes "in hand";
    # a treated target put down in the wrong place keeps its milestone.
    treated = any(target_ok(world, state, o) for o in range(len(world.items)))
    return max(int(holding_target), 2 * treated) / 3


def distance_potential(world: World, state: State) -> float:
    from rspo_gym.envs.alfworld.planner import distance_to_goal

    start = distance_to_goal(world, world.initial)
    now = distance_to_goal(world, state)
    if start in (None, 0) or now is None:
        return 0.0 if now is None else 1.0
    return 1.0 - now / start


POTENTIALS = {"milestones": milestone_potential, "distance": distance_potential}
