"""RSPO: reward-swap policy optimisation around any base algorithm (design §5).

- ``swap="explorer"`` (default, F1): an explorer copy of the learner (full, or LoRA on a frozen
  copy) is trained with the base algorithm on the *dense* reward (``explorer_updates`` per
  iteration, after ``explorer_warmup_iterations`` alone) and re-synced to the learner once the
  learner wins more per episode over ``explorer_overtake_window`` iterations (or every
  ``explorer_sync_every``). Each iteration it samples ``explorer_group_size`` (M)
  trajectories of every task the learner plays (N = ``group_size``). Its trajectories enter a
  replay buffer with their rewards swapped back to the outcome; the learner is updated with the
  base algorithm over the union group of each task (its own N plus the buffered explorer
  trajectories of that task sampled in the last ``replay_age`` iterations, this one included), on
  the outcome only.
  Replayed rows keep the learner's own (no-grad) log-probs as the PPO "old" policy and carry a
  truncated importance weight ``min(pi_learner / pi_explorer, is_cap)`` on their token losses.
  Invariants (tested): M = 0 is exactly the base algorithm; the learner's loss does not change
  when the process reward of a fixed buffer changes.
- ``swap="rank"`` (F2): one policy; inside each group, trajectories sorted by (outcome, process
  return) receive the group's process returns in that sorted order. The swapped value is the
  trajectory's *return*, delivered on its last step as the outcome is: every estimator reads it
  where it would read the outcome (GRPO's episode score; GiGPO's episode score *and* its step
  returns, which discount it back from the last step; PPO's terminal reward), and normalises it
  its own way. The process return here is ``Trajectory.process_progress``, Φ(end) − Φ(start):
  the summed process reward at γ = 1, except on WebShop, whose summed process rewards are the same
  −Φ(start) for every episode (F2 then gave all-equal returns, zero advantages, and the entropy
  bonus alone drove the score to 0). There Φ(end) is the potential the episode ended on. The
  *peak* potential was tried too: it ranks browsing past a good item above buying a poor one,
  and the policy learned never to buy (score 0.136 -> 0.00).
- ``swap="anneal"`` (F3, ablation): reward = (1 - beta) dense + beta outcome, beta 0 -> 1 over
  ``anneal_iterations``.

The paper's text is unavailable; F1 follows the only mechanism description found (reference
§1.1). The learner's reward is ``config.reward`` (``outcome`` or ``score``), never ``dense``.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace
from typing import Any

import torch

from rspo_gym.algos.estimates import Estimate, RewardView, annealed_view, gigpo_estimate, grpo_estimate, ppo_estimate, rank_swapped_view
from rspo_gym.training.checkpoints import load_optimizer_state
from rspo_gym.training.config import RSPOConfig
from rspo_gym.training.dynamic_sampling import concat_rollouts
from rspo_gym.training.envs import env_pool_settings, make_vector_env
from rspo_gym.algos.losses import trajectory_is_weights, truncated_is_weights
from rspo_gym.algos.replay_metrics import from_sums, is_weight_stats, logp_gain, revisits, run_labels, summed, task_labels
from rspo_gym.atomic import write_text_atomic
from rspo_gym.training.trainer import Trainer
from rspo_gym.training.transfer import detached_copy, measure_transfer
from rspo_gym.errors import UserError
from rspo_gym.rollout.collector import collect
from rspo_gym.rollout.trajectory import Rollout, group_outcomes, to_batch

__all__ = ["RSPOTrainer", "BASES", "SWAPS", "merge_replay", "replayable", "replay_tasks", "learner_overtook", "rank_swapped_view",
           "annealed_view"]

BASES = ("grpo", "ppo", "gigpo")
SWAPS = ("explorer", "rank", "anneal")
_REPLAY_TRAJ_STRIDE = 1_000_000  # replayed trajectory ids: (iteration + 1) * stride + original id
WARMUP_STREAM = 9  # the explorer warm-up's task and sampling streams (the learner's are 1-3, the explorer's 5)


def replayable(born: int, iteration: int, replay_age: int) -> bool:
    """Whether explorer trajectories sampled at ``born`` join the update of ``iteration``.

    ``replay_age`` counts the updates they join, their own iteration included (see ``RSPOConfig``).

    >>> [replayable(3, it, 2) for it in (3, 4, 5)]
    [True, True, False]
    """
    return 0 <= iteration - born < replay_age


def merge_replay(learner: Rollout, buffer: list[tuple[int, Rollout]], iteration: int, replay_age: int) -> Rollout:
    """The learner's rollout plus the buffered explorer trajectories of the same tasks still replayable.

    Replayed trajectories join the learner group that played the same task id and get fresh
    trajectory ids; trajectories of tasks the learner did not play this iteration are skipped.
    """
    group_of_task = {}
    for t in learner.trajectories:
        group_of_task.setdefault(t.task_id, t.group_id)
    rows, trajectories = list(learner.rows), list(learner.trajectories)
    for born, rollout in buffer:
        if not replayable(born, iteration, replay_age):
            continue
        offset = (born + 1) * _REPLAY_TRAJ_STRIDE
        keep = {t.traj_id: group_of_task[t.task_id] for t in rollout.trajectories if t.task_id in group_of_task}
        trajectories += [replace(t, traj_id=t.traj_id + offset, group_id=keep[t.traj_id]) for t in rollout.trajectories if t.traj_id in keep]
        rows += [replace(r, traj_id=r.traj_id + offset, group_id=keep[r.traj_id]) for r in rollout.rows if r.traj_id in keep]
    return Rollout(rows, trajectories)


def replay_tasks(buffer: list[tuple[int, Rollout]], iteration: int, replay_age: int, count: int) -> list[Any]:
    """Up to ``count`` distinct task ids whose buffered explorer trajectories ``iteration`` can still
    replay: most explorer wins first, then the most recent, then the smallest id (deterministic).

    >>> from rspo_gym.rollout.trajectory import Trajectory
    >>> def played(task, won): return Trajectory(0, 0, task, "", float(won), 0.0, 0.0, won, float(won), 1, 0)
    >>> buffer = [(0, Rollout([], [played(7, True)])), (1, Rollout([], [played(3, False), played(5, True), played(5, True)]))]
    >>> replay_tasks(buffer, 2, 2, 2), replay_tasks(buffer, 1, 2, 3)
    ([5, 3], [5, 7, 3])
    """
    wins: dict[Any, list[int]] = {}
    for born, rollout in buffer:
        if not replayable(born, iteration, replay_age):
            continue
        for t in rollout.trajectories:
            entry = wins.setdefault(t.task_id, [0, born])
            entry[0] += int(t.won)
            entry[1] = max(entry[1], born)
    ranked = sorted(wins, key=lambda task: (-wins[task][0], -wins[task][1], task))
    return ranked[:count]


def learner_overtook(history: list[dict[str, Any]], window: int) -> bool:
    """Whether the learner has overtaken the explorer: over the latest ``window`` iterations since
    the explorer's last sync (the synced iteration included; fewer than ``window``: not yet), its
    training success summed is higher than the explorer's.

    >>> rows = [{"rollout/success": 0.2, "explorer/success": 0.3, "explorer/synced": 1.0}] + [{"rollout/success": 0.5, "explorer/success": 0.1}] * 2
    >>> learner_overtook(rows, 2), learner_overtook(rows, 3), learner_overtook(rows, 4), learner_overtook(rows[:1] * 3, 2)
    (True, True, False, False)
    """
    since = []
    for row in reversed(history):
        since.append(row)
        if row.get("explorer/synced") or len(since) == window:
            break
    if len(since) < window:
        return False
    return sum(r["rollout/success"] for r in since) > sum(r["explorer/success"] for r in since)


class RSPOTrainer(Trainer):
    """Reward-Swap Policy Optimization around GRPO, PPO or GiGPO.

    >>> import rspo_gym
    >>> trainer = RSPOTrainer("rspo/ALFWorld-v0", base="grpo", swap="explorer", iterations=1,
    ...                       num_groups=1, group_size=2, explorer_group_size=1, max_turns=2,
    ...                       eval_every=0, progress=False)
    >>> history = trainer.learn()  # doctest: +ELLIPSIS
    Logging to .../rspo-grpo-explorer-ALFWorld-v0-...
    >>> "explorer/success" in history[0]
    True
    """

    algo = "rspo"
    config_class = RSPOConfig

    def __init__(self, env: Any, model: Any = "tiny", config: RSPOConfig | None = None, *, base: str | None = None, swap: str | None = None, **overrides: Any):
        if base is not None:
            overrides["base"] = base
        if swap is not None:
            overrides["swap"] = swap
        chosen = overrides.get("base", (config or RSPOConfig()).base)
        if chosen not in BASES:
            raise ValueError(f"unknown base {chosen!r}; expected one of {BASES}")
        self.needs_values = chosen == "ppo"
        super().__init__(env, model, config, **overrides)
        c = self.config  # its swap, reward and replay_age were checked by RSPOConfig itself
        self.algo = f"rspo-{c.base}-{c.swap}"
        self.buffer: list[tuple[int, Rollout]] = []
        self._iteration_for_anneal = 0  # the iteration being trained (anneal's beta schedule)
        self.explorer = None
        self.explorer_optimizer = None
        self._explorer_rollout: Rollout | None = None
        self._synced = False  # the explorer was re-synced before this iteration's rollout
        self._warmup_steps = self._warmup_tokens = 0  # the explorer's warm-up's env steps and tokens, counted in iteration 0's
        self.pending_labels: dict[Any, str] = {}  # task id -> who won it when last played (``replay_metrics.revisits``)
        self.run_labels: dict[Any, str] = {}  # task id -> who won it over the run (``transfer_tasks``)
        self._start_weights: Any = None  # the learner's weights when its run began (``transfer_tasks``)
        self.transfer: dict[str, Any] | None = None  # the end of learn()'s ``measure_transfer``
        if c.transfer_tasks and (c.swap != "explorer" or c.explorer_group_size == 0):
            raise UserError("transfer_tasks measures what an explorer's wins teach its learner: it needs swap='explorer' "
                            "and explorer_group_size > 0")
        if c.transfer_tasks and self.dist.shards_state:
            raise UserError("transfer_tasks keeps a copy of the learner's start weights, which FSDP / DeepSpeed shard: "
                            "measure it under DDP or in one process")
        if c.swap == "explorer" and c.explorer_group_size > 0:
            if self.env_factory is None:
                raise ValueError(
                    "swap='explorer' builds a second vector env of explorer_group_size members per task: "
                    "pass an env id or a factory instead of a GroupedVectorEnv (or use swap='rank')"
                )
            if self.dist.shards_state and c.explorer_lora:
                raise ValueError(
                    "explorer_lora puts an adapter on a frozen copy of the learner, which FSDP / DeepSpeed would "
                    "have to shard as a second peft model: under those engines use explorer_lora=False (the explorer "
                    "is then a sharded full copy) or DDP"
                )
            if c.lora_r > 0 and self.dist.world_size > 1:
                raise ValueError(
                    "a LoRA learner's explorer is a second adapter on the learner's own engine-wrapped model, "
                    "which data parallelism over several ranks cannot wrap twice: use full fine-tuning "
                    "(lora_r=0, optionally explorer_lora=True) or swap='rank' / 'anneal'"
                )
            if c.replay_task_share > 0 and not c.train_task_ids:
                raise UserError("replay_task_share draws tasks from the replay buffer within a finite pool: set train_task_ids too")
            if c.replay_task_share > 0 and self.dist.world_size > 1:
                raise UserError("replay_task_share reads one process's replay buffer: run it in one process, or set it to 0")
            self.explorer_venv, _ = make_vector_env(self.env_factory, len(self.groups), c.explorer_group_size, **env_pool_settings(c))
            self.sync_explorer()

    # -- estimator of the base algorithm
    def step_discount(self) -> float:
        return self.config.gamma if self.config.base == "gigpo" else 1.0

    def estimate(self, view, batch, old_values) -> Estimate:
        if self.config.base == "grpo":
            return grpo_estimate(view, self.config)
        if self.config.base == "gigpo":
            return gigpo_estimate(view, self.config)
        return ppo_estimate(view, self.config, batch.response_mask, old_values, self.dist.sum_tensor)

    def tasks(self, it: int, stream: int = 0) -> dict[str, Any]:
        """The base draw, with the first ``replay_task_share`` of the learner's groups replaying buffered tasks."""
        drawn = super().tasks(it, stream)
        c = self.config
        count = round(c.replay_task_share * c.num_groups)
        if stream or self.explorer is None or count == 0 or "task_ids" not in drawn:
            return drawn
        revisit = replay_tasks(self.buffer, it, c.replay_age, count)
        rest = [task for task in drawn["task_ids"] if task not in revisit]
        return {"task_ids": (revisit + rest + drawn["task_ids"])[:c.num_groups]}

    # -- rewards for rank / anneal
    def reward_view(self, rollout: Rollout, kind: str) -> RewardView:
        view = super().reward_view(rollout, kind)
        c = self.config
        if c.swap == "rank" and kind != "dense":
            process = {t.traj_id: t.process_progress for t in rollout.trajectories}
            per_row = torch.tensor([process[r.traj_id] for r in rollout.rows], dtype=torch.float64)
            return rank_swapped_view(view, per_row)
        if c.swap == "anneal" and kind != "dense":
            beta = min(1.0, self._iteration_for_anneal / max(c.anneal_iterations, 1))
            return annealed_view(super().reward_view(rollout, "dense"), view, beta)
        return view

    # -- explorer
    def _before_engine(self) -> None:
        """Under FSDP / DeepSpeed the engine shards the learner in place: a full-copy explorer is
        copied from the whole weights first, then prepared (sharded) like the learner."""
        from rspo_gym.policies.llm import LLMPolicy

        c = self.config
        wanted = c.swap == "explorer" and c.explorer_group_size > 0 and not c.explorer_lora
        if self.dist.shards_state and wanted and isinstance(self.policy, LLMPolicy):
            self._explorer_copy = copy.deepcopy(self.policy.model)

    def _sync_sharded_explorer(self) -> None:
        """phi <- theta under FSDP / DeepSpeed: the explorer is the copy taken before sharding,
        prepared like the learner, so both hold the same shards of the same tensors; a sync copies
        the learner's shards into the explorer's (local, no collective) and clears the explorer
        optimizer's state (the same as a fresh AdamW)."""
        from rspo_gym.policies.llm import LLMPolicy

        learner = self.policy
        if self.explorer is None:
            self.explorer = LLMPolicy(
                self._explorer_copy, learner.tokenizer, value_head=self.needs_values,
                micro_batch_size=learner.micro_batch_size, seed=self.config.seed + 1, autocast_dtype=learner.autocast_dtype,
            )
            self._explorer_copy = None
            if self.needs_values:
                self.explorer.value_head.load_state_dict(learner.value_head.state_dict())
            self.explorer_optimizer = self._make_optimizer(self.explorer)
            return
        theirs = list(learner.policy_parameters()) + list(learner.critic_parameters())
        mine = list(self.explorer.policy_parameters()) + list(self.explorer.critic_parameters())
        with torch.no_grad():
            for target, source in zip(mine, theirs, strict=True):
                target.copy_(source)
        if not self.config.explorer_keep_optimizer:
            self.explorer_optimizer.state.clear()

    def sync_explorer(self) -> None:
        """phi <- theta, with a fresh explorer optimizer (its state kept with ``explorer_keep_optimizer``).

        A LoRA learner's explorer is a second adapter on the same base whose weights are set to the
        learner's adapter (no copy of the base). With full fine-tuning it is a copy of the learner
        (trained whole, or through a LoRA adapter on the frozen copy with ``explorer_lora``).
        """
        from rspo_gym.policies.adapters import adapter_parameters
        from rspo_gym.policies.llm import LLMPolicy

        c = self.config
        learner = self.policy
        if self.dist.shards_state and learner.adapter is None:
            self._sync_sharded_explorer()
            return
        kept = self.explorer_optimizer.state_dict() if c.explorer_keep_optimizer and self.explorer_optimizer is not None else None
        if self.explorer is not None:  # its engine wrappers and optimizer are replaced below
            self.dist.release(self.explorer, self.explorer_optimizer)
        if learner.adapter is not None:
            if self.explorer is None:
                backend = learner.backend.sharing(learner.model, adapter="explorer") if hasattr(learner.backend, "sharing") else None
                self.explorer = learner.sibling(backend=backend, value_head=self.needs_values, seed=c.seed + 1)
                self.explorer.add_lora(**self.lora_options(), name="explorer")
            theirs = dict(adapter_parameters(learner.model, learner.adapter))
            with torch.no_grad():
                for name, parameter in adapter_parameters(learner.model, "explorer"):
                    parameter.copy_(theirs[name.replace(".explorer.", f".{learner.adapter}.")])
            self.explorer.sync_weights()
        elif not isinstance(learner, LLMPolicy):  # the action-scoring policy copies itself
            self.explorer = learner.copy(value_head=self.needs_values, seed=c.seed + 1)
        else:
            model = copy.deepcopy(learner.model)
            backend = learner.backend.sharing(model) if hasattr(learner.backend, "sharing") else None
            self.explorer = LLMPolicy(
                model, learner.tokenizer, backend=backend, value_head=self.needs_values,
                micro_batch_size=learner.micro_batch_size, seed=c.seed + 1, autocast_dtype=learner.autocast_dtype,
            )
            if c.explorer_lora:
                self.explorer.add_lora()
        if self.needs_values:
            self.explorer.value_head.load_state_dict(learner.value_head.state_dict())
        self.explorer_optimizer = self._make_optimizer(self.explorer)
        if kept is not None:  # the same parameters in the same order: the moments carry over
            self.explorer_optimizer.load_state_dict(kept)

    def sync_due(self, it: int) -> bool:
        """Whether the explorer is re-synced before iteration ``it``'s rollout: every
        ``explorer_sync_every`` iterations, or once the learner overtakes it (``explorer_sync_on_overtake``).
        Read from the metric history, so a resumed run syncs where the uninterrupted one did."""
        c = self.config
        if it == 0 or self._gen_batch > 0:
            return False
        if c.explorer_sync_every and it % c.explorer_sync_every == 0:
            return True
        return c.explorer_sync_on_overtake and learner_overtook(self.history, c.explorer_overtake_window)

    def warm_up_explorer(self) -> tuple[int, int]:
        """Train the explorer alone on the dense reward for ``explorer_warmup_iterations``
        iterations of fresh tasks (their own task and sampling streams); its env steps and
        generated tokens, all ranks."""
        c = self.config
        steps = tokens = 0
        for k in range(c.explorer_warmup_iterations):
            with self.dist.full_weights(self.explorer):
                rollout = collect(
                    self.explorer, self.explorer_venv, self.collect_config(k, stream=WARMUP_STREAM), **self.tasks(k, WARMUP_STREAM),
                    source="explorer", row_seeds=self.row_seeds(k, c.explorer_group_size, stream=WARMUP_STREAM),
                    on_turn=self.rollout_reporter("explorer warm-up"),
                )
            self.explorer_update(rollout, k)
            steps += len(rollout.rows)
            tokens += sum(len(r.response_ids) for r in rollout.rows)
        steps, tokens = self.dist.sum([steps, tokens])
        return int(steps), int(tokens)

    def optimizers(self) -> list[torch.optim.Optimizer]:
        """The learner's optimizer and the explorer's: the lr schedule drives both."""
        return super().optimizers() + ([self.explorer_optimizer] if self.explorer_optimizer is not None else [])

    @property
    def gen_batch_stride(self) -> int:
        """The learner's and the explorer's trajectories of one rollout (``filter_groups``)."""
        return self.venv.num_envs + (self.explorer_venv.num_envs if self.explorer is not None else 0)

    def collect(self, it: int) -> Rollout:
        """The learner's rollout; the explorer plays the same tasks and its trajectories join the
        replay buffer. A later rollout of one iteration (``filter_groups``) adds its explorer
        trajectories to the iteration's, all of which the explorer's own update then reads."""
        c = self.config
        self._iteration_for_anneal = it
        if self.explorer is not None and it == 0 and self._gen_batch == 0 and c.explorer_warmup_iterations:
            self._warmup_steps, self._warmup_tokens = self.warm_up_explorer()
        tasks = self.tasks(it)
        with self.dist.full_weights(self.policy):
            learner = self.gen_batch_ids(collect(self.policy, self.venv, self.collect_config(it), **tasks, row_seeds=self.row_seeds(it, c.group_size),
                                                 on_turn=self.rollout_reporter()))
        earlier = self._explorer_rollout if self._gen_batch > 0 else None
        self._explorer_rollout = None
        if self.explorer is not None:
            self._synced = self.sync_due(it)
            if self._synced:
                self.sync_explorer()
            with self.dist.full_weights(self.explorer):
                explored = self.gen_batch_ids(collect(
                    self.explorer, self.explorer_venv, self.collect_config(it, stream=5), **tasks,
                    source="explorer", traj_offset=self.venv.num_envs, row_seeds=self.row_seeds(it, c.explorer_group_size, stream=5),
                    on_turn=self.rollout_reporter("explorer"),
                ))
            self._explorer_rollout = explored if earlier is None else concat_rollouts([earlier, explored])
            self.buffer = [(born, r) for born, r in self.buffer if replayable(born, it, c.replay_age)] + [(it, explored)]
        return learner

    def update_rollout(self, rollout: Rollout, it: int) -> Rollout:
        """The learner's rollout with its replayed explorer trajectories: the groups it is updated on."""
        if self.explorer is None:
            return rollout
        return merge_replay(rollout, self.buffer, it, self.config.replay_age)

    def train_on(self, rollout: Rollout, it: int) -> dict[str, float]:
        if self.explorer is None:
            return super().train_on(rollout, it)
        c = self.config
        merged = self.update_rollout(rollout, it)
        metrics = self._learner_update(merged, it)
        metrics.update(group_outcomes(self.gathered(merged).trajectories))  # the groups the learner was updated on
        explorer_rollout = self._explorer_rollout
        played = task_labels(self.gathered(rollout).trajectories + self.gathered(explorer_rollout).trajectories)
        transfer, self.pending_labels = revisits(self.pending_labels, played)
        if c.transfer_tasks:
            self.run_labels = run_labels(self.run_labels, played)
        metrics.update({f"explorer/{k}": v for k, v in transfer.items()})
        metrics.update({k.replace("rollout/", "explorer/"): v for k, v in self.rollout_metrics(self.gathered(explorer_rollout)).items()})
        replayed, steps, tokens = self.dist.sum([
            len(merged.rows) - len(rollout.rows), len(explorer_rollout.rows), sum(len(r.response_ids) for r in explorer_rollout.rows),
        ])  # summed over ranks
        metrics["explorer/replayed_rows"] = float(replayed)
        metrics["explorer/env_steps"] = int(steps) + self._warmup_steps
        metrics["explorer/generated_tokens"] = int(tokens) + self._warmup_tokens
        metrics["explorer/synced"] = float(self._synced)
        metrics["explorer/success_gap"] = metrics["explorer/success"] - self.rollout_metrics(self.gathered(rollout))["rollout/success"]
        if self._warmup_steps:
            metrics["explorer/warmup_env_steps"] = self._warmup_steps
            metrics["explorer/warmup_generated_tokens"] = self._warmup_tokens
            self._warmup_steps = self._warmup_tokens = 0
        metrics.update(self.explorer_update(explorer_rollout, it))
        return metrics

    def explorer_update(self, explorer_rollout: Rollout, it: int) -> dict[str, float]:
        """``explorer_updates`` base-algorithm updates of the explorer on its own rollout's dense reward."""
        metrics = {}
        for _ in range(self.config.explorer_updates):
            view = Trainer.reward_view(self, explorer_rollout, "dense")
            batch = to_batch(explorer_rollout.rows, self.explorer.pad_token_id, self.explorer.device)
            with self.dist.full_weights(self.explorer):
                old_logprobs, old_values = self.old_policy_outputs(self.explorer, batch)
            estimate = self.estimate(view, batch, old_values)
            stats = self.update(self.explorer, self.explorer_optimizer, batch, estimate, it, old_values=old_values, old_logprobs=old_logprobs,
                                label="explorer")
            metrics.update({k.replace("train/", "explorer/"): v for k, v in stats.items()})
        return metrics

    def learner_inputs(self, merged: Rollout) -> dict[str, Any]:
        """Batch, outcome view, old log-probs and importance weights of a learner update (no side effects)."""
        c = self.config
        view = super().reward_view(merged, c.reward)
        batch = to_batch(merged.rows, self.policy.pad_token_id, self.policy.device)
        replayed = torch.tensor([r.source != "learner" for r in merged.rows])
        rows = torch.nonzero(replayed).flatten()
        with self.dist.full_weights(self.policy):
            recomputed, old_values = self.old_policy_outputs(self.policy, batch)
            learner_logp = None
            if len(rows):
                learner_logp = recomputed[rows] if recomputed is not None else self.policy.logprobs(
                    batch.index(rows), temperature=c.temperature, max_tokens=c.max_tokens_per_micro_batch
                )["logprobs"]
        old = batch.old_logprobs.clone() if recomputed is None else recomputed
        weights = torch.ones_like(old)
        if learner_logp is not None:
            sub = batch.index(rows)
            old[rows] = learner_logp
            if c.is_level == "step":
                weights[rows] = truncated_is_weights(learner_logp, sub.old_logprobs, sub.response_mask, cap=c.is_cap)
            elif c.is_level == "trajectory":
                traj_ids = torch.tensor([merged.rows[i].traj_id for i in rows.tolist()])
                weights[rows] = trajectory_is_weights(learner_logp, sub.old_logprobs, sub.response_mask, traj_ids, cap=c.is_cap)
        return {"view": view, "batch": batch, "old_logprobs": old, "is_weights": weights, "old_values": old_values}

    def _learner_update(self, merged: Rollout, it: int) -> dict[str, float]:
        inputs = self.learner_inputs(merged)
        view, kl_metrics = self.kl_in_reward(inputs["view"], inputs["batch"], inputs["old_logprobs"])
        estimate = self.estimate(view, inputs["batch"], inputs["old_values"])
        metrics = self.update(
            self.policy, self.optimizer, inputs["batch"], estimate, it,
            old_values=inputs["old_values"], old_logprobs=inputs["old_logprobs"], is_weights=inputs["is_weights"],
        )
        metrics.update(kl_metrics)
        metrics["train/reward_mean"] = float(inputs["view"].episode.mean())
        metrics.update(self.replay_metrics(merged, inputs))
        return metrics

    def replay_metrics(self, merged: Rollout, inputs: dict[str, Any]) -> dict[str, float]:
        """The importance weights of the replayed rows by outcome, and how far the update moved the
        learner's log-probs of the winning actions, replayed and its own: one extra forward pass,
        without gradients, over the winning rows only (``replay_metrics``), pooled over ranks."""
        batch = inputs["batch"]
        won_traj = {t.traj_id: t.won for t in merged.trajectories}
        won = torch.tensor([bool(won_traj.get(r.traj_id, False)) for r in merged.rows], dtype=torch.bool)
        replayed = torch.tensor([r.source != "learner" for r in merged.rows], dtype=torch.bool)
        mask = batch.response_mask.cpu()
        stats = is_weight_stats(inputs["is_weights"].cpu()[replayed], mask[replayed], won[replayed])
        winners = torch.nonzero(won).flatten()
        after = torch.zeros_like(inputs["old_logprobs"])
        if len(winners):
            with torch.no_grad(), self.dist.full_weights(self.policy):
                after[winners] = self.policy.logprobs(
                    batch.index(winners), temperature=self.config.temperature, max_tokens=self.config.max_tokens_per_micro_batch
                )["logprobs"].to(after.dtype)
        before, after = inputs["old_logprobs"].cpu(), after.cpu()
        for name, rows in (("replay_win", won & replayed), ("own_win", won & ~replayed)):
            tokens, gain = logp_gain(before[rows], after[rows], mask[rows])
            stats[f"{name}_logp_gain"], stats[f"{name}_logp_tokens"] = gain, tokens
        if self.dist.world_size > 1:  # every rank's rows, as one process would count them
            stats = from_sums(self.dist.sum(summed(stats)))
        return {f"explorer/{k}": v for k, v in stats.items()}

    # -- checkpoints
    def state(self) -> dict[str, Any]:
        """The base state, the explorer's weights and optimizer (in the engine's own sharded state
        under FSDP / DeepSpeed) and every rank's replay buffer (a collective: ``save_checkpoint``
        calls it on every rank, and rank 0 writes it)."""
        state = super().state()
        if self.explorer is not None:
            if not self.dist.shards_state:
                state["explorer"] = self.explorer.state_dict()
                state["explorer_optimizer"] = self.explorer_optimizer.state_dict()
            state["buffers"] = self.dist.gather([self.buffer])  # rank-local, with its groups
            state["pending_labels"] = self.dist.gather([self.pending_labels])
            if self.config.transfer_tasks:
                state["run_labels"] = self.dist.gather([self.run_labels])
                state["transfer_start"] = self._start_weights
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        if self.explorer is None:
            return
        if "explorer" in state:
            self.explorer.load_state_dict(state["explorer"])
            load_optimizer_state(self.explorer_optimizer, state["explorer_optimizer"], "explorer_optimizer")
        if "buffer" in state:  # written by one process before buffers were kept per rank
            state["buffers"] = [state["buffer"]]
        buffers = state.get("buffers")
        if buffers is not None:
            if len(buffers) != self.dist.world_size:
                raise UserError(
                    f"this RSPO explorer run was saved by {len(buffers)} rank(s) and resumes under {self.dist.world_size}: "
                    f"its replay buffers belong to the groups each rank played, so resume it under {len(buffers)} rank(s)"
                )
            self.buffer = list(buffers[self.dist.rank])
        labels = state.get("pending_labels")  # absent from checkpoints written before it was logged
        if labels is not None and len(labels) == self.dist.world_size:
            self.pending_labels = dict(labels[self.dist.rank])
        if self.config.transfer_tasks and state.get("transfer_start") is not None:
            self.run_labels = _merged_labels(state["run_labels"])  # every rank's: a union, whatever the ranks now
            self._start_weights = state["transfer_start"]

    # -- transfer of the explorer's wins
    def _open_run(self, total: int, **kwargs: Any):
        folder = super()._open_run(total, **kwargs)
        if self.config.transfer_tasks and self._start_weights is None and self.iteration == 0:
            self._start_weights = detached_copy(self.policy.state_dict())
        return folder

    def measure_transfer(self, temperature: float | None = None) -> dict[str, Any]:
        """Did the goals only the explorer won become goals the learner wins? Up to
        ``transfer_tasks`` such goals and as many that nobody won are played ``transfer_episodes``
        times each by the learner's start and final weights (``training/transfer.py``); the result's
        ``transfer`` is the explorer-only goals' gain less the nobody-won goals' gain
        (``docs/metrics.md``; None where a label has no goals). ``temperature`` overrides
        ``eval_temperature``. The end of ``learn()`` calls it when ``transfer_tasks`` is set; call it
        again for another temperature."""
        c = self.config
        if not c.transfer_tasks:
            raise UserError("measure_transfer() needs the labels and start weights a run keeps when transfer_tasks > 0")
        if self._start_weights is None:
            raise UserError("measure_transfer() needs the learner's start weights: they are kept from the first learn() of a "
                            "run with transfer_tasks > 0 (a checkpoint written without it has none)")
        labels = _merged_labels(self.dist.gather([self.run_labels]))
        result = measure_transfer(self, self._start_weights, labels, tasks=c.transfer_tasks, episodes=c.transfer_episodes,
                                  seed=c.seed, temperature=temperature)
        return _nan_to_none({**result, "temperature": c.eval_temperature if temperature is None else temperature})

    def _save_results(self) -> None:
        """The base's end products, after ``transfer.json`` (``measure_transfer``) when asked for."""
        if self.config.transfer_tasks and self.history and self._start_weights is None and self.dist.is_main:
            print("transfer not measured: this run was resumed from a checkpoint written without transfer_tasks, "
                  "which kept no start weights")
        elif self.config.transfer_tasks and self.history:
            self.transfer = self.measure_transfer()
            if self.dist.is_main:
                text = json.dumps(self.transfer, indent=2, allow_nan=False)
                write_text_atomic(self._require_output_dir() / "transfer.json", text + "\n")
        super()._save_results()


def _merged_labels(parts: list[dict[Any, str]]) -> dict[Any, str]:
    """One goal-label map from several ranks' (or checkpoints'): a goal keeps its strongest label."""
    labels: dict[Any, str] = {}
    for part in parts:
        labels = run_labels(labels, {task: (label, 0.0) for task, label in part.items()})
    return labels


def _nan_to_none(value: Any) -> Any:
    """No NaN (a label without goals has no success): None, which JSON writes as ``null`` for strict readers."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {key: _nan_to_none(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(item) for item in value]
    return value
