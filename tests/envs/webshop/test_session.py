"""The WebShop session engine: exact text pages, transitions, no-op invalid actions, scoring."""

from __future__ import annotations

import random
import string

import pytest

from rspo_gym.envs.webshop.catalog import Catalog
from rspo_gym.envs.webshop.model import Goal
from rspo_gym.envs.webshop.reward import LexiconNouns, score
from rspo_gym.envs.webshop.session import MAX_QUERY_CHARS, SEARCH_PLACEHOLDER, Page, Session

INSTR = "i want clip in hair extensions in dark brown, and price lower than 200.00 dollars"
S = " [SEP] "
HEAD = f"Instruction:{S}{INSTR}"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog(200, seed=0)


@pytest.fixture(scope="module")
def index(catalog):
    return catalog.build_search_index()


@pytest.fixture(scope="module")
def target(catalog) -> int:
    """An item with two option groups (item 1 of seed 0: clip in hair extensions)."""
    i = next(i for i in range(len(catalog)) if len(catalog.item(i).options) >= 2)
    return i


@pytest.fixture(scope="module")
def goal(catalog, target) -> Goal:
    it = catalog.item(target)
    p = it.product
    return Goal(
        name=p.name, query=p.query, category=p.category, attributes=p.attributes[:3],
        options=tuple(values[0] for values in it.options.values()), price_upper=it.price + 10.0,
        instruction_text=INSTR, asin=p.asin,
    )


@pytest.fixture
def sess(catalog, index, goal) -> Session:
    return Session(catalog, index, goal)


def _query(catalog, target) -> str:
    return catalog.item(target).title.lower()


def _entries(catalog, hits) -> list[str]:
    out = []
    for i in hits:
        it = catalog.item(i)
        out += [it.asin, it.title, it.price_text]
    return out


# ----------------------------------------------------------------------------- pages


def test_search_page(sess):
    assert sess.observation() == f"WebShop{S}Instruction:{S}{INSTR}{S}Search"
    assert sess.available_actions() == {"has_search_bar": True, "clickables": ["search"]}
    assert sess.admissible_actions() == []
    assert sess.prompt_actions() == [SEARCH_PLACEHOLDER]
    assert sess.page is Page.SEARCH
    before = sess.state_key()
    assert not sess.step("click[search]").valid
    assert sess.state_key() == before


def test_results_pages(sess, catalog, index, target):
    q = _query(catalog, target)
    hits = index.search(q, k=50)
    assert len(hits) > 10
    r = sess.step(f"search[{catalog.item(target).title}]")  # upper case: lower-cased like upstream
    assert r.valid and not r.done
    assert sess.state_key()[1] == q
    total = len(hits)
    exp = S.join([HEAD, "Back to Search", f"Page 1 (Total results: {total})", "Next >",
                  *_entries(catalog, hits[:10])])
    assert sess.observation() == exp
    assert sess.available_actions() == {
        "has_search_bar": False,
        "clickables": ["back to search", "next >"] + [catalog.item(i).asin.lower() for i in hits[:10]],
    }
    assert sess.admissible_actions()[:2] == ["click[back to search]", "click[next >]"]
    assert sess.step("click[Next >]").valid
    exp2 = S.join([HEAD, "Back to Search", f"Page 2 (Total results: {total})", "< Prev", "Next >",
                   *_entries(catalog, hits[10:20])])
    assert sess.observation() == exp2
    assert sess.available_actions()["clickables"][:3] == ["back to search", "< prev", "next >"]
    # Next > is always there, even past the last hit (empty page)
    pages_needed = (total + 9) // 10
    for _ in range(pages_needed - 1):
        assert sess.step("click[next >]").valid
    assert sess.observation() == S.join(
        [HEAD, "Back to Search", f"Page {pages_needed + 1} (Total results: {total})", "< Prev", "Next >"])
    for _ in range(pages_needed):
        assert sess.step("click[< prev]").valid
    assert sess.observation() == exp
    assert not sess.step("click[< prev]").valid  # no < Prev on page 1


def test_no_hits(sess):
    assert sess.step("search[zzqxv]").valid
    assert sess.observation() == S.join([HEAD, "Back to Search", "Page 1 (Total results: 0)", "Next >"])


