"""Dataclass configs of the trainers; every field documents its default (TRL's habit).

- ``TrainerConfig``: what every trainer shares (rollout, reward, optimisation, evaluation, I/O).
- ``GiGPOConfig``, ``PPOConfig``: the estimator-specific knobs.
- ``RSPOConfig``: the reward-swap wrapper's knobs on top of any base.

Defaults are sized for a CPU and the ``tiny`` model; the verl-agent values used for the published
runs are given in the field docs where they differ. Fields whose right value
depends on the env or the model (``max_turns``, ``history_length``, ``reward``) default to None and
are filled in by the trainer (``training/defaults.py``), so a run configured with nothing matches how
its starting model was trained and what its env rewards.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rspo_gym.atomic import write_text_atomic
from rspo_gym.training.validation import unknown_fields_error, validate_config

__all__ = ["TrainerConfig", "GiGPOConfig", "PPOConfig", "RSPOConfig", "RUN_INFO_KEYS", "RUN_EVAL_FIELDS", "save_config", "load_config"]

#: Keys a run's ``config.json`` holds beside the config fields and ``config_class``: what the run
#: trained, for readers such as ``rspo-gym eval``.
RUN_INFO_KEYS = ("env_id", "model")
#: The fields of a run's config that say how its policy acted and was measured; ``rspo-gym eval``
#: and ``rspo-gym compare`` reuse them so that a run is evaluated as it was trained.
RUN_EVAL_FIELDS = (
    "max_turns", "history_length", "prompt_format", "think", "constrained", "max_new_tokens", "env_kwargs",
    "eval_temperature", "eval_split", "eval_tasks", "eval_task_ids", "eval_seed",
)


@dataclass
class TrainerConfig:
    """Settings shared by GRPO, PPO, GiGPO and RSPO."""

    # -- rollout
    num_groups: int = 2
    """Tasks per iteration (verl-agent: 16)."""
    group_size: int = 4
    """Trajectories per task, GRPO's N (verl-agent: 8)."""
    max_turns: int | None = None
    """Turn limit per episode; None uses the env's registered step limit (ALFWorld 50, WebShop 15),
    as verl-agent: a lower limit cuts off episodes the env would still let an agent win."""
    temperature: float = 1.0
    """Sampling temperature for training rollouts (verl-agent: 1.0)."""
    top_p: float = 1.0
    """Nucleus mass for training rollouts."""
    max_new_tokens: int = 48
    """Reply length bound (verl-agent: 512 with <think>)."""
    max_prompt_length: int | None = None
    """Prompt token bound; longer prompts drop history entries oldest-first, and one over it even
    without history is an error. None: no limit (verl-agent: 2048 ALFWorld, 4096 WebShop)."""
    history_length: int | None = None
    """Past (observation, action) pairs in the prompt; None: what the starting model was trained with
    (``tiny-alfworld``: 6; every other model: 2, verl-agent's value). A clone prompted with another
    history sees prompts it never saw in cloning."""
    prompt_format: str | None = None
    """``"window"``: verl-agent's prompt (task, step count, last ``history_length`` steps, rewritten
    every turn); ``"conversation"``: the episode as a growing chat whose KV cache the policy keeps
    across turns and whose rows one packed pass trains. None: what the starting model was trained
    with (``tiny-alfworld-chat``: conversation; every other model: window)."""
    think: bool = False
    """Ask for <think>/<action> tags (True for real instruction models)."""
    constrained: bool = True
    """Constrain replies to admissible actions (small models; False for real models)."""
    train_task_ids: list[int] | None = None
    """A fixed training task set (sampled per iteration); None draws fresh tasks from seeds."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gym.make`` of the training env."""
    processes: int = 0
    """Env worker processes (0: in-process); the same as ``env_pool="processes"`` with
    ``env_workers=processes``."""
    env_pool: str | None = None
    """Where the training envs live: ``inprocess``, ``processes`` (``env_workers`` worker
    processes) or ``ray`` (``env_workers`` Ray actors, on any node of the cluster joined by the
    caller's ``ray.init``; needs the ``[ray]`` extra). None: ``processes`` when ``processes > 0``,
    else ``inprocess``."""
    env_workers: int | None = None
    """Workers of the ``processes`` / ``ray`` pools; None: ``processes``, or 2 when that is 0."""

    # -- generation engine
    generation_backend: str = "hf"
    """``hf`` (transformers, in the trainer's process, constrained decoding), ``vllm``: a vLLM
    engine colocated with the learner, weights pushed from memory after each update, the explorer
    on the same engine (needs the ``[vllm]`` extra and ``constrained=False``), or ``vllm-server``:
    a running ``vllm serve`` at ``vllm_server_url``, on other GPUs, weights pushed over NCCL
    after each update (``constrained=False``; docs/scaling.md)."""
    vllm_gpu_memory_utilization: float = 0.4
    """Share of the GPU vLLM reserves for weights and KV cache (the learner needs the rest)."""
    vllm_enable_sleep_mode: bool | None = None
    """Free vLLM's KV cache and weights while the learner updates (CUDA only); None: on with CUDA."""
    vllm_tensor_parallel_size: int = 1
    """GPUs one vLLM engine spreads over."""
    vllm_kwargs: dict[str, Any] = field(default_factory=dict)
    """Further ``vllm.LLM`` arguments (e.g. ``kv_cache_memory_bytes``, ``max_model_len``)."""
    recompute_old_logprobs: bool | None = None
    """Recompute the behaviour log-probs with the learner before the update, so PPO ratios start
    from one numerics (verl does); None: on with ``vllm`` and ``vllm-server``, whose kernels differ
    from the learner's, off with ``hf``, whose recorded log-probs already are the learner's."""
    vllm_server_url: str | None = None
    """Base URL of the ``vllm serve`` that ``vllm-server`` generates on, e.g.
    ``http://10.0.0.2:8000`` (required for that backend)."""
    vllm_server_model: str | None = None
    """The served model name requests ask for; None: the only model the server lists."""
    vllm_server_timeout: float = 600.0
    """Seconds to wait for one answer of the server (a generation request, a weight update)."""
    vllm_weight_sync: str = "nccl"
    """How ``vllm-server`` gets the learner's weights: ``nccl`` (vLLM's NCCL transfer engine,
    after every update; the server runs with ``VLLM_SERVER_DEV_MODE=1`` and
    ``--weight-transfer-config '{"backend": "nccl"}'``) or ``none``: the server keeps the weights
    it was launched with, for evaluation only (training refuses it: rollouts would come from a
    policy that never changes)."""
    vllm_weight_sync_host: str | None = None
    """This trainer's (rank 0's) address that the server's workers reach for the NCCL rendezvous;
    None: the address of this machine's interface on the route to the server."""
    vllm_weight_sync_port: int | None = None
    """Port of that rendezvous on the trainer; None: a free one."""

    # -- reward
    reward: str | None = None
    """``outcome`` (10 x won), ``score`` (10 x env reward, WebShop's score) or ``dense`` (outcome +
    process); None: the env family's (WebShop ``score``, whose partial credit for a near-match
    purchase is a denser signal than its rare full wins; ``outcome`` elsewhere)."""
    success_reward: float = 10.0
    """Reward of a won episode (verl-agent: 10)."""
    invalid_penalty: float = 0.1
    """Subtracted on rows whose action was invalid (verl-agent: 0.1)."""
    invalid_penalty_on: str = "format"
    """Which rows are invalid: ``format`` (the reply broke the requested format: tags, CJK), as
    verl-agent's ``is_action_valid``, where a command the env rejects is a no-op with reward 0; or
    ``format_or_env`` (also rows whose command the env did not accept)."""
    process_reward: str | None = None
    """The process reward of ``dense`` and of RSPO's explorer and swaps, by name
    (``rspo_gym.envs.process_rewards(env_id)`` lists them): a potential (the aligned control:
    ALFWorld ``milestones`` / ``distance``, WebShop ``score``) or a per-event reward (``events``,
    ``open``, ``search``, ...: paid on every repeat, so it can be farmed). None: the env's default
    potential (ALFWorld ``milestones``, WebShop ``score``)."""
    process_weights: dict[str, float] = field(default_factory=dict)
    """Per-event rewards: weights of their events over the defaults, e.g. ``{"open": 0.2}``."""
    process_once: bool = False
    """Per-event rewards: pay each event (e.g. opening cabinet 3) only the first time in an episode."""
    process_coef: float = 1.0
    """Weight of the process reward in ``dense``."""
    dense_outcome: str | None = None
    """The outcome term of ``dense`` (and of RSPO's explorer): ``outcome`` (10 x won) or ``score``
    (10 x the env's reward, WebShop's purchase score), to pair dense baselines with a ``score`` run.
    None: the env family's default reward, as ``reward`` (WebShop ``score``, else ``outcome``)."""
    process_gamma: float | None = None
    """Discount γ of the shaping term γΦ(s') − Φ(s); None: the discount the algorithm credits steps
    with (GiGPO's ``gamma``, 1 for GRPO and PPO). Shaping changes no step's relative credit only
    at the return's own discount (Ng et al., 1999). With 1 under GiGPO's 0.95, WebShop's zeroed
    terminal potential makes putting off a purchase worth the discount gap, and step-group
    normalisation blows that gap up to full-size advantages: dense GiGPO stopped buying (score
    0.40 → 0.00 in the removed ``benchmarks/compare.py --preset curves``, last at 8faa9cc)."""

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
    """Rows per forward/backward; gradients accumulate over a mini-batch. Rows nested in one another
    (the turns of an append-only conversation, ``LLMPolicy(pack_rows=True)``) share one pass and
    count as one row."""
    max_tokens_per_micro_batch: int | None = None
    """Token budget of a forward/backward instead of a row count (verl's ``ppo_max_token_len_per_gpu``):
    each mini-batch's rows, longest first, are packed into micro-batches of at most this many
    padded tokens (rows x (longest prompt + longest response); a longer row goes alone), so memory
    is bounded by tokens and short rows share a pass. Also sizes the no-gradient passes (old values,
    reference and replay log-probs). None: ``micro_batch_size`` rows, longest first. Either way a
    micro-batch is padded only to its own longest prompt and response, and the gradient is the one
    big batch's. Rows nested in one another share a micro-batch and count their longest row's
    tokens only: the policy runs one pass over it."""
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
    """KL-to-reference weight (verl-agent: 0.01). > 0 with full fine-tuning keeps a frozen copy of
    the initial policy (bfloat16 unless ``precision="fp32"``); with LoRA the reference is the base."""
    kl_kind: str = "k3"
    """KL estimator (verl-agent: low_var_kl = k3)."""
    lora_r: int = 0
    """LoRA rank of the learner; 0 trains every weight. With LoRA the KL reference is the base with
    the adapter disabled and RSPO's explorer a second adapter on the same base: no model copies."""
    lora_alpha: float = 32.0
    """LoRA scaling numerator (the update is scaled by ``lora_alpha / lora_r``)."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA branch."""
    lora_target_modules: str | list[str] = "all-linear"
    """Modules that get adapters (peft's ``target_modules``; ``all-linear``: every linear but the head)."""
    ref_offload: bool = False
    """Keep the full fine-tuning KL reference on the CPU, moved to the learner's device only for
    its forward passes (memory for time; no effect with LoRA, whose reference is the base)."""
    max_grad_norm: float = 1.0
    """Clipping of the policy's gradient norm, over the policy's parameters alone (verl-agent: 1.0)."""

    # -- update (verl's knobs, under verl's key names)
    loss_scale_factor: int | None = None
    """The constant divisor of ``loss_agg="seq-mean-token-sum-norm"`` (Dr.GRPO; verl's
    ``loss_scale_factor``): each row's token-summed loss is divided by it. None: the response
    length limit ``max_new_tokens``. A constant keeps the gradient the same under any
    micro-batching or token budget (a micro-batch's own width would not)."""
    tis_imp_ratio_cap: float | None = None
    """Truncated importance sampling for rollouts from another engine (verl's
    ``tis_imp_ratio_cap``): the policy loss of each token is multiplied by
    ``min(pi_train / pi_rollout, cap)``, the training policy's ("old", recomputed) probability
    over the rollout engine's, detached, so vLLM's different kernels do not bias the gradient.
    None: off (verl's default). Not with RSPO's ``swap="explorer"``, whose replayed rows carry
    their own learner/explorer weights."""
    shuffle_mini_batches: bool = True
    """Shuffle the rows before cutting them into mini-batches, anew each epoch (verl's actor
    ``shuffle``, False there: verl cuts the batch in its rollout order). With one mini-batch and
    one epoch the order changes nothing."""
    shuffle_chains: bool = False
    """Shuffle chains of nested rows instead of rows (a conversation-format trajectory's turns, see
    ``policies/packing.py``), keeping each chain's rows together, so that a mini-batch holds whole
    trajectories and scores each in one packed pass: row shuffling spreads a trajectory over every
    mini-batch, each of which then runs most of its tokens again. A batch in which no row nests in
    another is shuffled as rows, exactly as without this. One process only (several ranks shuffle
    rows)."""
    lr_scheduler: str = "constant"
    """Learning-rate schedule over ``learn()``'s iterations (verl's ``lr_scheduler_type`` /
    ``warmup_style``): ``constant`` or ``cosine`` (half a cosine down to ``min_lr_ratio`` x lr at
    the last iteration). Applies to the policy's and the critic's lr alike."""
    lr_warmup_steps_ratio: float = 0.0
    """Share of the iterations over which the lr rises linearly from 0 (verl's key; 0.0 there)."""
    min_lr_ratio: float = 0.0
    """The cosine schedule's final lr as a share of the base lr (verl's key; 0.0 there)."""

    # -- KL in the reward (verl's ``algorithm.use_kl_in_reward`` and ``algorithm.kl_ctrl``)
    use_kl_in_reward: bool = False
    """Pay the KL to the reference in the reward instead of the loss (verl's key; False there and
    in the verl-agent scripts): ``beta * KL(pi_old || pi_ref)`` (estimator ``kl_kind``) is
    subtracted from every response token's reward before the advantage, as verl's
    ``apply_kl_penalty``; the loss then has no KL term. ``beta`` starts at ``kl_coef``, which must
    be > 0. GRPO and GiGPO normalise each row's score less its summed penalty (GiGPO's step returns
    stay env rewards, as in verl-agent); PPO's GAE reads the penalty per token."""
    kl_ctrl: str = "fixed"
    """How ``beta`` moves under ``use_kl_in_reward`` (verl's ``kl_ctrl.type``): ``fixed`` or
    ``adaptive``: after each iteration ``beta *= 1 + clip(kl / kl_target - 1, -0.2, 0.2) * rows /
    kl_horizon``, with ``kl`` the batch's mean per-row token-mean KL (verl's
    ``AdaptiveKLController``). ``beta`` is logged as ``train/reward_kl_penalty_coeff`` and kept in
    checkpoints."""
    kl_target: float = 0.1
    """The adaptive controller's target KL (verl's ``kl_ctrl.target_kl``: 0.1)."""
    kl_horizon: int = 10000
    """The adaptive controller's horizon, in rows (verl's ``kl_ctrl.horizon``: 10000)."""

    # -- DAPO's dynamic sampling (verl's ``algorithm.filter_groups``)
    filter_groups: bool = False
    """Drop task groups whose trajectories all got the same training reward (all won or all lost:
    every advantage 0) and sample new groups until the iteration has ``num_groups`` informative
    ones (DAPO; verl's ``filter_groups.enable``). A group of one trajectory is kept, as in verl.
    Under RSPO's ``swap="explorer"`` a group is judged with its replayed explorer trajectories, the
    group the learner is updated on. One process only."""
    max_num_gen_batches: int = 10
    """Rollouts an iteration may sample under ``filter_groups`` (verl-agent: 10; verl's 0: no cap).
    The last one allowed fills the remaining places with its groups, informative or not, as
    verl-agent keeps its last try unfiltered, so an iteration never trains on too few groups."""

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
    """Where ``learn()`` writes metrics, ``config.json``, checkpoints, ``policy/`` and
    ``learning_curve.png``; None: a new ``runs/<algo>-<env>-<timestamp>/`` (base folder from
    ``$RSPO_GYM_RUNS_DIR``). The folder is made by the first ``learn()``, not by the constructor, so
    a trainer built only to ``evaluate()`` leaves nothing behind."""
    checkpoint_every: int = 1
    """Checkpoint every this many iterations (0: only at the end of ``learn()``). Every iteration
    by default: a resume then repeats no work, for a few per cent of an iteration's time."""
    progress: bool = True
    """Show progress on stderr: ``learn()``'s bar (the phase, and the episodes done of its rollout,
    the turn, env steps per second) and ``evaluate()``'s own when called alone; a tqdm bar on a
    terminal, a line every 10 s elsewhere (a log file is not flooded)."""
    report_to: str = "none"
    """Where metrics go besides ``metrics.jsonl`` and ``metrics.csv`` (TRL's name): ``none``,
    ``tensorboard`` (event files in ``<output_dir>/tensorboard``; the ``[llm]`` extra installs it)
    or ``wandb`` (a Weights & Biases run named after the run folder; ``pip install wandb``)."""

    def __post_init__(self) -> None:
        validate_config(self)  # types, ranges and choices of every field (``validation.py``)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "config_class": type(self).__name__}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainerConfig":
        """The config of ``to_dict`` or of a run's ``config.json`` (its ``RUN_INFO_KEYS`` are skipped)."""
        names = {f.name for f in fields(cls)}
        if "process_potential" in data:  # the field's name before per-event rewards (config.json of older runs)
            data = {**data, "process_reward": data["process_potential"]}
            data.pop("process_potential")
        unknown = set(data) - names - {"config_class", *RUN_INFO_KEYS}
        if unknown:
            raise unknown_fields_error(cls, unknown)
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class GiGPOConfig(TrainerConfig):
    """GiGPO: episode groups plus anchor-state step groups."""

    gamma: float = 0.95
    """Discount of the step returns (verl-agent: 0.95)."""
    omega: float = 1.0
    """Weight of the step-level advantage (verl-agent: 1.0)."""
    gigpo_norm: str = "mean_std"
    """``mean_std`` (ALFWorld script) or ``mean`` (WebShop script)."""
    # -- GiGPO step-group similarity (verl-agent's newer fork)
    enable_similarity: bool = False
    """Anchor states of a group that are similar, not only equal, share a step group: greedy,
    each joins the first cluster whose first anchor it matches with ``difflib`` ratio >=
    ``similarity_thresh`` (verl-agent's ``enable_similarity``; off there by default)."""
    similarity_thresh: float = 0.95
    """The ``difflib.SequenceMatcher`` ratio two anchors need to share a step group (verl-agent: 0.95)."""


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
    # -- the critic's model
    critic: str = "head"
    """``head``: a value head (one linear layer) on the policy's trunk, reading its hidden states
    detached, so the value loss trains the head alone (no second model in memory); ``separate``:
    a critic model of its own (``critic_model``; verl-agent's PPO), its decoder and a value head
    trained whole by the value loss with its own AdamW (``critic_lr``, ``critic_max_grad_norm``,
    ``value_clip``). One process, an LLM policy, and not under RSPO. Memory: docs/training.md."""
    critic_model: str | None = None
    """The separate critic's model: a preset, Hugging Face id or local path sharing the policy's
    tokenizer (a smaller model of the same family fits); None: the policy's starting model
    (verl: ``critic.model.path`` defaults to the actor's)."""


