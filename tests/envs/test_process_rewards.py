"""Per-event process rewards pay what they say, on scripted action sequences, farming loops included."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import pytest

import rspo_gym  # noqa: F401
from rspo_gym.envs import process_rewards
from rspo_gym.envs.alfworld.process import PROCESS_REWARDS as ALFWORLD_REWARDS
from rspo_gym.envs.alfworld.process import goal_conditions
from rspo_gym.envs.alfworld.scenes import SceneBuilder, tiny_kitchen
from rspo_gym.envs.alfworld.world import Task
from rspo_gym.envs.wrappers import ProcessReward

ALFWORLD = "rspo/ALFWorld-v0"
WEBSHOP = "rspo/WebShop-v0"

HEAT_APPLE = [  # tiny_kitchen: heat an apple, put it in the fridge
    "go to countertop 1", "take apple 1 from countertop 1", "go to microwave 1", "heat apple 1 with microwave 1",
    "go to fridge 1", "open fridge 1", "close fridge 1", "open fridge 1", "move apple 1 to fridge 1",
]


def _scene_env(world, name: str, **kwargs) -> ProcessReward:
    """ALFWorld on one hand-built scene, wrapped in the process reward ``name``."""
    env = gym.make(ALFWORLD)
    env.unwrapped.tasks = SimpleNamespace(size=1, world=lambda _task_id: world)
    wrapped = ProcessReward(env, name, **kwargs)
    wrapped.reset(options={"task_id": 0})
    return wrapped


def _pay(env: ProcessReward, actions: list[str]) -> list[tuple[float, tuple[str, ...]]]:
    out = []
    for action in actions:
        *_, info = env.step(action)
        out.append((round(info["process_reward"], 6), info["process_events"]))
    return out


def test_process_rewards_lists_both_kinds_for_both_envs():
    for env_id, potentials in ((ALFWORLD, {"milestones", "distance"}), (WEBSHOP, {"score"})):
        rewards = process_rewards(env_id)
        kinds = {name: text.split(":", 1)[0] for name, text in rewards.items()}
        assert {n for n, k in kinds.items() if k == "potential"} == potentials
        assert "events" in rewards and kinds["events"] == "per-event"
        assert set(kinds.values()) == {"potential", "per-event"}
        assert all(len(text.split(":", 1)[1].strip()) > 20 for text in rewards.values())
    assert {"open", "pickup", "treat", "lamp", "place", "valid", "goal_rate"} <= set(process_rewards(ALFWORLD))
    assert {"search", "product", "option", "price", "purchase"} <= set(process_rewards(WEBSHOP))
    with pytest.raises(gym.error.Error):
        process_rewards("rspo/Nowhere-v0")


@pytest.mark.parametrize("name", sorted(ALFWORLD_REWARDS))
def test_every_alfworld_name_wraps_and_steps(name):
    env = ProcessReward(gym.make(ALFWORLD, split="valid_seen"), name)
    env.reset(options={"task_id": 3})
    for action in env.unwrapped.expert_plan()[:4]:
        *_, info = env.step(action)
        assert isinstance(info["process_reward"], float)


def test_alfworld_events_pay_on_the_heat_task_and_open_repeats():
    env = _scene_env(tiny_kitchen(), "events")
    paid = _pay(env, HEAT_APPLE)
    assert paid == [
        (0.0, ()), (1.0, ("pickup",)), (0.0, ()), (1.0, ("treat",)), (0.0, ()),
        (0.5, ("open",)), (0.0, ()), (0.5, ("open",)), (1.0, ("place",)),
    ]
    assert env.unwrapped.game.won


def test_alfworld_open_close_loop_is_farmed_unless_once():
    loop = ["go to fridge 1"] + ["open fridge 1", "close fridge 1"] * 10
    farmed = _pay(_scene_env(tiny_kitchen(), "open"), loop)
    assert sum(p for p, _ in farmed) == pytest.approx(10 * 0.5)
    once = _pay(_scene_env(tiny_kitchen(), "open", once=True), loop)
    assert sum(p for p, _ in once) == pytest.approx(0.5)
    heavier = _pay(_scene_env(tiny_kitchen(), "open", weights={"open": 2.0}), loop)
    assert sum(p for p, _ in heavier) == pytest.approx(20.0)


def test_alfworld_take_put_loop_pays_pickup_every_time():
    loop = ["go to countertop 1"] + ["take apple 1 from countertop 1", "move apple 1 to countertop 1"] * 5
    assert sum(p for p, _ in _pay(_scene_env(tiny_kitchen(), "pickup"), loop)) == pytest.approx(5.0)


def test_alfworld_sub_goal_events_pay_once_per_key_with_once():
    """``once=True`` makes the sub-goal events a first-time bonus: the take/put and open/close loops
    pay their first event only, a second object or receptacle pays again."""
    loop = ["go to countertop 1"] + ["take apple 1 from countertop 1", "move apple 1 to countertop 1"] * 5
    assert [p for p, _ in _pay(_scene_env(tiny_kitchen(), "pickup", once=True), loop)] == [0.0, 1.0] + [0.0] * 9
    paid = _pay(_scene_env(tiny_kitchen(), "events", once=True), HEAT_APPLE + ["close fridge 1", "open fridge 1"])
    assert [p for p, _ in paid] == [0.0, 1.0, 0.0, 1.0, 0.0, 0.5, 0.0, 0.0, 1.0, 0.0, 0.0]  # the fridge's second open is unpaid


def test_alfworld_untreated_target_placed_still_pays_place():
    """The misalignment ``place`` documents: an unheated apple in the fridge pays, and does not win."""
    env = _scene_env(tiny_kitchen(), "place")
    paid = _pay(env, ["go to countertop 1", "take apple 1 from countertop 1", "go to fridge 1", "open fridge 1",
                      "move apple 1 to fridge 1"])
    assert paid[-1] == (1.0, ("place",))
    assert not env.unwrapped.game.won


def test_alfworld_goal_rate_pays_every_step_after_a_condition():
    env = _scene_env(tiny_kitchen(), "goal_rate")
    paid = _pay(env, HEAT_APPLE[:4] + ["look", "jump", "look"])
    assert [p for p, _ in paid] == [0.0, 0.0, 0.0, round(1 / 3, 6), round(1 / 3, 6), round(1 / 3, 6), round(1 / 3, 6)]
    world = tiny_kitchen()
    assert goal_conditions(world, world.initial) == (0, 3)


def test_alfworld_valid_pays_understood_commands_only():
    paid = _pay(_scene_env(tiny_kitchen(), "valid"), ["look", "jump", "inventory", "fly"])
    assert [p for p, _ in paid] == [0.1, 0.0, 0.1, 0.0]


def test_alfworld_lamp_pays_while_holding_the_target():
    scene = SceneBuilder()
    desk = scene.add_receptacle("desk")
    scene.add_receptacle("shelf")
    scene.add_item("desklamp", desk)
    scene.add_item("book", desk)
    world = scene.build(Task("look_at_obj_in_light", "book", None, "desklamp", "look at book under the desklamp."), name="lamp")
    env = _scene_env(world, "lamp")
    paid = _pay(env, ["go to desk 1", "use desklamp 1", "take book 1 from desk 1", "use desklamp 1", "use desklamp 1"])
    assert [p for p, _ in paid] == [0.0, 0.0, 0.0, 1.0, 1.0]


def test_unknown_names_and_weights_are_refused():
    with pytest.raises(ValueError, match="process reward 'vibes'"):
        ProcessReward(gym.make(ALFWORLD), "vibes")
    with pytest.raises(ValueError, match="unknown event weight"):
        ProcessReward(gym.make(ALFWORLD), "open", weights={"search": 1.0})
    with pytest.raises(ValueError, match="potential"):
        ProcessReward(gym.make(ALFWORLD), "milestones", weights={"open": 1.0})


# ---------------------------------------------------------------------------------------- WebShop

SMALL = {"num_products": 300, "split": "test"}


def _shop(name: str, **kwargs) -> tuple[ProcessReward, object]:
    env = ProcessReward(gym.make(WEBSHOP, **SMALL), name, **kwargs)
    env.reset(options={"task_id": 0})
    return env, env.unwrapped.session.goal


def _target_click(env) -> str:
    asin = env.unwrapped.session.goal.asin.lower()
    return f"click[{asin}]"


def test_webshop_search_pays_attribute_coverage_on_every_repeat():
    env, goal = _shop("search")
    assert goal.attributes
    query = " ".join(goal.attributes)
    paid = _pay(env, [f"search[{query}]", "click[back to search]", f"search[{query}]", "click[back to search]", "search[zzz]"])
    assert [p for p, _ in paid] == [1.0, 0.0, 1.0, 0.0, 0.0]
    half = _pay(_shop("search")[0], [f"search[{goal.attributes[0]}]"])
    assert half[0][0] == pytest.approx(round(1 / len(goal.attributes), 6))


def test_webshop_product_option_and_price_events_on_the_target():
    env, goal = _shop("events")
    session = env.unwrapped.session
    env.step(f"search[{goal.instruction_text[:200]}]")
    target = _target_click(env)
    if target not in env.unwrapped.session.admissible_actions():
        pytest.skip("the target is not on the first results page of this catalog")
    *_, info = env.step(target)
    assert set(info["process_events"]) <= {"product", "price"} and "product" in info["process_events"]
    item = session.catalog.item(session.current_item)
    assert ("price" in info["process_events"]) == (item.price <= goal.price_upper)
    wanted = [a for a in session.admissible_actions() if any(str(o).lower() in a for o in goal.options)]
    if wanted:
        first = _pay(env, [wanted[0], wanted[0]])  # clicking the selected value again pays again
        assert first == [(1.0, ("option",)), (1.0, ("option",))]
    again = _pay(env, ["click[< prev]", target])
    assert again[1][1] == info["process_events"] and again[1][0] == pytest.approx(info["process_reward"])


def test_webshop_option_and_product_pay_once_per_key_with_once():
    env, goal = _shop("events", once=True)
    env.step(f"search[{goal.instruction_text[:200]}]")
    target = _target_click(env)
    if target not in env.unwrapped.session.admissible_actions():
        pytest.skip("the target is not on the first results page of this catalog")
    *_, info = env.step(target)
    assert "product" in info["process_events"] and info["process_reward"] > 0
    wanted = [a for a in env.unwrapped.session.admissible_actions() if any(str(o).lower() in a for o in goal.options)]
    assert wanted, "the target product offers the goal's options"
    assert _pay(env, [wanted[0], wanted[0]]) == [(1.0, ("option",)), (0.0, ())]  # the repeat click is unpaid
    assert _pay(env, ["click[< prev]", target]) == [(0.0, ()), (0.0, ())]  # reopening the product too


def test_webshop_purchase_pays_the_purchase_score_once_at_buy_now():
    env, goal = _shop("purchase")
    paid = _pay(env, [f"search[{goal.instruction_text[:200]}]"])
    results = [a for a in env.unwrapped.session.admissible_actions() if a.startswith("click[b0")]
    paid += _pay(env, [results[0], "click[buy now]"])
    bought = env.unwrapped.session.purchase
    assert bought is not None and 0 < bought.score < 1
    assert paid == [(0.0, ()), (0.0, ()), (round(bought.score, 6), ("purchase",))]
    assert _pay(env, ["click[buy now]"]) == [(0.0, ())]  # the episode is over: nothing more to buy


def test_a_trainer_refuses_an_unknown_process_reward_or_event_weight_in_one_line():
    pytest.importorskip("torch")
    from rspo_gym.algos import GRPOTrainer
    from rspo_gym.errors import UserError

    with pytest.raises(UserError, match="unknown process reward 'vibes'"):
        GRPOTrainer(ALFWORLD, model="drrn", process_reward="vibes")
    with pytest.raises(UserError, match=r"unknown event weight\(s\) \['search'\]"):
        GRPOTrainer(ALFWORLD, model="drrn", process_reward="open", process_weights={"search": 1.0})
    with pytest.raises(UserError, match="'milestones' is a potential"):
        GRPOTrainer(ALFWORLD, model="drrn", process_weights={"open": 1.0})
