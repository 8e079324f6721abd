"""Every trainer config field checked where the config is made, before any env or model is built.

- ``validate_config``: types, ranges and choices of every field a config has (``RULES``), then
  the checks across fields; called by the config dataclasses' ``__post_init__``, so a bad value
  fails in ``TrainerConfig(...)``, in ``dataclasses.replace`` and in ``from_dict`` alike.
- ``unknown_fields_error``: the error for field names a config does not have, with a did-you-mean.
- ``positive_int``: the check of a count given outside a config (``learn(iterations)``).
- ``check_env_id`` / ``check_eval_split`` / ``check_task_ids`` / ``check_text_env``: the env id is
  registered, the held-out split exists, task ids are in range and the env is a text env (they need
  the env, so the trainer calls them after the cheap env build, before the model load).
- ``MAX_*`` / ``MIN_PROMPT_LENGTH``: the bounds of the sizes that allocate with their value.
- ``float_fields`` / ``FLOAT64_FIELDS``: every float field must fit the dtype it is used in.

Every error is a ``UserError`` (a ``ValueError``) whose one line names the field, what it must be
and what came. The choice tuples repeat those of the modules that implement them (``losses``,
``advantages``, ``rewards``, ``rspo``, ``trainer``), which import torch; a test checks that they
agree. This module imports nothing heavy, so the command line validates before loading torch.
"""

from __future__ import annotations

import difflib
import functools
import math
import struct
from collections.abc import Callable, Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

from rspo_gym.errors import UserError

__all__ = [
    "CHOICES",
    "FLOAT64_FIELDS",
    "RULES",
    "UnknownFieldError",
    "validate_config",
    "unknown_fields_error",
    "positive_int",
    "check_env_id",
    "check_eval_split",
    "check_task_ids",
    "check_text_env",
    "check_generation_backend",
]

#: Allowed values of the fields with a fixed set of choices.
CHOICES: dict[str, tuple[str, ...]] = {
    "generation_backend": ("hf", "vllm", "vllm-server"),
    "vllm_weight_sync": ("nccl", "none"),
    "reward": ("outcome", "score", "dense"),
    "invalid_penalty_on": ("format", "format_or_env"),
    "dense_outcome": ("outcome", "score"),
    "precision": ("fp32", "bf16-mixed", "bf16"),
    "loss_agg": ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"),
    "kl_kind": ("k1", "kl", "abs", "k2", "mse", "k3", "low_var_kl"),
    "episode_stats": ("steps", "trajectories"),
    "gigpo_norm": ("mean_std", "mean_std_norm", "mean", "mean_norm"),
    "base": ("grpo", "ppo", "gigpo"),
    "swap": ("explorer", "rank", "anneal"),
    "is_level": ("step", "trajectory", "none"),
    "env_pool": ("inprocess", "processes", "ray"),
    "prompt_format": ("window", "conversation"),
    "report_to": ("none", "tensorboard", "wandb"),
    "lr_scheduler": ("constant", "cosine"),
    "kl_ctrl": ("fixed", "adaptive"),
    "critic": ("head", "separate"),
}

Rule = Callable[[Any], str | None]  # None: valid; else what the value must be

# Upper bounds of the sizes that allocate in proportion to their value: a typo (an extra zero or
# six) must be one line at once, not minutes of work and gigabytes of memory before a crash.
# Each is far above any setting the suite, or verl-agent's published runs, use.
#: Trajectories per task (``group_size``, ``explorer_group_size``): verl-agent uses 8.
MAX_GROUP_SIZE = 1024
#: Tasks per iteration (``num_groups``) and held-out tasks per evaluation (``eval_tasks``):
#: verl-agent uses 16 and ALFWorld's largest split has 3,553 tasks.
MAX_TASKS = 10_000
#: Envs of one iteration's rollout (``num_groups x group_size``), each a live env in memory.
MAX_ENVS = 65_536
#: LoRA rank: a 7B model's hidden size is 3,584; a rank above it adds parameters and nothing else.
MAX_LORA_RANK = 4096
#: Task ids and seeds are drawn in ``[0, 2**31)`` by the envs, and numpy / torch take 64-bit seeds.
MAX_TASK_ID = 2**31
MAX_SEED = 2**63 - 1
#: Seconds a request may wait (``vllm_server_timeout``): sockets refuse a timeout past ``time_t``.
MAX_TIMEOUT = 1e9
#: Float fields used only as Python floats (float64), never in a tensor. Every other float field
#: ends up in float32 (or bfloat16, of the same range) tensors, where a value past float32's range
#: is inf and a nonzero one below its smallest is 0: both are refused where the config is made.
FLOAT64_FIELDS = frozenset({"vllm_server_timeout", "kl_target"})
#: float32's largest finite value and smallest positive (subnormal) one.
FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.401298464324817e-45
#: The shortest prompt limit that holds any env's first prompt (instructions, task, admissible
#: actions); a smaller one fails on the first turn, after the model has loaded.
MIN_PROMPT_LENGTH = 64


