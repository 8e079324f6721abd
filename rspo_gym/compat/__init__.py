"""The original environments' Python APIs over ours: code written for ALFWorld or WebShop runs unchanged.

- ``alfworld``: ``AlfredTWEnv(config, train_eval).init_env(batch_size)`` and ``get_environment``.
- ``webshop``: ``WebAgentTextEnv`` (``reset(session=k)``, 4-tuple ``step``, ``get_available_actions()``).
- ``install()``: registers these modules under the originals' import paths
  (``alfworld.agents.environment``, ``web_agent_site.envs``), so that existing ``import`` lines
  resolve to them with no other change, and upstream WebShop's Gym id ``WebAgentTextEnv-v0``.

May import: ``rspo_gym.envs`` (the room order is checked by ``tests/test_layout.py``).
"""

from __future__ import annotations

import sys
import types

__all__ = ["install", "ALIASES"]

#: the originals' module paths and what each holds here
ALIASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "alfworld": ("rspo_gym.compat.alfworld", ()),
    "alfworld.agents": ("rspo_gym.compat.alfworld", ()),
    "alfworld.agents.environment": ("rspo_gym.compat.alfworld", ("AlfredTWEnv", "get_environment")),
    "alfworld.agents.environment.alfred_tw_env": ("rspo_gym.compat.alfworld", ("AlfredTWEnv",)),
    "web_agent_site": ("rspo_gym.compat.webshop", ()),
    "web_agent_site.envs": ("rspo_gym.compat.webshop", ("WebAgentTextEnv",)),
    "web_agent_site.envs.web_agent_text_env": ("rspo_gym.compat.webshop", ("WebAgentTextEnv",)),
}


def install() -> list[str]:
    """Put modules named as the originals' into ``sys.modules``; returns the names set.

    They replace the originals for the rest of the process, installed or not (so ``import
    alfworld.agents.environment`` gives our ``AlfredTWEnv`` even where ``alfworld`` is installed);
    call it before the first import of them. A parent package (``alfworld``) is a plain namespace
    holding only its child, so other ``alfworld`` modules (``alfworld.agents.modules.generic``)
    are not found: load the config yourself (``yaml.safe_load``) or use
    ``rspo_gym.compat.alfworld.default_config()``.
    """
    import importlib

    made: dict[str, types.ModuleType] = {}
    for name, (source, names) in ALIASES.items():
        module = types.ModuleType(name, f"rspo_gym's stand-in for {name} (rspo_gym.compat.install)")
        module.__path__ = []  # a package: its children are looked up in sys.modules
        ours = importlib.import_module(source)
        for attr in names:
            setattr(module, attr, getattr(ours, attr))
        made[name] = module
    for name, module in made.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(made[parent], child, module)
        sys.modules[name] = module
    importlib.import_module("rspo_gym.compat.webshop").register_gym_id()  # as importing upstream's web_agent_site.envs does
    return list(made)
