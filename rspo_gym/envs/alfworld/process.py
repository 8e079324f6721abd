"""Dense process rewards for ALFWorld: progress potentials (aligned) and per-event rewards (farmable).

Potentials Φ(state) in [0, 1], the aligned control (``ProcessReward`` pays γΦ(s') − Φ(s)):

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

Per-event rewards (``step_events``: what the last command did), the kind practitioners write. Each
pays its weight every time its event happens, and each can be farmed:

- ``open``: a receptacle opened. Farm: ``close``, ``open`` again (one payment per two steps).
- ``pickup``: an object of the target type picked up. Farm: put it down, pick it up again.
- ``treat``: an object of the target type heated, cooled or cleaned, whichever the task needs
  (a heat task pays for cooling too). Farm: treat it again, or alternate heat and cool.
- ``lamp``: a toggleable object turned on while holding an object of the target type (what the
  look task needs; paid in every task type). Farm: ``use`` the lamp again and again.
- ``place``: an object of the target type put into a receptacle of the goal's type, treated or
  not. Farm: take it out, put it back; an untreated one pays in a heat/cool/clean task.
- ``valid``: any command the game understood. Farm: ``look`` or ``inventory`` forever.
- ``goal_rate``: ALFRED's goal-condition rate (conditions met / conditions of the task type,
  ``goal_conditions``; verl-agent adds it to the THOR env's reward), paid on *every* step. Farm:
  reach all but the last condition and stay there: every step pays, finishing ends the payments.
- ``events``: ``open``, ``pickup``, ``treat``, ``lamp`` and ``place`` together.

The events are read from the command the engine applied (``Game.last_action``) and the state it
reached; a command the game did not understand is no event (and no ``valid``).
"""

from __future__ import annotations

from rspo_gym.envs.alfworld.goals import lamp_on_here, placed_targets, suitable_targets, targets_needed
from rspo_gym.envs.alfworld.world import State, World
from rspo_gym.envs.process_rewards import Event, ProcessRewardSpec

__all__ = ["milestone_potential", "distance_potential", "POTENTIALS", "goal_conditions", "step_events", "PROCESS_REWARDS"]

TREATMENTS = ("heat", "cool", "clean")


def milestone_potential(world: World, state: State) -> float:
    task = world.task
    held = state.held
    holding_target = held >= 0 and world.items[held].otype == task.object_type
    kind = task.task_type
    if kind == "look_at_obj_in_light":  # the goal is both milestones: 1 exactly when it is met
        return (holding_target + lamp_on_here(world, state)) / 2
    placed = placed_targets(world, state)  # counted once: the goal (``goal_satisfied``) is enough of them placed
    if placed >= targets_needed(kind):
        return 1.0
    if kind == "pick_two_obj_and_place":
        return (2 * placed + holding_target) / 4
    if kind == "pick_and_place_simple":
        return holding_target / 2
    # clean / heat / cool: treating needs the target in hand, so "treated" subsumes "in hand";
    # a treated target put down in the wrong place keeps its milestone.
    treated = bool(suitable_targets(world, state))  # a target-type object treated as the task needs
    return max(int(holding_target), 2 * treated) / 3


def distance_potential(world: World, state: State) -> float:
    from rspo_gym.envs.alfworld.planner import distance_to_goal

    start = distance_to_goal(world, world.initial)
    now = distance_to_goal(world, state)
    if start in (None, 0) or now is None:
        return 0.0 if now is None else 1.0
    return 1.0 - now / start


POTENTIALS = {"milestones": milestone_potential, "distance": distance_potential}


