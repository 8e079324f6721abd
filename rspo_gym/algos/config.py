"""Dataclass configs of the trainers; every field documents its default (TRL's habit).

- ``TrainerConfig``: what every trainer shares (rollout, reward, optimisation, evaluation, I/O).
- ``GiGPOConfig``, ``PPOConfig``: the estimator-specific knobs.
- ``RSPOConfig``: the reward-swap wrapper's knobs (design §5) on top of any base.

Defaults are sized for a CPU and the ``tiny`` model; the verl-agent values used for the published
runs (reference §2.4) are given in the field docs where they differ.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["TrainerConfig", "GiGPOConfig", "PPOConfig", "RSPOConfig", "save_config"]


@dataclass
class TrainerConfig:
    """Settings shared by GRPO, PPO, GiGPO and RSPO."""

    # -- rollout
    num_groups: int = 2
    """Tasks per iteration (verl-agent: 16)."""
    group_size: int = 4
    """Trajectories per task, GRPO's N (verl-agent: 8)."""
    max_turns: int | None = 15
    """Turn limit per episode; None uses the env's step limit (ALFWorld 50, WebShop 15)."""
    temperature: float = 1.0
    """Sampling temperature for training rollouts (verl-agent: 1.0)."""
    top_p: float = 1.0
    """Nucleus mass for training rollouts."""
    max_new_tokens: int = 48
    """Reply length bound (verl-agent: 512 with <think>)."""
    history_length: int = 2
    """Past (observation, action) pairs in the prompt (verl-agent: 2)."""
    think: bool = False
    """Ask for <think>/<action> tags (True for real instruction models)."""
    constrained: bool = True
    """Constrain replies to admissible actions (small models; False for real models)."""
    train_task_ids: list[int] | None = None
    """A fixed training task set (sampled per iteration); None draws fresh tasks from seeds."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gym.make`` of the training env."""
    processes: int = 0
    """Env worker processes (0: in-process)."""

    # -- reward
    reward: str = "outcome"
    """``outcome`` (10 x won), ``score`` (10 x env reward, WebShop's score) or ``dense`` (outcome + process)."""
    success_reward: float = 10.0
    """Reward of a won episode (verl-agent: 10)."""
    invalid_penalty: float = 0.1
    """Subtracted on rows whose action was invalid (verl-agent: 0.1)."""
    invalid_penalty_on: str = "format"
    """Which rows are invalid: ``format`` (the reply broke the requested format: tags, CJK), as
    verl-agent's ``is_action_valid``, where a command the env rejects is a no-op with reward 0; or
    ``format_or_env`` (also rows whose command the env did not accept)."""
    process_potential: str | None = None
    """ProcessReward potential; None picks the env family's (ALFWorld ``milestones``, WebShop ``score``)."""
    process_coef: float = 1.0
    """Weight of the process reward in ``dense``."""
    dense_outcome: str = "outcome"
    """The outcome term of ``dense`` (and of RSPO's explorer): ``outcome`` (10 x won) or ``score``
    (10 x the env's reward, WebShop's purchase score), to pair dense baselines with a ``score`` run."""
    process_gamma: float | None = None
    """Discount γ of the shaping term γΦ(s') − Φ(s); None: the discount the algorithm credits steps
    with (GiGPO's ``gamma``, 1 for GRPO and PPO). Shaping changes no step's relative credit only
    at the return's own discount (Ng et al., 1999). With 1 under GiGPO's 0.95, WebShop's zeroed
    terminal potential makes putting off a purchase worth the discount gap, and step-group
    normalisation blows that gap up to full-size advantages: dense GiGPO stopped buying (score
    0.40 → 0.00 in ``benchmarks/compare.py --preset curves``)."""

    # -- optimisation
    learning_rate: float = 1e-4
    """AdamW learning rate (verl-agent, 1.5B model: 1e-6; the tiny model needs far more)."""
    weight_decay: float = 0.01
    """AdamW weight decay (verl's actor and critic: 0.01). Decoupled, so it shrinks weights by
    ``lr x 0.01`` per step: 1e-6 of each weight at the tiny model's 1e-4."""
    precision: str | None = None
    """``fp32``; ``bf16-mixed``: float32 master weights and AdamW state, bfloat16 autocast for the
    forward and backward passes (verl's actor); or ``bf16``: weights and AdamW state in bfloat16.
    Warning: under ``bf16`` an update smaller than half a weight's bfloat16 spacing (2^-9 of its
    magnitude) rounds away, so at verl-agent's lr 1e-6 only ~1 % of weights change at all. None:
    ``bf16-mixed`` where CUDA is used, ``fp32`` elsewhere."""
    ppo_epochs: int = 1
    """Passes over each rollout (verl-agent: 1)."""
    mini_batch_size: int = 64
    """Rows per optimizer step (verl-agent ALFWorld: 256)."""
    micro_batch_size: int = 16
    """Rows per forward/backward; gradients accumulate over a mini-batch."""
    max_tokens_per_micro_batch: int | None = None
    """Token budget of a forward/backward instead of a row count (verl's ``ppo_max_token_len_per_gpu``):
    each mini-batch's rows, longest first, are packed into micro-batches of at most this many
    padded tokens (rows x (longest prompt + longest response); a longer row goes alone), so memory
    is bounded by tokens and short rows share a pass. Also sizes the no-gradient passes (old values,
    reference and replay log-probs). None: ``micro_batch_size`` rows, longest first. Either way a
    micro-batch is padded only to its own longest prompt and response, and the gradient is the one
    big batch's."""
    gradient_checkpointing: bool = False
    """Recompute decoder-layer activations in backward (transformers' non-reentrant activation
    checkpointing): ~one hidden state per layer and token is kept instead of every intermediate,
    for about a third more compute per update. For long prompts on 1.5B/7B models."""
    clip: float = 0.2
    """PPO clip epsilon (low side, and high side unless ``clip_high``)."""
    clip_high: float | None = None
    """High-side clip epsilon (DAPO: 0.28)."""
    dual_clip: float | None = 3.0
    """Dual-clip constant c for negative advantages (verl: 3.0)."""
    loss_agg: str = "token-mean"
    """Loss aggregation mode (verl-agent: token-mean)."""
    entropy_coef: float = 0.001
    """Entropy bonus weight (verl-agent: 0.001)."""
    kl_coef: float = 0.0
    """KL-to-reference weight; > 0 keeps a frozen copy of the initial policy (verl-agent: 0.01)."""
    kl_kind: str = "k3"
    """KL estimator (verl-agent: low_var_kl = k3)."""
    max_grad_norm: float = 1.0
    """Clipping of the policy's gradient norm, over the policy's parameters alone (verl-agent: 1.0)."""

    # -- GRPO-family estimator settings
    norm_by_std: bool = True
    """Divide group-centred scores by the group std (False: Dr.GRPO / 'w/o std')."""
    episode_stats: str = "steps"
    """Group statistics over every step row (verl-agent) or one entry per trajectory."""

    # -- evaluation, logging, checkpoints
    iterations: int = 20
    """Default number of iterations for ``learn()``."""
    eval_every: int = 5
    """Evaluate every this many iterations (and after the last); 0 disables."""
    eval_tasks: int = 8
    """Held-out tasks per evaluation (one episode each)."""
    eval_split: str | None = None
    """Held-out split; None picks the env family's (ALFWorld ``valid_seen``, WebShop ``test``)."""
    eval_task_ids: list[int] | None = None
    """Explicit held-out task ids; None uses ``range(eval_tasks)`` (or seeds for other envs)."""
    eval_temperature: float = 0.0
    """Evaluation sampling temperature (0: greedy; verl-agent: 0.4)."""
    eval_seed: int = 1000
    """Seed of evaluation sampling (verl-agent uses seed + 1000)."""
    seed: int = 0
    """Seed of everything: model init, task draws, sampling, mini-batch order."""
    output_dir: str | None = None
    """Where metrics, config and checkpoints go; None keeps results in memory only."""
    checkpoint_every: int = 0
    """Checkpoint every this many iterations (0: only at the end when ``output_dir`` is set)."""
    progress: bool = True
    """Show a progress bar (tqdm) on a terminal."""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "config_class": type(self).__name__}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainerConfig":
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names - {"config_class"}
        if unknown:
            raise ValueError(f"unknown {cls.__name__} fields: {sorted(unknown)}")
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class GiGPOConfig(TrainerConfig):
    """GiGPO: episode groups plus anchor-state step groups (reference §2.1–2.2)."""

    gamma: float = 0.95
    """Discount of the step returns (verl-agent: 0.95)."""
    omega: float = 1.0
    """Weight of the step-level advantage (verl-agent: 1.0)."""
    gigpo_norm: str = "mean_std"
    """``mean_std`` (ALFWorld script) or ``mean`` (WebShop script)."""


