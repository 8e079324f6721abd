"""TRL (``GRPOTrainer``): our envs as an ``environment_factory``, a task dataset, and a ``rollout_func``.

Two ways to train, both with ``pip install 'rspo-gym[trl]'``:

- **TRL's own tool loop** (append-only): ``GRPOTrainer(..., environment_factory=environment_factory(
  "rspo/ALFWorld-v0"), train_dataset=task_dataset("rspo/ALFWorld-v0", 64))``. Each dataset row is
  one task (``prompt`` and ``task_id`` columns); TRL repeats it ``num_generations`` times and
  calls ``reset(**row)``, so a group plays one task. The env's one tool is ``act(action)``; its
  ``get_reward()`` is the episode's reward (verl-agent's 10 × won by default). The conversation
  grows by one tool call and one answer per turn, and TRL drops tool answers past
  ``max_completion_length`` (the episode then ends there, unfinished, reward 0): size it for
  ``max_turns``. TRL says nothing of it; the env warns (``EpisodeCutWarning``) the first time it
  is scored unfinished.
- **Windowed prompts** (``WindowedRollout``): a ``rollout_func`` that plays every episode with
  our verl-agent prompts (a fixed window of ``history_length`` past steps, so prompts stay short)
  and generates with the trainer's model. TRL trains one sequence per episode, so each episode
  gives one of its turns (``turn="random"``: drawn uniformly, ``"last"``: the final one) with the
  episode's reward, a sample of verl-agent's per-step rows that share the episode's advantage.

``tool_chat_template(tokenizer)`` gives a ChatML tokenizer (the offline ``tiny`` model's,
SmolLM2's) the Qwen2.5 tool-calling template that TRL ships and recognises, so ``GRPOTrainer``'s
tool-calling check passes.
"""

from __future__ import annotations

import importlib.resources
import warnings
from typing import Any, Sequence

import numpy as np

from rspo_gym.integrations.episode import EPISODE_OVER, Episode, EpisodeConfig, first_prompts, task_ids
from rspo_gym.rollout.prompts import parse_action

__all__ = ["environment_factory", "task_dataset", "tool_chat_template", "WindowedRollout", "episode_reward", "require_trl",
           "EpisodeCutWarning"]


class EpisodeCutWarning(UserWarning):
    """TRL's tool loop scored an episode before it ended: its completion reached
    ``max_completion_length`` (TRL then drops the tool answer and stops the rollout) or the model
    answered without calling the tool. The episode's reward is then that of an unfinished one."""


def require_trl() -> Any:
    """``trl``, or an ImportError saying how to install it."""
    try:
        import trl
    except ImportError as error:
        raise ImportError("rspo_gym.integrations.trl needs TRL: pip install 'rspo-gym[trl]'") from error
    return trl


def tool_chat_template(tokenizer: Any) -> Any:
    """Give a ChatML tokenizer TRL's Qwen2.5 template (tool calls as ``<tool_call>`` JSON, tool
    answers as ``<tool_response>``), which ``GRPOTrainer``'s tool-calling check accepts and whose
    response parser TRL registers. Returns the tokenizer."""
    require_trl()
    if "<|im_start|>" not in tokenizer.get_vocab():
        raise ValueError("tool_chat_template needs a ChatML tokenizer (<|im_start|>/<|im_end|> tokens)")
    tokenizer.chat_template = importlib.resources.files("trl").joinpath("chat_templates/qwen2_5.jinja").read_text(encoding="utf-8")
    return tokenizer


def environment_factory(env_id: str = "rspo/ALFWorld-v0", **options: Any) -> type:
    """A class for ``GRPOTrainer(environment_factory=...)``: ``reset(task_id=..., **row)`` → the first
    prompt, the tool ``act(action)``, ``get_reward()``. ``options`` are ``EpisodeConfig`` fields."""
    config = EpisodeConfig(env_id=env_id, **options)

    class TextEnvironment:
        __doc__ = f"{env_id} for TRL: one instance per rollout slot, reset once per episode."
        _config = config
        _warned = False  # the cut is said once per factory: a batch cuts many episodes alike

        def __init__(self) -> None:
            self._episode = Episode(self._config)

        def reset(self, task_id: int | None = None, **row: Any) -> str:
            return self._episode.reset(task_id)

        def act(self, action: str) -> str:
            """Take one action in the environment.

            Args:
                action: One of the admissible actions listed in the last message, copied exactly.

            Returns:
                What the environment shows after the action.
            """
            turn = self._episode.step(str(action))
            if turn.done and turn.message != EPISODE_OVER:
                return f"{turn.message}\n{EPISODE_OVER}"
            return turn.message

        def get_reward(self) -> float:
            """The episode's reward; TRL calls it when its rollout ends, finished or not."""
            episode = self._episode
            if not episode.done and not type(self)._warned:
                type(self)._warned = True
                warnings.warn(
                    f"TRL ended a {env_id} rollout before the episode did (turn {episode.turns} of at most "
                    f"{episode.max_turns}, not won; reward {episode.total_reward:g}): its completion reached "
                    f"max_completion_length, where TRL drops the next tool answer and stops, or the model answered "
                    f"without calling act. Size max_completion_length for max_turns (docs/integrations.md, TRL).",
                    EpisodeCutWarning, stacklevel=2)
            return episode.total_reward

        @property
        def episode(self) -> Episode:
            """The episode this instance plays (its totals: ``episode.result()``)."""
            return self._episode

    TextEnvironment.__name__ = TextEnvironment.__qualname__ = env_id.split("/")[-1].split("-")[0] + "Environment"
    return TextEnvironment


