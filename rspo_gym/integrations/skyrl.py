"""SkyRL (``skyrl-gym``): our envs as registered ``BaseTextEnv`` classes, ``rspo_alfworld`` and ``rspo_webshop``.

``register_skyrl_envs()`` registers both with ``skyrl_gym``; SkyRL's generator then makes one per
sample with ``skyrl_gym.make(env_class, env_config=..., extras=row)``, calls ``init(prompt)`` and
``step(reply)`` until ``done``. The task id travels in the dataset row (``extras["task_id"]``, or
``extras["extra_info"]["task_id"]``), so the members of a group play one task.
``skyrl_dataset_rows`` writes such rows. ``env_config`` may set any ``EpisodeConfig`` field
(``env_kwargs``, ``reward``, ``process_reward``, ``history``, ``history_length``, ``think``,
``max_turns``); each env carries its own ``max_turns`` (the env's step limit unless set).

``init(prompt)`` puts the env's first prompt into the last user message of ``prompt`` (or appends
one); ``step`` parses the reply (``<action>`` tags with ``think``, else the whole reply), returns
the next message as a user turn (none once done), verl-agent's reward and
``metadata = {won, task_score, task_id}``. ``get_metrics()`` keys carry the env's name
(``rspo_alfworld/won``), so two envs' metrics in one run do not overwrite each other.
"""

from __future__ import annotations

from typing import Any, Mapping

from rspo_gym.integrations.episode import Episode, EpisodeConfig, task_ids
from rspo_gym.rollout.prompts import parse_action

__all__ = ["skyrl_env_class", "register_skyrl_envs", "skyrl_dataset_rows", "SKYRL_ENVS"]

#: the names ``register_skyrl_envs`` registers, and their env ids (WebShop: the calibrated tasks; for
#: v0's, ``register_skyrl_envs({"rspo_webshop_v0": "rspo/WebShop-v0"})``)
SKYRL_ENVS = {"rspo_alfworld": "rspo/ALFWorld-v0", "rspo_webshop": "rspo/WebShop-v1"}


def _require_skyrl() -> Any:
    try:
        import skyrl_gym
        from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
    except ImportError as error:
        raise ImportError("rspo_gym.integrations.skyrl needs skyrl-gym: pip install 'rspo-gym[skyrl]'") from error
    return skyrl_gym, BaseTextEnv, BaseTextEnvStepOutput


def _plain(config: Any) -> dict[str, Any]:
    """An ``env_config`` (a dict, an OmegaConf node, or None) as a plain dict."""
    if config is None:
        return {}
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(config):
            return OmegaConf.to_container(config, resolve=True)
    except ImportError:
        pass
    return dict(config)


def skyrl_env_class(name: str, env_id: str) -> type:
    """A ``BaseTextEnv`` subclass playing ``env_id``, its metrics prefixed with ``name``."""
    _, BaseTextEnv, BaseTextEnvStepOutput = _require_skyrl()

    class RspoTextEnv(BaseTextEnv):
        def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
            super().__init__()
            extras = dict(extras or {})
            options = _plain(env_config)
            self.episode = Episode(EpisodeConfig(env_id=env_id, **options))
            self.task_id = extras.get("task_id", (extras.get("extra_info") or {}).get("task_id"))
            self.max_turns = self.episode.max_turns
            self._tail = self.episode.builder.template.tail_chars

        def init(self, prompt: list[dict]) -> tuple[list[dict], dict]:
            first = self.episode.reset(self.task_id)
            prompt = [dict(m) for m in (prompt or [])]
            if prompt and prompt[-1].get("role") == "user":
                prompt[-1]["content"] = (prompt[-1].get("content") or "") + first
            else:
                prompt.append({"role": "user", "content": first})
            return prompt, {"task_id": self.episode.task_id}

        def step(self, action: str) -> Any:
            parsed = parse_action(action, think=self.episode.config.think, tail_chars=self._tail)
            turn = self.episode.step(parsed.action)
            self.turns = self.episode.turns
            observations = [] if turn.done else [{"role": "user", "content": turn.message}]
            metadata = {"won": self.episode.won, "task_score": self.episode.task_score, "task_id": self.episode.task_id,
                        "format_valid": parsed.format_valid}
            return BaseTextEnvStepOutput(observations=observations, reward=turn.reward, done=turn.done,
                                         metadata=metadata, postprocessed_action=parsed.action)

        def get_metrics(self) -> dict[str, Any]:
            result = self.episode.result()
            return {f"{name}/won": float(result["won"]), f"{name}/task_score": result["task_score"],
                    f"{name}/turns": result["turns"], f"{name}/reward": result["reward"]}

        def close(self) -> None:
            self.episode.close()

    RspoTextEnv.__name__ = RspoTextEnv.__qualname__ = f"{name.title().replace('_', '')}Env"
    return RspoTextEnv


def register_skyrl_envs(envs: Mapping[str, str] | None = None) -> list[str]:
    """Register ``{name: env_id}`` (default ``SKYRL_ENVS``) with ``skyrl_gym``; returns the names.
    Registering a name again replaces it."""
    skyrl_gym, _, _ = _require_skyrl()
    from skyrl_gym.envs.registration import registry

    names = []
    for name, env_id in (envs or SKYRL_ENVS).items():
        registry.pop(name, None)
        skyrl_gym.register(id=name, entry_point=skyrl_env_class(name, env_id))
        names.append(name)
    return names


def skyrl_dataset_rows(name: str, num_tasks: int, *, env_id: str | None = None, seed: int = 0,
                       env_kwargs: Mapping[str, Any] | None = None) -> list[dict]:
    """Dataset rows for SkyRL (``prompt``, ``env_class``, ``task_id``): write them to parquet or JSON.
    The prompt is an empty user message, which ``init`` fills with the task's first prompt."""
    env_id = env_id or SKYRL_ENVS[name]
    probe = Episode(EpisodeConfig(env_id=env_id, env_kwargs=dict(env_kwargs or {})))
    ids = task_ids(probe.num_tasks, num_tasks, seed)
    probe.close()
    return [{"prompt": [{"role": "user", "content": ""}], "env_class": name, "task_id": k} for k in ids]
