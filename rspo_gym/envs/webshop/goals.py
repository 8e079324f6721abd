"""Goal (instruction) synthesis for the synthetic WebShop catalog, with the canonical split.

A goal is made from one target item (``docs/reference/webshop.md`` §3.2, §3.6 item 6):

- ``attributes``: 1-3 of the target's hidden attributes, type-specific ones first (they read
  naturally for the product), never two fuzzy near-duplicates ("lightweight"/"light weight");
- ``options``: one value the target really offers from some (human style) or all (synthetic style)
  of its option groups (synthetic: skipping values whose ``(name, value)`` pair cannot match under
  upstream's colour normalisation, e.g. flavor "peppered", which contains "red"); human style stores value strings, synthetic style ``(name, value)`` pairs
  in sorted name order (upstream passes ``dict.items()``);
- ``price_upper`` and the price clause exactly by upstream's rule (:func:`price_clause`), drawn from
  a seeded generator so it is deterministic per catalog seed (upstream re-draws it per process,
  §2.4);
- ``name``/``query``/``category``/``asin`` copied from the target;
- ``instruction_text``: human style ("i am looking for a gluten free dark chocolate bar with sea
  salt in 4 ounce (pack of 2)") with openings drawn at the frequencies measured on upstream's
  12,087 human instructions, then, as upstream, ``text.strip('.') + price_text``; or upstream's
  synthetic style ("Find me ... with ..." + " with color: x, and size: y" + price clause).

Every goal is satisfiable: buying the target with the goal's option values scores exactly 1.0.

:class:`GoalSet` is the canonical, lazily evaluated goal list of a catalog: ``goals_per_product``
variants per product (default ``ceil(12087 / num_products)``, so the default 1k catalog has 13,000
goals, at least upstream's 12,087; a 1M catalog has one goal per product, 1M goals, none built
until asked), ordered by a keyed bijective permutation (Feistel network with cycle walking) that
depends only on (catalog seed, number of goals, style) - never on a worker seed, unlike
verl-agent's per-worker reshuffle (§3.4). ``split("test")`` is the first 500 goals, ``"valid"``
the next 1,000, ``"train"`` the rest, as upstream's baselines; if fewer goals exist (only when
``goals_per_product`` is given explicitly and small) the ranges are clipped in that order (test
first, then valid, train gets what remains, possibly nothing). As upstream, different goals on the
same product may fall into different splits (upstream has ~10 instructions per product, shuffled
together); the *instructions* are never shared between splits.

All randomness is ``blake2b`` -> ``random.Random`` consumed through ``random()`` draws only, so
goals are identical across processes, hash seeds and Python versions.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, overload

from .draws import below, choice, shuffled, stable_rng, weighted
from .model import Goal, GoalOption, Product
from .reward import COLOR_SET, fuzzy_score, option_reward

__all__ = [
    "DEFAULT_MIN_GOALS", "GoalSet", "PRICE_RANGE", "SPLITS", "STYLES", "goals_for", "make_goal",
    "price_clause", "split_range", "strip_price_clause", "style_stats",
]

#: Upstream ``goal.py``: ``PRICE_RANGE = [10.0 * i for i in range(1, 100)]``.
PRICE_RANGE: tuple[float, ...] = tuple(10.0 * i for i in range(1, 100))
#: Upstream's ``price_upper`` when no clause is added (fewer than 2 candidates).
NO_PRICE_UPPER = 1000000
#: Number of upstream human instructions; the default goal count is at least this.
DEFAULT_MIN_GOALS = 12_087
STYLES = ("human", "synthetic")
#: Canonical split sizes (upstream baselines): test first, then valid; train is the rest.
SPLITS: dict[str, int | None] = {"test": 500, "valid": 1000, "train": None}

_VERSION = "rspo_gym.webshop.goals.v1"
_PRICE_CLAUSE_RE = re.compile(r", and price lower than \d+\.\d\d dollars$")


# ----------------------------------------------------------------------------- price clause


def price_clause(price: float, rng: random.Random | int) -> tuple[float, str]:
    """``(price_upper, price_text)`` by upstream's rule for a target whose hidden price is ``price``.

    Candidates are the first four :data:`PRICE_RANGE` values strictly above ``price``; with at least
    two, two are sampled without replacement and the larger is ``price_upper``, the text
    ``", and price lower than {upper:.2f} dollars"``; otherwise ``(1000000, "")``.

    >>> price_clause(985.0, 0)
    (1000000, '')
    """
    r = rng if isinstance(rng, random.Random) else stable_rng(b'rspo-goals', _VERSION, "price", rng)
    candidates = [p for p in PRICE_RANGE if p > price][:4]
    if len(candidates) < 2:
        return NO_PRICE_UPPER, ""
    first = below(r, len(candidates))
    second = below(r, len(candidates) - 1)
    if second >= first:
        second += 1
    upper = max(candidates[first], candidates[second])
    return upper, f", and price lower than {upper:.2f} dollars"


def strip_price_clause(text: str) -> str:
    """The instruction without its trailing upstream price clause (if any)."""
    return _PRICE_CLAUSE_RE.sub("", text)


# ----------------------------------------------------------------------------- phrasing data

# (opening, weight, article mode): "a" wants an article (a/an/some), "bare" takes none, "any"
# either. Weights follow the openings measured on upstream's human_goals.json (§3.6 item 6).
_OPENINGS: tuple[tuple[str, float, str], ...] = (
    ("i am looking for", 27.6, "any"),
    ("im looking for", 15.1, "any"),
    ("i would like", 8.6, "a"),
    ("i would like to buy", 2.2, "a"),
    ("i would like to get", 1.5, "a"),
    ("i need", 12.6, "a"),
    ("i want", 7.4, "a"),
    ("i want to buy", 2.6, "a"),
    ("i want to find", 1.4, "a"),
    ("i want to get", 1.4, "a"),
    ("i am interested in", 2.0, "a"),
    ("i need to buy", 1.0, "a"),
    ("id like to buy", 0.8, "a"),
    ("find me", 0.9, "a"),
    ("get me", 0.6, "a"),
    ("i am searching for", 0.4, "any"),
    ("can you find me", 0.4, "a"),
    ("im interested in", 0.35, "a"),
    ("buy me", 0.3, "a"),
    ("looking for", 0.25, "any"),
    ("help me find", 0.15, "a"),
    ("im searching for", 0.15, "any"),
    ("show me", 0.1, "a"),
    ("i'm looking for", 0.1, "any"),
    # the long tail of other openings (~13 % of real instructions)
    ("i am shopping for", 1.2, "a"),
    ("please find", 1.0, "a"),
    ("search for", 0.8, "a"),
    ("i wish to buy", 0.8, "a"),
    ("do you have", 0.8, "a"),
    ("can i get", 0.8, "a"),
    ("im trying to find", 0.8, "a"),
    ("i am trying to find", 0.8, "a"),
    ("i have to buy", 0.7, "a"),
    ("i require", 0.7, "a"),
    ("look for", 0.7, "a"),
    ("we need", 0.7, "a"),
    ("order me", 0.5, "a"),
    ("please get me", 0.5, "a"),
    ("my wife needs", 0.4, "a"),
    ("i must have", 0.4, "a"),
)

_FOR_LAST = frozenset({
    "skin", "lines", "circles", "loss", "growth", "wear", "room", "office", "sleepers", "bedroom",
    "business", "puffiness", "outdoor",
})
_FOR_FULL = frozenset({"dry hair", "damaged hair", "ingrown hair", "gift idea", "great gift"})
_ADJ_WORDS = frozenset({
    "lightweight", "portable", "vegan", "waterproof", "hypoallergenic", "organic", "gentle",
    "slim", "original", "electric", "wireless", "rustic", "deluxe", "oversized", "kosher",
    "imported", "heavy", "duty", "quality", "rectangular", "seamless", "velvet", "ergonomic",
    "convertible", "heated", "decaf", "sour", "chewy", "crunchy", "fluffy", "extendable",
    "foldable", "washable", "stackable", "reversible", "rechargeable", "recyclable",
    "freestanding", "upholstered", "uncured", "unfiltered", "unsalted", "unsweetened", "smoked",
    "peppered", "armless", "backless", "turbo", "arched", "beveled", "tilting", "swivel",
    "reclining", "rotary", "shockproof", "windproof", "blendable",
})
_ADJ_PREFIXES = ("non ", "anti ", "easy ", "fully ", "highly ", "naturally ", "fast ", "quick ",
                 "long ", "low ", "sugar ", "gluten", "dairy ", "caffeine ", "fat ", "nut ",
                 "soy ", "oil ", "alcohol ", "cruelty ", "paraben ", "sulfate ", "fragrance ",
                 "light ", "machine ", "hand ", "high ", "water ", "stain ", "wrinkle ",
                 "heat ", "chip ", "slip ", "smudge ", "squat ", "clump ", "tag ", "bubble ",
                 "keto ", "reef ", "shelf ", "gold ", "grass ", "hickory ", "kettle ",
                 "freeze ", "dry ", "cold ", "certified ", "usda ", "plant ", "thermal ",
                 "individually ", "fully ", "height ", "color ", "case ", "volume ", "room ")
_ADJ_SUFFIXES = ("free", "proof", "resistant", "lasting", "able", "ible", "less", "ic", "ive",
                 "ous", "ful", "ed", "ing", "washable", "weight", "friendly", "compatible",
                 "safe", "tested", "organic", "assembled", "wrapped")

# option name -> mention templates ({v} is the value as written in text)
_OPTION_TEMPLATES: dict[str, tuple[str, ...]] = {
    "color": ("in {v}", "in {v}", "in {v} color", "in the color {v}", "{v} color",
              "in color {v}"),
    "size": ("size {v}", "in size {v}", "in {v}", "{v} size", "size: {v}"),
    "pattern name": ("in {v} pattern", "with a {v} pattern", "{v} pattern"),
    "scent": ("in {v} scent", "{v} scent", "with {v} scent"),
    "flavor": ("{v} flavor", "in {v} flavor", "with {v} flavor", "flavor {v}"),
    "style": ("in {v} style", "style {v}", "in {v}", "{v} style"),
    "capacity": ("{v}", "with {v} capacity", "{v} capacity", "in {v}"),
    "length": ("{v} long", "{v} length", "in {v}", "length {v}"),
    "item package quantity": ("quantity {v}", "{v} count", "pack of {v}", "in quantity {v}"),
}
_OPTION_DEFAULT = ("{n} {v}", "in {v}", "with {n} {v}")
_SELF_SIZED = re.compile(r"pack of|ounce|fl oz|inch|\d+\s*pcs|'|\"")
_TAILS = ("for my wife", "for my husband", "for my son", "for my daughter", "for daily use",
          "for travel", "as a gift", "for my mom", "for work", "for home")


def _attr_kind(attr: str) -> str:
    """'for' ("for dry skin"), 'adj' ("that is gluten free") or 'with' ("with rubber sole")."""
    words = attr.split()
    last = words[-1]
    if attr in _FOR_FULL or last in _FOR_LAST:
        return "for"
    if any(ch.isdigit() for ch in attr) or last in ("fit", "sole", "toe", "sleeve", "neck"):
        return "with"
    if last in _ADJ_WORDS or attr.startswith(_ADJ_PREFIXES) or last.endswith(_ADJ_SUFFIXES):
        return "adj"
    return "with"


def _is_plural(phrase: str) -> bool:
    last = phrase.split()[-1]
    return last.endswith("s") and not last.endswith(("ss", "us"))


def _article(word: str) -> str:
    vowel = word[:1] in "aeiou" and not word.startswith(("usb", "uni", "use", "one"))
    return "an" if vowel else "a"


def _value_text(value: str) -> str:
    return value.replace(" | ", " and ")


def _option_mention(r: random.Random, name: str, value: str) -> str:
    text = _value_text(value)
    if name == "size":
        if _SELF_SIZED.search(value):
            return choice(r, ("{v}", "in {v}", "{v}", "in the {v}")).format(v=text)
        if value in ("twin", "twin xl", "full", "queen", "king", "california king"):
            return choice(r, ("{v} size", "in {v} size", "size {v}")).format(v=text)
    templates = _OPTION_TEMPLATES.get(name, _OPTION_DEFAULT)
    return choice(r, templates).format(v=text, n=name)


def _join(r: random.Random, parts: Sequence[str], glue: tuple[str, ...] = (" and ", ", ")) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    sep = choice(r, glue)
    if sep == ", " and len(parts) > 2:
        return ", ".join(parts[:-1]) + ", and " + parts[-1]
    if sep == ", ":
        return parts[0] + " and " + parts[1]
    return " and ".join(parts)


# ----------------------------------------------------------------------------- goal making


def _type_attributes(catalog: Any, index: int) -> frozenset[str]:
    types = getattr(catalog, "product_types", None)
    type_index_of = getattr(catalog, "type_index_of", None)
    if types is None or type_index_of is None:
        return frozenset()
    return frozenset(types[type_index_of(index)].attributes)


def _visible_attributes(product: Product) -> tuple[str, ...]:
    """The product's attributes that its pages show (title, features or description).

    WebShop's instruction attributes were mined from the product's own text, so a shopper can
    check them on the item page or its sub-pages; attributes the catalog keeps only in the hidden
    ``Attributes`` list are asked for only when no visible one exists.
    """
    text = " ".join((product.name, *product.bullet_points, product.description)).lower()
    visible = tuple(a for a in product.attributes if a.lower() in text)
    return visible or product.attributes


def _pick_attributes(r: random.Random, attributes: Sequence[str], preferred: frozenset[str]
                     ) -> list[str]:
    """1-3 distinct attributes, type-specific first, no fuzzy near-duplicates, in draw order."""
    n = 1 + weighted(r, (0.5, 0.36, 0.14))
    first = shuffled(r, [a for a in attributes if a in preferred])
    rest = shuffled(r, [a for a in attributes if a not in preferred])
    return distinct_attributes(first + rest, n)


def distinct_attributes(candidates: Sequence[str], n: int) -> list[str]:
    """The first ``n`` of ``candidates`` that are no fuzzy near-duplicate (score > 70) of one taken
    before: a goal asking twice for one attribute in other words asks for less than it seems."""
    chosen: list[str] = []
    for attr in candidates:
        if len(chosen) == n:
            break
        if any(fuzzy_score(attr, c) > 70 for c in chosen):
            continue
        chosen.append(attr)
    return chosen


def _human_text(r: random.Random, query: str, category_top: str, attributes: Sequence[str],
                options: Sequence[tuple[str, str]]) -> str:
    opening, _, mode = _OPENINGS[weighted(r, [w for _, w, _ in _OPENINGS])]
    plural = _is_plural(query)
    kinds = [(a, _attr_kind(a)) for a in attributes]
    pre = [a for a, k in kinds if k == "adj" and r.random() < 0.4][:2]
    post_adj = [a for a, k in kinds if k == "adj" and a not in pre]
    with_ = [a for a, k in kinds if k == "with"]
    for_ = [a for a, k in kinds if k == "for"]

    noun = " ".join([*pre, query]) if pre else query
    if pre and len(pre) == 2 and r.random() < 0.5:
        noun = f"{pre[0]} and {pre[1]} {query}"
    mass = plural or category_top == "food"
    if mode == "a" or (mode == "any" and r.random() < 0.75):
        if mass:
            if plural and category_top == "fashion" and r.random() < 0.5:
                det = "a pair of"
            else:
                det = choice(r, ("some", "some", "")) if mode == "a" else ""
        else:
            det = _article(noun)
    else:
        det = ""
    head = " ".join(p for p in (opening, det, noun) if p)

    clauses: list[str] = []
    if post_adj:
        verb = ("that are", "which are") if plural else ("that is", "which is", "thats", "that's")
        clauses.append(f"{choice(r, verb)} {_join(r, post_adj)}")
    if with_:
        clauses.append(f"{choice(r, ('with', 'with', 'that has', 'having'))} {_join(r, with_)}")
    if for_:
        clauses.append(f"{choice(r, ('for', 'for', 'good for', 'suitable for'))} {_join(r, for_)}")
    clauses = shuffled(r, clauses) if len(clauses) > 1 and r.random() < 0.3 else clauses
    text = head
    for i, clause in enumerate(clauses):
        text += (" " if i == 0 or r.random() < 0.6 else " and ") + clause
    for i, (name, value) in enumerate(options):
        mention = _option_mention(r, name, value)
        glue = " " if i == 0 else choice(r, (" ", ", ", " and "))
        text += glue + mention
    if r.random() < 0.06:
        text += " " + choice(r, _TAILS)
    return text


def _synthetic_text(r: random.Random, query: str, attributes: Sequence[str]) -> str:
    kinds = [(a, _attr_kind(a)) for a in attributes]
    pre = [a for a, k in kinds if k == "adj"]
    with_ = [a for a, k in kinds if k == "with"]
    for_ = [a for a, k in kinds if k == "for"]
    text = "Find me " + ", ".join(pre) + (" " if pre else "") + query
    if with_:
        text += " with " + ", ".join(with_)
    if for_:
        text += " for " + ", ".join(for_)
    return text


def make_goal(catalog: Any, index: int, rng_or_seed: random.Random | int = 0,
              style: str = "human") -> Goal:
    """A satisfiable goal whose target is ``catalog.item(index)``.

    ``rng_or_seed``: a ``random.Random`` to draw from, or an int variant number (the generator is
    then derived from the catalog seed, ``index``, the variant and ``style``, so
    ``make_goal(c, i, k)`` is a pure function). See the module docstring for what is drawn.
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    if isinstance(rng_or_seed, random.Random):
        r = rng_or_seed
    elif isinstance(rng_or_seed, int) and not isinstance(rng_or_seed, bool):
        r = stable_rng(b'rspo-goals', _VERSION, "goal", getattr(catalog, "seed", 0), index, rng_or_seed, style)
    else:
        raise TypeError(f"rng_or_seed must be a random.Random or an int, got {rng_or_seed!r}")
    item = catalog.item(index)
    product = item.product
    if not product.attributes:
        raise ValueError(f"item {index} has no attributes; upstream skips such goals")
    attributes = _pick_attributes(r, _visible_attributes(product), _type_attributes(catalog, index))
    groups = [(name, values) for name, values in item.options.items() if values]

    if style == "synthetic":
        # Upstream's (name, value) pairs are unsatisfiable when the value merely *contains* a
        # colour word ("peppered" -> "red" on the selected side only); such values are skipped
        # (and a group left with none is not asked for).
        groups = [(name, ok) for name, values in groups
                  if (ok := [v for v in values if option_reward([v], [(name, v)])[0] == 1])]
        picked = sorted((name, choice(r, values)) for name, values in groups)
        goal_options: tuple[GoalOption, ...] = tuple(picked)
        base = _synthetic_text(r, product.query, attributes)
        option_text = ", and ".join(f"{k}: {v}" for k, v in picked)
        base += " with " + option_text if option_text else ""
    else:
        picked = [(name, choice(r, values)) for name, values in groups if r.random() < 0.75]
        goal_options = tuple(value for _, value in picked)
        base = _human_text(r, product.query, getattr(item, "category_top", ""), attributes,
                           picked)
    price_upper, price_text = price_clause(item.price, r)
    return Goal(
        name=product.name, query=product.query, category=product.category,
        attributes=tuple(attributes), options=goal_options, price_upper=price_upper,
        instruction_text=base.strip(".") + price_text, asin=product.asin,
    )


