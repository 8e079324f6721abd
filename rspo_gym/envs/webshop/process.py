"""Dense process rewards for WebShop: the score potential (aligned) and per-event rewards (farmable).

The potential ``score`` is Φ = what ``Buy Now`` would score now (the viewed item with the selected
options, 0 elsewhere); the env zeroes it at the end of every episode, so with γ = 1 an episode's
shaping sums to −Φ(start) = 0 and the dense return *equals* the score: aligned by construction.

Per-event rewards (``step_events``: what the last action did), the kind practitioners write. Each
pays its weight times the event's amount every time it happens, and each can be farmed:

- ``search``: a search, × the share of the goal's attributes whose every word is in the query.
  Farm: ``Back to Search`` and the same query again; a query stuffed with attribute words pays
  in full whatever it finds.
- ``product``: opening a product page, × its match: half for a category sharing two levels with
  the goal's (upstream's ``category_match``), half for the share of the goal's attributes the
  product has (upstream's attribute rule). Farm: ``< Prev`` and open it again.
- ``option``: clicking an option value the goal asks for (upstream's option match). Farm: click
  it again (a click on the selected value changes nothing and pays again).
- ``price``: opening a product whose price is within the goal's budget. Farm: reopen any cheap
  product, matching or not.
- ``purchase``: ``Buy Now``, × the purchase's score (upstream's reward: the share of the goal's
  attributes, options and price the bought item meets). Not farmable (buying ends the episode),
  but misaligned with *success*: a near-match pays almost as much as the exact item, so it
  rewards settling for the first good-enough product.
- ``events``: all four together.
"""

from __future__ import annotations

from typing import Any

from rspo_gym.envs.process_rewards import Event, ProcessRewardSpec
from rspo_gym.envs.webshop.reward import attribute_reward, category_match, option_reward, price_ok

__all__ = ["step_events", "search_coverage", "product_match", "PROCESS_REWARDS"]


def search_coverage(query: str, attributes: tuple[str, ...]) -> float:
    """The share of ``attributes`` whose every word appears among the query's words.

    >>> search_coverage("gluten free dark chocolate", ("gluten free", "sea salt"))
    0.5
    """
    if not attributes:
        return 0.0
    words = set(query.lower().split())
    return sum(all(w in words for w in attr.lower().split()) for attr in attributes) / len(attributes)


def product_match(product: Any, goal: Any) -> float:
    """Half for a matching category, half for the share of the goal's attributes the product has."""
    hits, n = attribute_reward(product.attributes, product.name, product.bullet_points, product.description, goal.attributes)
    return 0.5 * category_match(product.category, goal.category) + (0.5 * hits / n if n else 0.0)


def step_events(session: Any) -> list[Event]:
    """The events of the session's last step (``Session.last_action``)."""
    last = session.last_action
    if last is None:
        return []
    kind, payload = last
    goal = session.goal
    if kind == "search":
        coverage = search_coverage(payload, goal.attributes)
        return [Event("search", payload, coverage)] if coverage > 0 else []
    if kind == "item":
        item = session.catalog.item(payload)
        events = []
        match = product_match(item.product, goal)
        if match > 0:
            events.append(Event("product", payload, match))
        if price_ok(item.price, goal.price_upper):
            events.append(Event("price", payload))
        return events
    if kind == "buy":
        bought = session.purchase
        return [Event("purchase", bought.asin, bought.score)] if bought is not None and bought.score > 0 else []
    if kind == "option":
        value = session.selected_options.get(payload)
        if value is not None and option_reward([value], goal.options)[0]:
            return [Event("option", (payload, value))]
    return []


PROCESS_REWARDS = {
    "score": ProcessRewardSpec("potential", "the score Buy Now would give now (viewed item, selected options), as shaping "
                               "γΦ(s') − Φ(s), zeroed at the end: at γ = 1 the dense return equals the score."),
    "events": ProcessRewardSpec("per-event", "search 1 × attribute coverage, product 1 × match, option 1, price 0.5, on every "
                                "repeat; farmed by search/back and open/prev loops.",
                                {"search": 1.0, "product": 1.0, "option": 1.0, "price": 0.5}),
    "search": ProcessRewardSpec("per-event", "1 × the share of the goal's attributes the query names, per search; farmed by "
                                "searching the same words again.", {"search": 1.0}),
    "product": ProcessRewardSpec("per-event", "1 × (half category match + half attribute share) per product page opened; "
                                 "farmed by reopening it.", {"product": 1.0}),
    "option": ProcessRewardSpec("per-event", "1 per click on an option value the goal asks for; farmed by clicking it again.",
                                {"option": 1.0}),
    "price": ProcessRewardSpec("per-event", "0.5 per product opened within the budget; farmed by reopening cheap products.",
                               {"price": 0.5}),
    "purchase": ProcessRewardSpec("per-event", "1 × the purchase's score on Buy Now (upstream's partial credit); not farmable "
                                  "(buying ends the episode), but pays a near-match almost as much as the exact item.",
                                  {"purchase": 1.0}),
}
