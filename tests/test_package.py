"""The top-level package: what ``from rspo_gym import ...`` and ``dir(rspo_gym)`` offer, and that
``import rspo_gym`` stays light (no torch) until a trainer or policy is asked for."""

import importlib
import subprocess
import sys

import pytest

import rspo_gym

TRAINERS_AND_CONFIGS = ("GRPOTrainer", "PPOTrainer", "GiGPOTrainer", "RSPOTrainer",
                        "TrainerConfig", "GiGPOConfig", "PPOConfig", "RSPOConfig")


def test_process_reward_is_a_top_level_name():
    from rspo_gym import ProcessReward
    from rspo_gym.envs.wrappers import ProcessReward as defined

    assert ProcessReward is defined


def test_dir_lists_the_trainers_configs_and_env_tools():
    names = set(dir(rspo_gym))
    assert set(TRAINERS_AND_CONFIGS) <= names
    assert {"ProcessReward", "AlfworldEnv", "WebShopEnv", "GroupedVectorEnv", "collect", "LLMPolicy",
            "__version__"} <= names
    assert set(rspo_gym.__all__) <= names


def test_every_exported_name_is_the_object_its_module_defines():
    pytest.importorskip("torch")
    for name in rspo_gym.__all__:
        value = getattr(rspo_gym, name)
        if name in rspo_gym._LAZY:
            assert value is getattr(importlib.import_module(rspo_gym._LAZY[name]), name), name
    with pytest.raises(AttributeError, match="no attribute 'NoSuchTrainer'"):
        rspo_gym.NoSuchTrainer  # noqa: B018


def test_import_and_dir_do_not_import_torch():
    code = ("import sys, rspo_gym; names = dir(rspo_gym); from rspo_gym import ProcessReward, AlfworldEnv; "
            "print('RSPOTrainer' in names, 'torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False", "False"]