# ----------------------------------------------------------------------------- goal set


def split_range(name: str, num_goals: int) -> range:
    """Goal positions of split ``name``: test ``[0, 500)``, valid ``[500, 1500)``, train the rest,
    each clipped to ``num_goals``."""
    if name not in SPLITS:
        raise ValueError(f"split must be one of {tuple(SPLITS)}, got {name!r}")
    start = 0
    for split, size in SPLITS.items():
        stop = num_goals if size is None else min(start + size, num_goals)
        if split == name:
            return range(min(start, num_goals), stop)
        start = stop
    raise AssertionError("unreachable")


class _Permutation:
    """A keyed bijection of ``range(n)`` (4-round Feistel over 2^2h >= n, cycle walking)."""

    def __init__(self, n: int, *key: object) -> None:
        self.n = n
        self.half = max(1, math.ceil(max(1, (n - 1).bit_length()) / 2))
        self.mask = (1 << self.half) - 1
        self.key = repr(key).encode()

    def _round(self, rnd: int, x: int) -> int:
        digest = hashlib.blake2b(self.key + f"|{rnd}|{x}".encode(), digest_size=8,
                                 person=b"rspo-goalperm").digest()
        return int.from_bytes(digest, "big") & self.mask

    def _once(self, x: int) -> int:
        left, right = x >> self.half, x & self.mask
        for rnd in range(4):
            left, right = right, left ^ self._round(rnd, right)
        return (left << self.half) | right

    def __call__(self, i: int) -> int:
        x = self._once(i)
        while x >= self.n:
            x = self._once(x)
        return x


