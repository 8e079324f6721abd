"""Seeded synthetic WebShop product catalog, generated on demand, plus a loader for real items.

A :class:`Catalog` stores only its seed, size and the static taxonomy; product ``i`` is a pure
function of ``(seed, i)`` (randomness from ``blake2b`` feeding ``random.Random`` through
``random()`` draws only, so items are identical across processes, hash seeds and Python versions)
and is built when asked, with a small LRU cache. A 1M-product catalog therefore costs almost nothing
beyond its search index.

What the catalog reproduces (``docs/reference/webshop.md`` §3.6): five top-level categories and
100+ product types (``query``) with 3-6-level Amazon-style breadcrumbs, near-type distractors
(shared breadcrumb prefix and head noun, e.g. men's running / walking / trail running shoes, or a
head noun across categories: laptop bag / makeup bag), titles "Brand + attrs + Type + model"
(sometimes keyword-stuffed), 3-10 hidden mined-style attributes per product drawn from per-category
vocabularies with fuzzy near-duplicates (some shown only in the description or features, some
nowhere), 0-3 option groups of 2-8 values that collide under fuzzy matching, and skewed log-normal
prices (median about $25-30, ~27% shown as ranges "$a to $b" with a hidden uniform draw, ~2%
unpriced, which upstream prices at $100).

``Catalog(..., version=1)`` is ``rspo/WebShop-v1``'s catalog: the same items except for the option
groups they offer (:data:`~.catalog_data.V1_EXTRA_GROUPS` give every type up to three; 12.5 % of
items offer none, 1 % one) and so for their prices and reviews, drawn after the options.

Upstream's real files are read by :mod:`~rspo_gym.envs.webshop.upstream` instead.
"""

from __future__ import annotations

import functools
import hashlib
import math
import random
import re
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .draws import below, between, choice, gauss, sample, sample_indices, stable_rng, weighted
from .catalog_data import CATEGORIES, OPTION_POOLS, TYPES, V1_EXTRA_GROUPS
from .model import Product
from .search import SearchIndex, search_text

__all__ = [
    "CATALOG_VERSIONS", "CATEGORY_TOPS", "Catalog", "CatalogItem", "MAX_PRODUCTS", "ProductType",
    "Review", "UNPRICED_PRICE",
]

#: Largest catalog accepted.
MAX_PRODUCTS = 5_000_000
#: Upstream's price for a product without pricing (``load_products``/``generate_product_prices``).
UNPRICED_PRICE = 100.0
#: Catalog versions: 0 is ``rspo/WebShop-v0``'s; 1 (``rspo/WebShop-v1``) differs only in the
#: option groups items offer (every type has two or three, and 86 % of items offer two or more,
#: as most of the original's do); titles, descriptions, features and attributes are v0's.
CATALOG_VERSIONS = (0, 1)
#: The five top-level categories, in taxonomy order.
CATEGORY_TOPS: tuple[str, ...] = ("fashion", "beauty", "electronics", "furniture", "food")

_BREADCRUMB_JOIN = " \u203a "
_ASIN_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ASIN_HALF = 36**4  # Feistel halves over the 8 free base-36 digits
_ASIN_RE = re.compile(r"B0[0-9A-Z]{8}")
_CACHE_SIZE = 1024
_VERSION = b"rspo_gym.webshop.catalog.v1"
# Words of type phrases that are not nouns (or are single letters) and so stay out of the lexicon.
_NON_NOUNS = frozenset({
    "s", "t", "c", "in", "of", "on", "over", "for", "and", "with", "extra", "virgin", "raw",
    "smoked", "roasted", "mixed", "wireless", "mechanical", "portable", "external", "electric",
    "liquid", "matte", "casual", "lace", "blackout", "dark", "green", "herbal", "sparkling",
    "ground", "hot", "smart", "standing", "accent", "athletic", "gaming", "computer", "winter",
    "leather", "pendant", "clip", "micro", "usb", "trail", "running", "walking", "yoga",
})


# ----------------------------------------------------------------------------- asins


