"""``rspo-gym webshop export``: the v1 catalog and goals in upstream WebShop's three file formats.

``data/export_upstream_view.json`` is what upstream's own ``load_products`` and ``get_goals`` made
of a 40-product export (``record_export_upstream.py``); the tests check it against our catalog
and goals, and check that our loader of upstream's data (``load_upstream``) gives back the same
products, goals and rewards, with upstream's own price draws and goal order."""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
from pathlib import Path

import gymnasium as gym
import pytest

import rspo_gym  # noqa: F401 - registers the envs
from rspo_gym.cli import main
from rspo_gym.envs.webshop import export
from rspo_gym.envs.webshop.catalog import Catalog
from rspo_gym.envs.webshop.catalog_data import OPTION_POOLS, TYPES, V1_EXTRA_GROUPS
from rspo_gym.envs.webshop.export import (
    attributes_record, export_names, export_webshop, option_value_text, pricing_text, product_record,
    upstream_option_value,
)
from rspo_gym.envs.webshop.goals import PRICE_RANGE, strip_price_clause
from rspo_gym.envs.webshop.goals_v1 import goals_v1_for
from rspo_gym.envs.webshop.reward import score, shared_lexicon_nouns
from rspo_gym.envs.webshop.upstream import load_upstream
from tests.envs.webshop.record_export_upstream import STRIDE, goal_digest, goal_row

VIEW = json.loads((Path(__file__).parent / "data" / "export_upstream_view.json").read_text(encoding="utf-8"))
N = VIEW["num_products"]
NAMES = ("items_shuffle.json", "items_ins_v2.json", "items_human_ins.json")


@pytest.fixture(scope="module")
def ours():
    """The catalog and its canonical goals, every one made once (the set's cache holds fewer)."""
    catalog = Catalog(N, 0, version=1)
    return catalog, list(goals_v1_for(catalog))


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """The export the recorded view was made from, written through the command line."""
    data = tmp_path_factory.mktemp("export") / "data"
    assert main(["webshop", "export", str(data), "--num-products", str(N)]) == 0
    return data


@pytest.fixture(scope="module")
def loaded(exported, tmp_path_factory):
    return load_upstream(exported, num_products=None, cache_dir=tmp_path_factory.mktemp("cache"))


def upstream_tag(item) -> str:
    """Upstream's price tag of an item's written pricing: float ``repr``, ``$a to $b``, ``$100.0``."""
    return " to ".join(f"${float(f'{x:.2f}')}" for x in item.price_range) or "$100.0"


def goal_key(goal) -> tuple:
    """What an export carries of a goal: all but the price limit (upstream draws its own)."""
    return goal.asin, strip_price_clause(goal.instruction_text), tuple(goal.attributes), tuple(goal.options)


def _all_option_values() -> set[str]:
    values = {v for _, _, pool in OPTION_POOLS.values() for v in pool}
    groups = [g for t in TYPES for g in t[4]] + [g for extras in V1_EXTRA_GROUPS.values() for g in extras]
    return values | {v for g in groups if not isinstance(g, str) for v in g[1]}


# ----------------------------------------------------------------------------- records


def test_file_names_are_upstreams_for_its_small_set_only():
    assert export_names(1000) == ("items_shuffle_1000.json", "items_ins_v2_1000.json", "items_human_ins.json")
    assert export_names(40) == export_names(1_181_436) == NAMES


def test_every_option_value_survives_upstreams_lowercasing_and_slash_rule():
    values = _all_option_values()
    assert "black | white" in values
    assert option_value_text("black | white") == "black/white"
    assert all(upstream_option_value(option_value_text(v)) == v for v in values)
    for bad in ("1/2 inch", "Black", "a | b/c", " black"):
        with pytest.raises(ValueError, match="cannot be written"):
            option_value_text(bad)


def test_pricing_is_written_as_upstreams_three_forms():
    catalog = Catalog(400, 0, version=1)
    kinds = {}
    for item in catalog:
        kinds.setdefault(len(item.price_range), item)
    single, ranged, unpriced = kinds[1], kinds[2], kinds[0]
    assert pricing_text(single) == single.price_text == f"${single.price:.2f}"
    a, b = ranged.price_range
    assert pricing_text(ranged) == f"${a:.2f} - ${b:.2f}" and ranged.price_text == f"${a:.2f} to ${b:.2f}"
    assert pricing_text(unpriced) == "" and unpriced.price_text == "$100.0"


