"""Goal synthesis and the canonical split (rspo_gym.envs.webshop.goals)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from rspo_gym.envs.webshop.catalog import Catalog
from rspo_gym.envs.webshop.goals import (
    NO_PRICE_UPPER, PRICE_RANGE, GoalSet, goals_for, make_goal, price_clause, split_range,
    strip_price_clause, style_stats,
)
from rspo_gym.envs.webshop.reward import LexiconNouns, option_reward, score

REPO = Path(__file__).resolve().parents[3]
HUMAN_GOALS = Path("/work/shared/data/webshop/human_goals.json")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog(1000, seed=0)


@pytest.fixture(scope="module")
def goalset(catalog: Catalog) -> GoalSet:
    return goals_for(catalog)


@pytest.fixture(scope="module")
def first_goals(goalset: GoalSet) -> list:
    return goalset[:2000]


# ----------------------------------------------------------------------------- price clause


def test_price_clause_rule_on_hand_made_prices() -> None:
    assert PRICE_RANGE[0] == 10.0 and PRICE_RANGE[-1] == 990.0 and len(PRICE_RANGE) == 99
    uppers = Counter()
    for k in range(6000):
        upper, text = price_clause(23.5, random.Random(k))
        assert text == f", and price lower than {upper:.2f} dollars"
        uppers[upper] += 1
    # candidates [30, 40, 50, 60]: max of 2 sampled is 40 w.p. 1/6, 50 w.p. 1/3, 60 w.p. 1/2
    assert set(uppers) == {40.0, 50.0, 60.0}
    assert abs(uppers[40.0] / 6000 - 1 / 6) < 0.03
    assert abs(uppers[50.0] / 6000 - 1 / 3) < 0.03
    assert abs(uppers[60.0] / 6000 - 1 / 2) < 0.03
    assert price_clause(985.0, 1) == (NO_PRICE_UPPER, "")
    assert price_clause(980.0, 1) == (NO_PRICE_UPPER, "")  # only 990 is strictly greater
    assert price_clause(975.0, 1) == (990.0, ", and price lower than 990.00 dollars")
    assert {price_clause(30.0, k)[0] for k in range(200)} == {50.0, 60.0, 70.0}  # strict ">"
    assert price_clause(23.5, 7) == price_clause(23.5, 7)  # int seed -> deterministic


def test_goal_price_matches_target(catalog: Catalog, goalset: GoalSet, first_goals: list) -> None:
    for g, goal in enumerate(first_goals[:500]):
        item = catalog.item(goalset.locate(g)[0])
        candidates = [p for p in PRICE_RANGE if p > item.price][:4]
        if len(candidates) >= 2:
            assert goal.price_upper in candidates[1:]
            assert goal.instruction_text.endswith(
                f", and price lower than {goal.price_upper:.2f} dollars")
        else:
            assert goal.price_upper == NO_PRICE_UPPER and "price lower than" not in goal.instruction_text
        assert item.price <= goal.price_upper


# ----------------------------------------------------------------------------- content


def test_goals_satisfiable(catalog: Catalog, goalset: GoalSet, first_goals: list) -> None:
    nouns = LexiconNouns(catalog.noun_lexicon)
    for g, goal in enumerate(first_goals):
        item = catalog.item(goalset.locate(g)[0])
        total, parts = score(item.product, goal, list(goal.options), item.price, nouns)
        assert total == 1.0, (g, goal, parts)
    synthetic = goals_for(catalog, style="synthetic")
    for g in range(300):
        goal = synthetic[g]
        item = catalog.item(synthetic.locate(g)[0])
        selected = {name: value for name, value in goal.options}
        assert score(item.product, goal, selected, item.price, nouns)[0] == 1.0, goal


def test_goal_fields_attributes_and_options(catalog: Catalog, goalset: GoalSet,
                                            first_goals: list) -> None:
    n_opts = Counter()
    for g, goal in enumerate(first_goals):
        item = catalog.item(goalset.locate(g)[0])
        p = item.product
        assert (goal.name, goal.query, goal.category, goal.asin) == (p.name, p.query, p.category,
                                                                     p.asin)
        assert 1 <= len(goal.attributes) <= 3
        assert len(set(goal.attributes)) == len(goal.attributes)
        assert set(goal.attributes) <= set(p.attributes)
        assert len(goal.options) <= len(item.options)
        offered = [v for values in item.options.values() for v in values]
        for value in goal.options:
            assert isinstance(value, str) and value in offered
        # at most one value per option group
        groups = [name for name, values in item.options.items()
                  for v in goal.options if v in values]
        assert len(groups) == len(set(groups)) or len(set(goal.options)) < len(groups)
        n_opts[len(goal.options)] += 1
        assert goal.instruction_text == goal.instruction_text.strip()
        assert p.query in goal.instruction_text
    assert n_opts[0] and n_opts[1] and n_opts[2]  # some goals ask for none, some for several

    synthetic = goals_for(catalog, style="synthetic")
    for g in range(300):
        goal = synthetic[g]
        item = catalog.item(synthetic.locate(g)[0])
        assert goal.instruction_text.startswith("Find me ")
        names = [name for name, _ in goal.options]
        askable = [name for name, values in item.options.items()
                   if any(option_reward([v], [(name, v)])[0] == 1 for v in values)]
        assert names == sorted(askable)  # every (satisfiable) option group, sorted by name
        for name, value in goal.options:
            assert value in item.options[name]
            assert f"{name}: {value}" in goal.instruction_text


def test_make_goal_api(catalog: Catalog) -> None:
    assert make_goal(catalog, 5, 3) == make_goal(catalog, 5, 3)
    assert make_goal(catalog, 5, 3) != make_goal(catalog, 5, 4)
    assert make_goal(catalog, 5, random.Random(1)) == make_goal(catalog, 5, random.Random(1))
    assert make_goal(catalog, 5, 3, style="synthetic").instruction_text.startswith("Find me")
    with pytest.raises(ValueError):
        make_goal(catalog, 5, 3, style="fancy")
    with pytest.raises(TypeError):
        make_goal(catalog, 5, "3")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- order and splits


def test_split_sizes_and_disjointness(goalset: GoalSet) -> None:
    assert len(goalset) == 13_000 and goalset.goals_per_product == 13  # >= upstream's 12,087
    test, valid, train = goalset.split("test"), goalset.split("valid"), goalset.split("train")
    assert (test, valid, train) == (range(0, 500), range(500, 1500), range(1500, 13_000))
    assert not (set(test) & set(valid)) and not (set(valid) | set(test)) & set(train)
    # the permutation is a bijection: every (product, variant) exactly once
    located = {goalset.locate(g) for g in range(len(goalset))}
    assert len(located) == 13_000
    assert {p for p, _ in located} == set(range(1000))
    # the test split covers many products, not a block of them
    assert len({goalset.locate(g)[0] for g in test}) > 350
    with pytest.raises(ValueError):
        goalset.split("dev")


def test_small_catalog_splits() -> None:
    small = goals_for(Catalog(100, seed=1))
    assert small.goals_per_product == 121 and len(small) == 12_100
    tiny = goals_for(Catalog(100, seed=1), goals_per_product=10)
    assert len(tiny) == 1000
    assert (tiny.split("test"), tiny.split("valid"), tiny.split("train")) == (
        range(0, 500), range(500, 1000), range(1000, 1000))
    assert split_range("test", 300) == range(0, 300)
    assert split_range("valid", 300) == range(300, 300)
    assert split_range("train", 300) == range(300, 300)


def test_large_catalog_is_lazy() -> None:
    big = goals_for(Catalog(1_000_000, seed=0))
    assert len(big) == 1_000_000 and big.goals_per_product == 1
    assert len(big.split("train")) == 1_000_000 - 1500
    goal = big[999_999]
    assert goal.asin == big.catalog.asin(big.locate(999_999)[0])
    assert big[-1] == goal


def test_determinism_and_independence_from_other_seeds(catalog: Catalog,
                                                      first_goals: list) -> None:
    random.seed(12345)  # the global generator must play no part
    again = goals_for(Catalog(1000, seed=0))
    assert again[:2000] == first_goals
    random.seed(999)
    assert goals_for(Catalog(1000, seed=0))[:50] == first_goals[:50]
    # a goal's content depends on (catalog seed, product, variant, style) only, not on the size
    assert make_goal(Catalog(1000, seed=0), 17, 2) == make_goal(Catalog(5000, seed=0), 17, 2)
    # another catalog seed gives other goals and another order
    other = goals_for(Catalog(1000, seed=1))
    assert [other.locate(g) for g in range(50)] != [again.locate(g) for g in range(50)]
    # styles have their own orders
    synthetic = goals_for(catalog, style="synthetic")
    assert [synthetic.locate(g) for g in range(50)] != [again.locate(g) for g in range(50)]


def test_deterministic_across_processes(first_goals: list) -> None:
    code = (
        "import json; from rspo_gym.envs.webshop.catalog import Catalog;"
        "from rspo_gym.envs.webshop.goals import goals_for;"
        "gs = goals_for(Catalog(1000, seed=0));"
        "print(json.dumps([[g.instruction_text, list(g.attributes), list(g.options),"
        " g.price_upper, g.asin] for g in gs[:40]]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "4242", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=REPO).stdout
    ours = [[g.instruction_text, list(g.attributes), list(g.options), g.price_upper, g.asin]
            for g in first_goals[:40]]
    assert json.loads(out) == ours


# ----------------------------------------------------------------------------- style


def test_style_statistics(first_goals: list) -> None:
    ours = style_stats(g.instruction_text for g in first_goals)
    if HUMAN_GOALS.exists():
        real = style_stats(json.loads(HUMAN_GOALS.read_text()))
        print("\nstatistic        ours     real")
        for key in ("mean_words", "p10", "p50", "p90", "color", "size", "digit", "pack_of"):
            print(f"{key:<15} {ours[key]:7.3f}  {real[key]:7.3f}")
        for key in ours["openings"]:
            print(f"{key!r:<17}{ours['openings'][key]:6.3f}  {real['openings'][key]:7.3f}")
    assert 10 <= ours["mean_words"] <= 20
    assert all(share > 0.02 for share in ours["openings"].values()), ours["openings"]
    assert 0.2 <= ours["openings"]["i am looking"] <= 0.36
    assert 0.25 <= ours["color"] <= 0.70
    assert 0.20 <= ours["digit"] <= 0.60
    # the stats ignore the price clause, which real (unpriced) instructions do not have
    assert strip_price_clause("a b, and price lower than 40.00 dollars") == "a b"
