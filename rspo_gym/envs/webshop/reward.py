"""WebShop's outcome reward, rule for rule as upstream ``web_agent_site/engine/goal.py``.

``R = r_type · (A + O + P) / (n_attr + n_opt + 1)`` where ``A`` counts goal attributes found on
the product, ``O`` goal options matched by the selected option values, ``P = 1[price ≤ upper]``,
and ``r_type ∈ {0, 0.1, 0.5, 1}`` says whether the product is the right kind of thing. An episode
is won iff ``R == 1``. Everything here is a pure function of its arguments; the only optional
dependency is spaCy, used for ``title_score`` when no noun lexicon is given.

Fuzzy matching goes through :func:`fuzzy_score`, which reproduces ``thefuzz`` 0.22.1's
``fuzz.token_set_ratio`` exactly on top of rapidfuzz (see its docstring for why a bare rapidfuzz
call is not enough).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from .model import GoalOption

__all__ = [
    "COLOR_SET", "DUMMY_ATTR", "FUZZY_THRESHOLD", "BREADCRUMB_SEP", "LexiconNouns", "NounExtractor",
    "RewardParts", "attribute_reward", "category_match", "fuzzy_score", "normalize_color",
    "option_reward", "price_ok", "score", "shared_lexicon_nouns", "title_nouns", "title_score",
    "type_reward",
]

#: Colour words in upstream ``engine/normalize.py`` order (data, reproduced as is). Order matters:
#: :func:`normalize_color` returns the *first* entry contained in the text, so "black | white" is
#: "black" and "navy blue" is "blue" ('blue' precedes 'navy').
COLOR_SET: tuple[str, ...] = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure",
    "banana", "beige", "black", "blue", "blush", "bordeaux", "bronze",
    "brown", "burgundy", "camel", "camo", "caramel", "champagne",
    "charcoal", "cheetah", "chestnut", "chocolate", "christmas", "coffee",
    "cognac", "copper", "coral", "cranberry", "cream", "crystal", "dark",
    "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite",
    "grape", "graphite", "grass", "gray", "green", "grey", "heather", "indigo",
    "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light", "lilac",
    "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha",
    "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive",
    "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow", "red",
    "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver", "skull",
    "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal",
    "tiger", "turquoise", "violet", "walnut", "wheat", "white", "wine", "yellow",
)

#: Upstream ``goal.py``: an attribute/option matches when ``token_set_ratio > 85`` (strictly).
FUZZY_THRESHOLD = 85
#: Upstream ``load_products`` gives a product with no mined attributes ``['DUMMY_ATTR']``.
DUMMY_ATTR = "DUMMY_ATTR"
#: Amazon breadcrumb separator (U+203A) used in ``product_category``.
BREADCRUMB_SEP = "\u203a"

# thefuzz's ``utils.ascii_only``: deletes code points 128-255 only (not all non-ASCII).
_LATIN1_HIGH = {i: None for i in range(128, 256)}


class _TypeInfo(Protocol):
    """What :func:`type_reward` reads from a product or goal (both model records qualify)."""

    name: str
    query: str
    category: str


#: ``title -> noun tokens`` (lowercased, duplicates and order kept).
NounExtractor = Callable[[str], list[str]]


# ----------------------------------------------------------------------------- fuzzy matching


def fuzzy_score(a: object, b: object) -> int:
    """``thefuzz.fuzz.token_set_ratio(a, b)`` (0.22.1, default arguments), computed with rapidfuzz.

    thefuzz 0.22.1 is a thin wrapper: ``str()`` each side, delete chars 128-255
    (``force_ascii=True``), apply rapidfuzz's ``default_process`` (lowercase, non-alphanumerics to
    spaces, strip), call rapidfuzz's ``token_set_ratio`` and return ``int(round(score))``. The
    rounding matters for the ``> 85`` test (a raw 85.3 is 85, a miss), and ``str()`` matters for
    upstream synthetic goals, whose options are ``(name, value)`` tuples.

    >>> fuzzy_score("8", "8.5"), fuzzy_score("Pack of 2", "pack of 12")
    (100, 95)
    """
    s1 = default_process(str(a).translate(_LATIN1_HIGH))
    s2 = default_process(str(b).translate(_LATIN1_HIGH))
    return int(round(fuzz.token_set_ratio(s1, s2)))


def _fuzzy_hit(a: object, b: object) -> bool:
    return fuzzy_score(a, b) > FUZZY_THRESHOLD


def normalize_color(text: str) -> str:
    """The first :data:`COLOR_SET` word that occurs *as a substring* of ``text``, else ``text``.

    Upstream ``normalize.normalize_color``; applied to both selected and goal option values before
    matching, so any colour-bearing value collapses to one colour word (which is why "black | white"
    does not match "white").

    >>> normalize_color("black | white"), normalize_color("navy blue"), normalize_color("xl")
    ('black', 'blue', 'xl')
    """
    for color in COLOR_SET:
        if color in text:
            return color
    return text


def _normalize_option(option: GoalOption) -> GoalOption:
    """``normalize_color`` as upstream applies it to a str *or* a synthetic ``(name, value)`` pair.

    For a tuple, upstream's ``color in option`` is element membership, so only a value that *is*
    exactly a colour word is normalized; the pair is otherwise kept and later matched via ``str()``.
    """
    if isinstance(option, tuple):
        return next((color for color in COLOR_SET if color in option), option)
    return normalize_color(option)


# ----------------------------------------------------------------------------- type reward


class LexiconNouns:
    """Noun extractor over a fixed vocabulary: the title's tokens that are in ``vocabulary``.

    The synthetic catalog knows its own product-type and brand words, so it passes them here and
    the reward needs no tagger; spaCy (:func:`title_nouns` without a lexicon) is only for real data.
    Tokens are maximal runs of letters/digits of the lowercased title (so "x-large" is "x",
    "large", roughly like spaCy's infix split); duplicates and order are kept, as upstream's noun
    list keeps them (they count in ``title_score``'s denominator).

    >>> LexiconNouns(["shoes", "Sneakers"])("Running Shoes - Mens Sneakers, shoes")
    ['shoes', 'sneakers', 'shoes']
    """

    def __init__(self, vocabulary: Iterable[str]) -> None:
        words = frozenset(word.lower() for word in vocabulary)
        bad = sorted(word for word in words if _tokens(word) != [word])
        if bad:
            raise ValueError(f"vocabulary entries must be single alphanumeric tokens: {bad[:5]}")
        self.vocabulary = words

    def __call__(self, title: str) -> list[str]:
        return [token for token in _tokens(title.lower()) if token in self.vocabulary]


@functools.lru_cache(maxsize=16)
def shared_lexicon_nouns(vocabulary: frozenset[str]) -> LexiconNouns:
    """The process-wide :class:`LexiconNouns` of ``vocabulary``: every session scoring against one
    catalog shares it, so a long-lived session (the web UI keeps thousands) holds no copy of it.

    >>> shared_lexicon_nouns(frozenset({"shoes"})) is shared_lexicon_nouns(frozenset({"shoes"}))
    True
    """
    return LexiconNouns(vocabulary)


def _tokens(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text)


@functools.lru_cache(maxsize=1)
def _spacy_pipeline() -> Any:
    """Upstream's tagger, ``spacy.load("en_core_web_sm")``, loaded once on first use."""
    try:
        import spacy  # noqa: PLC0415 - optional dependency, imported lazily

        return spacy.load("en_core_web_sm")
    except (ImportError, OSError) as exc:
        raise ImportError(
            "title_nouns without a lexicon needs spaCy and en_core_web_sm; pass a LexiconNouns "
            "extractor (the synthetic catalog does) or install them"
        ) from exc


def title_nouns(title: str, *, lexicon: Iterable[str] | None = None) -> list[str]:
    """The noun tokens of a product name, lowercased, duplicates and order kept.

    Upstream tags the name with spaCy ``en_core_web_sm`` and keeps tokens whose POS is NOUN or
    PROPN (it also lists a non-existent ``PNOUN``). With ``lexicon`` the words of the title in that
    vocabulary are returned instead (:class:`LexiconNouns`). There is deliberately no lexicon-free
    fallback heuristic: without a lexicon spaCy is required and ``ImportError`` says so.
    """
    if lexicon is not None:
        return LexiconNouns(lexicon)(title)
    return [tok.text.lower() for tok in _spacy_pipeline()(title) if tok.pos_ in ("NOUN", "PROPN")]


def category_match(product_category: str, goal_category: str) -> bool:
    """Upstream: the two breadcrumbs, split on '›' and stripped, share at least 2 distinct elements.

    Order and depth are ignored, so "a › d › b" matches "a › b › c".
    """
    ours = {part.strip() for part in product_category.split(BREADCRUMB_SEP)}
    theirs = {part.strip() for part in goal_category.split(BREADCRUMB_SEP)}
    return len(ours & theirs) >= 2


def title_score(product_nouns: Sequence[str], goal_nouns: Sequence[str]) -> float:
    """Upstream: ``|set(product) ∩ set(goal)| / len(goal)`` (goal duplicates count), 0.2 if no goal nouns.

    >>> title_score(["shoes"], ["shoes", "shoes", "men"])
    0.3333333333333333
    """
    if not goal_nouns:
        return 0.2
    return len(set(product_nouns) & set(goal_nouns)) / len(goal_nouns)


def type_reward(
    purchased: _TypeInfo, goal: _TypeInfo, noun_extractor: NounExtractor | None = None
) -> tuple[float, dict[str, Any]]:
    """``r_type`` and its inputs, as upstream ``get_type_reward``.

    Rules in upstream order, later ones overriding: start at 1.0; 0.5 unless the queries are equal
    or the categories match or ``title_score > 0.2``; 0.1 if ``title_score < 0.1``; 0.0 if
    ``title_score == 0`` (so a matching query does not save a product sharing no name noun).
    ``noun_extractor`` defaults to :func:`title_nouns` (spaCy).
    """
    extract = noun_extractor if noun_extractor is not None else title_nouns
    q_match = purchased.query == goal.query
    c_match = category_match(purchased.category, goal.category)
    t_score = title_score(extract(purchased.name), extract(goal.name))
    r_type = 1.0
    if not (q_match or c_match or t_score > 0.2):
        r_type = 0.5
    if t_score < 0.1:
        r_type = 0.1
    if t_score == 0.0:
        r_type = 0.0
    return r_type, {"query_match": q_match, "category_match": c_match, "title_score": t_score}


# ----------------------------------------------------------------------------- attributes, options, price


def attribute_reward(
    product_attributes: Sequence[str],
    title: str,
    bullet_points: Sequence[str],
    description: str,
    goal_attributes: Sequence[str],
) -> tuple[int, int]:
    """``(hits, n)``: goal attributes found on the product, as upstream ``get_attribute_reward``.

    A goal attribute hits if some product attribute has ``token_set_ratio > 85``, else if it is a
    substring of the lowercased title, of the space-joined lowercased bullet points, or of the
    lowercased description. The goal attribute itself is *not* lowercased (upstream doesn't; mined
    attributes are lowercase). Each goal attribute counts at most once. A product without
    attributes is matched against upstream's placeholder ``['DUMMY_ATTR']``.
    """
    attrs = tuple(product_attributes) or (DUMMY_ATTR,)
    texts = (title.lower(), " ".join(bullet_points).lower(), description.lower())
    hits = 0
    for goal_attr in goal_attributes:
        if any(_fuzzy_hit(attr, goal_attr) for attr in attrs) or any(goal_attr in t for t in texts):
            hits += 1
    return hits, len(goal_attributes)


def option_reward(
    selected_values: Iterable[str], goal_options: Sequence[GoalOption]
) -> tuple[int, int]:
    """``(hits, n)``: goal options matched by the selected values, as upstream ``get_option_reward``.

    Both sides go through :func:`normalize_color`; a goal option hits if some selected value has
    ``token_set_ratio > 85`` with it, and counts once however many values match. Goal options may
    be value strings (human goals) or ``(name, value)`` pairs (upstream synthetic goals), matched
    as upstream matches them (``str()`` of the pair, e.g. "color navy blue").
    """
    selected = [normalize_color(value) for value in selected_values]
    hits = 0
    for goal_option in goal_options:
        wanted = _normalize_option(goal_option)
        if any(_fuzzy_hit(value, wanted) for value in selected):
            hits += 1
    return hits, len(goal_options)


def price_ok(price: float, price_upper: float) -> bool:
    """Upstream: the (hidden) price is at most the goal's ``price_upper``; equality passes."""
    return price <= price_upper


# ----------------------------------------------------------------------------- total


@dataclass(frozen=True)
class RewardParts:
    """Every component of one reward evaluation (``info["reward_parts"]``)."""

    total: float
    r_type: float
    query_match: bool
    category_match: bool
    title_score: float
    attr_hits: int
    n_attr: int
    opt_hits: int
    n_opt: int
    price_ok: bool

    @property
    def won(self) -> bool:
        """Success is upstream's ``reward == 1.0``: right type and every slot hit."""
        return self.total == 1.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def score(
    product: Any,
    goal: Any,
    selected_options: Mapping[str, str] | Iterable[str],
    price: float,
    noun_extractor: NounExtractor | None = None,
) -> tuple[float, RewardParts]:
    """Upstream ``get_reward``: ``r_type · (A + O + P) / (n_attr + n_opt + 1)``.

    ``product`` is a :class:`~rspo_gym.envs.webshop.model.Product` (or anything with its fields),
    ``goal`` a :class:`~rspo_gym.envs.webshop.model.Goal`; ``selected_options`` maps option name
    to chosen value (only values are used) or is the values; ``price`` is the product's hidden
    reward price. Computed in upstream's order (fraction first, then times ``r_type``) so floats
    agree bit for bit.
    """
    values = selected_options.values() if isinstance(selected_options, Mapping) else selected_options
    r_type, type_info = type_reward(product, goal, noun_extractor)
    attr_hits, n_attr = attribute_reward(
        product.attributes, product.name, product.bullet_points, product.description,
        goal.attributes,
    )
    opt_hits, n_opt = option_reward(values, goal.options)
    p_ok = price_ok(price, goal.price_upper)
    total = (attr_hits + opt_hits + int(p_ok)) / (n_attr + n_opt + 1)
    total *= r_type
    parts = RewardParts(
        total=total, r_type=r_type, attr_hits=attr_hits, n_attr=n_attr, opt_hits=opt_hits,
        n_opt=n_opt, price_ok=p_ok, **type_info,
    )
    return total, parts