def _feistel_round_key(seed: int, rnd: int, half: int) -> int:
    digest = hashlib.blake2b(
        f"{seed}|{rnd}|{half}".encode(), digest_size=8, person=b"rspo-asin"
    ).digest()
    return int.from_bytes(digest, "big") % _ASIN_HALF


def _asin_encode(seed: int, i: int) -> str:
    """A bijection index -> "B0" + 8 base-36 digits (4-round Feistel over 36^4 x 36^4)."""
    left, right = divmod(i, _ASIN_HALF)
    for rnd in range(4):
        left, right = right, (left + _feistel_round_key(seed, rnd, right)) % _ASIN_HALF
    x = left * _ASIN_HALF + right
    digits = []
    for _ in range(8):
        x, d = divmod(x, 36)
        digits.append(_ASIN_ALPHABET[d])
    return "B0" + "".join(reversed(digits))


def _asin_decode(seed: int, asin: str) -> int:
    x = int(asin[2:], 36)
    left, right = divmod(x, _ASIN_HALF)
    for rnd in reversed(range(4)):
        left, right = (right - _feistel_round_key(seed, rnd, left)) % _ASIN_HALF, left
    return left * _ASIN_HALF + right


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Review:
    """One review as upstream's item dict keeps it: ``score`` (1-5 stars) and ``body``."""

    score: int
    body: str


@dataclass(frozen=True)
class ProductType:
    """One product type of the taxonomy (a ``query``)."""

    index: int
    category_top: str
    breadcrumb: tuple[str, ...]
    query: str
    nouns: tuple[str, ...]
    attributes: tuple[str, ...]
    option_groups: tuple[tuple[str, bool, tuple[str, ...]], ...]
    price_median: float
    #: indices of near-type distractors: types sharing this type's head noun
    near_types: tuple[int, ...] = ()

    @property
    def category(self) -> str:
        """The breadcrumb joined by ``' › '`` (upstream ``product_category``)."""
        return _BREADCRUMB_JOIN.join(self.breadcrumb)


@dataclass(frozen=True)
class CatalogItem:
    """Everything the env shows or scores for one product.

    ``product`` is what the reward reads; ``options`` maps option name to its values in page
    order; ``price_text`` is what pages show ("$12.99" or "$82.01 to $92.01"); ``price`` is the
    hidden reward price (the value, a uniform draw in ``[a, b]`` for ranges, 100.0 when
    unpriced); ``price_range`` the shown numbers (empty when unpriced); ``features`` the bullet
    points; ``rating`` the mean review score or ``None``.
    """

    product: Product
    options: Mapping[str, tuple[str, ...]]
    price_text: str
    price: float
    price_range: tuple[float, ...]
    features: tuple[str, ...]
    reviews: tuple[Review, ...]
    rating: float | None
    category_top: str

    def __hash__(self) -> int:
        return hash((self.product, self.price))

    @property
    def asin(self) -> str:
        return self.product.asin

    @property
    def title(self) -> str:
        return self.product.name

    @property
    def description(self) -> str:
        return self.product.description

    def search_document(self) -> str:
        """Upstream's indexed text for this item (:func:`search.search_text`)."""
        return search_text(self.product.name, self.product.description, self.features,
                           self.options)


def _freeze_options(options: Mapping[str, Sequence[str]]) -> Mapping[str, tuple[str, ...]]:
    return MappingProxyType({name: tuple(values) for name, values in options.items()})


# ----------------------------------------------------------------------------- taxonomy


def _title_case(text: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in text.split(" "))


def _tokens(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text.lower())


def _group_name(group: object) -> str:
    return OPTION_POOLS[group][0] if isinstance(group, str) else group[0]


def _with_extra_groups(groups: tuple, extras: tuple) -> tuple:
    """``groups`` plus the first ``extras`` with a new option name, up to three groups."""
    names = {_group_name(g) for g in groups}
    out = list(groups)
    for extra in extras:
        if len(out) >= 3:
            break
        if _group_name(extra) not in names:
            out.append(extra)
            names.add(_group_name(extra))
    return tuple(out)


