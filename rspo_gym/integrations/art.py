"""ART (OpenPipe): an async ``rollout`` that plays one of our env's tasks into an ``art.Trajectory``,
and ``groups`` of them for ``model.train``.

::

    from rspo_gym.integrations.art import groups
    train_groups = await groups(model, "rspo/ALFWorld-v0", task_ids=[3, 17], group_size=8)
    await model.train(train_groups)

The model answers through ART's OpenAI client (``model.openai_client()``, or ``client=``). The
task id is the rollout's argument and lands in ``trajectory.metadata["task_id"]``; a group is
``group_size`` rollouts of one task. ``trajectory.reward`` is the episode's reward (verl-agent's
10 × won by default); ``metrics`` has ``won``, ``task_score`` and ``turns``.

``local_backend()`` is ART's ``LocalBackend`` once this machine can train with it: ART's own
fails late on a CPU, inside ``model.register``, with ``No module named 'megatron'``; ours says
first, in one line, that it needs a CUDA GPU and which of its packages are missing. Rollouts need
no GPU: they run anywhere with a chat client (``client=``).

``history="append"`` (default) keeps one conversation: the first prompt, then one assistant reply
and one user message (the new observation and the admissible actions) per turn.
``history="window"`` gives every turn its own prompt, our windowed verl-agent prompt, and stores
turn 1 as the trajectory's messages and each later turn as one of its ``additional_histories``
(ART trains every history with the trajectory's reward): prompts stay short whatever the length
of the episode, as verl-agent's step rows.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from typing import Any, Callable, Mapping, Sequence

from rspo_gym.integrations.episode import Episode, EpisodeConfig
from rspo_gym.rollout.prompts import parse_action

__all__ = ["rollout", "groups", "local_backend", "local_training_missing"]

#: the packages ART's LocalBackend imports to serve (vLLM) and train (Unsloth, Megatron) a model
LOCAL_TRAINING_MODULES = ("megatron", "unsloth", "vllm")


def _keep_transformers_models_working() -> None:
    """Undo ART's import-time patch of transformers where it does not fit the installed transformers.

    ``import art`` replaces ``transformers.masking_utils._preprocess_mask_arguments`` with a wrapper
    written for transformers 5.2 (ART's backend pin). Later releases call it with other arguments,
    and every Hugging Face model's forward in the process then fails (``missing 1 required positional
    argument: 'layer_idx'``): our policies and TRL's trainer included. The wrapper only reshapes 3-D
    position ids (multimodal rope), which no rollout here needs; where it does fit, it stays."""
    patches = sys.modules.get("art.transformers.patches")
    if patches is None:
        return
    from transformers import masking_utils

    original, patched = patches._preprocess_mask_arguments, patches._patched_preprocess_mask_arguments
    if (masking_utils._preprocess_mask_arguments is patched
            and list(inspect.signature(original).parameters) != list(inspect.signature(patched).parameters)):
        masking_utils._preprocess_mask_arguments = original


def _require_art() -> Any:
    try:
        import art
    except ImportError as error:
        raise ImportError("rspo_gym.integrations.art needs ART: pip install openpipe-art") from error
    _keep_transformers_models_working()
    return art


def local_training_missing(cuda: bool, installed: Callable[[str], bool]) -> list[str]:
    """What this machine lacks for ART's LocalBackend: "a CUDA GPU" and/or its missing packages."""
    return (["a CUDA GPU"] if not cuda else []) + [name for name in LOCAL_TRAINING_MODULES if not installed(name)]


def local_backend(**kwargs: Any) -> Any:
    """ART's ``LocalBackend(**kwargs)``, or a one-line ImportError naming what it lacks here."""
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    missing = local_training_missing(cuda, lambda name: importlib.util.find_spec(name) is not None)
    if missing:
        raise ImportError(
            f"ART's LocalBackend trains on a CUDA GPU with vLLM, Unsloth and Megatron "
            f"(pip install 'openpipe-art[backend,megatron]' on a CUDA machine); missing here: {', '.join(missing)}. "
            f"rspo_gym.integrations.art's rollout and groups run without it, with any chat client (client=...)")
    _require_art()
    from art.local import LocalBackend

    return LocalBackend(**kwargs)


_keep_transformers_models_working()  # for a script that imported art before this module


async def rollout(model: Any, task_id: int, *, env_id: str = "rspo/ALFWorld-v0", client: Any = None,
                  sampling: Mapping[str, Any] | None = None, **options: Any) -> Any:
    """One episode of task ``task_id`` as an ``art.Trajectory`` (``options``: ``EpisodeConfig`` fields)."""
    art = _require_art()
    episode = Episode(EpisodeConfig(env_id=env_id, **options))
    client = client if client is not None else model.openai_client()
    name = model.get_inference_name() if hasattr(model, "get_inference_name") else model.name
    tail = episode.builder.template.tail_chars
    window = episode.config.history == "window"
    turns: list[list[Any]] = [[{"role": "user", "content": episode.reset(task_id)}]]
    try:
        while not episode.done:
            completion = await client.chat.completions.create(model=name, messages=art.trajectories.get_messages(turns[-1]),
                                                              **dict(sampling or {}))
            choice = completion.choices[0]
            turns[-1].append(choice)
            turn = episode.step(parse_action(choice.message.content or "", think=episode.config.think, tail_chars=tail).action)
            if turn.done:
                break
            message = {"role": "user", "content": turn.message}
            if window:
                turns.append([message])
            else:
                turns[-1].append(message)
    finally:
        episode.close()
    result = episode.result()
    return art.Trajectory(
        messages_and_choices=turns[0],
        additional_histories=[art.trajectories.History(messages_and_choices=t) for t in turns[1:]],
        reward=result["reward"],
        metrics={"won": result["won"], "task_score": result["task_score"], "turns": result["turns"]},
        metadata={"task_id": result["task_id"], "env_id": env_id},
    )


async def groups(model: Any, env_id: str = "rspo/ALFWorld-v0", *, task_ids: Sequence[int], group_size: int = 8,
                 pbar_desc: str | None = None, **options: Any) -> list[Any]:
    """``art.gather_trajectory_groups`` over one group of ``group_size`` rollouts per task id."""
    art = _require_art()
    return await art.gather_trajectory_groups(
        (art.TrajectoryGroup(rollout(model, task_id, env_id=env_id, **options) for _ in range(group_size)) for task_id in task_ids),
        pbar_desc=pbar_desc,
    )
