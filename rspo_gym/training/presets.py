"""Named settings selected in one word: ``GiGPOTrainer(env, model, preset="verl-agent")`` or
``rspo-gym train --preset verl-agent``.

``verl-agent``: the GiGPO ALFWorld and WebShop run scripts of verl-agent
(``examples/gigpo_trainer/run_alfworld.sh``, ``run_webshop.sh``) and the defaults they run on,
key by key in ``docs/verl_agent.md`` (a test checks that this module and that table agree). The
settings differ by env where the scripts do; on another env only the shared ones apply. A preset
sets fields only: fields given beside it win, and a field the config class lacks (``gamma`` for
GRPO) is left out. Light to import: the command line resolves a preset before loading torch.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from rspo_gym.errors import UserError

__all__ = ["PRESETS", "preset_overrides"]

_VERL_AGENT_SHARED: dict[str, Any] = {
    # verl-agent's scripts
    "num_groups": 16, "group_size": 8, "eval_tasks": 128, "max_new_tokens": 512, "learning_rate": 1e-6,
    "kl_coef": 0.01, "kl_kind": "low_var_kl", "use_kl_in_reward": False, "gradient_checkpointing": True,
    "eval_temperature": 0.4, "ref_offload": True, "invalid_penalty": 0.1, "gamma": 0.95, "omega": 1.0,
    # the defaults they run on (ppo_trainer.yaml, the env managers and prompts)
    "temperature": 1.0, "top_p": 1.0, "entropy_coef": 0.001, "clip": 0.2, "dual_clip": 3.0, "loss_agg": "token-mean",
    "ppo_epochs": 1, "max_grad_norm": 1.0, "success_reward": 10.0, "reward": "outcome", "history_length": 2, "think": True, "constrained": False,
}
_VERL_AGENT_ENV: dict[str, dict[str, Any]] = {
    "rspo/ALFWorld-v0": {"max_prompt_length": 2048, "mini_batch_size": 256, "micro_batch_size": 32, "gigpo_norm": "mean_std_norm",
                         "max_turns": 50, "eval_every": 10},
    "rspo/WebShop-v0": {"max_prompt_length": 4096, "mini_batch_size": 64, "micro_batch_size": 8, "gigpo_norm": "mean_norm",
                        "max_turns": 15, "eval_every": 5},
}
_VERL_AGENT_ENV["rspo/WebShop-v1"] = _VERL_AGENT_ENV["rspo/WebShop-v0"]  # same env, calibrated tasks

#: Preset name -> (settings every env gets, settings per env id).
PRESETS: dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]]]] = {"verl-agent": (_VERL_AGENT_SHARED, _VERL_AGENT_ENV)}


def preset_overrides(name: str, env: Any, config_class: type) -> dict[str, Any]:
    """The config fields preset ``name`` sets on ``env`` (an env id, or an env with a ``spec``) for
    ``config_class``: its shared settings, then the env's, less the fields the class lacks.

    >>> from rspo_gym.training.config import TrainerConfig
    >>> s = preset_overrides("verl-agent", "rspo/WebShop-v0", TrainerConfig)
    >>> s["max_prompt_length"], s["learning_rate"], "gamma" in s
    (4096, 1e-06, False)
    """
    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}")
    env_id = env if isinstance(env, str) else getattr(getattr(env, "spec", None), "id", None)
    shared, per_env = PRESETS[name]
    settings = {**shared, **per_env.get(env_id, {})}
    names = {f.name for f in fields(config_class)}
    return {key: value for key, value in settings.items() if key in names}
