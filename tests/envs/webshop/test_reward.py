"""The WebShop reward against hand-computed cases (upstream ``engine/goal.py`` rules, §2 of the reference)."""

import dataclasses
from fractions import Fraction

import pytest
from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from rspo_gym.envs.webshop.model import Goal, Product
from rspo_gym.envs.webshop.reward import (
    COLOR_SET,
    LexiconNouns,
    RewardParts,
    attribute_reward,
    category_match,
    fuzzy_score,
    normalize_color,
    option_reward,
    price_ok,
    score,
    title_nouns,
    title_score,
    type_reward,
)

NOUNS = LexiconNouns(
    ["shoes", "sneakers", "boots", "socks", "basketball", "cord", "cable", "plug", "knob", "men"]
)
TEN_NOUNS = "Shoes Cord Cord Cord Cord Cord Cord Cord Cord Cord"  # 10 nouns, 'shoes' once
ELEVEN_NOUNS = TEN_NOUNS + " Cord"


def _info(name: str, query: str = "q", category: str = "a › b › c") -> Product:
    return Product(asin="B0", name=name, query=query, category=category)


# ----------------------------------------------------------------------------- r_type

# (purchased name, query, category), (goal name, query, category), r_type, title_score, qm, cm
TYPE_CASES = {
    "identical -> 1.0": (
        ("Running Shoes", "shoes", "a › b › c"), ("Running Shoes", "shoes", "a › b › c"),
        1.0, 1.0, True, True),
    "query match saves title_score 0.2 -> 1.0": (
        ("Shoes", "shoes", "x › y"), ("Shoes Cord Plug Knob Cable", "shoes", "a › b"),
        1.0, 0.2, True, False),
    "category match saves title_score 0.2 -> 1.0": (
        ("Shoes", "other", "a › b › z"), ("Shoes Cord Plug Knob Cable", "shoes", "a › b › c"),
        1.0, 0.2, False, True),
    "title_score > 0.2 alone -> 1.0": (
        ("Boots", "other", "x › y"), ("Shoes Sneakers Boots", "shoes", "a › b"),
        1.0, 1 / 3, False, False),
    "title_score == 0.2, nothing else -> 0.5": (
        ("Shoes", "other", "x › y"), ("Shoes Cord Plug Knob Cable", "shoes", "a › b"),
        0.5, 0.2, False, False),
    "title_score == 0.1 is not < 0.1 -> 0.5": (
        ("Shoes", "other", "x › y"), (TEN_NOUNS, "shoes", "a › b"), 0.5, 0.1, False, False),
    "title_score 1/11 < 0.1 even with query+category -> 0.1": (
        ("Shoes", "shoes", "a › b"), (ELEVEN_NOUNS, "shoes", "a › b"), 0.1, 1 / 11, True, True),
    "query and category match but title_score == 0 -> 0.0": (
        ("Basketball Sneakers", "shoes", "a › b › c"), ("Running Shoes", "shoes", "a › b › c"),
        0.0, 0.0, True, True),
    "goal name without nouns -> title_score 0.2, no match -> 0.5": (
        ("Shoes", "other", "x › y"), ("Red Thing", "shoes", "a › b"), 0.5, 0.2, False, False),
    "goal name without nouns, query match -> 1.0": (
        ("Plug", "shoes", "x › y"), ("Red Thing", "shoes", "a › b"), 1.0, 0.2, True, False),
    "goal duplicates count in the denominator": (
        ("Shoes", "other", "x › y"), ("Shoes Shoes Cable", "shoes", "a › b"),
        1.0, 1 / 3, False, False),
}


@pytest.mark.parametrize("case", TYPE_CASES.values(), ids=TYPE_CASES.keys())
def test_type_reward_branches(case):
    purchased, goal, r_type, t_score, q_match, c_match = case
    r, info = type_reward(_info(*purchased), _info(*goal), NOUNS)
    assert r == r_type
    assert info == {"query_match": q_match, "category_match": c_match, "title_score": t_score}


@pytest.mark.parametrize(
    ("purchased", "expected"),
    [("a › b › c", True), ("b › c › a", True), ("d › e › f", False), ("a › d › b", True),
     ("a › a › b", True), ("a › a › d", False), ("a›b", True), ("a > b > c", False)],
)
def test_category_match_cases_from_upstream(purchased, expected):
    assert category_match(purchased, "a › b › c") is expected


def test_title_score_and_lexicon_nouns():
    assert NOUNS("Men's Basketball SHOES, shoes (x-large)") == ["men", "basketball", "shoes", "shoes"]
    assert title_score(["shoes"], []) == 0.2
    assert title_score(["shoes", "shoes", "cord"], ["shoes", "cable"]) == 0.5
    assert title_nouns("Basketball Shoes", lexicon=["shoes"]) == ["shoes"]
    with pytest.raises(ValueError, match="single alphanumeric tokens"):
        LexiconNouns(["yoga pants"])