@dataclass
class RSPOConfig(GiGPOConfig, PPOConfig):
    """Reward-swap wrapper around a base algorithm."""

    group_size: int = 4
    num_groups: int = 2
    base: str = "grpo"
    """Base algorithm X: ``grpo``, ``ppo`` or ``gigpo``."""
    swap: str = "explorer"
    """``explorer`` (a dense-reward explorer's trajectories, replayed to the learner with the outcome),
    ``rank`` (process returns handed out in outcome order within each group) or ``anneal`` (dense
    reward annealed to the outcome)."""
    explorer_group_size: int = 2
    """Explorer trajectories per task, M (2: half the default ``group_size``)."""
    explorer_sync_every: int = 0
    """Copy the learner into the explorer every this many iterations (0: never on a schedule, only
    when the learner overtakes it). The explorer pilot (``docs/explorer_method.md``): re-synced
    every 5 iterations (the earlier default) it never won more per episode than its learner."""
    explorer_updates: int = 2
    """Dense-reward updates of the explorer per iteration (U_p; the pilot: 2 over 1)."""
    explorer_sync_on_overtake: bool = True
    """Copy the learner into the explorer when the learner overtakes it: when, over the latest
    ``explorer_overtake_window`` iterations since the last sync, the learner's training success
    is higher than the explorer's. The explorer keeps what its dense reward taught it for as long
    as it wins more per episode."""
    explorer_overtake_window: int = 20
    """Iterations (since the last sync) whose training success ``explorer_sync_on_overtake`` compares.
    Over 5, two equal policies with a few wins each overtake each other by chance about every
    other window, and the explorer was re-synced about every 10 iterations (the pilot)."""
    explorer_keep_optimizer: bool = True
    """Keep the explorer's optimizer state (AdamW's moments) across syncs; False: a fresh
    optimizer at every sync, so the explorer restarts its dense-reward climb from zero momentum."""
    explorer_warmup_iterations: int = 0
    """Iterations the explorer trains alone on the dense reward before the learner's first (a warm
    explorer: an agent trained with the dense process reward). They play fresh tasks with the
    explorer's ``explorer_group_size`` members per task, and their env steps count in the first
    iteration's ``env_steps`` (``explorer/warmup_env_steps``), so equal-compute comparisons pay for them.
    The explorer study used 48 (about a quarter of its total env steps, a quarter of the
    learner's iterations); its cost scales with the run, so 0 is the default: set it to about a
    quarter of ``iterations`` for an explorer that wins more per episode than its learner."""
    explorer_lora: bool = False
    """With full fine-tuning: train the explorer as a LoRA adapter (r=8) on a frozen copy of the
    learner instead of training the whole copy. With a LoRA learner (``lora_r > 0``) the explorer is
    always a second adapter on the learner's base, and no copy is made."""
    replay_age: int = 2
    """Learner updates an explorer trajectory joins, counting the iteration it was sampled in:
    trajectories sampled at iteration ``b`` are replayed at iterations ``b .. b + replay_age - 1``
    (1: no replay beyond their own iteration)."""
    is_cap: float = 2.0
    """Truncation of the importance weight learner/explorer on replayed rows."""
    is_level: str = "step"
    """Importance weights of replayed rows: ``step`` (each token's own ratio, truncated: bounded
    variance, the per-decision correction PPO's per-token surrogate already assumes), ``trajectory``
    (the whole trajectory's ratio, truncated, on all its tokens: the exact correction of a
    trajectory-level advantage, but over 50 steps almost always ~0 or the cap) or ``none`` (weight
    1: replayed rows count as if on-policy)."""
    replay_task_share: float = 0.0
    """With a finite training task pool (``train_task_ids``): the share of each iteration's tasks
    drawn from the replay buffer's (tasks whose explorer trajectories are still replayable, those
    the explorer won first), so that replay happens; the rest are drawn from the pool as usual.
    0: tasks are drawn as for the base algorithm, and an explorer trajectory is replayed only when
    its task is drawn again within ``replay_age`` iterations (rare in a large pool). One process
    only (each rank's buffer holds its own groups)."""
    anneal_iterations: int = 10
    """``anneal``: iterations over which beta goes from 0 (dense) to 1 (outcome)."""
    transfer_tasks: int = 0
    """``explorer``: goals per label on which the end of ``learn()`` measures whether the
    explorer's wins transfer to its learner (``RSPOTrainer.measure_transfer``, ``transfer.json``):
    up to this many goals that only the explorer won in training, and as many that nobody won,
    each played by the learner's start and final weights. 0: off. On, the start weights are kept
    (in memory and in checkpoints) for the whole run."""
    transfer_episodes: int = 4
    """Episodes per goal of that measurement, at ``eval_temperature``, the same episodes for the
    start and the final weights."""


