"""SB3 adapters: deterministic features, index ↔ admissible command, masks, and SB3 itself."""

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import rspo_gym  # noqa: F401
from rspo_gym.sb3.envs import (
    INVALID_ACTION,
    ActionSlotFeaturizer,
    AdmissibleActionIndex,
    TaskSubset,
    TextFeaturizer,
    action_mask,
    make_sb3_env,
)

TEXT = dict(observation="You arrive at desk 1. On the desk 1, you see a mug 1.", task="put a mug in desk", actions=["go to desk 1"])


def _alfworld(**kwargs) -> gym.Env:
    return gym.make("rspo/ALFWorld-v0", split="valid_seen", **kwargs)


def test_features_are_identical_across_python_hash_seeds():
    here = TextFeaturizer(_alfworld(), dim=4096).featurize(TEXT["observation"], task=TEXT["task"], actions=TEXT["actions"])
    code = (
        "import sys, gymnasium as gym, rspo_gym; from rspo_gym.sb3.envs import TextFeaturizer; "
        f"v = TextFeaturizer(gym.make('rspo/ALFWorld-v0'), dim=4096).featurize({TEXT['observation']!r}, "
        f"task={TEXT['task']!r}, actions={TEXT['actions']!r}); sys.stdout.write(' '.join(map(str, v.nonzero()[0])))"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    there = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert there.split() == [str(i) for i in here.nonzero()[0]]
    assert here.sum() > 10


def test_featurized_observations_are_float32_in_the_box():
    env = TextFeaturizer(AdmissibleActionIndex(_alfworld()), dim=256, slots=128)
    obs, _ = env.reset(options={"task_id": 1})
    assert obs.shape == (256,) and obs.dtype == np.float32 and env.observation_space.contains(obs)
    obs, *_ = env.step(0)
    assert env.observation_space.contains(obs)


def test_featurizer_validates_arguments():
    with pytest.raises(ValueError, match="dim"):
        TextFeaturizer(_alfworld(), dim=0)
    with pytest.raises(TypeError, match="AdmissibleActionIndex"):
        TextFeaturizer(_alfworld(), slots=4)


def test_mask_matches_the_admissible_count():
    env = AdmissibleActionIndex(_alfworld(), num_actions=128)
    _, info = env.reset(options={"task_id": 2})
    for _ in range(3):
        mask = action_mask(env)
        assert mask.dtype == bool and mask.shape == (128,)
        assert mask.sum() == len(info["admissible_actions"]) and mask[: mask.sum()].all()
        _, _, _, _, info = env.step(int(mask.sum()) - 1)


def test_index_k_plays_the_kth_sorted_admissible_command():
    env = AdmissibleActionIndex(_alfworld(), num_actions=128)
    _, info = env.reset(options={"task_id": 0})
    commands = sorted(info["admissible_actions"])
    k = next(i for i, c in enumerate(commands) if c.startswith("go to"))
    _, _, _, _, step_info = env.step(k)
    assert step_info["action"] == commands[k] and step_info["valid"]


def test_webshop_search_template_searches_the_instruction():
    env = AdmissibleActionIndex(gym.make("rspo/WebShop-v0", num_products=200, split="test"), sort=False)
    _, info = env.reset(options={"task_id": 0})
    assert env.actions == [f"search[{info['task']}]"]
    _, _, _, _, info = env.step(0)
    assert info["valid"] and any(a.startswith("click[b0") for a in env.actions)


def test_invalid_index_is_a_no_op_with_optional_penalty():
    for penalty, expected in ((0.0, 0.0), (0.1, -0.1)):
        env = AdmissibleActionIndex(_alfworld(), num_actions=128, invalid_penalty=penalty)
        obs, _ = env.reset(options={"task_id": 0})
        state = env.unwrapped.game.state
        _, reward, terminated, truncated, info = env.step(127)
        assert info["action"] == INVALID_ACTION and not info["valid"]
        assert reward == pytest.approx(expected) and not (terminated or truncated)
        assert env.unwrapped.game.state == state


def test_task_subset_draws_only_its_tasks_and_is_seeded():
    env = TaskSubset(_alfworld(), [4, 9, 20])
    draws = [env.reset(seed=s)[1]["task_id"] for s in range(12)]
    assert set(draws) <= {4, 9, 20} and draws == [env.reset(seed=s)[1]["task_id"] for s in range(12)]


def test_sb3_check_env_accepts_the_wrapped_envs():
    pytest.importorskip("sb3_contrib")
    from stable_baselines3.common.env_checker import check_env

    check_env(make_sb3_env("rspo/ALFWorld-v0", split="valid_seen", dim=512), warn=True)
    check_env(make_sb3_env("rspo/WebShop-v0", num_products=200, split="test", sort=False, dim=512), warn=True)
    check_env(make_sb3_env("rspo/ALFWorld-v0", split="valid_seen", dim=256, layout="pairs", num_actions=64, slot_dim=64), warn=True)


def test_maskable_ppo_learns_a_few_steps_on_both_envs():
    pytest.importorskip("sb3_contrib")
    import torch
    from sb3_contrib import MaskablePPO

    torch.set_num_threads(1)
    for env in (
        make_sb3_env("rspo/ALFWorld-v0", split="valid_seen", dim=512, num_actions=64),
        make_sb3_env("rspo/WebShop-v0", num_products=200, split="test", sort=False, dim=512, num_actions=64),
    ):
        model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
        model.learn(total_timesteps=64)
        obs, _ = env.reset(seed=0)
        action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
        assert env.action_masks()[int(action)]


def _pairs_env(num_actions: int = 64) -> ActionSlotFeaturizer:
    return ActionSlotFeaturizer(AdmissibleActionIndex(_alfworld(), num_actions), dim=256, slot_dim=64)


def test_pair_observations_are_in_the_box_with_zero_empty_slots():
    env, twin = _pairs_env(), _pairs_env()
    obs, _ = env.reset(options={"task_id": 1})
    assert obs.shape == (256 + 64 * 64,) and obs.dtype == np.float32
    for step in range(4):
        slots = obs[256:].reshape(64, 64)
        listed = len(env.get_wrapper_attr("actions"))
        assert env.observation_space.contains(obs) and obs[:256].any()
        assert slots[:listed].any(axis=1).all() and not slots[listed:].any()
        assert (obs == (twin.reset(options={"task_id": 1})[0] if step == 0 else twin.step(0)[0])).all()
        obs, *_ = env.step(0)


def test_pair_features_follow_what_is_held_and_where_the_object_was_seen():
    env = _pairs_env(128)
    _, info = env.reset(options={"task_id": 1})
    plan = env.unwrapped.expert_plan()
    place = next(c for c in plan if c.startswith("take ")).split(" from ")[1]
    for command in plan[:-1]:
        env.step(env.get_wrapper_attr("actions").index(command))
    assert "go|n0|found1|task" in env.slot_features(f"go to {place}", 0, {})
    assert "move|n0|typed1|task" in env.slot_features(plan[-1], 0, {})
    assert "go|played1" in env.slot_features(next(c for c in plan if c.startswith("go to ")), 0, {})
    with pytest.raises(TypeError, match="AdmissibleActionIndex"):
        ActionSlotFeaturizer(_alfworld())


def _policies(state_dim: int = 32, slot_dim: int = 16, num_slots: int = 8):
    pytest.importorskip("sb3_contrib")
    import torch
    from gymnasium import spaces
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

    from rspo_gym.sb3.drrn import DRRNPolicy

    torch.manual_seed(0)
    obs_space = spaces.Box(0.0, 1.0, (state_dim + num_slots * slot_dim,), np.float32)
    act_space = spaces.Discrete(num_slots)
    drrn = DRRNPolicy(obs_space, act_space, lambda _: 3e-4, net_arch=[32], state_dim=state_dim)
    mlp = MaskableActorCriticPolicy(obs_space, act_space, lambda _: 3e-4)
    obs = (torch.rand(3, obs_space.shape[0]) < 0.3).float()
    obs[:, state_dim + 6 * slot_dim :] = 0.0  # slots 6 and 7 empty
    return drrn, mlp, obs


def _permute_slots(obs, perm, state_dim: int = 32, slot_dim: int = 16):
    import torch

    slots = obs[:, state_dim:].reshape(len(obs), -1, slot_dim)[:, perm]
    return torch.cat([obs[:, :state_dim], slots.reshape(len(obs), -1)], dim=1)


def test_drrn_logits_are_permutation_equivariant_and_the_mlp_logits_are_not():
    import torch

    drrn, mlp, obs = _policies()
    perm = torch.tensor([7, 2, 0, 5, 6, 1, 4, 3])
    with torch.no_grad():
        for policy, equivariant in ((drrn, True), (mlp, False)):
            logits = policy.get_distribution(obs).distribution.logits
            permuted = policy.get_distribution(_permute_slots(obs, perm)).distribution.logits
            assert torch.allclose(permuted, logits[:, perm], atol=1e-6) == equivariant


def test_drrn_gives_masked_slots_no_probability():
    import torch

    drrn, _, obs = _policies()
    masks = np.zeros((3, 8), dtype=bool)
    masks[:, :6] = True
    masks[1, 2:] = False
    with torch.no_grad():
        probs = drrn.get_distribution(obs, action_masks=masks).distribution.probs
    assert (probs[torch.as_tensor(~masks)] == 0).all() and torch.allclose(probs.sum(1), torch.ones(3))
    assert (probs[torch.as_tensor(masks)] > 0).all()


def test_drrn_policy_checks_the_layout():
    pytest.importorskip("sb3_contrib")
    from gymnasium import spaces

    from rspo_gym.sb3.drrn import DRRNPolicy

    with pytest.raises(ValueError, match="state_dim"):
        DRRNPolicy(spaces.Box(0.0, 1.0, (100,), np.float32), spaces.Discrete(8), lambda _: 3e-4, state_dim=30)
    with pytest.raises(ValueError, match="layout"):
        make_sb3_env("rspo/ALFWorld-v0", layout="grid")


def test_maskable_ppo_learns_a_few_steps_with_the_drrn_policy(tmp_path):
    pytest.importorskip("sb3_contrib")
    import torch
    from sb3_contrib import MaskablePPO

    from rspo_gym.sb3.drrn import DRRNPolicy

    torch.set_num_threads(1)
    env = make_sb3_env("rspo/ALFWorld-v0", split="valid_seen", layout="pairs", dim=512, num_actions=64, slot_dim=64)
    model = MaskablePPO(DRRNPolicy, env, n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu", policy_kwargs={"state_dim": 512, "net_arch": [32]})
    model.learn(total_timesteps=256)
    model.save(tmp_path / "drrn")
    loaded = MaskablePPO.load(tmp_path / "drrn", device="cpu")
    obs, _ = env.reset(seed=0)
    action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
    assert env.action_masks()[int(action)]
    assert int(loaded.predict(obs, action_masks=env.action_masks(), deterministic=True)[0]) == int(action)