@functools.cache
def _taxonomy(version: int = 0) -> tuple[tuple[ProductType, ...], Mapping[str, dict[str, Any]]]:
    """Build the product types once per process (pure function of the data below); version 1
    adds :data:`~.catalog_data.V1_EXTRA_GROUPS` to the types that offer one option group."""
    types: list[ProductType] = []
    for idx, (cat, tail, phrase, attrs, groups, median) in enumerate(TYPES):
        if version >= 1:
            groups = _with_extra_groups(tuple(groups), V1_EXTRA_GROUPS[cat])
        resolved = []
        for group in groups:
            if isinstance(group, str):
                resolved.append(OPTION_POOLS[group])
            else:
                name, values = group
                resolved.append((name, name in ("size", "length"), tuple(values)))
        nouns = tuple(t for t in _tokens(phrase) if t not in _NON_NOUNS)
        types.append(ProductType(
            index=idx, category_top=cat, breadcrumb=(CATEGORIES[cat]["root"], *tail),
            query=phrase, nouns=nouns, attributes=tuple(attrs), option_groups=tuple(resolved),
            price_median=float(median),
        ))
    by_head: dict[str, list[int]] = {}
    for t in types:
        by_head.setdefault(t.nouns[-1], []).append(t.index)
    final = tuple(
        ProductType(**{**t.__dict__, "near_types": tuple(
            j for j in by_head[t.nouns[-1]] if j != t.index)})
        for t in types
    )
    return final, MappingProxyType(CATEGORIES)


@functools.cache
def _noun_lexicon() -> frozenset[str]:
    types, cats = _taxonomy()
    words: set[str] = set()
    for t in types:
        words.update(t.nouns)
    for cat in cats.values():
        for brand in cat["brands"]:
            words.update(_tokens(brand))
        words.update(w for f in cat["fillers"] for w in _tokens(f))
    return frozenset(words)


# ----------------------------------------------------------------------------- text templates

_BULLET_TEMPLATES = (
    "{A}: this {q} is {a}, made for everyday use and built to last",
    "{A} design - our {q} is {a}, so you can use it with confidence",
    "Premium quality: {a} and carefully checked before shipping",
    "{A}: customers love that it is {a}; a practical choice for {f}",
    "Why choose {b}? Every {q} is {a} and comes ready for {f}",
)
_GENERIC_BULLETS = (
    "What you get: 1 x {q} and a quick start guide",
    "Worry-free purchase: 30-day returns and friendly customer service from {b}",
    "Perfect gift for family and friends, great for {f}",
    "Please check the size and option details before ordering",
)
_DESC_OPENERS = (
    "The {b} {q} combines thoughtful design with dependable quality.",
    "Meet the {b} {q}, a simple upgrade for {f}.",
    "Looking for a reliable {q}? {b} has you covered.",
)
_DESC_ATTR = (
    "It is {a}.",
    "Features: {a}.",
    "Highlights include {a} construction and careful finishing.",
    "Designed to be {a} for years of use.",
)
_DESC_CLOSERS = (
    "Backed by {b} customer support.",
    "Makes a great addition to any {f} routine.",
    "",
)
_REVIEWS = {
    5: ("Absolutely love it, exactly as described.", "Great quality for the price.",
        "Would buy again, highly recommend."),
    4: ("Very good overall, minor issues.", "Works well, shipping was fast.",
        "Nice product, a bit different from the photos."),
    3: ("It's okay, does the job.", "Average quality, fair price."),
    2: ("Not great, quality could be better.", "Smaller than expected."),
    1: ("Broke after a week, disappointed.", "Not as described, returned it."),
}
_REVIEW_WEIGHTS = (0.06, 0.07, 0.12, 0.3, 0.45)  # 1..5 stars
_CONSONANTS = "BCDFGHJKLMNPRSTVWXZ"
_PLACE_WEIGHTS = (0.15, 0.4, 0.3, 0.15)
#: ``(0.1, 0.35, 0.4, 0.15)[:g + 1]`` for the number ``g`` of option groups a type offers (max 3)
_GROUP_WEIGHTS = tuple((0.1, 0.35, 0.4, 0.15)[: g + 1] for g in range(4))
#: Version 1: the share of items offering no option; 1 % offer
#: one group, the others two or three (86 % offer two or more, as 88.4 % of the original's synthetic
#: goals need two or more option clicks).
_NO_OPTION_V1 = 0.125
_GROUP_WEIGHTS_V1 = ((1.0,), (_NO_OPTION_V1, 1 - _NO_OPTION_V1),
                     (_NO_OPTION_V1, 0.01, 0.99 - _NO_OPTION_V1),
                     (_NO_OPTION_V1, 0.01, 0.3, 0.69 - _NO_OPTION_V1))