def test_item_and_sub_pages(catalog, index, goal, target):
    it = catalog.item(target)
    sess = Session(catalog, index, goal, show_attrs=True)
    sess.step(f"search[{it.title}]")
    assert sess.step(f"click[{it.asin}]").valid  # ASIN in upper case also works (lower-cased)
    opts = []
    for name, values in it.options.items():
        opts += [name, *values]
    exp_item = S.join([HEAD, "Back to Search", "< Prev", *opts, it.title, f"Price: {it.price_text}",
                       "Rating: N.A.", "Description", "Features", "Reviews", "Attributes", "Buy Now"])
    assert sess.observation() == exp_item
    values = [v for vs in it.options.values() for v in vs]
    assert sess.available_actions() == {
        "has_search_bar": False,
        "clickables": ["back to search", "< prev", "description", "features", "reviews",
                       "attributes", "buy now", *values],
    }
    sub_head = [HEAD, "Back to Search", "< Prev"]
    expected_sub = {
        "Description": S.join(sub_head + [it.description]),
        "Features": S.join(sub_head + list(it.features)),
        "Reviews": S.join(sub_head),  # upstream never loads reviews
        "Attributes": S.join(sub_head + [*it.product.attributes, it.category_top, it.product.query,
                                         it.product.category]),
    }
    for name, exp in expected_sub.items():
        assert sess.step(f"click[{name.lower()}]").valid
        assert sess.page is Page.SUB
        assert sess.observation() == exp
        assert sess.available_actions() == {"has_search_bar": False,
                                            "clickables": ["back to search", "< prev"]}
        assert not sess.step("click[buy now]").valid
        assert sess.step("click[< prev]").valid
        assert sess.observation() == exp_item


def test_show_reviews(catalog, index, goal):
    i = next(i for i in range(len(catalog)) if catalog.item(i).reviews)
    it = catalog.item(i)
    sess = Session(catalog, index, goal, show_reviews=True)
    sess._s.page, sess._s.item = Page.ITEM, i  # jump straight to the item
    sess._changed()
    assert f"Rating: {it.rating}" in sess.observation()
    sess.step("click[reviews]")
    body = [x for rv in it.reviews for x in (str(rv.score), rv.body)]
    assert sess.observation() == S.join([HEAD, "Back to Search", "< Prev", *body])


# ----------------------------------------------------------------------------- transitions


def test_full_episode(sess, catalog, index, goal, target):
    it = catalog.item(target)
    groups = list(it.options)
    q = _query(catalog, target)
    hits = index.search(q, k=50)
    assert sess.step(f"search[{q}]").valid and sess.page is Page.RESULTS
    assert sess.step("click[next >]").valid and sess.state_key()[3] == 2
    assert sess.step("click[< prev]").valid and sess.state_key()[3] == 1
    assert sess.current_item_score() == 0.0
    assert target in hits[:10]
    assert sess.step(f"click[{it.asin.lower()}]").valid and sess.page is Page.ITEM
    assert sess.current_item == target and dict(sess.selected_options) == {}
    g0 = it.options[groups[0]]
    assert sess.step(f"click[{g0[1]}]").valid
    assert dict(sess.selected_options) == {groups[0]: g0[1]}
    assert sess.step(f"click[{g0[0]}]").valid  # same group: replaces
    assert dict(sess.selected_options) == {groups[0]: g0[0]}
    k_before, o_before = sess.state_key(), sess.observation()
    assert sess.step(f"click[{g0[0]}]").valid  # re-selecting: valid, nothing changes
    assert sess.state_key() == k_before and sess.observation() == o_before
    g1 = it.options[groups[1]]
    assert sess.step(f"click[{g1[0]}]").valid
    assert dict(sess.selected_options) == {groups[0]: g0[0], groups[1]: g1[0]}
    assert sess.step("click[description]").valid and sess.page is Page.SUB
    assert sess.current_item_score() == 1.0  # sub-pages count as viewing the item
    assert sess.step("click[< prev]").valid and sess.page is Page.ITEM
    assert dict(sess.selected_options) == {groups[0]: g0[0], groups[1]: g1[0]}  # kept
    assert sess.current_item_score() == 1.0
    r = sess.step("click[buy now]")
    assert r.valid and r.done and r.reward == 1.0 and sess.done
    assert r.purchase.asin == it.asin and r.purchase.index == target
    assert dict(r.purchase.options) == {groups[0]: g0[0], groups[1]: g1[0]}
    assert r.purchase.parts.won
    assert sess.observation() == f"Thank you for shopping with us!{S}Your score (min 0.0, max 1.0){S}1.0"
    assert sess.available_actions() == {"has_search_bar": False, "clickables": []}
    assert sess.admissible_actions() == [] and sess.prompt_actions() == []
    assert not sess.step("click[buy now]").valid
    assert not sess.step(f"search[{q}]").valid