def task_dataset(env_id: str = "rspo/ALFWorld-v0", num_tasks: int = 64, *, ids: Sequence[int] | None = None, seed: int = 0,
                 prompt: str = "", env_kwargs: dict | None = None, first_prompt: bool = False) -> Any:
    """A ``datasets.Dataset`` of ``num_tasks`` task ids (``task_id`` column) for ``GRPOTrainer``.

    ``prompt`` is the user message the env's first prompt is appended to (TRL adds ``reset``'s
    text to it). ``ids`` lists the tasks instead of drawing ``num_tasks``. With ``first_prompt=True`` the prompt column holds each task's first prompt
    instead (what ``WindowedRollout`` reads the task from). Ids come from ``task_ids``: without
    repeats, and drawn (not enumerated) for an unbounded split.
    """
    require_trl()
    from datasets import Dataset

    config = EpisodeConfig(env_id=env_id, env_kwargs=env_kwargs or {})
    if ids is None:
        episode = Episode(config)
        ids = task_ids(episode.num_tasks, num_tasks, seed)
        episode.close()
    ids = [int(k) for k in ids]
    texts = first_prompts(config, ids) if first_prompt else [prompt] * len(ids)
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": text}] for text in texts], "task_id": ids})


def episode_reward(completions: Sequence[Any], episode_reward: Sequence[float], **kwargs: Any) -> list[float]:
    """The reward function for ``WindowedRollout``: the episode's reward it forwards."""
    return [float(r) for r in episode_reward]


class WindowedRollout:
    """A ``rollout_func`` that plays each prompt's task with our windowed prompts.

    Args:
        env_id / options: the episode (``EpisodeConfig`` fields; ``history_length`` is the window).
        dataset: the ``task_dataset(..., first_prompt=True)`` the trainer reads; its first prompts
            name the tasks (two tasks with the same first prompt are refused).
        max_new_tokens: reply length per turn.
        turn: which turn of an episode is returned for training, ``"random"`` or ``"last"``.
        seed: the stream of the ``"random"`` turn draws.
    """

    def __init__(self, env_id: str = "rspo/ALFWorld-v0", *, dataset: Any, max_new_tokens: int = 32,
                 turn: str = "random", seed: int = 0, **options: Any) -> None:
        if turn not in ("random", "last"):
            raise ValueError(f"turn must be 'random' or 'last', got {turn!r}")
        self.config = EpisodeConfig(env_id=env_id, **options)
        self.tasks: dict[str, int] = {}
        for row_prompt, task_id in zip(dataset["prompt"], dataset["task_id"]):
            text = row_prompt[-1]["content"]
            if self.tasks.setdefault(text, task_id) != task_id:
                raise ValueError(f"tasks {self.tasks[text]} and {task_id} have the same first prompt; keep one of them")
        self.max_new_tokens = max_new_tokens
        self.turn = turn
        self._rng = np.random.default_rng(seed)
        self.episodes: list[Episode] = []
        """Reused across calls: the first ``len(prompts)`` are the last call's episodes (totals: ``result()``)."""

    def _task_of(self, prompt: Any) -> int:
        text = prompt[-1]["content"] if isinstance(prompt, list) else prompt
        if text not in self.tasks:
            raise KeyError("a prompt that is not a first prompt of the rollout's dataset")
        return self.tasks[text]

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list]:
        import torch

        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        while len(self.episodes) < len(prompts):
            self.episodes.append(Episode(self.config))
        episodes = self.episodes[: len(prompts)]
        for episode, prompt in zip(episodes, prompts):
            episode.reset(self._task_of(prompt))
        builder = self.config.builder()
        tail = builder.template.tail_chars
        turns: list[list[tuple[list[int], list[int], list[float]]]] = [[] for _ in episodes]
        pad = tokenizer.pad_token_id
        temperature = float(getattr(trainer, "temperature", 1.0) or 1.0)
        while True:
            live = [i for i, episode in enumerate(episodes) if not episode.done]
            if not live:
                break
            rows = [builder.chat_ids(tokenizer, episodes[i].prompt()) for i in live]
            width = max(map(len, rows))
            ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=model.device)
            mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=model.device)
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=temperature,
                                     max_new_tokens=self.max_new_tokens, output_scores=True, return_dict_in_generate=True,
                                     pad_token_id=pad)
            new = out.sequences[:, width:]
            scores = torch.stack(out.scores, dim=1).float().log_softmax(-1)
            token_logprobs = scores.gather(-1, new.unsqueeze(-1)).squeeze(-1)
            stop = {tokenizer.eos_token_id, pad}
            for row, i in enumerate(live):
                tokens = new[row].tolist()
                end = next((k + 1 for k, t in enumerate(tokens) if t in stop), len(tokens))
                completion = tokens[:end]
                turns[i].append((rows[row], completion, token_logprobs[row, :end].tolist()))
                reply = tokenizer.decode(completion, skip_special_tokens=True)
                episodes[i].step(parse_action(reply, think=self.config.think, tail_chars=tail).action)
        chosen = [t[-1] if self.turn == "last" else t[int(self._rng.integers(len(t)))] for t in turns]
        results = [episode.result() for episode in episodes]
        return {
            "prompt_ids": [c[0] for c in chosen],
            "completion_ids": [c[1] for c in chosen],
            "logprobs": [c[2] for c in chosen],
            "episode_reward": [r["reward"] for r in results],
            "task_id": [r["task_id"] for r in results],
            "won": [r["won"] for r in results],
            "task_score": [r["task_score"] for r in results],
            "turns": [r["turns"] for r in results],
        }