class UnknownFieldError(UserError, TypeError):
    """A field name the config does not have (a ``TypeError`` too, as for an unknown keyword)."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond float64 (JSON has no limit)
        return False


def _fits_float32(value: float) -> bool:
    """Whether float32 holds ``value`` as a finite number that is 0 only when ``value`` is."""
    try:
        rounded = struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:  # rounds to inf
        return False
    return rounded != 0 or value == 0


_FLOAT32_WORDS = f"a float32 number (0 or from {FLOAT32_TINY:.2g} to {FLOAT32_MAX:g} in size)"


@functools.cache
def float_fields(config_class: type) -> tuple[tuple[str, bool], ...]:
    """The fields of ``config_class`` whose annotation takes floats, each with whether it is a
    mapping of floats (``dict[str, float]``), read from the annotations so a new field is covered
    (as text: a subclass's annotation need not resolve)."""
    found = []
    for f in fields(config_class):
        hint = f.type if isinstance(f.type, str) else "float" if f.type is float else str(f.type)
        if "float" in hint:
            found.append((f.name, hint.startswith("dict")))
    return tuple(found)


def _float32_problem(config: Any) -> tuple[str, str] | None:
    """The first float field (outside ``FLOAT64_FIELDS``) whose value float32 cannot hold, with the words."""
    for name, is_mapping in float_fields(type(config)):
        value = getattr(config, name)
        if name in FLOAT64_FIELDS or value is None:
            continue
        numbers = value.values() if is_mapping else [value]
        if not all(_fits_float32(number) for number in numbers):
            return name, _FLOAT32_WORDS + (" for each event" if is_mapping else "")
    return None


def _optional(rule: Rule) -> Rule:
    def check(value: Any) -> str | None:
        problem = rule(value) if value is not None else None
        return f"{problem} or None" if problem else None

    return check


def _int(low: int, high: int | None = None) -> Rule:
    words = {0: "a non-negative integer", 1: "a positive integer"}.get(low, f"an integer >= {low}")
    if high is not None:
        words = f"an integer from {low} to {high}"
    return lambda value: None if _is_int(value) and value >= low and (high is None or value <= high) else words


def _number(low: float | None = None, high: float | None = None, *, low_open: bool = False, high_open: bool = False) -> Rule:
    bounds = []
    if low is not None:
        bounds.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        bounds.append(f"{'<' if high_open else '<='} {high:g}")
    words = "a number" + (f" {' and '.join(bounds)}" if bounds else "")

    def check(value: Any) -> str | None:
        if not _is_number(value):
            return words
        if low is not None and (value <= low if low_open else value < low):
            return words
        if high is not None and (value >= high if high_open else value > high):
            return words
        return None

    return check


def _bool(value: Any) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def _choice(name: str) -> Rule:
    return lambda value: None if value in CHOICES[name] else f"one of {', '.join(CHOICES[name])}"


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) and value else "a non-empty string"


def _mapping(value: Any) -> str | None:
    return None if isinstance(value, dict) and all(isinstance(k, str) for k in value) else "a JSON object (keyword arguments)"


