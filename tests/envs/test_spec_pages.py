"""The environment spec pages (``docs/env_alfworld.md``, ``docs/env_webshop.md``) say what the
envs do: their ``info`` keys and types (with and without ``ProcessReward``), ``gym.make``
arguments and defaults, process rewards, spaces and step limits are read from the pages' tables
and compared with the registered envs."""

from __future__ import annotations

import inspect
from pathlib import Path

import gymnasium as gym
import pytest

import rspo_gym
from rspo_gym import ProcessReward
from rspo_gym.envs import process_rewards
from tests.doc_tables import names, tables

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = {"rspo/ALFWorld-v0": "env_alfworld.md", "rspo/WebShop-v0": "env_webshop.md", "rspo/WebShop-v1": "env_webshop.md"}
#: small, fast settings for each env (the pages' tables do not depend on them)
SETTINGS = {"rspo/ALFWorld-v0": {"split": "valid_seen"}, "rspo/WebShop-v0": {"num_products": 200, "split": "test"},
            "rspo/WebShop-v1": {"num_products": 200, "split": "test"}}
CLASSES = {"rspo/ALFWorld-v0": rspo_gym.AlfworldEnv, "rspo/WebShop-v0": rspo_gym.WebShopEnv, "rspo/WebShop-v1": rspo_gym.WebShopEnv}
#: the Python type each documented type names (its outer type)
TYPES = {"str": str, "int": int, "bool": bool, "float": float, "dict": dict, "list[str]": list, "tuple[str, ...]": tuple}

ENV_IDS = pytest.mark.parametrize("env_id", list(PAGES))


def page_tables(env_id: str, first_column: str) -> list[list[dict[str, str]]]:
    """The tables of ``env_id``'s page whose first column is ``first_column``, in page order."""
    text = (DOCS / PAGES[env_id]).read_text(encoding="utf-8")
    return [table for table in tables(text) if table and next(iter(table[0])) == first_column]


def documented(rows: list[dict[str, str]], when: str) -> dict[str, str]:
    """``{key: documented type}`` of the rows whose ``on`` column lists ``when``."""
    return {names(row["key"])[0]: names(row["type"])[0] for row in rows if when in [w.strip() for w in row["on"].split(",")]}


def assert_info(info: dict, expected: dict[str, str]) -> None:
    assert sorted(info) == sorted(expected)
    wrong = {key: type(info[key]).__name__ for key, kind in expected.items() if not isinstance(info[key], TYPES[kind])}
    assert not wrong, f"types differ from the page: {wrong}"


def purchase(env: gym.Env) -> dict:
    """Play WebShop's scripted shopper until it buys; the purchase step's ``info``."""
    for _ in range(15):
        _, _, terminated, _, info = env.step(env.unwrapped.expert_action())
        if terminated:
            return info
    raise AssertionError("the shopper did not buy within 15 steps")


def test_documented_selects_rows_by_when():
    rows = [{"key": "`a`", "type": "`str`", "on": "reset, step"}, {"key": "`b`", "type": "`int`", "on": "purchase step"}]
    assert documented(rows, "reset") == {"a": "str"} and documented(rows, "purchase step") == {"b": "int"}
    with pytest.raises(AssertionError):
        assert_info({"a": "x", "c": 1}, {"a": "str"})


@ENV_IDS
def test_info_keys_and_types_are_the_pages(env_id):
    info_table = page_tables(env_id, "key")[0]
    env = gym.make(env_id, **SETTINGS[env_id])
    _, info = env.reset(options={"task_id": 0})
    assert_info(info, documented(info_table, "reset"))
    step = documented(info_table, "step")
    assert_info(env.step("jump")[-1], step)  # an invalid action: a plain step
    env.reset(options={"task_id": 0})
    if env_id.startswith("rspo/WebShop"):
        bought = purchase(env)
        assert_info(bought, {**step, **documented(info_table, "purchase step")})
        parts = [names(row["part"])[0] for row in page_tables(env_id, "part")[0]]
        assert parts == list(bought["reward_parts"])
    else:
        for command in env.unwrapped.expert_plan():
            _, reward, _, _, info = env.step(command)
        assert reward == 1.0
        assert_info(info, step)


@ENV_IDS
def test_process_reward_info_keys_are_the_pages(env_id):
    env_table, wrapper_table = page_tables(env_id, "key")[:2]
    for name in (None, "events"):  # the default potential, and a per-event reward
        env = ProcessReward(gym.make(env_id, **SETTINGS[env_id]), name)
        _, info = env.reset(options={"task_id": 0})
        assert_info(info, {**documented(env_table, "reset"), **documented(wrapper_table, "reset")})
        assert_info(env.step("look")[-1], {**documented(env_table, "step"), **documented(wrapper_table, "step")})


@ENV_IDS
def test_make_arguments_and_defaults_are_the_constructors(env_id):
    rows = page_tables(env_id, "argument")[0]
    parameters = list(inspect.signature(CLASSES[env_id]).parameters.values())
    assert [names(row["argument"])[0] for row in rows] == [p.name for p in parameters]
    assert [names(row["default"])[0] for row in rows] == [repr(p.default) for p in parameters]


@ENV_IDS
def test_process_reward_table_is_the_envs_list(env_id):
    rows = page_tables(env_id, "name")[0]
    documented_rewards = [(names(row["name"])[0], f"{row['kind']}: {row['what it pays, and how it can be farmed']}") for row in rows]
    assert documented_rewards == list(process_rewards(env_id).items())


@ENV_IDS
def test_spaces_and_step_limit_are_the_pages(env_id):
    properties = {row["property"]: row["value"] for row in page_tables(env_id, "property")[0]}
    env = gym.make(env_id, **SETTINGS[env_id])
    for space in ("action space", "observation space"):
        assert f"max_length={getattr(env, space.replace(' ', '_')).max_length}" in properties[space]
    assert f"{len(env.action_space.character_set)}-character charset" in properties["action space"]
    assert f"after {gym.spec(env_id).max_episode_steps} steps" in properties["truncation"]
    assert [m for m in env.unwrapped.metadata["render_modes"] if f"`{m}`" not in properties["render modes"]] == []


def test_alfworld_page_names_every_task_type():
    from rspo_gym.envs.alfworld.vocab import TASK_TYPES

    text = (DOCS / PAGES["rspo/ALFWorld-v0"]).read_text(encoding="utf-8")
    assert [t for t in TASK_TYPES if f"`{t}`" not in text] == []
