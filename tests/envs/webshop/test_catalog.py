"""Synthetic WebShop catalog: determinism, taxonomy, options, prices, reward wiring, real loader."""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from rspo_gym.envs.webshop import catalog as catalog_mod
from rspo_gym.envs.webshop.catalog import CATEGORY_TOPS, Catalog, CatalogItem
from rspo_gym.envs.webshop.model import Goal
from rspo_gym.envs.webshop.reward import LexiconNouns, score, type_reward
from rspo_gym.envs.webshop.search import search_text

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def cat1k():
    return Catalog(1000, seed=0)


@pytest.fixture(scope="module")
def items10k():
    return list(Catalog(10_000, seed=3))


def _fingerprint(item: CatalogItem) -> tuple:
    return (item.product, tuple(item.options.items()), item.price_text, item.price,
            item.features, item.reviews, item.rating, item.category_top)


def test_deterministic_and_cache_eviction(cat1k):
    first = [_fingerprint(cat1k.item(i)) for i in (0, 1, 999)]
    for i in range(1000):  # more than the LRU size: evicts 0 and 1
        cat1k.item(i)
    again = Catalog(1000, seed=0)
    assert [_fingerprint(cat1k.item(i)) for i in (0, 1, 999)] == first
    assert [_fingerprint(again.item(i)) for i in (0, 1, 999)] == first
    assert cat1k.item(5) is cat1k.item(5)  # cached
    assert _fingerprint(next(iter(again))) == first[0]


def test_same_in_subprocess_with_other_hash_seed(cat1k):
    code = ("from rspo_gym.envs.webshop.catalog import Catalog;"
            "c = Catalog(1000, seed=0); print(repr([c.item(i).search_document() for i in (0, 7)]),"
            " repr([c.item(i).price for i in (0, 7)]))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    expected = (repr([cat1k.item(i).search_document() for i in (0, 7)]) + " "
                + repr([cat1k.item(i).price for i in (0, 7)]))
    assert out == expected


def test_seeds_differ():
    a, b = Catalog(50, seed=0), Catalog(50, seed=1)
    assert sum(a.item(i).product.name != b.item(i).product.name for i in range(50)) > 40
    assert {a.asin(i) for i in range(50)}.isdisjoint({b.asin(i) for i in range(50)})


def test_asins_unique_and_invertible(items10k):
    asins = [it.asin for it in items10k]
    assert len(set(asins)) == len(asins)
    assert all(len(a) == 10 and a.startswith("B0") and a.isalnum() and a.upper() == a
               for a in asins)
    c = Catalog(10_000, seed=3)
    for i in (0, 1, 4321, 9999):
        assert c.index_of(asins[i]) == i and c.index_of(asins[i].lower()) == i
        assert asins[i] in c
    with pytest.raises(KeyError):
        c.index_of("B000000000")  # decodes to some index, almost surely >= 10k; or invalid
    with pytest.raises(KeyError):
        c.index_of("not-an-asin")
    assert "B0XYZ" not in c
    small = Catalog(10, seed=3)
    assert sum(a in small for a in asins) == 10  # first 10 items share the seed's asins


def test_taxonomy(cat1k):
    types = cat1k.product_types
    assert len(types) >= 100
    assert {t.category_top for t in types} == set(CATEGORY_TOPS) and len(CATEGORY_TOPS) == 5
    assert len({t.query for t in types}) == len(types)
    for t in types:
        assert 3 <= len(t.breadcrumb) <= 6, t.breadcrumb
        assert t.nouns and set(t.nouns) <= cat1k.noun_lexicon
    counts = {}
    for i in range(1000):
        counts[cat1k.type_index_of(i)] = counts.get(cat1k.type_index_of(i), 0) + 1
    assert set(counts) == {t.index for t in types}
    assert min(counts.values()) >= 1000 // len(types)
    # near-type distractors with a shared breadcrumb prefix and head noun exist
    running = next(t for t in types if t.query == "men's running shoes")
    walking = next(t for t in types if t.query == "men's walking shoes")
    assert walking.index in running.near_types
    assert running.breadcrumb[:4] == walking.breadcrumb[:4]
    assert sum(bool(t.near_types) for t in types) >= 20
    LexiconNouns(cat1k.noun_lexicon)  # valid single-token vocabulary


def test_items_shape(items10k):
    tops = set()
    for it in items10k[:2000]:
        p = it.product
        assert p.query.lower() in p.name.lower()  # title carries the type phrase
        assert 3 <= len(p.attributes) <= 10 and len(set(p.attributes)) == len(p.attributes)
        assert all(a == a.lower() for a in p.attributes)
        assert p.bullet_points == it.features and it.features
        assert len(it.options) <= 3
        assert all(2 <= len(v) <= 8 for v in it.options.values())
        assert it.category_top in CATEGORY_TOPS and p.category.split(" \u203a ")[0]
        tops.add(it.category_top)
        assert all(1 <= r.score <= 5 for r in it.reviews)
        assert (it.rating is None) == (not it.reviews)
    assert tops == set(CATEGORY_TOPS)
    # some attributes are shown only on the description/features sub-pages, some nowhere
    only_sub, hidden = 0, 0
    for it in items10k[:500]:
        p = it.product
        for a in p.attributes:
            in_title = a in p.name.lower()
            in_sub = a in p.description.lower() or a in " ".join(p.bullet_points).lower()
            only_sub += in_sub and not in_title
            hidden += not in_sub and not in_title
    assert only_sub > 500 and hidden > 100
    assert sum(not it.options for it in items10k) > 100  # some products offer no options