def test_back_and_prev_reset_options(sess, catalog, target):
    q = _query(catalog, target)
    sess.step(f"search[{q}]")
    sess.step("click[next >]")
    p2_obs = sess.observation()
    first = sess.available_actions()["clickables"][3]
    assert sess.step(f"click[{first}]").valid
    vals = next(iter(catalog.item(sess.current_item).options.values()), None)
    if vals:
        sess.step(f"click[{vals[0]}]")
    assert sess.step("click[< prev]").valid  # item -> the results page it came from
    assert sess.observation() == p2_obs and dict(sess.selected_options) == {}
    sess.step(f"click[{first}]")
    assert dict(sess.selected_options) == {}
    sess.step("click[features]")
    assert sess.step("click[back to search]").valid
    assert sess.page is Page.SEARCH and sess.observation().startswith("WebShop [SEP] ")
    assert sess.state_key() == Session(sess.catalog, sess.index, sess.goal).state_key()


@pytest.mark.parametrize("q", ["<q> hair extensions", "<Q> hair", "<r>", "<R> x", "<c> beauty",
                               "<a> double weft"])
def test_hidden_prefixes_refused(sess, q):
    before = sess.state_key(), sess.observation()
    r = sess.step(f"search[{q}]")
    assert not r.valid and not r.done
    assert (sess.state_key(), sess.observation()) == before


# ----------------------------------------------------------------------------- invalid actions


def _sessions_on_every_page(catalog, index, goal, target):
    it = catalog.item(target)

    def after(*actions: str) -> Session:
        session = Session(catalog, index, goal)
        for action in actions:
            session.step(action)
        return session

    search, item = f"search[{it.title}]", f"click[{it.asin}]"
    return {
        "search": after(),
        "results": after(search),
        "results2": after(search, "click[next >]"),
        "item": after(search, item, f"click[{next(iter(it.options.values()))[0]}]"),
        "sub": after(search, item, "click[reviews]"),
        "done": after(search, item, "click[buy now]"),
    }


def _random_invalid(rng: random.Random, sess: Session) -> str | None:
    """A random action that must be a no-op on ``sess`` (None when a draw happens to be valid)."""
    clickables = sess.available_actions()["clickables"]
    on_search = sess.page is Page.SEARCH
    word = "".join(rng.choice(string.ascii_lowercase + " ") for _ in range(rng.randint(1, 12)))
    kind = rng.randrange(14)
    if kind == 0:
        a = f"click[{word}]"
    elif kind == 1:
        a = f"search[{word or 'x'}]" if not on_search else f"search[{rng.choice(['<q>', '<r>', '<c>', '<a>'])} {word}]"
    elif kind == 2:
        a = rng.choice(["", " ", "search[]", "click[]", "search", "click", "[]", "buy now", "\n"])
    elif kind == 3:
        a = "search[" + "a" * (MAX_QUERY_CHARS + rng.randint(1, 5000)) + "]"
    elif kind == 4:
        a = "click[" + "x" * rng.randint(100, 20000) + "]"
    elif kind == 5:
        uni = "".join(chr(rng.randint(0x80, 0x2FFFF)) for _ in range(rng.randint(1, 8)))
        a = rng.choice([f"search[{uni}]", f"click[{uni}]", uni, f"search[hair {uni}]"])
    elif kind == 6:
        c = rng.choice(clickables) if clickables else "buy now"
        a = rng.choice([f"click({c})", f"click{{{c}}}", f"click[{c}", f"click{c}]", f"click [{c}]",
                        f"click[[{c}]]", f"Click[{c}]", f"CLICK[{c}]", f"click[{c}]]", f"clik[{c}]",
                        f"click[{c}]junk", f"press[{c}]", f"click[{c}\n]"])
    elif kind == 7:
        a = rng.choice(["search[hair [x]]", "search[[hair]", "search[hair]]", "Search[hair]",
                        "search(hair)", "search hair", "search[hair\nextensions]", "search[\t]"])
    elif kind == 8:
        a = "".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(rng.randint(0, 40)))
    elif kind == 9:
        a = "click[search]"
    elif kind == 10:
        a = rng.choice(["click[next >]", "click[< prev]", "click[buy now]", "click[back to search]",
                        "click[description]", "click[attributes]", "click[dark brown]"])
    elif kind == 11:
        a = f"click[{sess.catalog.item(rng.randrange(len(sess.catalog))).asin.lower()}]"
    elif kind == 12:
        a = "search[" + "\x00\x07" + word + "]"
    else:
        a = rng.choice([None, 3, b"click[buy now]", ["click[buy now]"]])
        return a  # type: ignore[return-value]
    if not isinstance(a, str):
        return a
    if sess.done:
        return a
    # discard draws that are in fact valid here
    stripped = a.strip()
    for name in ("click", "search"):
        if stripped.startswith(name + "[") and stripped.endswith("]") and "\n" not in stripped:
            arg = stripped[len(name) + 1:-1].lower()
            if name == "click" and arg in clickables and arg != "search":
                return None
    return a


