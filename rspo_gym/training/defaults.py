"""The trainer defaults that depend on the env or the model, resolved in one place.

- ``resolve_model``: ``"tiny"`` on ALFWorld or WebShop means that env's shipped warm start.
- ``default_reward``: the env family's training reward (WebShop's score).
- ``default_history_length``, ``default_prompt_format``: the prompts a model was trained with.
- ``resolve_config``: a config with its None fields (``reward``, ``dense_outcome``,
  ``history_length``, ``prompt_format``) filled in.

A random 0.9M-parameter model wins no ALFWorld task in CPU minutes, and a clone prompted with a
history it was not cloned with sees unfamiliar prompts, so a run configured with nothing starts
from the clone and prompts it the way it was trained. ``max_turns=None`` needs no resolving here:
the collector reads it as the env's registered step limit.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from rspo_gym.training.config import TrainerConfig
from rspo_gym.training.envs import env_family

__all__ = ["WARM_STARTS", "resolve_model", "default_reward", "default_history_length", "default_prompt_format", "resolve_config"]

#: The shipped warm start of each env family (``policies/models.py``'s presets).
WARM_STARTS = {"alfworld": "tiny-alfworld", "webshop": "tiny-webshop"}

Config = TypeVar("Config", bound=TrainerConfig)


def resolve_model(name: str, env_id: str | None) -> str:
    """The model a trainer loads for ``name`` on ``env_id``: ``tiny`` is the env's clone where one
    ships (``tiny-untrained`` keeps the random model); every other name is itself.

    >>> resolve_model("tiny", "rspo/WebShop-v0"), resolve_model("tiny", "FrozenLake-v1")
    ('tiny-webshop', 'tiny')
    >>> resolve_model("tiny-untrained", "rspo/ALFWorld-v0")
    'tiny-untrained'
    """
    return WARM_STARTS.get(env_family(env_id), name) if name == "tiny" else name


def default_reward(env_id: str | None) -> str:
    """WebShop trains on its purchase score (partial credit for a near match, as WebShop's own RL);
    elsewhere on the outcome (verl-agent)."""
    return "score" if env_family(env_id) == "webshop" else "outcome"


def _preset(model: str | None):
    """``model``'s built-in preset, or None (a policy object, a path, an unknown name)."""
    from rspo_gym.policies.models import MODEL_ALIASES, MODEL_PRESETS

    return MODEL_PRESETS.get(MODEL_ALIASES.get(model, model)) if model is not None else None


def default_history_length(model: str | None) -> int:
    """The prompt history ``model`` was trained with: its preset's (``tiny-alfworld``: 6), else 2
    (verl-agent's, also for a policy object or a path, whose training history is unknown here).

    >>> default_history_length("tiny-alfworld"), default_history_length("tiny-webshop"), default_history_length(None)
    (6, 2, 2)
    """
    preset = _preset(model)
    return preset.history_length if preset is not None else 2


def default_prompt_format(model: str | None) -> str:
    """The prompt format ``model`` was trained with: its preset's, else verl-agent's window.

    >>> default_prompt_format("tiny-alfworld-chat"), default_prompt_format("tiny-alfworld"), default_prompt_format(None)
    ('conversation', 'window', 'window')
    """
    preset = _preset(model)
    return preset.prompt_format if preset is not None else "window"


def resolve_config(config: Config, env_id: str | None, model: str | None) -> Config:
    """``config`` with ``reward``, ``dense_outcome`` (both the env family's reward) and
    ``history_length`` and ``prompt_format`` set from the env and the (resolved) model name where
    they are None; values the user gave are kept."""
    return replace(
        config,
        reward=config.reward if config.reward is not None else default_reward(env_id),
        dense_outcome=config.dense_outcome if config.dense_outcome is not None else default_reward(env_id),
        history_length=config.history_length if config.history_length is not None else default_history_length(model),
        prompt_format=config.prompt_format if config.prompt_format is not None else default_prompt_format(model),
    )
