"""Text environments of the suite; importing ``rspo_gym`` registers them with Gymnasium.

- ``alfworld/``, ``webshop/``: the two environments (``AlfworldEnv``, ``WebShopEnv``).
- ``core.py``: the text-env contract; ``wrappers.py``: ``ProcessReward``; ``process_rewards.py``:
  the process-reward specs an env declares.

May import: ``rspo_gym.errors`` and ``rspo_gym.algos`` (the room order is checked by
``tests/test_layout.py``); nothing of rollouts, policies or training.
"""

import warnings

from gymnasium.envs.registration import WrapperSpec, register, registry

from rspo_gym.envs.process_rewards import process_rewards

__all__ = ["register_envs", "process_rewards"]

ALFWORLD_ID = "rspo/ALFWorld-v0"
WEBSHOP_ID = "rspo/WebShop-v0"
#: WebShop with tasks calibrated to the original's difficulty (``docs/env_webshop.md``); v0 stays
#: registered unchanged so that results made on it reproduce.
WEBSHOP_V1_ID = "rspo/WebShop-v1"


# v0 is kept on purpose (its results reproduce), not deprecated: Gymnasium's "out of date" notice,
# given whenever a higher version of an id is registered, would print on every v0 run.
warnings.filterwarnings("ignore", message=r".*The environment rspo/WebShop-v0 is out of date", category=DeprecationWarning)


#: Wrappers ``gym.make`` puts around ours, outermost: ``CheckTaskId`` refuses a bad task id before
#: Gymnasium's env checker sees the reset (a first reset that raises there breaks its later steps).
_OUTER = (WrapperSpec(name="CheckTaskId", entry_point="rspo_gym.envs.wrappers:CheckTaskId", kwargs={}),)


def register_envs() -> None:
    """Register ``rspo/ALFWorld-v0``, ``rspo/WebShop-v0`` and ``rspo/WebShop-v1`` (idempotent:
    re-imports are harmless)."""
    if ALFWORLD_ID not in registry:
        register(
            id=ALFWORLD_ID,
            entry_point="rspo_gym.envs.alfworld.env:AlfworldEnv",
            max_episode_steps=50,
            additional_wrappers=_OUTER,
        )
    if WEBSHOP_ID not in registry:
        register(
            id=WEBSHOP_ID,
            entry_point="rspo_gym.envs.webshop.env:WebShopEnv",
            max_episode_steps=15,
            additional_wrappers=_OUTER,
        )
    if WEBSHOP_V1_ID not in registry:
        register(
            id=WEBSHOP_V1_ID,
            entry_point="rspo_gym.envs.webshop.env:WebShopEnv",
            max_episode_steps=15,
            kwargs={"task_version": 1},
            additional_wrappers=_OUTER,
        )