def test_title_nouns_without_lexicon_needs_spacy():
    try:
        import spacy

        spacy.load("en_core_web_sm")
    except (ImportError, OSError):
        with pytest.raises(ImportError, match="LexiconNouns"):
            title_nouns("Basketball Shoes")
    else:  # pragma: no cover - spaCy is optional
        assert "shoes" in title_nouns("Basketball Shoes")


# ----------------------------------------------------------------------------- fuzzy matching


def test_fuzzy_score_reproduces_thefuzz_processing():
    # thefuzz rounds: a raw 85.1 is 85, so not a hit; bare rapidfuzz would say 85.1 > 85.
    a, b = "a" * 40 + "b" * 7, "a" * 40 + "c" * 7
    assert fuzz.token_set_ratio(a, b, processor=default_process) == pytest.approx(85.106, abs=1e-3)
    assert fuzzy_score(a, b) == 85
    # thefuzz deletes chars 128-255 ("café" -> "caf"), and str()s non-strings.
    assert fuzzy_score("café", "cafe") == 86
    assert fuzzy_score(("color", "Navy Blue"), "color navy blue") == 100


def test_color_set_is_upstream_list():
    assert len(COLOR_SET) == 102 and len(set(COLOR_SET)) == 102
    assert COLOR_SET[:3] == ("alabaster", "apricot", "aqua") and COLOR_SET[-1] == "yellow"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("black | white", "black"), ("white | black", "black"), ("navy blue", "blue"),
     ("rose gold", "gold"), ("light grey", "grey"), ("blush pink", "blush"),
     ("standard", "tan"), ("xl", "xl"), ("", "")],
)
def test_normalize_color_takes_first_set_entry_by_list_order(text, expected):
    assert normalize_color(text) == expected


# ----------------------------------------------------------------------------- options

LENIENT_PAIRS = [
    ("large", "x-large"), ("x-large", "large"), ("blue", "navy blue"), ("navy blue", "blue"),
    ("8", "8.5"), ("8.5", "8"), ("8.5 wide", "8.5"), ("pack of 2", "pack of 12"),
    ("12 ounce (pack of 2)", "12 ounce (pack of 4)"),
]


@pytest.mark.parametrize(("selected", "goal"), LENIENT_PAIRS)
def test_option_leniency_table_all_hit(selected, goal):
    assert option_reward([selected], [goal]) == (1, 1)


def test_black_white_misses_white_because_it_normalizes_to_black():
    assert option_reward(["black | white"], ["white"]) == (0, 1)


@pytest.mark.parametrize(
    ("selected", "goal", "expected"),
    [
        (["pack of 12", "grey", "XL"], ["grey", "XL", "pack of 12"], (3, 3)),
        (["pack of 12", "blue", "XL"], ["grey", "XL", "pack of 12"], (2, 3)),
        (["pack of 12", "powder snow", "XL"], ["cool powder snow", "XL", "pack of 12"], (3, 3)),
        (["goal 1", "goal 2"], [], (0, 0)),
        (["navy blue", "blue", "royal blue"], ["blue"], (1, 1)),  # a goal option counts once
        (["pack of 2"], ["pack of 2", "pack of 12"], (2, 2)),  # one value may serve two goals
        (["small"], ["x-large"], (0, 1)),
        ([], ["red"], (0, 1)),
        # upstream synthetic goals: (name, value) pairs, matched via str()
        (["navy blue"], [("color", "navy blue")], (1, 1)),
        (["black | white"], [("color", "black")], (1, 1)),
        (["large"], [("size", "large")], (1, 1)),
        (["small"], [("size", "large")], (0, 1)),
    ],
)
def test_option_reward_cases(selected, goal, expected):
    assert option_reward(selected, goal) == expected


# ----------------------------------------------------------------------------- attributes


@pytest.mark.parametrize(
    ("attrs", "title", "bullets", "desc", "goal", "expected"),
    [
        (["tea tree", "essential oil", "natural ingredients"], "", [], "",
         ["tea tree", "essential oils", "natural ingredients"], (3, 3)),
        (["essential oil", "natural ingredients"], "", [], "",
         ["tea tree", "essential oils", "natural ingredients"], (2, 3)),
        # substring fallback in bullets and description
        ([], "", ["This shampoo has essential oils and smells like lemons"],
         "Best shampoo on the market, made with natural ingredients",
         ["tea tree", "essential oils", "natural ingredients"], (2, 3)),
        (["tea bag", "earl gray", "lipton"], "English tea for breakfast",
         ["Soothing aroma", "Calming, great feeling"], "Best tea made by Lipton",
         ["tea tree", "essential oils", "natural ingredients"], (0, 3)),
        # substring fallback in the lowercased title; bullets are joined by spaces first
        (["shampoo"], "GLUTEN FREE Pasta", [], "", ["gluten free"], (1, 1)),
        (["shampoo"], "", ["made to be long", "lasting"], "", ["long lasting"], (1, 1)),
        # the goal side is not lowercased
        (["shampoo"], "tea tree shampoo", [], "", ["Tea Tree"], (0, 1)),
        # each goal attribute counts once, even if fuzzy and substring both hit
        (["tea tree", "tea tree oil"], "tea tree", ["tea tree"], "tea tree", ["tea tree"], (1, 1)),
        # no attributes: the DUMMY_ATTR placeholder
        ([], "", [], "", ["gluten free"], (0, 1)),
        ([], "", [], "", ["dummy attr"], (1, 1)),
        ([], "", [], "it is gluten free", ["gluten free"], (1, 1)),
        (["anything"], "", [], "", [], (0, 0)),
    ],
)
def test_attribute_reward_cases(attrs, title, bullets, desc, goal, expected):
    assert attribute_reward(attrs, title, bullets, desc, goal) == expected