class GoalSet(Sequence[Goal]):
    """The canonical goal list of a catalog, built lazily (goal ``g`` is made when asked).

    ``len(self) == catalog.num_products * goals_per_product``; goal ``g`` targets product
    ``locate(g)[0]`` with variant ``locate(g)[1]`` and equals
    ``make_goal(catalog, *locate(g), style=style)``, or ``maker(catalog, *locate(g))`` when a
    ``maker`` is given (``goals_v1.py`` passes ``rspo/WebShop-v1``'s, with an ``order_tag`` that
    gives its goals their own order). The order depends only on the catalog seed, the number of
    goals, the style and the tag. A small LRU cache keeps recently made goals.
    """

    def __init__(self, catalog: Any, *, style: str = "human",
                 goals_per_product: int | None = None, cache_size: int = 4096,
                 maker: Callable[[Any, int, int], Goal] | None = None, order_tag: str = "") -> None:
        if style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, got {style!r}")
        num_products = len(catalog)
        if goals_per_product is None:
            goals_per_product = max(1, math.ceil(DEFAULT_MIN_GOALS / num_products))
        if isinstance(goals_per_product, bool) or not isinstance(goals_per_product, int) \
                or goals_per_product < 1:
            raise ValueError(f"goals_per_product must be a positive int, got {goals_per_product!r}")
        self.catalog = catalog
        self.style = style
        self.goals_per_product = goals_per_product
        self.num_products = num_products
        self._n = num_products * goals_per_product
        self._maker = maker
        order_key: tuple[object, ...] = (_VERSION, "order", getattr(catalog, "seed", 0), self._n, style)
        self._perm = _Permutation(self._n, *order_key, *((order_tag,) if order_tag else ()))
        self._cache: OrderedDict[int, Goal] = OrderedDict()
        self._cache_size = cache_size

    def __repr__(self) -> str:
        return (f"GoalSet({self.catalog!r}, style={self.style!r}, "
                f"goals_per_product={self.goals_per_product}, len={self._n})")

    def __len__(self) -> int:
        return self._n

    def locate(self, g: int) -> tuple[int, int]:
        """``(product index, variant)`` of goal ``g``."""
        g = self._check(g)
        variant, product = divmod(self._perm(g), self.num_products)
        return product, variant

    def target_index(self, g: int) -> int:
        return self.locate(g)[0]

    @overload
    def __getitem__(self, g: int) -> Goal: ...
    @overload
    def __getitem__(self, g: slice) -> list[Goal]: ...

    def __getitem__(self, g: int | slice) -> Goal | list[Goal]:
        if isinstance(g, slice):
            return [self[i] for i in range(*g.indices(self._n))]
        g = self._check(g)
        hit = self._cache.get(g)
        if hit is not None:
            self._cache.move_to_end(g)
            return hit
        if self._maker is not None:
            goal = self._maker(self.catalog, *self.locate(g))
        else:
            goal = make_goal(self.catalog, *self.locate(g), style=self.style)
        self._cache[g] = goal
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return goal

    def __iter__(self) -> Iterator[Goal]:
        for g in range(self._n):
            yield self[g]

    def split(self, name: str) -> range:
        """Goal indices of ``name`` ('test' first 500, 'valid' next 1,000, 'train' the rest)."""
        return split_range(name, self._n)

    def goals(self, name: str) -> Iterator[Goal]:
        return (self[g] for g in self.split(name))

    def _check(self, g: int) -> int:
        if isinstance(g, bool) or not isinstance(g, int):
            raise TypeError(f"goal index must be an int, got {type(g).__name__}")
        if g < 0:
            g += self._n
        if not 0 <= g < self._n:
            raise IndexError(f"goal index out of range [0, {self._n})")
        return g