def _weights(value: Any) -> str | None:
    ok = isinstance(value, dict) and all(isinstance(k, str) and _is_number(v) for k, v in value.items())
    return None if ok else "a JSON object of event name -> number"


def _url(value: Any) -> str | None:
    ok = isinstance(value, str) and value.startswith(("http://", "https://")) and len(value.split("://", 1)[1]) > 0
    return None if ok else "an http:// or https:// URL"


def _port(value: Any) -> str | None:
    return None if _is_int(value) and 1 <= value <= 65535 else "a port number (1-65535)"


def _task_ids(value: Any) -> str | None:
    ok = isinstance(value, list) and value and all(_is_int(v) and 0 <= v < MAX_TASK_ID for v in value)
    return None if ok else f"a non-empty list of task ids (integers from 0 to {MAX_TASK_ID - 1})"


def _env_kwargs(value: Any) -> str | None:
    problem = _mapping(value)
    if problem or value.get("max_episode_steps") is None:
        return problem
    return None if _is_int(value["max_episode_steps"]) and value["max_episode_steps"] >= 1 else (
        "a JSON object whose max_episode_steps is a positive integer or null")


def _target_modules(value: Any) -> str | None:
    ok = _text(value) is None or (isinstance(value, list) and value and all(_text(v) is None for v in value))
    return None if ok else "a module name pattern or a non-empty list of module names"