@functools.lru_cache(maxsize=None)
def _title_query(query: str) -> str:
    return _title_case(query)


def _model_code(r: random.Random) -> str:
    kind = below(r, 4)
    if kind == 0:
        return f"{choice(r, _CONSONANTS)}{choice(r, _CONSONANTS)}-{between(r, 10, 999)}"
    if kind == 1:
        return f"{choice(r, ('Pro', 'Max', 'Plus', 'Lite', 'Classic', 'Elite'))} {between(r, 2, 9)}"
    if kind == 2:
        return f"{choice(r, _CONSONANTS)}{between(r, 100, 9999)}"
    return f"Series {between(r, 1, 12)}"


def _money(x: float) -> str:
    return f"${x:.2f}"


def _price(r: random.Random, median: float) -> tuple[str, float, tuple[float, ...]]:
    """(shown text, hidden price, shown numbers): log-normal, ~27% ranges, ~2% unpriced."""
    u = r.random()
    value = median * math.exp(0.6 * gauss(r))
    value = min(max(value, 1.0), 999.0)
    value = math.floor(value) + 0.99 if r.random() < 0.5 and value < 998 else round(value, 2)
    if u < 0.02:
        return "$100.0", UNPRICED_PRICE, ()  # upstream's tag for a product without pricing
    if u < 0.29:
        high = round(min(value * (1.1 + 0.9 * r.random()), 999.0), 2)
        if high > value:
            hidden = value + (high - value) * r.random()
            return f"{_money(value)} to {_money(high)}", hidden, (value, high)
    return _money(value), value, (value,)


# ----------------------------------------------------------------------------- catalog

#: Catalog size from which a sequential scan of search documents uses worker processes.
_PARALLEL_MIN = 200_000
_WORKERS = 2
_CHUNK = 10_000
_AHEAD = 6


def _docs_chunk(num_products: int, seed: int, start: int, stop: int, version: int = 0) -> list[str]:
    cat = Catalog(num_products, seed, version=version)
    return [cat._search_document(i) for i in range(start, stop)]


class _Prefetch:
    """Search documents ``0, 1, 2, ...`` of a catalog, computed ahead in chunks by a process pool
    and handed out in index order."""

    def __init__(self, num_products: int, seed: int, version: int = 0) -> None:
        import concurrent.futures
        import multiprocessing

        self._n = num_products
        self._seed = seed
        self._version = version
        ctx = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() \
            else None
        self._pool = concurrent.futures.ProcessPoolExecutor(_WORKERS, mp_context=ctx)
        self._futures: deque = deque()
        self._submitted = 0
        self._buf: list[str] = []
        self._base = 0  # index of self._buf[0]
        self._pos = 0  # next index expected
        self.done = False
        for _ in range(_AHEAD):
            self._submit()

    def _submit(self) -> None:
        if self._submitted < self._n:
            stop = min(self._submitted + _CHUNK, self._n)
            self._futures.append(self._pool.submit(_docs_chunk, self._n, self._seed,
                                                   self._submitted, stop, self._version))
            self._submitted = stop

    def get(self, i: int) -> str | None:
        if i != self._pos:
            return None
        if i - self._base >= len(self._buf):
            if not self._futures:
                return None
            self._base += len(self._buf)
            self._buf = self._futures.popleft().result()
            self._submit()
        doc = self._buf[i - self._base]
        self._pos = i + 1
        self.done = self._pos >= self._n
        return doc

    def close(self) -> None:
        for f in self._futures:
            f.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)