@dataclass
class PPOConfig(TrainerConfig):
    """PPO with a value head on the shared trunk (verl-agent's PPO: token-level GAE per step row)."""

    group_size: int = 1
    """PPO needs no groups (verl-agent's PPO batch is ungrouped)."""
    num_groups: int = 8
    """Episodes per iteration, one per task (verl-agent: 128)."""
    gae_gamma: float = 1.0
    """Token-level GAE discount (verl-agent default 1.0)."""
    gae_lambda: float = 1.0
    """Token-level GAE lambda (verl-agent default 1.0)."""
    vf_coef: float = 0.5
    """Value-loss weight. The critic reads detached trunk features and has its own optimizer group
    and clip, so this scales the critic's gradient only; it cannot change the policy's update."""
    critic_lr: float | None = None
    """The critic's AdamW learning rate; None: 10 x ``learning_rate`` (verl-agent: 1e-5 vs 1e-6)."""
    critic_max_grad_norm: float = 1.0
    """Clipping of the critic's gradient norm, apart from the policy's (verl's critic: 1.0)."""
    value_clip: float = 0.5
    """Value clipping range (verl-agent: cliprange_value 0.5)."""


@dataclass
class RSPOConfig(GiGPOConfig, PPOConfig):
    """Reward-swap wrapper around a base algorithm (design §5)."""

    group_size: int = 4
    num_groups: int = 2
    base: str = "grpo"
    """Base algorithm X: ``grpo``, ``ppo`` or ``gigpo``."""
    swap: str = "explorer"
    """``explorer`` (F1), ``rank`` (F2) or ``anneal`` (F3)."""
    explorer_group_size: int = 2
    """Explorer trajectories per task, M (reference default N/2)."""
    explorer_sync_every: int = 5
    """Copy the learner into the explorer every this many iterations."""
    explorer_updates: int = 1
    """Dense-reward updates of the explorer per iteration (U_p)."""
    explorer_lora: bool = False
    """Explorer as a LoRA adapter copy (r=8) instead of a full copy."""
    replay_age: int = 2
    """Learner updates an explorer trajectory joins, counting the iteration it was sampled in:
    trajectories sampled at iteration ``b`` are replayed at iterations ``b .. b + replay_age - 1``
    (1: no replay beyond their own iteration)."""
    is_cap: float = 2.0
    """Truncation of the importance weight learner/explorer on replayed rows."""
    anneal_iterations: int = 10
    """``anneal``: iterations over which beta goes from 0 (dense) to 1 (outcome)."""


def save_config(config: TrainerConfig, path: str | Path) -> None:
    Path(path).write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
