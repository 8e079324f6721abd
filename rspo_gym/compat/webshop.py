"""WebShop's own Python API over ``rspo/WebShop-v1``: ``WebAgentTextEnv`` as upstream's text mode.

``WebAgentTextEnv(observation_mode="text", num_products=..., human_goals=...)`` with upstream's
calls: ``reset(session=k)`` → ``(observation, None)``, ``step(action)`` → ``(observation, reward,
done, None)`` (the old 4-tuple gym API), ``get_available_actions()`` → ``{"has_search_bar",
"clickables"}``, ``get_instruction_text()``, the ``observation``, ``instruction_text`` and
``session`` attributes and ``server.goals`` (its length is the number of goals).

Upstream's data: ``file_path`` is upstream's ``items_shuffle*.json``; the other two files are read
from beside it: ``items_human_ins.json`` and the ``items_ins_v2`` file of the same size
(``items_ins_v2_1000.json`` beside ``items_shuffle_1000.json``, ``items_ins_v2.json`` beside
``items_shuffle.json``; for another name ``items_ins_v2_1000.json``, which upstream's
``DEFAULT_ATTR_PATH`` names whatever ``file_path`` is). ``num_products`` then keeps that many
records (None: all, as upstream), and the goals are upstream's, in its order
(``rspo_gym.envs.webshop.upstream``). As upstream's text env, it plays the synthetic goals unless
``human_goals=True`` is passed (upstream passes ``kwargs.get('human_goals')`` on, None when not
given).

Sessions: an integer ``k`` is upstream's goal index. Upstream numbers its shuffled goals test
``0..499``, then ``500..1499`` and the training goals after them, and our splits are cut in the same
order, so ``reset(session=k)`` plays goal ``k - start`` of the split whose range holds ``k``
(``reset(session=3)`` is ``gym.make("rspo/WebShop-v1", split="test").reset(options={"task_id": 3})``).
A string session ``"fixed_<k>"`` is goal ``k``, as upstream's web site pins it; any other string or
None draws a goal from the env's random stream (``seed`` in the constructor). Upstream's text env
would draw a random goal for ``"fixed_-1"`` too; here a ``"fixed_..."`` string that names no goal
is refused.

Only ``observation_mode="text"`` exists (the pages are rendered as text directly, no HTML);
without ``file_path`` the goals are those of our synthetic catalog (``num_products`` products;
upstream's ``None``, the full catalog, means our default of 1,000); ``human_goals`` picks the
human-style instructions (True, the default without ``file_path``) or the synthetic ones.

Tasks: ``rspo/WebShop-v1``'s, calibrated to the original's difficulty (the WebShop paper's rule
baseline scores 46.9 / 8.4 % here, 45.6 / 9.6 % on the original), since code written for the
original expects its difficulty. ``task_version=0`` plays ``rspo/WebShop-v0``'s easier tasks (72.3
/ 23.6 %), on which older results were made; only they have synthetic-style goals.

``install()`` (``rspo_gym.compat``) also registers upstream's Gym id, so upstream's
``gym.make("WebAgentTextEnv-v0", observation_mode="text", num_products=...)`` gives this class,
unwrapped as upstream's (Gymnasium's ``gym.make``: ``import gymnasium as gym``).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np

from rspo_gym.envs.webshop.env import WebShopEnv, shared_catalog
from rspo_gym.envs.webshop.goals import SPLITS, split_range
from rspo_gym.envs.webshop.upstream import UpstreamFiles, load_upstream

__all__ = ["WebAgentTextEnv", "DEFAULT_NUM_PRODUCTS", "GYM_ID", "register_gym_id"]

#: the catalog size ``num_products=None`` (upstream: every product) maps to: the env's default
DEFAULT_NUM_PRODUCTS = 1000
_INDEX = re.compile(r"-?\d+")
#: the ``items_ins_v2`` file read beside each ``items_shuffle`` file (upstream's
#: ``DEFAULT_ATTR_PATH`` names the ``_1000`` one whatever ``file_path`` is)
_ATTRIBUTES_BESIDE = {"items_shuffle.json": "items_ins_v2.json"}
_DEFAULT_ATTRIBUTES = "items_ins_v2_1000.json"
#: the id upstream's ``web_agent_site.envs`` registers its text env under
GYM_ID = "WebAgentTextEnv-v0"


def _check_num_products(num_products: Any) -> int | None:
    """``num_products`` is None or a positive int: ``int()`` of 1.5 or True would quietly play a
    one-product catalog."""
    if num_products is None:
        return None
    if isinstance(num_products, bool) or not hasattr(num_products, "__index__"):
        shown = "NaN" if isinstance(num_products, float) and math.isnan(num_products) else repr(num_products)
        raise TypeError(f"num_products must be an int or None, got {shown}")
    if num_products.__index__() < 1:
        raise ValueError(f"num_products must be at least 1 (or None), got {num_products}")
    return num_products.__index__()


def register_gym_id() -> None:
    """Register ``GYM_ID`` with Gymnasium, as upstream's package import does with Gym (idempotent).
    Without the env checker and the order enforcer: their wrappers pass only Gymnasium's
    ``reset(seed, options)``, not upstream's ``reset(session=k)``, and its 4-tuple ``step``."""
    if GYM_ID not in gym.registry:
        gym.register(id=GYM_ID, entry_point=f"{__name__}:WebAgentTextEnv", order_enforce=False, disable_env_checker=True)