class ItemCache:
    """The last :data:`_CACHE_SIZE` items a catalog built, shared by the threads of one process.

    Items are made on demand (from a seed, or decoded from a data file) because an env reads a
    few pages of a catalog that may hold a million products; keeping every one would cost the
    memory the lazy catalog saves. Making happens outside the lock, so two threads asking for
    the same new item may both make it: items are pure functions of their index, so either
    copy is right.
    """

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self._size = size
        self._items: OrderedDict[int, CatalogItem] = OrderedDict()
        self._lock = threading.Lock()

    def peek(self, i: int) -> CatalogItem | None:
        """Item ``i`` if it is cached, without making it or changing the eviction order."""
        with self._lock:
            return self._items.get(i)

    def get_or_make(self, i: int, make: Callable[[int], CatalogItem]) -> CatalogItem:
        with self._lock:
            hit = self._items.get(i)
            if hit is not None:
                self._items.move_to_end(i)
                return hit
        made = make(i)
        with self._lock:
            self._items[i] = made
            if len(self._items) > self._size:
                self._items.popitem(last=False)
        return made


class Catalog:
    """A seeded synthetic catalog of ``num_products`` items, each generated on demand.

    ``item(i)`` is a pure function of ``(seed, i)`` (and ``version``: 0 for ``rspo/WebShop-v0``,
    1 for ``rspo/WebShop-v1``); the object itself holds the seed, the size,
    the taxonomy (shared, built once per process), a type permutation and a bounded LRU cache.
    Thread-safe.
    """

    def __init__(self, num_products: int = 1000, seed: int = 0, *, version: int = 0) -> None:
        if isinstance(num_products, bool) or not isinstance(num_products, int):
            raise TypeError(f"num_products must be an int, got {type(num_products).__name__}")
        if not 1 <= num_products <= MAX_PRODUCTS:
            raise ValueError(f"num_products must be in [1, {MAX_PRODUCTS}], got {num_products}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        if version not in CATALOG_VERSIONS:
            raise ValueError(f"version must be one of {CATALOG_VERSIONS}, got {version!r}")
        self.num_products = num_products
        self.seed = seed
        self.version = version
        self._types, self._categories = _taxonomy(version)
        self._group_weights = _GROUP_WEIGHTS_V1 if version == 1 else _GROUP_WEIGHTS
        r = stable_rng(b'rspo-webshop', _VERSION, "types", seed)
        self._type_perm = tuple(sample_indices(r, len(self._types), len(self._types)))
        self._cache = ItemCache()
        self._pf: _Prefetch | None = None
        self._pf_lock = threading.Lock()

    def __repr__(self) -> str:
        tail = f", version={self.version}" if self.version else ""
        return f"Catalog(num_products={self.num_products}, seed={self.seed}{tail})"

    def __len__(self) -> int:
        return self.num_products

    def __iter__(self) -> Iterator[CatalogItem]:
        """All items in index order (generated fresh; the LRU cache is left alone)."""
        for i in range(self.num_products):
            yield self._make(i)

    @property
    def product_types(self) -> tuple[ProductType, ...]:
        return self._types

    @property
    def categories(self) -> Mapping[str, dict[str, Any]]:
        """Per top-level category: breadcrumb root, brands, attribute vocabulary, filler nouns."""
        return self._categories

    @property
    def noun_lexicon(self) -> frozenset[str]:
        """Single lowercase words a title tagger would call nouns: type nouns, brands, fillers.

        Pass to :class:`~rspo_gym.envs.webshop.reward.LexiconNouns` for ``title_score``.
        """
        return _noun_lexicon()

    def type_index_of(self, i: int) -> int:
        """The product type of item ``i``: every block of ``len(types)`` consecutive items holds
        each type once (a seeded permutation, rotated per block)."""
        self._check_index(i)
        n = len(self._types)
        block, pos = divmod(i, n)
        return self._type_perm[(pos + 7 * block) % n]

    def item(self, i: int) -> CatalogItem:
        self._check_index(i)
        return self._cache.get_or_make(i, self._make)

    def __getitem__(self, i: int) -> CatalogItem:
        return self.item(i)

    def asin(self, i: int) -> str:
        """Item ``i``'s ASIN without building the item."""
        self._check_index(i)
        return _asin_encode(self.seed, i)

    def index_of(self, asin: str) -> int:
        """The index of the item with ``asin`` (case-insensitive); ``KeyError`` if none."""
        if not isinstance(asin, str):
            raise TypeError(f"asin must be a str, got {type(asin).__name__}")
        key = asin.upper()
        if _ASIN_RE.fullmatch(key):
            i = _asin_decode(self.seed, key)
            if i < self.num_products:
                return i
        raise KeyError(asin)

    def __contains__(self, asin: object) -> bool:
        try:
            self.index_of(asin)  # type: ignore[arg-type]
        except (KeyError, TypeError):
            return False
        return True

    def search_document(self, i: int) -> str:
        """Item ``i``'s :meth:`CatalogItem.search_document` (built without the whole item).

        For catalogs of :data:`_PARALLEL_MIN` products or more, a scan ``0, 1, 2, ...`` (as
        indexing does) is served by :data:`_WORKERS` worker processes generating chunks ahead, in
        order; documents are pure functions of ``(seed, i)``, so the text is the same."""
        self._check_index(i)
        hit = self._cache.peek(i)
        if hit is not None:
            return hit.search_document()
        if self.num_products >= _PARALLEL_MIN:
            doc = self._prefetched(i)
            if doc is not None:
                return doc
        return self._search_document(i)

    def _prefetched(self, i: int) -> str | None:
        with self._pf_lock:
            pf = self._pf
            if pf is None:
                if i != 0:
                    return None
                pf = self._pf = _Prefetch(self.num_products, self.seed, self.version)
            doc = pf.get(i)
            if doc is None or pf.done:
                pf.close()
                self._pf = None
            return doc

    def build_search_index(self) -> SearchIndex:
        """A BM25 index whose document ``i`` is :meth:`search_document` of item ``i``; equal
        scores are ordered by ASIN, as upstream's Lucene orders them."""
        return SearchIndex.build((self._search_document(i) for i in range(self.num_products)),
                                 doc_ids=(self.asin(i) for i in range(self.num_products)))

    # ------------------------------------------------------------------ generation

    def _check_index(self, i: int) -> None:
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"item index must be an int, got {type(i).__name__}")
        if not 0 <= i < self.num_products:
            raise IndexError(f"item index {i} out of range [0, {self.num_products})")

    def _core(self, i: int) -> tuple[ProductType, random.Random, str, list[str], list[str], str,
                                     dict[str, tuple[str, ...]]]:
        """The draws every view of item ``i`` shares, in stream order: brand, attributes, title,
        bullets, description, options. Returns ``(type, rng, title, attrs, bullets, description,
        options)`` with ``rng`` positioned for the price and review draws of :meth:`_make`."""
        types = self._types
        n = len(types)
        block, pos = divmod(i, n)
        t = types[self._type_perm[(pos + 7 * block) % n]]
        cat = self._categories[t.category_top]
        r = stable_rng(b'rspo-webshop', _VERSION, "item", self.seed, i)
        rand = r.random
        brands = cat["brands"]
        m = len(brands)
        x = int(rand() * m)
        brand = brands[x if x < m else m - 1]
        fillers = cat["fillers"]
        nf = len(fillers)

        # hidden attributes: 1-4 type attributes + category vocabulary, 3-10 in all
        k = between(r, 3, 10)
        n_type = between(r, 1, min(k, len(t.attributes)))
        attrs = sample(r, t.attributes, n_type)
        attrs += sample(r, [a for a in cat["attrs"] if a not in attrs], k - n_type)
        # where each is visible: 0 title, 1 features, 2 description, 3 nowhere (hidden only)
        place = [weighted(r, _PLACE_WEIGHTS) for _ in attrs]
        in_title = [a for a, p in zip(attrs, place) if p == 0][:2]
        place = [1 if p == 0 and a not in in_title else p for a, p in zip(attrs, place)]
        if all(p == 0 for p in place):
            place[-1] = 2  # at least one attribute shown only on a sub-page

        title = " ".join([brand, *(_title_case(a) for a in in_title), _title_query(t.query),
                          _model_code(r)])
        if rand() < 0.3:  # Amazon-style keyword stuffing
            title += " for " + " ".join(_title_case(f) for f in sample(r, fillers, between(r, 2, 8)))

        q = t.query
        bullets = []
        for a in [a for a, p in zip(attrs, place) if p == 1]:
            x = int(rand() * 5)
            tmpl = _BULLET_TEMPLATES[x if x < 5 else 4]
            x = int(rand() * nf)
            bullets.append(tmpl.format(A=a.upper(), a=a, f=fillers[x if x < nf else nf - 1],
                                       q=q, b=brand))
        for g in sample(r, _GENERIC_BULLETS, max(0, between(r, 3, 5) - len(bullets))):
            x = int(rand() * nf)
            bullets.append(g.format(f=fillers[x if x < nf else nf - 1], q=q, b=brand))
        opener = choice(r, _DESC_OPENERS)
        x = int(rand() * nf)
        desc = [opener.format(f=fillers[x if x < nf else nf - 1], q=q, b=brand)]
        desc += [choice(r, _DESC_ATTR).format(a=a) for a, p in zip(attrs, place) if p == 2]
        closer = choice(r, _DESC_CLOSERS)
        x = int(rand() * nf)
        desc.append(closer.format(f=fillers[x if x < nf else nf - 1], q=q, b=brand))
        description = " ".join(s for s in desc if s)

        options: dict[str, tuple[str, ...]] = {}
        groups = t.option_groups
        n_groups = weighted(r, self._group_weights[min(3, len(groups))])
        for name, ordered, values in (groups[j] for j in sorted(sample_indices(r, len(groups),
                                                                                 n_groups))):
            if name in options:
                continue
            count = between(r, 2, min(8, len(values)))
            if ordered:
                start = below(r, len(values) - count + 1)
                options[name] = values[start:start + count]
            else:
                options[name] = tuple(sample(r, values, count, keep_order=True))
        return t, r, title, attrs, bullets, description, options

    def _search_document(self, i: int) -> str:
        """:meth:`CatalogItem.search_document` of item ``i`` without building the item: the same
        draws as :meth:`_make` up to the options (price, reviews and the ASIN come after them in
        the stream, or need none, so skipping them changes nothing before)."""
        _, _, title, _, bullets, description, options = self._core(i)
        return search_text(title, description, bullets, options)

    def _make(self, i: int) -> CatalogItem:
        t, r, title, attrs, bullets, description, options = self._core(i)
        price_text, price, price_range = _price(r, t.price_median)

        reviews = tuple(
            Review(score := weighted(r, _REVIEW_WEIGHTS) + 1, choice(r, _REVIEWS[score]))
            for _ in range(weighted(r, (0.25, 0.2, 0.2, 0.15, 0.1, 0.1)))
        )
        rating = round(sum(rv.score for rv in reviews) / len(reviews), 1) if reviews else None

        product = Product(
            asin=_asin_encode(self.seed, i), name=title, query=t.query, category=t.category,
            attributes=tuple(attrs), bullet_points=tuple(bullets), description=description,
        )
        return CatalogItem(
            product=product, options=_freeze_options(options), price_text=price_text,
            price=price, price_range=price_range, features=tuple(bullets), reviews=reviews,
            rating=rating, category_top=t.category_top,
        )
