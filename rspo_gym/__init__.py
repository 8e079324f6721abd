"""rspo_gym: RL for multi-turn LLM agents on text environments (ALFWorld, WebShop).

Importing the package registers the environments with Gymnasium::

    import gymnasium as gym, rspo_gym
    env = gym.make("rspo/ALFWorld-v0")
"""

from rspo_gym.envs import register_envs

__all__ = ["__version__"]
__version__ = "0.1.0"

register_envs()