def test_invalid_actions_are_noops(catalog, index, goal, target):
    rng = random.Random(1234)
    sessions = _sessions_on_every_page(catalog, index, goal, target)
    checked = 0
    while checked < 5000:
        sess = rng.choice(list(sessions.values()))
        a = _random_invalid(rng, sess)
        if a is None:
            continue
        before = (sess.state_key(), sess.observation(), sess.available_actions(), sess.purchase,
                  dict(sess.selected_options))
        r = sess.step(a)
        assert not r.valid and not r.done and r.reward == 0.0 and r.purchase is None, a
        after = (sess.state_key(), sess.observation(), sess.available_actions(), sess.purchase,
                 dict(sess.selected_options))
        assert after == before, a
        checked += 1
    assert all(s.num_invalid > 0 for s in sessions.values())


def test_search_only_with_search_bar(catalog, index, goal, target):
    sessions = _sessions_on_every_page(catalog, index, goal, target)
    for name, sess in sessions.items():
        if name == "search":
            continue
        before = sess.state_key()
        assert not sess.step("search[hair extensions]").valid
        assert sess.state_key() == before


def test_surrounding_whitespace_and_case(sess):
    assert sess.step("  search[Hair EXTENSIONS]  ").valid
    assert sess.state_key()[1] == "hair extensions"
    assert sess.step("click[BACK TO SEARCH]").valid and sess.page is Page.SEARCH


# ----------------------------------------------------------------------------- scoring


def test_buy_score_matches_reward(catalog, index, goal):
    nouns = LexiconNouns(catalog.noun_lexicon)
    rng = random.Random(7)
    for _ in range(20):
        sess = Session(catalog, index, goal)
        sess.step(f"search[{rng.choice(['hair', 'mixed nuts', 'belt', 'shampoo', 'hair extensions'])}]")
        asins = [c for c in sess.available_actions()["clickables"] if c in catalog]
        sess.step(f"click[{rng.choice(asins)}]")
        i = sess.current_item
        it = catalog.item(i)
        chosen = {}
        for name, values in it.options.items():
            if rng.random() < 0.7:
                v = rng.choice(values)
                sess.step(f"click[{v}]")
                chosen[name] = v
        expected = score(it.product, goal, chosen, it.price, nouns)
        assert sess.current_item_score() == expected[0]
        r = sess.step("click[buy now]")
        assert r.done and r.reward == expected[0]
        assert r.purchase.parts == expected[1] and dict(r.purchase.options) == chosen


def test_target_scores_one(catalog, index, goal, target):
    it = catalog.item(target)
    sess = Session(catalog, index, goal)
    sess.step(f"search[{it.title}]")
    sess.step(f"click[{it.asin}]")
    for v in goal.options:
        sess.step(f"click[{v}]")
    r = sess.step("click[buy now]")
    assert r.reward == 1.0 and r.purchase.parts.won
    # without options it is not a win
    sess = Session(catalog, index, goal)
    sess.step(f"search[{it.title}]")
    sess.step(f"click[{it.asin}]")
    assert sess.current_item_score() < 1.0


def test_current_item_score_off_item(sess):
    assert sess.current_item_score() == 0.0
    sess.step("search[hair]")
    assert sess.current_item_score() == 0.0


# ----------------------------------------------------------------------------- memory


def test_bought_sessions_share_the_noun_extractor(catalog, index, goal):
    """A session kept after its purchase (the web UI keeps up to 10,000) holds no per-session copy
    of the catalog's noun vocabulary: the extractor is one object per process."""
    import gc
    import tracemalloc

    def bought() -> Session:
        sess = Session(catalog, index, goal)
        sess.step("search[hair extensions]")
        sess.step(f"click[{next(c for c in sess.available_actions()['clickables'] if c in catalog)}]")
        assert sess.step("click[buy now]").done
        return sess

    first = bought()  # the shared extractor and the catalog's items are made before measuring
    gc.collect()
    tracemalloc.start()
    kept = [bought() for _ in range(40)]
    gc.collect()
    retained, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # ~1.7 KB a session; ~53 KB when each session built its own extractor
    assert retained / len(kept) < 8_000, retained / len(kept)
    assert all(s._noun_extractor() is first._noun_extractor() for s in kept)