def test_option_collisions(items10k):
    def any_item(pred):
        return any(pred(v) for it in items10k for v in [it.options])

    assert any_item(lambda o: {"large", "x-large"} <= set(o.get("size", ())))
    assert any_item(lambda o: any(" | " in c or c == "navy blue" for c in o.get("color", ())))
    assert any_item(lambda o: {"8.5", "8.5 wide"} <= set(o.get("size", ())))
    assert any_item(lambda o: {"queen", "king"} <= set(o.get("size", ())))
    assert any_item(lambda o: {"pack of 2", "pack of 12"} <= set(o.get("size", ())))
    assert any_item(lambda o: any("ounce (pack of" in s for s in o.get("size", ())))
    assert any_item(lambda o: "flavor" in o)


def test_prices(items10k):
    prices = [it.price for it in items10k]
    assert 10 <= statistics.median(prices) <= 60
    assert all(1.0 <= p <= 999.0 for p in prices)
    ranges = [it for it in items10k if len(it.price_range) == 2]
    assert 0.20 <= len(ranges) / len(items10k) <= 0.35
    for it in ranges[:200]:
        a, b = it.price_range
        assert a <= it.price <= b and it.price_text == f"${a:.2f} to ${b:.2f}"
    unpriced = [it for it in items10k if not it.price_range]
    assert 0 < len(unpriced) < 0.05 * len(items10k)
    assert all(it.price == 100.0 and it.price_text == "$100.0" for it in unpriced)
    single = next(it for it in items10k if len(it.price_range) == 1)
    assert single.price_text == f"${single.price:.2f}"


def test_reward_self_goal_is_one_and_distractors_are_not(cat1k):
    nouns = LexiconNouns(cat1k.noun_lexicon)
    for i in range(0, 1000, 37):
        it = cat1k.item(i)
        p = it.product
        goal = Goal(name=p.name, query=p.query, category=p.category, attributes=p.attributes[:3],
                    options=tuple(v[-1] for v in it.options.values()), price_upper=it.price + 10)
        total, parts = score(p, goal, {k: v[-1] for k, v in it.options.items()}, it.price, nouns)
        assert total == 1.0, parts
    # r_type over goals from one type and purchases from its near types / unrelated types
    seen = set()
    types = cat1k.product_types
    by_type = {}
    for i in range(1000):
        by_type.setdefault(cat1k.type_index_of(i), []).append(cat1k.item(i))
    for t in types:
        for g_item in by_type[t.index][:3]:
            goal = g_item.product
            for other in (*t.near_types, (t.index + 50) % len(types)):
                for b_item in by_type[other][:3]:
                    seen.add(type_reward(b_item.product, goal, nouns)[0])
    assert {1.0, 0.5, 0.0} <= seen
    assert seen <= {1.0, 0.5, 0.1, 0.0}
    run = next(t for t in types if t.query == "men's running shoes")
    walk = next(t for t in types if t.query == "women's sandals")
    r, info = type_reward(by_type[walk.index][0].product, by_type[run.index][0].product, nouns)
    assert info["query_match"] is False


def test_search_document_format(cat1k):
    it = cat1k.item(3)
    doc = cat1k.search_document(3)
    assert doc == search_text(it.title, it.description, it.features, it.options)
    assert doc == doc.lower() and doc.startswith(it.title.lower())
    if it.options:
        name = next(iter(it.options))
        assert f"{name}: {', '.join(it.options[name])}" in doc


def test_parallel_search_documents_match_single_process(monkeypatch):
    """The worker-process path (used from ``_PARALLEL_MIN`` products, forced here on a small
    catalog with small chunks, so chunks are resubmitted past the look-ahead) gives the
    single-process documents, in order; an out-of-order read falls back and stays correct."""
    n = 2_500
    expected = [Catalog(n, seed=5)._search_document(i) for i in range(n)]
    monkeypatch.setattr(catalog_mod, "_PARALLEL_MIN", 1)
    monkeypatch.setattr(catalog_mod, "_CHUNK", 300)
    assert n > catalog_mod._AHEAD * 300
    cat = Catalog(n, seed=5)
    got = []
    for i in range(n):
        got.append(cat.search_document(i))
        if i == 0:
            assert cat._pf is not None  # the scan is served by the workers
    assert got == expected
    assert cat._pf is None  # the pool is shut down at the end of the scan
    order = (7, 0, 1, 2, 1999)  # 0 starts a new scan, 1999 breaks it off
    assert [cat.search_document(i) for i in order] == [expected[i] for i in order]
    assert cat._pf is None


def test_search_index_small():
    c = Catalog(300, seed=1)
    index = c.build_search_index()
    assert len(index) == 300
    hits = index.search(c.item(42).title.lower(), k=5)
    assert hits[0] == 42


@pytest.mark.parametrize("bad", [0, -1, 5_000_001])
def test_num_products_range(bad):
    with pytest.raises(ValueError):
        Catalog(bad)


@pytest.mark.parametrize("kwargs", [{"num_products": 1.5}, {"num_products": True},
                                    {"num_products": "10"}, {"seed": "0"}, {"seed": 1.0}])
def test_argument_types(kwargs):
    with pytest.raises(TypeError):
        Catalog(**kwargs)


def test_item_index_validation():
    c = Catalog(5)
    assert Catalog(5_000_000).asin(4_999_999).startswith("B0")
    with pytest.raises(IndexError):
        c.item(5)
    with pytest.raises(IndexError):
        c.item(-1)
    with pytest.raises(TypeError):
        c.item("0")
    with pytest.raises(TypeError):
        c.index_of(3)
    assert len(c) == 5 and len(list(c)) == 5 and "seed=0" in repr(c)


def test_module_exports():
    for name in catalog_mod.__all__:
        assert hasattr(catalog_mod, name)