class WebAgentTextEnv(gym.Env):
    """Upstream's ``web_agent_site.envs.WebAgentTextEnv`` in text mode.

    Args mirror upstream's; ``file_path`` plays upstream's data (see the module's notes), with
    ``cache_dir`` and ``noun_extractor`` as ``rspo/WebShop-v1``'s ``data_dir`` takes them.
    ``catalog_seed`` (ours) picks the synthetic catalog, ``seed`` the
    stream random sessions are drawn from, ``task_version`` the task set (1: ``rspo/WebShop-v1``'s,
    0: ``rspo/WebShop-v0``'s). Upstream arguments about its browser
    (``server``, ``get_image``, ``limit_goals``, ``num_prev_obs``,
    ``num_prev_actions``, ``session_prefix``) are accepted at their defaults only.
    """

    def __init__(
        self,
        observation_mode: str = "text",
        num_products: int | None = None,
        human_goals: bool | None = None,
        *,
        catalog_seed: int = 0,
        seed: int | None = None,
        task_version: int = 1,
        file_path: str | Path | None = None,
        cache_dir: str | Path | None = None,
        noun_extractor: Any = None,
        **upstream: Any,
    ) -> None:
        if observation_mode != "text":
            raise ValueError(f"observation_mode {observation_mode!r} is not offered: rspo_gym renders WebShop pages as text only")
        defaults = {"server": None, "get_image": False, "limit_goals": -1,
                    "num_prev_obs": 0, "num_prev_actions": 0, "session_prefix": None}
        changed = sorted(k for k, v in upstream.items() if k not in defaults or v != defaults[k])
        if changed:
            raise ValueError(f"WebAgentTextEnv: {', '.join(changed)} not supported (upstream's browser options)")
        num_products = _check_num_products(num_products)
        self.observation_mode = observation_mode
        self.task_version = task_version
        self.catalog_seed = catalog_seed
        if human_goals is None:  # upstream's text env passes kwargs.get('human_goals'): synthetic goals
            human_goals = file_path is None  # our catalog's default stays the human-style tasks
        self.goal_style = "human" if human_goals else "synthetic"
        self._files: UpstreamFiles | None = None
        self._upstream_kwargs: dict[str, Any] = {}
        if file_path is not None:
            items = Path(file_path)
            self._files = UpstreamFiles(items, items.with_name(_ATTRIBUTES_BESIDE.get(items.name, _DEFAULT_ATTRIBUTES)),
                                        items.with_name("items_human_ins.json"))
            self.num_products = num_products
            self._upstream_kwargs = {"data_dir": self._files, "human_goals": bool(human_goals),
                                     "cache_dir": cache_dir, "noun_extractor": noun_extractor}
            _, goals = load_upstream(self._files, num_products, bool(human_goals), cache_dir)
        else:
            if cache_dir is not None or noun_extractor is not None:
                raise ValueError("cache_dir and noun_extractor apply to upstream's data only (pass file_path)")
            if task_version not in (0, 1):
                raise ValueError(f"task_version must be 1 (rspo/WebShop-v1's tasks) or 0 (rspo/WebShop-v0's), got {task_version!r}")
            if task_version == 1 and not human_goals:
                raise ValueError("human_goals=False: only rspo/WebShop-v0's tasks have synthetic goals (pass task_version=0)")
            self.num_products = DEFAULT_NUM_PRODUCTS if num_products is None else num_products
            _, goals = shared_catalog(self.num_products, catalog_seed, self.goal_style, task_version)
        self.server = SimpleNamespace(goals=goals)
        self._envs: dict[str, WebShopEnv] = {}
        self._rng = np.random.default_rng(seed)
        self._env: WebShopEnv | None = None
        self.session: Any = None
        self.instruction_text = ""
        self.observation = ""

    def _split_env(self, split: str) -> WebShopEnv:
        if split not in self._envs:
            if self._files is not None:
                self._envs[split] = WebShopEnv(num_products=self.num_products, split=split, **self._upstream_kwargs)
            else:
                self._envs[split] = WebShopEnv(num_products=self.num_products, split=split, catalog_seed=self.catalog_seed,
                                               goal_style=self.goal_style, task_version=self.task_version)
        return self._envs[split]

    def _goal_index(self, session: Any) -> int:
        if isinstance(session, str):
            if "fixed" not in session:
                return int(self._rng.integers(len(self.server.goals)))
            tail = session.rsplit("_", 1)[-1]  # upstream's site: int(session_id.split('_')[-1])
            if "_" not in session or _INDEX.fullmatch(tail) is None:
                raise ValueError(f"session {session!r}: a 'fixed_<k>' session needs a goal index k in [0, {len(self.server.goals)})")
            session = int(tail)
        if session is None:
            return int(self._rng.integers(len(self.server.goals)))
        if isinstance(session, bool) or not hasattr(session, "__index__"):
            raise TypeError(f"session must be an int, a string or None, got {type(session).__name__}")
        index = session.__index__()
        if not 0 <= index < len(self.server.goals):
            raise ValueError(f"session {index} out of range: expected a goal index in [0, {len(self.server.goals)})")
        return index

    def reset(self, session: Any = None, instruction_text: str | None = None) -> tuple[str, None]:
        """Start goal ``session`` (see the module's notes); upstream's second value is None."""
        if instruction_text is not None:
            raise ValueError("instruction_text is not supported: a goal's instruction comes with its goal (pass session=k)")
        index = self._goal_index(session)
        for split in SPLITS:
            positions = split_range(split, len(self.server.goals))
            if index in positions:
                break
        self._env = self._split_env(split)
        self.observation, info = self._env.reset(options={"task_id": index - positions.start})
        self.session = session
        self.instruction_text = info["task"]
        return self.observation, None

    def step(self, action: str) -> tuple[str, float, bool, None]:
        """Upstream's 4-tuple: the page, the purchase score (0 before), whether bought, None."""
        if self._env is None:
            raise RuntimeError("Call reset() before step().")
        self.observation, reward, terminated, _, _ = self._env.step(action)
        return self.observation, reward, terminated, None

    def get_available_actions(self) -> dict[str, Any]:
        if self._env is None:
            raise RuntimeError("Call reset() before get_available_actions().")
        return self._env.session.available_actions()

    def get_instruction_text(self) -> str:
        return self.instruction_text

    def close(self) -> None:
        self._envs.clear()
        self._env = None