def _output_dir(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return "a folder path"
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        return "a folder, not an existing file"
    return None


#: The rule of every config field (a test checks that every field of every config has one).
RULES: dict[str, Rule] = {
    # rollout
    "num_groups": _int(1, MAX_TASKS),
    "group_size": _int(1, MAX_GROUP_SIZE),
    "max_turns": _optional(_int(1)),
    "temperature": _number(0, low_open=True),
    "top_p": _number(0, 1, low_open=True),
    "max_new_tokens": _int(1),
    "max_prompt_length": _optional(_int(MIN_PROMPT_LENGTH)),
    "history_length": _optional(_int(0)),
    "prompt_format": _optional(_choice("prompt_format")),
    "think": _bool,
    "constrained": _bool,
    "train_task_ids": _optional(_task_ids),
    "env_kwargs": _env_kwargs,
    "processes": _int(0),
    "env_pool": _optional(_choice("env_pool")),
    "env_workers": _optional(_int(1)),
    # generation engine
    "generation_backend": _choice("generation_backend"),
    "vllm_gpu_memory_utilization": _number(0, 1, low_open=True),
    "vllm_enable_sleep_mode": _optional(_bool),
    "vllm_tensor_parallel_size": _int(1),
    "vllm_kwargs": _mapping,
    "recompute_old_logprobs": _optional(_bool),
    "vllm_server_url": _optional(_url),
    "vllm_server_model": _optional(_text),
    "vllm_server_timeout": _number(0, MAX_TIMEOUT, low_open=True),
    "vllm_weight_sync": _choice("vllm_weight_sync"),
    "vllm_weight_sync_host": _optional(_text),
    "vllm_weight_sync_port": _optional(_port),
    # reward
    "reward": _optional(_choice("reward")),
    "success_reward": _number(),
    "invalid_penalty": _number(0),
    "invalid_penalty_on": _choice("invalid_penalty_on"),
    "process_reward": _optional(_text),
    "process_weights": _weights,
    "process_once": _bool,
    "process_coef": _number(),
    "dense_outcome": _optional(_choice("dense_outcome")),
    "process_gamma": _optional(_number(0, 1)),
    # optimisation
    "learning_rate": _number(0, low_open=True),
    "weight_decay": _number(0),
    "precision": _optional(_choice("precision")),
    "ppo_epochs": _int(1),
    "mini_batch_size": _int(1),
    "micro_batch_size": _int(1),
    "max_tokens_per_micro_batch": _optional(_int(1)),
    "gradient_checkpointing": _bool,
    "clip": _number(0, low_open=True),
    "clip_high": _optional(_number(0, low_open=True)),
    "dual_clip": _optional(_number(1, low_open=True)),
    "loss_agg": _choice("loss_agg"),
    "entropy_coef": _number(),
    "kl_coef": _number(0),
    "kl_kind": _choice("kl_kind"),
    "lora_r": _int(0, MAX_LORA_RANK),
    "lora_alpha": _number(0, low_open=True),
    "lora_dropout": _number(0, 1, high_open=True),
    "lora_target_modules": _target_modules,
    "ref_offload": _bool,
    "max_grad_norm": _number(0, low_open=True),
    # update (verl's knobs)
    "loss_scale_factor": _optional(_int(1)),
    "tis_imp_ratio_cap": _optional(_number(1)),
    "shuffle_mini_batches": _bool,
    "shuffle_chains": _bool,
    "lr_scheduler": _choice("lr_scheduler"),
    "lr_warmup_steps_ratio": _number(0, 1),
    "min_lr_ratio": _number(0, 1),
    # KL in the reward, dynamic sampling (verl's knobs)
    "use_kl_in_reward": _bool,
    "kl_ctrl": _choice("kl_ctrl"),
    "kl_target": _number(0, low_open=True),
    "kl_horizon": _int(1),
    "filter_groups": _bool,
    "max_num_gen_batches": _int(0),
    # GRPO-family estimators
    "norm_by_std": _bool,
    "episode_stats": _choice("episode_stats"),
    # evaluation, logging, checkpoints
    "iterations": _int(1),
    "eval_every": _int(0),
    "eval_tasks": _int(1, MAX_TASKS),
    "eval_split": _optional(_text),
    "eval_task_ids": _optional(_task_ids),
    "eval_temperature": _number(0),
    "eval_seed": _int(0, MAX_SEED),
    "seed": _int(0, MAX_SEED),
    "output_dir": _optional(_output_dir),
    "checkpoint_every": _int(0),
    "progress": _bool,
    "report_to": _choice("report_to"),
    # GiGPO
    "gamma": _number(0, 1),
    "omega": _number(),
    "gigpo_norm": _choice("gigpo_norm"),
    "enable_similarity": _bool,
    "similarity_thresh": _number(0, 1),
    # PPO
    "gae_gamma": _number(0, 1),
    "gae_lambda": _number(0, 1),
    "vf_coef": _number(0),
    "critic_lr": _optional(_number(0, low_open=True)),
    "critic_max_grad_norm": _number(0, low_open=True),
    "value_clip": _number(0, low_open=True),
    "critic": _choice("critic"),
    "critic_model": _optional(_text),
    # RSPO
    "base": _choice("base"),
    "swap": _choice("swap"),
    "explorer_group_size": _int(0, MAX_GROUP_SIZE),
    "explorer_sync_every": _int(0),
    "explorer_updates": _int(0),
    "explorer_sync_on_overtake": _bool,
    "explorer_overtake_window": _int(1),
    "explorer_keep_optimizer": _bool,
    "explorer_warmup_iterations": _int(0),
    "explorer_lora": _bool,
    "replay_age": _int(1),
    "is_cap": _number(0, low_open=True),
    "is_level": _choice("is_level"),
    "replay_task_share": _number(0, 1),
    "anneal_iterations": _int(1),
    "transfer_tasks": _int(0, MAX_ENVS),
    "transfer_episodes": _int(1, MAX_GROUP_SIZE),
}


def validate_config(config: Any) -> None:
    """Raise ``UserError`` naming the first field of ``config`` whose value is not allowed.

    >>> from rspo_gym.training.config import TrainerConfig
    >>> TrainerConfig(max_turns=0)
    Traceback (most recent call last):
    ...
    rspo_gym.errors.UserError: max_turns must be a positive integer or None, got 0
    """
    for f in fields(config):
        value = getattr(config, f.name)
        problem = RULES[f.name](value)
        if problem:
            raise UserError(f"{f.name} must be {problem}, got {value!r}")
    overflow = _float32_problem(config)  # after the rules: every value is a finite number or None here
    if overflow:
        name, words = overflow
        raise UserError(f"{name} must be {words}, got {getattr(config, name)!r}")
    _check_across_fields(config)


def _check_across_fields(config: Any) -> None:
    if config.num_groups * config.group_size > MAX_ENVS:
        raise UserError(f"num_groups x group_size must be at most {MAX_ENVS} envs per iteration, "
                        f"got {config.num_groups} x {config.group_size}")
    if getattr(config, "swap", None) == "explorer" and config.num_groups * config.explorer_group_size > MAX_ENVS:
        raise UserError(f"num_groups x explorer_group_size must be at most {MAX_ENVS} explorer envs per iteration, "
                        f"got {config.num_groups} x {config.explorer_group_size}")
    if 2 * getattr(config, "transfer_tasks", 0) * getattr(config, "transfer_episodes", 1) > MAX_ENVS:
        raise UserError(f"2 x transfer_tasks x transfer_episodes must be at most {MAX_ENVS} envs (both labels' episodes are "
                        f"played at once), got 2 x {config.transfer_tasks} x {config.transfer_episodes}")
    if config.generation_backend in ("vllm", "vllm-server") and config.constrained:
        raise UserError(
            f"constrained decoding is HF-only: set constrained=False with generation_backend={config.generation_backend!r} "
            "(real instruction models write <think>/<action> replies; think=True asks for them)"
        )
    if config.generation_backend == "vllm-server" and config.vllm_server_url is None:
        raise UserError("generation_backend='vllm-server' needs vllm_server_url, the server's base URL (e.g. http://10.0.0.2:8000)")
    if getattr(config, "swap", None) == "explorer" and config.tis_imp_ratio_cap is not None:
        raise UserError("tis_imp_ratio_cap does not combine with swap='explorer' (replayed rows carry their own importance weights): unset one")
    if config.use_kl_in_reward and config.kl_coef <= 0:
        raise UserError("use_kl_in_reward needs kl_coef > 0, the penalty's starting coefficient: set kl_coef (verl's kl_ctrl.kl_coef: 0.001)")
    if getattr(config, "base", None) is not None and config.critic == "separate":
        raise UserError("critic='separate' is PPOTrainer's (RSPO's explorer would need a critic of its own): use critic='head' under RSPO")
    if getattr(config, "base", None) is not None and config.reward == "dense":
        raise UserError("RSPO's learner optimises the outcome: use reward='outcome' or 'score' (the explorer uses dense)")


def unknown_fields_error(config_class: type, names: Iterable[str]) -> UnknownFieldError:
    """The error for ``names`` that ``config_class`` lacks, each with its closest field, if any.

    >>> from rspo_gym.training.config import TrainerConfig
    >>> str(unknown_fields_error(TrainerConfig, ["num_grups"]))
    "unknown TrainerConfig field 'num_grups' (did you mean 'num_groups'?)"
    """
    known = [f.name for f in fields(config_class)]
    described = []
    for name in sorted(names):
        close = difflib.get_close_matches(name, known, n=1)
        described.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    plural = "s" if len(described) > 1 else ""
    return UnknownFieldError(f"unknown {config_class.__name__} field{plural} {', '.join(described)}")


def positive_int(name: str, value: Any) -> int:
    """``value`` when it is a positive integer, else a ``UserError`` naming ``name``."""
    if not _is_int(value) or value < 1:
        raise UserError(f"{name} must be a positive integer, got {value!r}")
    return value


def check_env_id(env: Any) -> None:
    """For an env id string: that Gymnasium knows it (its own did-you-mean in the message)."""
    if not isinstance(env, str):
        return
    import gymnasium as gym

    import rspo_gym  # noqa: F401 - registers our envs

    try:
        gym.spec(env)
    except gym.error.Error as err:
        raise UserError(f"unknown env id {env!r}: {err}") from err


def check_process_reward(env: Any, name: str | None, weights: dict[str, float]) -> None:
    """That the env offers the process reward ``name`` and its events take ``weights``: one line
    naming the env's process rewards otherwise, before any env is built. Factories and vector
    envs are checked when their envs are wrapped."""
    from rspo_gym.envs.process_rewards import choice_problem, reward_specs

    if (name is None and not weights) or not (isinstance(env, str) or hasattr(env, "unwrapped")):
        return
    specs = reward_specs(env)
    if not specs:
        raise UserError(f"process_reward {name!r}: this env offers no process rewards")
    problem = choice_problem(specs, next(iter(specs)) if name is None else name, weights)
    if problem:
        raise UserError(f"process_reward / process_weights: {problem}")


def check_eval_split(make_env: Callable[[], Any], split: str, task_ids: list[int] | None = None) -> None:
    """That the env made by ``make_env`` (the evaluation env factory) accepts ``split`` and has
    every id of ``task_ids`` (``eval_task_ids``): one env is built and closed, as cheap as the
    training env, before the model is loaded."""
    try:
        env = make_env()
    except (TypeError, ValueError) as err:
        raise UserError(f"eval_split {split!r} does not fit the env: {err}") from err
    check_task_ids(env, task_ids, "eval_task_ids", f"split {split!r}")


def check_task_ids(env: Any, task_ids: list[int] | None, name: str, where: str) -> None:
    """That every id of ``task_ids`` (the field ``name``) is a task of ``env``, whose
    ``unwrapped.num_tasks`` (None: unbounded, generated tasks) counts them; ``env`` is closed."""
    try:
        size = getattr(env.unwrapped, "num_tasks", None)
    finally:
        env.close()
    outside = [i for i in task_ids or () if size is not None and i >= size]
    if outside:
        raise UserError(f"{name} {outside[:3]} out of range: {where} has {size} tasks (ids 0 to {size - 1})")


def check_text_env(observation_space: Any, action_space: Any, env_id: str | None) -> None:
    """That the env speaks text (``gymnasium.spaces.Text`` observations and actions), as the LLM
    rollout needs; a ``Discrete`` one is pointed at the adapter that makes it a text env."""
    from gymnasium import spaces

    if isinstance(observation_space, spaces.Text) and isinstance(action_space, spaces.Text):
        return
    hint = (" (a Discrete-action env: wrap it in rspo_gym.DiscreteTextAdapter with a TextPreset and pass that env; docs/env_usage.md)"
            if isinstance(action_space, spaces.Discrete) else "")
    raise UserError(
        f"{env_id or 'the env'} is not a text env: it has {type(observation_space).__name__} observations and "
        f"{type(action_space).__name__} actions, and a text env has Text observations and actions and names its "
        f"commands in info['admissible_actions']{hint}"
    )


def check_env_settings(env_id: str, config: Any) -> None:
    """Before torch and the model (the command line's first checks, about a second): ``env_id`` is
    registered, speaks text, takes ``env_kwargs``, and has every id of ``train_task_ids`` and (when
    ``learn()`` will evaluate on them) ``eval_task_ids`` in the evaluation split. One env of each
    split is built and closed; the trainer checks the same again for Python callers."""
    import gymnasium as gym

    from rspo_gym.training.envs import default_eval_split

    check_env_id(env_id)
    kwargs = dict(config.env_kwargs or {})

    def make(**extra: Any) -> Any:
        try:
            return gym.make(env_id, **{**kwargs, **extra})
        except (TypeError, ValueError, ImportError) as err:  # ImportError: a kwarg that needs a package not installed
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise UserError(f"{env_id} cannot be made with env_kwargs {kwargs}: {first}") from None

    env = make()
    try:
        check_text_env(env.observation_space, env.action_space, env_id)
    except UserError:
        env.close()
        raise
    check_task_ids(env, config.train_task_ids, "train_task_ids", "the training env")
    split = config.eval_split or default_eval_split(env_id)
    if split:
        check_eval_split(lambda: make(split=split), split, config.eval_task_ids if config.eval_every > 0 else None)


def check_generation_backend(backend: str) -> None:
    """That the engine ``generation_backend`` names is installed (``vllm`` runs in this process),
    said in one line before the model loads rather than as the import's traceback."""
    import importlib.util
    import sys

    if backend == "vllm" and "vllm" not in sys.modules and importlib.util.find_spec("vllm") is None:
        raise UserError("generation_backend='vllm' needs vLLM, which is not installed: pip install 'rspo-gym[vllm]' "
                        "(on a CUDA machine), or use generation_backend='hf'")
