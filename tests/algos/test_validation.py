"""Every config field is checked by the config itself, before any env or model is built."""

from dataclasses import fields

import pytest

from rspo_gym.training.config import GiGPOConfig, PPOConfig, RSPOConfig, TrainerConfig
from rspo_gym.training.validation import CHOICES, RULES, unknown_fields_error
from rspo_gym.errors import UserError

NONSENSE = [
    ("explorer_group_size", -3, "an integer from 0 to 1024"),
    ("temperature", 0, "a number > 0"),
    ("temperature", -1.0, "a number > 0"),
    ("top_p", 0, "a number > 0 and <= 1"),
    ("top_p", 1.5, "a number > 0 and <= 1"),
    ("max_new_tokens", 0, "a positive integer"),
    ("iterations", -3, "a positive integer"),
    ("max_turns", 0, "a positive integer or None"),
    ("max_turns", "abc", "a positive integer or None"),
    ("learning_rate", "abc", "a number > 0"),
    ("learning_rate", float("nan"), "a number > 0"),
    ("loss_agg", "sum", "one of token-mean"),
    ("episode_stats", "episodes", "one of steps, trajectories"),
    ("kl_kind", "k4", "one of k1"),
    ("train_task_ids", "abc", "a non-empty list of task ids"),
    ("train_task_ids", [], "a non-empty list of task ids"),
    ("train_task_ids", [1, -2], "a non-empty list of task ids"),
    ("eval_split", "", "a non-empty string or None"),
    ("num_groups", True, "an integer from 1 to 10000"),
    ("progress", "yes", "true or false"),
    ("base", "sac", "one of grpo, ppo, gigpo"),
    ("swap", "magic", "one of explorer, rank, anneal"),
    ("replay_age", 0, "a positive integer"),
    ("checkpoint_every", -1, "a non-negative integer"),
    ("generation_backend", "sglang", "one of hf, vllm, vllm-server"),
    ("vllm_server_url", "10.0.0.2:8000", "an http:// or https:// URL or None"),
    ("vllm_server_url", "http://", "an http:// or https:// URL or None"),
    ("vllm_server_timeout", 0, "a number > 0"),
    ("vllm_weight_sync", "gloo", "one of nccl, none"),
    ("vllm_weight_sync_port", 70000, "a port number (1-65535) or None"),
    ("vllm_weight_sync_host", "", "a non-empty string or None"),
]


@pytest.mark.parametrize("name,value,expected", NONSENSE, ids=lambda v: str(v))
def test_nonsense_is_refused_by_the_config_in_one_line(name, value, expected):
    with pytest.raises(UserError) as refused:
        RSPOConfig(**{name: value})
    assert str(refused.value).startswith(f"{name} must be {expected}") and str(refused.value).endswith(f"got {value!r}")


def test_every_field_of_every_config_has_a_rule_and_the_defaults_pass():
    for cls in (TrainerConfig, GiGPOConfig, PPOConfig, RSPOConfig):
        assert {f.name for f in fields(cls)} <= set(RULES), cls
        cls()  # defaults are valid


def test_output_dir_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(UserError, match="output_dir must be a folder, not an existing file"):
        TrainerConfig(output_dir=str(path))
    TrainerConfig(output_dir=str(tmp_path / "new"))


def test_replace_and_from_dict_validate_too():
    from dataclasses import replace

    with pytest.raises(UserError, match="max_turns"):
        replace(TrainerConfig(), max_turns=0)
    with pytest.raises(UserError, match="learning_rate"):
        TrainerConfig.from_dict({"learning_rate": "abc"})
    with pytest.raises(TypeError, match=r"unknown TrainerConfig field 'num_grups' \(did you mean 'num_groups'\?\)"):
        TrainerConfig.from_dict({"num_grups": 1})
    assert str(unknown_fields_error(TrainerConfig, ["zzz"])) == "unknown TrainerConfig field 'zzz'"


def test_rspo_learner_cannot_train_on_the_dense_reward():
    with pytest.raises(UserError, match="RSPO's learner optimises the outcome"):
        RSPOConfig(reward="dense")
    TrainerConfig(reward="dense")


def test_choices_agree_with_the_modules_that_implement_them():
    pytest.importorskip("torch")
    from rspo_gym.algos import advantages, losses, rewards
    from rspo_gym.training import reporting, rspo, trainer

    assert CHOICES["loss_agg"] == losses.TRAINING_AGG_MODES
    assert set(CHOICES["kl_kind"]) == set(losses._KL_KINDS)
    assert CHOICES["reward"] == rewards.REWARD_KINDS and CHOICES["dense_outcome"] == rewards.DENSE_OUTCOMES
    assert CHOICES["episode_stats"] == advantages._EPISODE_STATS and set(CHOICES["gigpo_norm"]) == set(advantages._GIGPO_NORMS)
    assert CHOICES["base"] == rspo.BASES and CHOICES["swap"] == rspo.SWAPS
    assert CHOICES["precision"] == trainer.PRECISIONS
    assert CHOICES["report_to"] == reporting.REPORT_TO