# ----------------------------------------------------------------------------- price and total


def test_price_boundary():
    assert price_ok(30.0, 30.0) and price_ok(29.99, 30.0)
    assert not price_ok(30.01, 30.0)


PRODUCT = Product(
    asin="B01",
    name="Acme Trail Shoes",
    query="running shoes",
    category="Clothing › Men › Shoes › Running",
    attributes=["rubber sole", "lace up"],
    bullet_points=["Breathable mesh", "Non slip"],
    description="A light weight trail shoe.",
)


def _goal(name=PRODUCT.name, query=PRODUCT.query, category=PRODUCT.category, **kw) -> Goal:
    defaults = {
        "attributes": ["rubber sole", "non slip", "light weight"],
        "options": ["navy blue", "8.5"],
        "price_upper": 40.0,
    }
    return Goal(name=name, query=query, category=category, **{**defaults, **kw})


def test_full_score_arithmetic_with_partial_hits():
    goal = _goal(
        name="Acme Trail Shoes Boots",  # nouns [shoes, boots] -> title_score 0.5 ...
        query="boots",  # ... no query match
        category="Outdoor › Boots",  # ... no category match, 0.5 > 0.2 -> r_type 1
        attributes=["rubber sole", "non slip", "waterproof"],
    )
    total, parts = score(PRODUCT, goal, {"color": "blue", "size": "9"}, 40.0, NOUNS)
    assert parts == RewardParts(
        total=total, r_type=1.0, query_match=False, category_match=False, title_score=0.5,
        attr_hits=2, n_attr=3, opt_hits=1, n_opt=2, price_ok=True,
    )
    assert total == (2 + 1 + 1) / (3 + 2 + 1)
    assert total == pytest.approx(float(Fraction(2, 3)))


def test_full_score_with_half_type_reward():
    # title_score 1/5 = 0.2, no query/category match -> r_type 0.5; 2 attrs, 1 option, price.
    goal = _goal(name="Shoes Cord Plug Knob Cable", query="x", category="Other › Thing",
                 attributes=["rubber sole", "lace up", "waterproof"])
    total, parts = score(PRODUCT, goal, ["blue", "10"], 39.0, NOUNS)
    assert (parts.r_type, parts.attr_hits, parts.opt_hits, parts.price_ok) == (0.5, 2, 1, True)
    assert total == 0.5 * (2 + 1 + 1) / (3 + 2 + 1)
    assert total == pytest.approx(float(Fraction(1, 3)))
    assert not parts.won


def test_won_iff_score_is_one():
    goal = _goal()
    total, parts = score(PRODUCT, goal, {"color": "navy blue", "size": "8.5"}, 40.0, NOUNS)
    assert total == 1.0 and parts.won
    assert parts.as_dict()["total"] == 1.0
    # Same values as a plain list of values.
    assert score(PRODUCT, goal, ["navy blue", "8.5"], 40.0, NOUNS)[0] == 1.0
    # One slot missing -> 5/6, not won.
    total, parts = score(PRODUCT, goal, {"color": "navy blue", "size": "8.5"}, 40.01, NOUNS)
    assert total == 5 / 6 and not parts.won
    # All slots hit but the type is only half right -> 0.5, not won.
    half = _goal(name="Shoes Cord Plug Knob Cable", query="x", category="Other › Thing")
    total, parts = score(PRODUCT, half, ["navy blue", "8.5"], 40.0, NOUNS)
    assert total == 0.5 and not parts.won
    # No shared name noun -> 0 whatever else matches.
    zero = _goal(name="Cord Plug")
    total, parts = score(PRODUCT, zero, ["navy blue", "8.5"], 40.0, NOUNS)
    assert total == 0.0 and parts.query_match and parts.category_match and not parts.won


def test_records_are_frozen_and_hashable():
    assert isinstance(PRODUCT.attributes, tuple) and PRODUCT.title == PRODUCT.name
    goal = _goal()
    assert isinstance(goal.options, tuple) and hash(goal) == hash(_goal())
    _, parts = score(PRODUCT, goal, [], 1.0, NOUNS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        parts.total = 1.0  # type: ignore[misc]
