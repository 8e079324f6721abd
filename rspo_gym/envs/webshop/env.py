"""``rspo/WebShop-v1`` and ``rspo/WebShop-v0``: WebShop's text mode over a synthetic catalog, as a
Gymnasium environment. The two differ only in their tasks (``task_version``: v1's catalog offers
more option groups and its goals ask for them, ``goals_v1.py``); v0 is kept so its results reproduce.

Observations are upstream's text-mode pages (``[SEP]``-joined, see ``session.py``); actions are
``search[query]`` (on the search page) and ``click[element]``. Reward is the purchase score at
``Buy Now`` (upstream's formula, ``reward.py``); ``terminated`` on purchase; the registered env
truncates at 15 steps (verl-agent's limit).

``info`` on reset and step: ``admissible_actions`` (verl-agent's listing: the template
``search[<your query>]`` where there is a search bar, then every ``click[...]``), ``task`` (the
instruction), ``task_id``, ``task_type`` (``"webshop"``), ``won`` (score == 1), ``anchor`` (the raw
observation), ``available_actions`` (upstream's ``get_available_actions()``: ``{"has_search_bar",
"clickables"}``, ``search`` among the clickables on the search page, as verl-agent lists it); on step
also ``valid``, ``score`` and, after a purchase, ``reward_parts``.

One catalog and one search index per (``num_products``, ``catalog_seed``, task version) are shared by every env
of the process. ``split`` picks the canonical goals: ``test`` (first 500), ``valid`` (next
1,000), ``train`` (the rest); ``reset(seed=s)`` draws a task of the split from the seed and
``reset(options={"task_id": k})`` picks the k-th goal of the split. No worker seed ever changes
which goals are in which split.

Upstream's data: ``data_dir`` (upstream's ``data/`` folder) plays its scraped products and its
human (``human_goals=True``) or synthetic instructions, in its goal order and splits
(``upstream.py``); purchases are scored with spaCy's ``en_core_web_sm`` as upstream does, unless a
``noun_extractor`` is given.

Experts: :meth:`WebShopEnv.expert_action` gives the next action of a page-reading scripted shopper
(``expert.py``; one per episode, reset on ``reset``; it never reads the hidden goal).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gymnasium as gym

from rspo_gym.envs.core import check_task_id, text_space
from rspo_gym.envs.webshop import process
from rspo_gym.envs.webshop.catalog import Catalog
from rspo_gym.envs.webshop.expert import ScriptedShopper
from rspo_gym.envs.webshop.goals import GoalSet, goals_for
from rspo_gym.envs.webshop.goals_v1 import goals_v1_for
from rspo_gym.envs.webshop.reward import NounExtractor, title_nouns
from rspo_gym.envs.webshop.search import index_for
from rspo_gym.envs.webshop.session import SEARCH_PLACEHOLDER, Session
from rspo_gym.envs.webshop.upstream import UpstreamFiles, load_upstream

__all__ = ["WebShopEnv", "check_catalog_size", "index_key", "shared_catalog", "LARGE_CATALOG"]

MAX_TEXT_LENGTH = 16384
#: Catalogs above this many products are built only when asked for with ``allow_large_catalog=True``:
#: the build is time and memory in proportion (measured at 100,000 products: 12.5 s and 0.27 GB peak
#: RSS, 2-core AMD EPYC shared with other jobs), so a typo of a few zeros is a line, not an hour.
LARGE_CATALOG = 100_000
_SECONDS_PER_PRODUCT, _BYTES_PER_PRODUCT = 12.5 / 100_000, 0.27e9 / 100_000


def check_catalog_size(num_products: int, allow_large_catalog: bool = False) -> None:
    """A ``ValueError`` saying what a catalog above ``LARGE_CATALOG`` products would cost, unless
    ``allow_large_catalog``; raised before anything is built."""
    if allow_large_catalog or not isinstance(num_products, int) or num_products <= LARGE_CATALOG:
        return
    seconds, gigabytes = num_products * _SECONDS_PER_PRODUCT, num_products * _BYTES_PER_PRODUCT / 1e9
    duration = f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"  # 200,000 products read "0 min"
    raise ValueError(
        f"num_products={num_products} builds a catalog and search index of about {gigabytes:.1f} GB in about "
        f"{duration} (100,000 products: 12.5 s and 0.27 GB on 2 cores); to build it anyway pass "
        f"allow_large_catalog=True (env_kwargs, or --allow-large-catalog for webshop serve)"
    )
@functools.cache
def shared_catalog(num_products: int, seed: int, style: str = "human", version: int = 0
                   ) -> tuple[Catalog, GoalSet]:
    """The process-wide catalog and goal set for these settings, shared by reference by every env.

    Like the search index (``search.py``), one per settings per process; both are small (products
    and goals are generated on demand), so they are never evicted. ``version`` is the task version
    (0 for ``rspo/WebShop-v0``, 1 for ``rspo/WebShop-v1``): it picks the catalog and goal versions.
    """
    catalog = Catalog(num_products, seed, version=version)
    if version == 1:
        if style != "human":
            raise ValueError("rspo/WebShop-v1's goals are human style only")
        return catalog, goals_v1_for(catalog)
    return catalog, goals_for(catalog, style=style)


def index_key(num_products: int, seed: int, version: int = 0) -> tuple:
    """The search-index cache key of a catalog (v0's key is unchanged from before v1 existed)."""
    return ("webshop", num_products, seed) if version == 0 else ("webshop", num_products, seed, version)


def upstream_nouns() -> NounExtractor:
    """Upstream's title tagger (spaCy ``en_core_web_sm``), loaded now so that a missing one is an
    error at construction rather than at the first purchase."""
    from rspo_gym.envs.webshop.reward import _spacy_pipeline  # noqa: PLC0415

    try:
        _spacy_pipeline()
    except ImportError:
        raise ImportError(
            "data_dir: purchases are scored as upstream scores them, with spaCy's en_core_web_sm; "
            "install spacy and its en_core_web_sm model, or pass noun_extractor=<title -> nouns>"
        ) from None
    return title_nouns


class WebShopEnv(gym.Env[str, str]):
    """Shop for the item an instruction describes, in WebShop's text pages.

    >>> import gymnasium as gym, rspo_gym
    >>> env = gym.make("rspo/WebShop-v1", num_products=200, split="test")
    >>> obs, info = env.reset(options={"task_id": 0})
    >>> obs.startswith("WebShop [SEP] Instruction: [SEP] ")
    True
    >>> obs, reward, terminated, truncated, info = env.step("click[buy now]")
    >>> info["valid"], reward
    (False, 0.0)
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}
    #: Process rewards by name (``rspo_gym.envs.process_rewards``; documented in ``webshop/process.py``).
    PROCESS_REWARDS = process.PROCESS_REWARDS

    def __init__(
        self,
        num_products: int = 1000,
        split: str = "train",
        catalog_seed: int = 0,
        goal_style: str = "human",
        render_mode: str | None = None,
        task_version: int = 0,
        allow_large_catalog: bool = False,
        data_dir: str | Path | UpstreamFiles | None = None,
        human_goals: bool = True,
        cache_dir: str | Path | None = None,
        noun_extractor: NounExtractor | None = None,
    ) -> None:
        """``data_dir``, ``human_goals``, ``cache_dir``: play upstream's data files instead of the
        synthetic catalog (:func:`~rspo_gym.envs.webshop.upstream.load_upstream`; ``num_products``
        then keeps that many records, None all; the catalog and task arguments do not apply).
        ``noun_extractor``: the title tagger of the reward's type score (default: the synthetic
        catalog's lexicon, or spaCy's ``en_core_web_sm`` with ``data_dir``, as upstream)."""
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"Unknown render_mode {render_mode!r}; expected one of {self.metadata['render_modes']}")
        self.task_version = task_version
        self._nouns = noun_extractor
        if data_dir is not None:
            if goal_style != "human":
                raise ValueError("goal_style is the synthetic catalog's; with data_dir pass human_goals=False for upstream's synthetic goals")
            self.catalog, self.goals = load_upstream(data_dir, num_products, human_goals, cache_dir)
            self.index = self.catalog.search_index
            if noun_extractor is None:
                self._nouns = upstream_nouns()
        else:
            if human_goals is not True:
                raise ValueError("human_goals picks upstream's goals and needs data_dir; the synthetic catalog's goals are set by goal_style")
            check_catalog_size(num_products, allow_large_catalog)
            self.catalog, self.goals = shared_catalog(num_products, catalog_seed, goal_style, task_version)
            self.index = index_for(
                index_key(num_products, catalog_seed, task_version), lambda: (self.catalog.search_document(i) for i in range(len(self.catalog))),
                doc_ids_factory=lambda: (self.catalog.asin(i) for i in range(len(self.catalog))),
            )
        self.split = split
        self.task_ids = self.goals.split(split)  # validates the split name
        if len(self.task_ids) == 0:
            raise ValueError(f"Split {split!r} has no goals with {len(self.catalog)} products ({len(self.goals)} goals); use a larger catalog")
        self.render_mode = render_mode
        self.observation_space = text_space(MAX_TEXT_LENGTH)
        self.action_space = text_space(MAX_TEXT_LENGTH)
        self.session: Session | None = None
        self.task_id = 0
        self._expert: ScriptedShopper | None = None

    @property
    def num_tasks(self) -> int:
        """Goals of this env's split (task ids ``0 .. num_tasks - 1``)."""
        return len(self.task_ids)

    # Process rewards: the wrapper zeroes the potential at truncation too (issue 3: viewing good
    # items without buying must earn nothing in total).
    zero_terminal_potential = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        options = options or {}
        if "task_id" in options:
            task_id = check_task_id(options["task_id"], len(self.task_ids))
        else:
            task_id = int(self.np_random.integers(len(self.task_ids)))
        goal = self.goals[self.task_ids[task_id]]
        self.task_id = task_id
        self.session = Session(self.catalog, self.index, goal, noun_extractor=self._nouns)
        self._expert = None
        obs = self.session.observation()
        return obs, self._info(obs)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self.session is None:
            raise gym.error.ResetNeeded("Call reset() before step().")
        result = self.session.step(action)
        obs = self.session.observation()
        info = self._info(obs)
        info["valid"] = result.valid
        reward = float(result.reward)
        info["score"] = reward
        if result.purchase is not None:
            info["reward_parts"] = result.purchase.parts.as_dict()
            info["won"] = result.purchase.score == 1.0
        if self.render_mode == "human":
            print(obs)
        # once bought, the episode stays over whatever comes next (as ALFWorld's stays won)
        return obs, reward, result.done or self.session.done, False, info

    def sample_admissible(self) -> str:
        """A uniformly random action that does something here, drawn from the env's ``np_random``
        (``reset(seed=s)`` makes the draws reproducible): one of the listed actions, with the
        ``search[<your query>]`` template replaced by a search for the instruction (a search query
        cannot be enumerated; the SB3 adapter does the same). ``action_space.sample()`` draws random
        strings over the charset, which are never actions; this is the random policy."""
        if self.session is None:
            raise gym.error.ResetNeeded("Call reset() before sample_admissible().")
        actions = self.session.prompt_actions()
        if not actions:
            raise gym.error.ResetNeeded("The episode ended with a purchase; call reset() before sample_admissible().")
        action = actions[int(self.np_random.integers(len(actions)))]
        return f"search[{self.session.goal.instruction_text}]" if action == SEARCH_PLACEHOLDER else action

    def expert_action(self) -> str:
        """The scripted shopper's next action for the current page (``expert.py``); it sees only
        the page text, the available actions and the instruction."""
        if self.session is None:
            raise gym.error.ResetNeeded("Call reset() before expert_action().")
        if self._expert is None:
            self._expert = ScriptedShopper(self.session.goal.instruction_text)
        return self._expert.act(self.session.observation(), self.session.available_actions())

    def render(self) -> str | None:
        text = self.session.observation() if self.session is not None else ""
        if self.render_mode == "ansi":
            return text
        if self.render_mode == "human":
            print(text)
        return None

    def process_potential(self, name: str = "score") -> float:
        """Φ = the score ``Buy Now`` would give now (current item, selected options); 0 once done."""
        if name != "score":
            raise ValueError(f"Unknown WebShop potential {name!r}; expected 'score'")
        if self.session is None or self.session.done:
            return 0.0
        return self.session.current_item_score()

    def step_events(self, wanted: frozenset[str] | None = None) -> list:
        """The per-event process-reward events of the last step (``webshop/process.py``; every
        event is cheap, so ``wanted`` is not needed)."""
        return [] if self.session is None else process.step_events(self.session)

    def _info(self, obs: str) -> dict[str, Any]:
        session = self.session
        purchase = session.purchase
        return {
            "admissible_actions": session.prompt_actions(),
            "task": session.goal.instruction_text,
            "task_id": self.task_id,
            "task_type": "webshop",
            "won": purchase is not None and purchase.score == 1.0,
            "anchor": obs,
            "available_actions": session.available_actions(),
        }