def test_the_files_hold_every_product_and_every_goal_once(exported, ours):
    catalog, goals = ours
    assert sorted(p.name for p in exported.iterdir()) == sorted(NAMES)  # no temporary left
    products = json.loads((exported / NAMES[0]).read_text())
    attributes = json.loads((exported / NAMES[1]).read_text())
    human = json.loads((exported / NAMES[2]).read_text())
    assert products == [json.loads(json.dumps(product_record(item))) for item in catalog]
    assert list(attributes) == list(human) == [catalog.asin(i) for i in range(N)]
    first_goals = {}
    seen = collections.Counter()
    for asin, records in human.items():
        assert len(records) == len(goals) // N
        for record in records:
            g = int(record["assignment_id"].removeprefix("goal-"))
            seen[g] += 1
            goal = goals[g]
            assert (goal.asin, strip_price_clause(goal.instruction_text), goal.attributes, goal.options) == (
                asin, record["instruction"], tuple(record["instruction_attributes"]), tuple(record["instruction_options"]))
            assert [o.split(": ", 1)[1] for o in record["options"]] == record["instruction_options"]
            assert record["worker_id"] == "rspo_gym"
            first_goals.setdefault(asin, goal)
    assert sorted(seen) == list(range(len(goals))) and set(seen.values()) == {1}
    item = catalog.item(0)
    assert attributes[item.asin] == attributes_record(item, first_goals[item.asin])
    assert attributes[item.asin]["instruction"].startswith("Find me ")


# ----------------------------------------------------------------------------- upstream's own loader


def test_upstreams_own_loader_reads_our_products(ours):
    catalog, _ = ours
    assert len(VIEW["products"]) == N
    trailing_zero = 0
    for p, price, item in zip(VIEW["products"], VIEW["product_prices"], catalog):
        product = item.product
        assert (p["asin"], p["Title"], p["Description"], p["query"], p["product_category"], p["category"]) == (
            product.asin, product.name, product.description, product.query, product.category, item.category_top)
        assert p["BulletPoints"] == list(item.features) and p["Attributes"] == list(product.attributes)
        assert p["options"] == {k: list(v) for k, v in item.options.items()}
        assert p["pricing"] == (list(item.price_range) or [100.0])
        assert p["Price"] == upstream_tag(item)
        if p["Price"] != item.price_text:
            trailing_zero += 1
            assert any(f"{x:.2f}".endswith("0") for x in item.price_range)
        if len(item.price_range) < 2:
            assert price == item.price  # a single or missing price is not re-drawn
        else:
            assert item.price_range[0] <= price <= item.price_range[1]
    assert trailing_zero < N // 4


def test_upstreams_own_goals_are_ours_with_its_price_limits(ours):
    catalog, goals = ours
    human = VIEW["human_goals"]
    assert human["count"] == len(goals)  # no goal skipped: every v1 goal has attributes
    ours_by_key = {goal_key(goal): goal for goal in goals}
    prices = dict(zip((p["asin"] for p in VIEW["products"]), VIEW["product_prices"]))
    for asin, text, attributes, options, upper in human["every_stride"]:
        base = strip_price_clause(text)
        assert (asin, base, tuple(attributes), tuple(options)) in ours_by_key
        candidates = [x for x in PRICE_RANGE if x > prices[asin]][:4]
        assert upper in candidates[1:] and text == f"{base}, and price lower than {upper:.2f} dollars"
    # synthetic goals: one per combination of the product's option values
    combos = sum(math.prod(len(v) for v in item.options.values()) for item in catalog)
    assert VIEW["synthetic_goals"]["count"] == combos


# ----------------------------------------------------------------------------- our loader


def test_load_upstream_gives_back_our_products(loaded, ours):
    catalog, _ = ours
    back, _ = loaded
    assert len(back) == N
    for i in range(N):
        item, got = catalog.item(i), back.item(i)
        assert got.product.asin == item.asin and got.title == item.title
        assert got.description == item.description and got.features == item.features
        assert dict(got.options) == dict(item.options)
        assert got.product.attributes == item.product.attributes
        assert (got.product.query, got.product.category, got.category_top) == (
            item.product.query, item.product.category, item.category_top)
        assert got.search_document() == item.search_document()
        assert got.price_text == upstream_tag(item)
        if len(item.price_range) < 2:
            assert got.price == item.price
    assert [back.asin(i) for i in range(N)] == [p["asin"] for p in VIEW["products"]]
    assert [back.item(i).price for i in range(N)] == VIEW["product_prices"]  # upstream's draws, seed 233


def test_load_upstream_gives_back_our_goals_in_upstreams_order(loaded, ours, exported, tmp_path):
    _, goals = ours
    _, back = loaded
    assert collections.Counter(goal_key(g) for g in back) == collections.Counter(goal_key(g) for g in goals)
    rows = [goal_row(g.asin, g.instruction_text, g.attributes, g.options, g.price_upper) for g in back]
    assert rows[::STRIDE] == VIEW["human_goals"]["every_stride"]
    assert goal_digest(rows) == VIEW["human_goals"]["digest"]
    _, synthetic = load_upstream(exported, num_products=None, human_goals=False, cache_dir=tmp_path)
    rows = [goal_row(g.asin, g.instruction_text, g.attributes, dict(g.options), g.price_upper) for g in synthetic]
    assert goal_digest(rows) == VIEW["synthetic_goals"]["digest"]