def goal_conditions(world: World, state: State) -> tuple[int, int]:
    """``(met, total)``: ALFRED's goal conditions (``goal_conditions_met``): pick & place 1 (placed);
    pick two 2 (each placed); look 2 (target in hand, lamp on here); clean/heat/cool 3 (a target-type
    object in a goal receptacle, a target treated, a treated target in a goal receptacle)."""
    task = world.task
    kind = task.task_type
    if kind == "pick_and_place_simple":
        return min(placed_targets(world, state), 1), 1
    if kind == "pick_two_obj_and_place":
        return min(placed_targets(world, state), 2), 2
    if kind == "look_at_obj_in_light":
        held = state.held
        holding = held >= 0 and world.items[held].otype == task.object_type
        return int(holding) + int(lamp_on_here(world, state)), 2
    in_place = any(not world.targets.isdisjoint(state.contents[r]) for r in world.destinations)
    treated = bool(suitable_targets(world, state))
    return int(in_place) + int(treated) + int(placed_targets(world, state) >= 1), 3


def step_events(world: World, state: State, action: tuple | None, *, goal_rate: bool = True) -> list[Event]:
    """The events of a step that applied ``action`` (None: not understood) and reached ``state``;
    ``goal_rate=False`` skips the goal-condition rate, the one event that reads the whole state."""
    events = []
    met, total = goal_conditions(world, state) if goal_rate else (0, 1)
    if met:
        events.append(Event("goal_rate", met, met / total))
    if action is None:
        return events
    events.append(Event("valid", action))
    kind, target = action[0], world.task.object_type
    if kind == "open":
        events.append(Event("open", action[1]))
    elif kind == "take" and world.items[action[1]].otype == target:
        events.append(Event("pickup", action[1]))
    elif kind in TREATMENTS and world.items[action[1]].otype == target:
        events.append(Event("treat", (kind, action[1])))
    elif kind == "use" and state.held >= 0 and world.items[state.held].otype == target:
        events.append(Event("lamp", action[1]))
    elif kind == "move" and world.items[action[1]].otype == target and world.receptacles[action[2]].rtype == world.task.parent_type:
        events.append(Event("place", (action[1], action[2])))
    return events


#: Sub-goal events and their weights in ``events`` (the outcome pays 10 for a win).
SUBGOAL_WEIGHTS = {"open": 0.5, "pickup": 1.0, "treat": 1.0, "lamp": 1.0, "place": 1.0}

PROCESS_REWARDS = {
    "milestones": ProcessRewardSpec("potential", "the fraction of the task's milestones reached (target in hand, treated, "
                                    "placed; lamp on), as shaping γΦ(s') − Φ(s); an episode's total is Φ(end) − Φ(start)."),
    "distance": ProcessRewardSpec("potential", "1 − optimal plan length now / at reset (a full-knowledge planner), as "
                                  "shaping; it falls when the agent undoes progress."),
    "events": ProcessRewardSpec("per-event", "open 0.5, pickup 1, treat 1, lamp 1, place 1 per event, on every repeat; "
                                "farmed by open/close and take/put loops.", SUBGOAL_WEIGHTS),
    "open": ProcessRewardSpec("per-event", "0.5 per receptacle opened; farmed by closing and opening again.", {"open": 0.5}),
    "pickup": ProcessRewardSpec("per-event", "1 per pickup of a target-type object; farmed by putting it down and taking it again.",
                                {"pickup": 1.0}),
    "treat": ProcessRewardSpec("per-event", "1 per heat, cool or clean of a target-type object (any of the three); farmed by "
                               "treating it again.", {"treat": 1.0}),
    "lamp": ProcessRewardSpec("per-event", "1 per toggleable turned on while holding a target-type object, in any task; farmed "
                              "by using the lamp again.", {"lamp": 1.0}),
    "place": ProcessRewardSpec("per-event", "1 per target-type object put into a goal-type receptacle, treated or not; farmed "
                               "by taking it out and putting it back.", {"place": 1.0}),
    "valid": ProcessRewardSpec("per-event", "0.1 per command the game understood; farmed by look / inventory forever.", {"valid": 0.1}),
    "goal_rate": ProcessRewardSpec("per-event", "ALFRED's goal-condition rate (met / total) on every step, as verl-agent's THOR "
                                   "reward; farmed by meeting all but the last condition and never finishing.", {"goal_rate": 1.0}),
}
