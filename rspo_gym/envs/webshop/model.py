"""The two records the WebShop reward reads: a catalog product and a shopping goal.

Field names follow upstream's dicts (``web_agent_site/engine/engine.py`` ``load_products`` and
``engine/goal.py`` ``get_goals``) so that a real-data adapter is a plain field copy:
``name``/``Title``, ``query``, ``product_category``, ``Attributes``, ``BulletPoints``,
``Description``; goals copy ``name``, ``query`` and ``product_category`` from their target and add
``attributes``, ``goal_options``, ``price_upper`` and ``instruction_text``.
"""

from __future__ import annotations

from dataclasses import dataclass

#: A goal option: a value string (human goals, the paper setting) or a ``(name, value)`` pair
#: (upstream synthetic goals pass ``dict.items()``; the reward treats the pair differently, see
#: :func:`rspo_gym.envs.webshop.reward.option_reward`).
GoalOption = str | tuple[str, str]


def _freeze(obj: object, *names: str) -> None:
    """Turn list-valued fields into tuples so frozen records stay hashable and immutable."""
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, tuple):
            object.__setattr__(obj, name, tuple(value))


@dataclass(frozen=True)
class Product:
    """A catalog item as the reward sees it.

    ``attributes`` are the hidden mined attributes (upstream ``items_ins_v2`` ``attributes``);
    ``category`` is the Amazon breadcrumb joined by ``' › '`` (upstream ``product_category``);
    ``query`` is the product type it was scraped for (upstream ``query``).
    """

    asin: str
    name: str
    query: str
    category: str
    attributes: tuple[str, ...] = ()
    bullet_points: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        _freeze(self, "attributes", "bullet_points")

    @property
    def title(self) -> str:
        """Upstream's ``Title`` is the product ``name`` verbatim."""
        return self.name


@dataclass(frozen=True)
class Goal:
    """A shopping task: the hidden target's type info plus what the instruction asks for.

    ``attributes`` are the instruction attributes, ``options`` the requested option values, and
    ``price_upper`` the price the purchase must not exceed.
    """

    name: str
    query: str
    category: str
    attributes: tuple[str, ...]
    options: tuple[GoalOption, ...]
    price_upper: float
    instruction_text: str = ""
    asin: str = ""

    def __post_init__(self) -> None:
        _freeze(self, "attributes", "options")