def goals_for(catalog: Any, *, style: str = "human", goals_per_product: int | None = None
              ) -> GoalSet:
    """The canonical :class:`GoalSet` of ``catalog`` (lazy; index it, slice it or iterate it).

    There is deliberately no seed argument: the goals and their order are a function of the
    catalog (its seed and size) and the style only.
    """
    return GoalSet(catalog, style=style, goals_per_product=goals_per_product)


# ----------------------------------------------------------------------------- style statistics

_SIZE_WORDS = frozenset({
    "size", "sizes", "small", "medium", "large", "xl", "xxl", "xs", "pack", "packs", "ounce",
    "ounces", "oz", "inch", "inches", "count", "pound", "pounds", "lb", "lbs", "queen", "king",
    "twin", "pcs", "pieces", "piece", "ft", "feet", "fl", "gb", "tb", "ml", "gram", "grams",
    "quantity", "wide",
})
_STAT_OPENINGS = ("i am looking", "im looking for", "i would like", "i need a", "i want a",
                  "i want to")


def style_stats(texts: Iterable[str]) -> dict[str, Any]:
    """Length, opening and word-class statistics of instructions (price clauses stripped).

    Keys: ``n``, ``mean_words``, ``p10``/``p50``/``p90`` words, ``openings`` (share of each of
    the six measured openings, as a whole-word prefix), ``color`` (share with a COLOR_SET word),
    ``size`` (a size/quantity word), ``digit``, ``pack_of``.
    """
    colors = frozenset(COLOR_SET)
    lengths: list[int] = []
    counts = {"color": 0, "size": 0, "digit": 0, "pack_of": 0}
    opening_counts = dict.fromkeys(_STAT_OPENINGS, 0)
    for raw in texts:
        text = strip_price_clause(raw).lower()
        words = text.split()
        lengths.append(len(words))
        tokens = set(re.findall(r"[a-z]+", text))
        counts["color"] += bool(tokens & colors)
        counts["size"] += bool(tokens & _SIZE_WORDS)
        counts["digit"] += any(ch.isdigit() for ch in text)
        counts["pack_of"] += "pack of" in text
        for opening in _STAT_OPENINGS:
            opening_counts[opening] += " ".join(words[:len(opening.split())]) == opening
    n = len(lengths)
    if n == 0:
        raise ValueError("no texts")
    ordered = sorted(lengths)

    def pct(q: float) -> int:
        return ordered[min(n - 1, int(q * n))]

    return {
        "n": n, "mean_words": sum(lengths) / n, "p10": pct(0.1), "p50": pct(0.5), "p90": pct(0.9),
        "openings": {k: v / n for k, v in opening_counts.items()},
        **{k: v / n for k, v in counts.items()},
    }
