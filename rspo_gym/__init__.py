"""rspo_gym: RL for multi-turn LLM agents on text environments (ALFWorld, WebShop).

Importing the package registers the environments with Gymnasium::

    import gymnasium as gym, rspo_gym
    env = gym.make("rspo/ALFWorld-v0")

Everything a user reaches for is also a top-level name (``dir(rspo_gym)`` lists them):
the envs (``AlfworldEnv``, ``WebShopEnv``) and the ``ProcessReward`` wrapper; the rollout API
(``GroupedVectorEnv``, ``DiscreteTextAdapter``, ``PromptBuilder``, ``collect``); the trainers
(``GRPOTrainer``, ``PPOTrainer``, ``GiGPOTrainer``, ``RSPOTrainer``) and their configs
(``TrainerConfig``, ``GiGPOConfig``, ``PPOConfig``, ``RSPOConfig``); ``LLMPolicy`` and
``load_policy``. They load on first use, so ``import rspo_gym`` stays light: environment users
never import torch.

Importing it also lets OpenMP's idle threads sleep rather than spin (``OMP_WAIT_POLICY=PASSIVE``
unless set; ``cpu_settings.py``), which OpenMP reads when torch loads: import ``rspo_gym`` before
torch for a script to run as well on a busy machine as the command line does.

>>> from rspo_gym import ProcessReward, RSPOConfig
>>> {"ProcessReward", "RSPOTrainer", "RSPOConfig"} <= set(dir(__import__("rspo_gym")))
True
"""

from rspo_gym.cpu_settings import prepare_process
from rspo_gym.envs import register_envs

__version__ = "0.1.0"

#: top-level name -> the module that defines it (imported on first access)
_LAZY = {
    "AlfworldEnv": "rspo_gym.envs.alfworld.env",
    "WebShopEnv": "rspo_gym.envs.webshop.env",
    "ProcessReward": "rspo_gym.envs.wrappers",
    "GroupedVectorEnv": "rspo_gym.rollout.vector",
    "DiscreteTextAdapter": "rspo_gym.rollout.adapters",
    "PromptBuilder": "rspo_gym.rollout.prompts",
    "collect": "rspo_gym.rollout.collector",
    "GRPOTrainer": "rspo_gym.training.grpo",
    "PPOTrainer": "rspo_gym.training.ppo",
    "GiGPOTrainer": "rspo_gym.training.gigpo",
    "RSPOTrainer": "rspo_gym.training.rspo",
    "TrainerConfig": "rspo_gym.training.config",
    "GiGPOConfig": "rspo_gym.training.config",
    "PPOConfig": "rspo_gym.training.config",
    "RSPOConfig": "rspo_gym.training.config",
    "LLMPolicy": "rspo_gym.policies.llm",
    "load_policy": "rspo_gym.policies.llm",
}

__all__ = ["__version__", "register_envs", *_LAZY]

prepare_process()
register_envs()


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rspo_gym' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