def save_config(config: TrainerConfig, path: str | Path, **run_info: Any) -> None:
    """Write ``config`` as JSON, with ``run_info`` (``env_id``, ``model``) beside its fields."""
    unknown = set(run_info) - set(RUN_INFO_KEYS)
    if unknown:
        raise TypeError(f"run info keys must be among {RUN_INFO_KEYS}, got {sorted(unknown)}")
    data = {**config.to_dict(), **run_info}
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")  # a full disk leaves the previous file


def load_config(path: str | Path) -> tuple[TrainerConfig, dict[str, Any]]:
    """A run's ``config.json``: the config (as the dataclass it was saved from) and the run info.

    Raises ``ValueError`` saying which file and why for anything that is not such a file, so a
    command line can report it in one line (``eval`` and ``compare`` read runs through here): a
    value nested thousands deep, which the JSON reader recurses into, included.
    """
    classes = {cls.__name__: cls for cls in (TrainerConfig, GiGPOConfig, PPOConfig, RSPOConfig)}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read {path}: {err}") from err
    except RecursionError:
        raise ValueError(f"cannot read {path}: it is nested too deep to read (not a config rspo-gym wrote)") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a trainer config: a JSON object was expected")
    name = data.get("config_class", "TrainerConfig")
    cls = classes.get(name) if isinstance(name, str) else None  # an object or a list would be unhashable: a TypeError
    if cls is None:
        raise ValueError(f"{path}: unknown config_class {data['config_class']!r}; expected one of {sorted(classes)}")
    try:
        config = cls.from_dict(data)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path} is not a {cls.__name__} file: {err}") from err
    return config, {key: data[key] for key in RUN_INFO_KEYS if key in data}