def test_the_same_purchase_scores_the_same(loaded, ours):
    catalog, goals = ours
    back, back_goals = loaded
    nouns = shared_lexicon_nouns(catalog.noun_lexicon)
    by_key = {goal_key(goal): goal for goal in goals}
    checked = 0
    for k in range(0, len(back_goals), 97):
        got = back_goals[k]
        goal = dataclasses.replace(by_key[goal_key(got)], price_upper=got.price_upper)  # upstream's own draw
        target = catalog.index_of(goal.asin)
        other = (target + 1 + k) % N
        for i, values in ((target, goal.options), (target, [v[0] for v in catalog.item(target).options.values()]),
                          (other, [v[-1] for v in catalog.item(other).options.values()])):
            mine, theirs = catalog.item(i), back.item(i)
            want = score(mine.product, goal, list(values), theirs.price, nouns)
            assert score(theirs.product, got, list(values), theirs.price, nouns) == want
            checked += 1
        assert score(back.item(target).product, got, list(goal.options), back.item(target).price, nouns)[0] == 1.0
    assert checked >= 3 * 100


def test_the_env_plays_an_export_with_our_pages_and_search(exported, loaded, ours, tmp_path):
    catalog, _ = ours
    nouns = shared_lexicon_nouns(catalog.noun_lexicon)
    env = gym.make("rspo/WebShop-v1", data_dir=exported, num_products=None, split="test",
                   cache_dir=tmp_path, noun_extractor=nouns)
    index = catalog.build_search_index()
    clicked = 0
    for task in range(0, 500, 50):
        obs, info = env.reset(options={"task_id": task})
        query = strip_price_clause(info["task"])
        assert env.unwrapped.index.search(query) == index.search(query)
        obs, _, _, _, info = env.step(f"search[{query}]")
        asin = env.unwrapped.session.goal.asin
        if f"click[{asin.lower()}]" in info["admissible_actions"]:
            obs, *_ = env.step(f"click[{asin.lower()}]")
            clicked += 1
            item = catalog.item(catalog.index_of(asin))
            assert item.title in obs and f"Price: {upstream_tag(item)}" in obs
            assert all(v in obs for values in item.options.values() for v in values)
    assert clicked >= 5


# ----------------------------------------------------------------------------- writing


@pytest.mark.slow
def test_workers_write_the_same_bytes(exported, tmp_path, monkeypatch):
    monkeypatch.setattr(export, "_CHUNK", 7)
    export_webshop(tmp_path, N, 0, workers=2)
    for name in NAMES:
        assert (tmp_path / name).read_bytes() == (exported / name).read_bytes(), name


def test_a_failed_export_leaves_the_folders_files_as_they_were(tmp_path, monkeypatch):
    for name in NAMES:
        (tmp_path / name).write_text("previous")
    real = export.product_record
    calls = []

    def failing(item):
        calls.append(item)
        if len(calls) == 5:
            raise RuntimeError("killed")
        return real(item)

    monkeypatch.setattr(export, "product_record", failing)
    monkeypatch.setattr(export, "_CHUNK", 3)  # some chunks are written before the failure
    with pytest.raises(RuntimeError, match="killed"):
        export_webshop(tmp_path, 12, 0)
    assert sorted(os.listdir(tmp_path)) == sorted(NAMES)
    assert all((tmp_path / name).read_text() == "previous" for name in NAMES)


@pytest.mark.parametrize("args, needle", [
    (["--num-products", "0"], "--num-products must be an integer from 1 to 5,000,000, got 0"),
    (["--num-products", "-3"], "got -3"),
    (["--num-products", "5000001"], "got 5000001"),
])
def test_a_bad_size_is_one_line_exit_2(tmp_path, capsys, args, needle):
    assert main(["webshop", "export", str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and not (tmp_path / "out").exists()


def test_a_bad_folder_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["webshop", "export", str(afile), "--num-products", "3"]) == 2
    err = capsys.readouterr().err
    assert f"{afile} is not a folder" in err and err.count("\n") == 1
    assert main(["webshop", "export", str(afile / "sub"), "--num-products", "3"]) == 2
    err = capsys.readouterr().err
    assert "cannot create the folder" in err and err.count("\n") == 1

    def refused(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(export, "atomic_write", refused)
    assert main(["webshop", "export", str(tmp_path / "ro"), "--num-products", "3"]) == 2
    err = capsys.readouterr().err
    assert "cannot write in" in err and "Permission denied" in err and err.count("\n") == 1


def test_a_full_disk_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, monkeypatch):
    import errno

    real = export.product_record

    def full(item):
        if item.asin == Catalog(3, 0, version=1).asin(0):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(item)

    monkeypatch.setattr(export, "product_record", full)
    assert main(["webshop", "export", str(tmp_path), "--num-products", "3"]) == 2
    err = capsys.readouterr().err
    assert "no room in" in err and err.count("\n") == 1 and os.listdir(tmp_path) == []
