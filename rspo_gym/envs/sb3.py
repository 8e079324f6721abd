"""The old import path of ``rspo_gym.sb3.envs`` (the Stable-Baselines3 env adapters), kept as a lazy alias.

``from rspo_gym.envs.sb3 import make_sb3_env`` keeps working: each name is looked up in
``rspo_gym.sb3.envs`` on first use, so importing this module imports nothing else and the
environments stay below SB3 support (the room order of ``tests/test_layout.py``). New code
imports ``rspo_gym.sb3.envs``.
"""

_TARGET = "rspo_gym.sb3.envs"


def __getattr__(name: str):
    import importlib

    return getattr(importlib.import_module(_TARGET), name)  # __all__ too, so `import *` works


def __dir__() -> list[str]:
    import importlib

    return sorted(set(globals()) | set(importlib.import_module(_TARGET).__all__))
