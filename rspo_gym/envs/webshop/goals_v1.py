"""``rspo/WebShop-v1``'s goals: tasks calibrated so that the WebShop paper's rule baseline scores
here what it scores on the original.

v0's human-style goals (``goals.py``) made the rule (search the instruction, buy the first result
with no option selected) score 72 with 24 % success where the paper reports 45.6 and 9.6 %: they
requested 0.9 options (29 % none, and the rule never selects one) and 1.6 attributes drawn from
what the target's pages show, its title included, so the first search result almost always had
them (``docs/env_webshop.md``, difficulty).

A v1 goal (:class:`TaskRecipe`, values in :data:`V1`), over catalog version 1 (``catalog.py``:
items offer two or three option groups) keeps v0's phrasing and upstream's price rule and
requests every option group the target offers and mostly one attribute, taken first from the
target's Features past the first bullet (shown on its pages, not indexed by search), then from the
rest of its off-title text, its title last. Every v1 goal is satisfiable: its attributes are the
target's own and its options values the target offers, so buying the target with them scores 1.0.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from .draws import choice, shuffled, stable_rng, weighted
from .goals import GoalSet, _human_text, distinct_attributes, price_clause
from .model import Goal

__all__ = ["TaskRecipe", "V1", "goals_v1_for", "make_goal_v1"]

_VERSION = "rspo_gym.webshop.goals.task-v1"


@dataclass(frozen=True)
class TaskRecipe:
    """What a calibrated goal asks for (the benchmark's lever table varies these).

    ``attribute_weights``: probability of asking for 1, 2, 3, ... attributes (fewer when the
    target has fewer); ``option_rate``: probability that each option group the target offers is
    requested; ``unindexed_share``: share of goals whose attributes come first from the Features
    past the first bullet (the others take any off-title attribute first).
    """

    attribute_weights: tuple[float, ...] = (0.9, 0.1)
    option_rate: float = 1.0
    unindexed_share: float = 1.0


#: The recipe of ``rspo/WebShop-v1`` (calibrated: see ``docs/env_webshop.md``, difficulty).
V1 = TaskRecipe()


def _candidate_attributes(r: random.Random, item: Any, recipe: TaskRecipe) -> list[str]:
    """The target's attributes in the order they are offered: for ``unindexed_share`` of goals,
    first those shown only on the Features page past its first bullet (where the original mined
    attributes and its search does not look), then the others its pages show off the title, then
    the title's; for the other goals, all those shown off the title first, then the title's. The
    ones no page shows come last: the original's were mined from the product's own text."""
    product = item.product
    title = product.name.lower()
    indexed = " ".join((product.description, *product.bullet_points[:1])).lower()
    features = " ".join(product.bullet_points[1:]).lower()
    on_title = [a for a in product.attributes if a.lower() in title]
    unindexed = [a for a in product.attributes
                 if a not in on_title and a.lower() in features and a.lower() not in indexed]
    shown = [a for a in product.attributes
             if a not in on_title and a not in unindexed and a.lower() in indexed + " " + features]
    hidden = [a for a in product.attributes if a not in on_title + unindexed + shown]
    if r.random() < recipe.unindexed_share:
        first = shuffled(r, unindexed) + shuffled(r, shown)
    else:
        first = shuffled(r, unindexed + shown)
    return first + shuffled(r, on_title) + shuffled(r, hidden)


def _pick(r: random.Random, candidates: list[str], weights: tuple[float, ...]) -> list[str]:
    return distinct_attributes(candidates, 1 + weighted(r, weights))


def make_goal_v1(catalog: Any, index: int, variant: int, recipe: TaskRecipe = V1) -> Goal:
    """The v1 goal ``variant`` of target ``catalog.item(index)``: a pure function of the catalog
    seed, ``index``, ``variant`` and ``recipe``."""
    r = stable_rng(b'rspo-goals', _VERSION, "goal", getattr(catalog, "seed", 0), index, variant,
                   recipe.attribute_weights, recipe.option_rate, recipe.unindexed_share)
    item = catalog.item(index)
    product = item.product
    if not product.attributes:
        raise ValueError(f"item {index} has no attributes; upstream skips such goals")
    attributes = _pick(r, _candidate_attributes(r, item, recipe), recipe.attribute_weights)
    picked = [(name, choice(r, values)) for name, values in item.options.items()
              if values and r.random() < recipe.option_rate]
    base = _human_text(r, product.query, item.category_top, attributes, picked)
    price_upper, price_text = price_clause(item.price, r)
    return Goal(
        name=product.name, query=product.query, category=product.category,
        attributes=tuple(attributes), options=tuple(value for _, value in picked),
        price_upper=price_upper, instruction_text=base.strip(".") + price_text, asin=product.asin,
    )


def goals_v1_for(catalog: Any) -> GoalSet:
    """``rspo/WebShop-v1``'s canonical goal set of ``catalog`` (a version-1 catalog): v0's sizes
    and splits, its own order."""
    return GoalSet(catalog, maker=make_goal_v1, order_tag="task-v1")