def test_a_vllm_server_needs_its_url_and_free_replies():
    with pytest.raises(UserError, match=r"^generation_backend='vllm-server' needs vllm_server_url, the server's base URL"):
        TrainerConfig(generation_backend="vllm-server", constrained=False)
    with pytest.raises(UserError, match=r"^constrained decoding is HF-only: set constrained=False with generation_backend='vllm-server'"):
        TrainerConfig(generation_backend="vllm-server", vllm_server_url="http://10.0.0.2:8000")
    config = TrainerConfig(generation_backend="vllm-server", vllm_server_url="http://10.0.0.2:8000", constrained=False)
    assert (config.vllm_weight_sync, config.vllm_server_timeout) == ("nccl", 600.0)


def test_the_explorers_envs_are_bounded_as_the_learners():
    # 10,000 tasks x 1,024 explorer members would be 10.24 M live envs, built after config.json is written.
    with pytest.raises(UserError, match=r"^num_groups x explorer_group_size must be at most 65536 explorer envs per iteration, got 10000 x 1024$"):
        RSPOConfig(num_groups=10_000, group_size=1, explorer_group_size=1024)
    RSPOConfig(num_groups=64, group_size=1, explorer_group_size=1024)  # exactly 65,536
    RSPOConfig(num_groups=10_000, group_size=1, explorer_group_size=1024, swap="rank")  # no explorer envs are built


def _float_fields(cls):
    """The fields whose annotation takes a float (``float``, ``float | None``, ``dict[str, float]``)."""
    from typing import get_type_hints

    return [name for name, hint in get_type_hints(cls).items() if "float" in str(hint) or hint is float]


@pytest.mark.parametrize("name", sorted(_float_fields(RSPOConfig)))
def test_every_float_field_must_fit_the_dtype_it_is_used_in(name):
    # A cap of 1e39 passed, was written to config.json and then broke the first update as inf.
    extra = {"swap": "rank"} if name == "tis_imp_ratio_cap" else {}
    # kl_target is used as a Python float (float64): only a value beyond float64 overflows it.
    value = {"process_weights": {"open": 1e39}, "vllm_server_timeout": 1e308, "kl_target": 10**400}.get(name, 1e39)
    with pytest.raises(UserError) as refused:
        RSPOConfig(**{name: value}, **extra)
    assert str(refused.value).startswith(f"{name} must be ") and "\n" not in str(refused.value)


@pytest.mark.parametrize("name,value,expected", [
    ("is_cap", 1e39, "is_cap must be a float32 number (0 or from 1.4e-45 to 3.40282e+38 in size), got 1e+39"),
    ("clip", 1e308, "clip must be a float32 number (0 or from 1.4e-45 to 3.40282e+38 in size), got 1e+308"),
    ("tis_imp_ratio_cap", 1e39, "tis_imp_ratio_cap must be a float32 number (0 or from 1.4e-45 to 3.40282e+38 in size), got 1e+39"),
    ("success_reward", -1e39, "success_reward must be a float32 number (0 or from 1.4e-45 to 3.40282e+38 in size), got -1e+39"),
    ("temperature", 1e-50, "temperature must be a float32 number (0 or from 1.4e-45 to 3.40282e+38 in size), got 1e-50"),
    ("process_weights", {"open": 1e39}, "process_weights must be a float32 number (0 or from 1.4e-45 to 3.40282e+38 in size) "
                                         "for each event, got {'open': 1e+39}"),
    ("success_reward", 10**400, "success_reward must be a number, got 1" + "0" * 400),
    ("vllm_server_timeout", 1e300, "vllm_server_timeout must be a number > 0 and <= 1e+09, got 1e+300"),
])
def test_a_float_that_overflows_is_refused_in_one_line(name, value, expected):
    extra = {"swap": "rank"} if name == "tis_imp_ratio_cap" else {}
    with pytest.raises(UserError) as refused:
        RSPOConfig(**{name: value}, **extra)
    assert str(refused.value) == expected


def test_floats_within_float32_pass():
    config = RSPOConfig(is_cap=3.4e38, clip=1e-45, success_reward=-3e38, eval_temperature=0.0, kl_target=1e300, swap="rank",
                        tis_imp_ratio_cap=3e38, process_weights={"open": 1e-40})
    assert (config.is_cap, config.kl_target) == (3.4e38, 1e300)
