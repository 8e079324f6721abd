"""The loop every trainer shares: collect -> advantages -> update -> evaluate -> log -> checkpoint.

- ``Trainer``: the base class. An algorithm supplies its estimator (``estimate``) and, for PPO,
  a value head; RSPO overrides ``collect`` and the reward view.
- ``RewardView`` / ``Estimate`` (from ``algos/estimates.py``): what an estimator reads and answers.

Reading ``Trainer.learn`` tells the whole story (CleanRL's habit): each iteration collects a
grouped rollout with one batched generation call per turn, turns rows into the chosen training
reward, computes advantages with a pure estimator from ``advantages.py``, runs clipped policy-
gradient updates with the pure losses of ``losses.py``, evaluates on held-out tasks every
``eval_every`` iterations (each evaluation's per-episode records go to ``evaluations/``:
``eval_records.py``), appends a metrics row (``metrics.jsonl`` / ``metrics.csv`` /
TensorBoard when installed) and writes an atomic checkpoint. Every ``learn()`` writes to a run
folder (``output_dir``, else a new ``runs/<algo>-<env>-<timestamp>/``) made on its first call, and
ends by saving ``policy/`` and ``learning_curve.png`` there; a trainer that only evaluates writes
nothing.

Determinism: every random draw of iteration ``k`` (tasks, sampling, mini-batch order) is seeded
from ``(config.seed, k)``, so a run resumed from a checkpoint continues exactly as the
uninterrupted run would.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import gc
import json
import os
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch

from rspo_gym.algos.estimates import Estimate, RewardView
from rspo_gym.training.checkpoints import (
    claim_run_dir, load_optimizer_state, read_checkpoint, remove_leftovers, remove_stale, restore_metrics, run_identity, save_tag,
    write_checkpoint,
)
from rspo_gym.atomic import atomic_folder, atomic_write
from rspo_gym.cpu_settings import one_thread, variable_problems
from rspo_gym.training.config import TrainerConfig, save_config
from rspo_gym.training.eval_records import evaluation_record, trim_evaluations, write_evaluation
from rspo_gym.training.defaults import resolve_config, resolve_model
from rspo_gym.training.dynamic_sampling import concat_rollouts, informative_groups, offset_ids, select_groups
from rspo_gym.training.distributed import chain_order, detect, group_share, rank_minibatches
from rspo_gym.training.envs import ProcessSettings, default_eval_split, env_pool_settings, make_vector_env
from rspo_gym.algos.kl_control import kl_reward_penalty, next_kl_coef
from rspo_gym.algos.losses import agg_loss, forced_token_mask, kl_penalty, ppo_policy_loss, truncated_is_weights, value_loss
from rspo_gym.training.presets import preset_overrides
from rspo_gym.training.progress import RolloutProgress, TrainingProgress, another_iteration_fits, quiet_third_party_progress
from rspo_gym.training.reporting import check_report_to, make_reporter
from rspo_gym.algos.rewards import episode_scores, training_step_rewards
from rspo_gym.training.runs import check_run_folder, create_run_dir, lock_run_dir, run_name, runs_dir, unlock_run_dir
from rspo_gym.algos.schedules import lr_factor
from rspo_gym.training.validation import (
    check_env_id, check_eval_split, check_generation_backend, check_process_reward, check_task_ids, check_text_env, positive_int,
    unknown_fields_error,
)
from rspo_gym.errors import UserError
from rspo_gym.rollout.generation import GenerationConfig
from rspo_gym.rollout.collector import CollectConfig, CollectionDeadline, RolloutCount, collect
from rspo_gym.rollout.trajectory import Rollout, TrainingBatch, Trajectory, group_outcomes, micro_batches, to_batch
from rspo_gym.rollout.vector import GroupedVectorEnv

__all__ = ["Trainer", "RewardView", "Estimate", "PRECISIONS", "resolve_precision", "loss_weights", "float32_master_weights"]

PRECISIONS = ("fp32", "bf16-mixed", "bf16")


def _seed(*parts: int) -> int:
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


def _check_history(history: Any) -> None:
    """A checkpoint's history is what ``_log`` wrote: a list of rows that JSON can hold; a row
    nested thousands deep would fail (``RecursionError``) when ``metrics.jsonl`` is rewritten."""
    if not isinstance(history, list) or not all(isinstance(row, dict) for row in history):
        raise ValueError("its history is not a list of metric rows")
    try:
        for row in history:
            json.dumps(row)
    except RecursionError:
        raise ValueError("its history holds a row nested too deep for JSON") from None


def _engine_folder(checkpoint: Path) -> Path:
    """Where a sharded engine's states live beside ``checkpoint.pt``: ``checkpoint_engine/``, one
    sub-folder per save, named in the checkpoint that goes with it."""
    return checkpoint.with_name(checkpoint.stem + "_engine")


def resolve_precision(precision: str | None, device_type: str) -> str:
    """The config's precision, or the default for a device: ``bf16-mixed`` on CUDA, else ``fp32``."""
    if precision is None:
        return "bf16-mixed" if device_type == "cuda" else "fp32"
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS} or None, got {precision!r}")
    return precision


def loss_weights(
    micro_rows: list[int], micro_tokens: list[float], mini_batch_size: int, agg: str,
    total_rows: int | None = None, total_tokens: float | None = None, batch_rows: int | None = None,
) -> list[float]:
    """Weights of the micro-batch losses of one mini-batch, so that accumulation equals one batch.

    Token-mean losses weigh each micro-batch by its share of the mini-batch's tokens, other modes
    by its share of rows (rows with at least one loss token: the sequence means skip the others).
    A partial mini-batch (the last one, when the rollout's row count is not a multiple of
    ``mini_batch_size``) is scaled by ``batch_rows / mini_batch_size`` (default ``batch_rows``: the
    rows counted), as gradient accumulation scales a short last window: a few rows do not get a
    full step's gradient.

    >>> loss_weights([2, 2], [30.0, 10.0], 4, "token-mean")
    [0.75, 0.25]
    >>> loss_weights([1], [10.0], 4, "seq-mean-token-mean")
    [0.25]

    Across ranks, ``total_rows`` / ``total_tokens`` are the mini-batch's counts summed over every
    rank (default: these micro-batches' own), so each rank's weights are its share of the global
    mini-batch: N ranks' weighted gradients add up to one rank's over the same rows.

    >>> loss_weights([2], [30.0], 4, "token-mean", total_rows=4, total_tokens=40.0)
    [0.75]
    """
    rows = sum(micro_rows) if total_rows is None else total_rows
    partial = min((rows if batch_rows is None else batch_rows) / mini_batch_size, 1.0)
    if agg == "token-mean":
        tokens = max(sum(micro_tokens) if total_tokens is None else total_tokens, 1.0)
        return [t / tokens * partial for t in micro_tokens]
    return [r / max(rows, 1) * partial for r in micro_rows]


def float32_master_weights(policy) -> None:
    """Cast ``policy``'s trainable weights to float32 in place (frozen ones keep their dtype).

    Under ``bf16-mixed`` (or ``fp32``) AdamW must step on float32 weights: on bfloat16 weights an
    update below half a weight's spacing (2^-9 of its magnitude) rounds away, so one step at lr
    1e-6 changed 0.13 % of a bfloat16 model's weights. verl's actor keeps float32 master weights
    the same way; the price is float32 memory for the trained weights. A LoRA learner's frozen
    base stays as it came (bfloat16 halves its memory and it never steps).
    """
    for parameter in policy.policy_parameters():
        if parameter.dtype != torch.float32:
            parameter.data = parameter.data.to(torch.float32)


class IterationGarbageCollection:
    """How a training loop runs Python's cyclic garbage collector: once an iteration, over the
    objects made since entry, instead of whenever allocations pass a threshold.

    - Objects alive on entry are frozen (``gc.freeze``) until exit: after importing torch and
      building envs they are ~460,000 (modules' functions, the worlds, the tokenizer's memo), and
      a full collection walking them all (~0.3 s) came every few iterations of the fast policy,
      13 % of its CPU time.
    - Automatic collection is off inside (``gc.disable``); ``iteration_starts`` collects the
      young generations once. The threshold (700 allocations) fired ~35 times an iteration, each
      pass walking the rollout's rows again (~5 % of the time), while an iteration leaves a few
      hundred objects in cycles.
    - Every ``full_every``-th iteration the collection is a full one, over what survived earlier
      iterations (the frozen objects stay out of it): garbage in a cycle that was still reachable
      when its iteration's collection ran (an LLM's outputs, say) is freed within that many
      iterations rather than when the loop ends.

    ``__exit__`` restores the collector as it found it, after an exception too; a process that
    froze objects or turned the collector off itself keeps its settings (and collects nothing here).
    """

    def __init__(self, full_every: int = 25):
        if full_every < 1:
            raise ValueError(f"full_every must be at least 1, got {full_every}")
        self.full_every = full_every
        self.iterations = 0

    def __enter__(self) -> "IterationGarbageCollection":
        self._freezes = not gc.get_freeze_count()
        self._automatic = gc.isenabled()
        if self._freezes:
            gc.freeze()
        gc.disable()
        return self

    def iteration_starts(self) -> None:
        self.iterations += 1
        if self._automatic:
            gc.collect(2 if self.iterations % self.full_every == 0 else 1)

    def __exit__(self, *exc_info: object) -> None:
        if self._automatic:
            gc.enable()
        if self._freezes:
            gc.unfreeze()


class Trainer:
    """Shared training loop; subclasses define ``estimate`` (and PPO a value head).

    Args:
        env: an env id (``"rspo/ALFWorld-v0"``), an env instance (re-made from its spec), a
            factory, or a ``GroupedVectorEnv``.
        model: a preset (``"tiny"``: on ALFWorld / WebShop that env's warm start ``tiny-alfworld``
            / ``tiny-webshop``, elsewhere the random model; ``"tiny-untrained"``: the random model
            everywhere; ``"smollm2-135m"``), a Hugging Face id / local path, or an ``LLMPolicy``;
            ``"drrn"`` (or an ``ActionScorerPolicy``): the fast action-scoring policy.
        config: the algorithm's config dataclass; keyword ``overrides`` replace its fields. Fields
            left None that depend on the env or the model are filled in (``training/defaults.py``).
        preset: named settings applied before ``overrides`` (``"verl-agent"``: verl-agent's GiGPO
            scripts, docs/verl_agent.md; ``training/presets.py``).
    """

    algo = "base"
    config_class = TrainerConfig
    needs_values = False
    _collect_deadline: float | None = None  # set by learn() under a time budget; training rollouts stop there
    _last_eval_s = 0.0  # how long the last evaluate() took: the time a budget keeps for the final one
    _gen_batch = 0  # which rollout of the iteration is being sampled (filter_groups samples several)
    _display: TrainingProgress | None = None  # learn()'s display while it runs: rollouts report to it
    critic = None  # PPO's separate LM critic (``policies/critic.py``); None: a value head on the policy, or no critic
    critic_optimizer: torch.optim.Optimizer | None = None

    def __init__(self, env: Any, model: Any = "tiny", config: TrainerConfig | None = None, *, preset: str | None = None, **overrides: Any):
        config = config if config is not None else self.config_class()
        if not isinstance(config, self.config_class):
            raise TypeError(f"{type(self).__name__} takes a {self.config_class.__name__}, got {type(config).__name__}")
        if preset is not None:  # named settings (``presets.py``) under the fields given beside them
            overrides = {**preset_overrides(preset, env, type(config)), **overrides}
        unknown = set(overrides) - set(config.to_dict())
        if unknown:
            raise unknown_fields_error(type(config), unknown)
        if isinstance(overrides.get("output_dir"), os.PathLike):  # a pathlib.Path, as SB3's paths take; the config keeps text
            overrides["output_dir"] = os.fspath(overrides["output_dir"])
        self.config = replace(config, **overrides)  # validated by the config (``validation.py``)
        for problem in variable_problems():  # the command line refuses them; a script is told, and runs
            warnings.warn(problem, RuntimeWarning, stacklevel=2)
        check_env_id(env)
        check_process_reward(env, self.config.process_reward, self.config.process_weights)
        check_report_to(self.config.report_to)  # the package it needs is installed
        check_generation_backend(self.config.generation_backend)
        torch.manual_seed(self.config.seed)
        self.env_spec = env
        self.dist = detect()  # one process, or this rank of a launched job (training/distributed.py)
        if self.dist.shards_state and self.config.lora_r > 0:
            raise UserError(
                "a LoRA learner under FSDP / DeepSpeed is not supported: its trainable state is small, so "
                "run it under DDP (accelerate launch without an FSDP or DeepSpeed config), or set lora_r=0"
            )
        if self.config.filter_groups and self.dist.world_size > 1:
            raise UserError("filter_groups samples until this process has num_groups informative groups: run it in one process, or set filter_groups=False")
        self.groups = self.dist.groups(self.config.num_groups)  # the task groups this rank plays
        self.venv, self.env_factory = make_vector_env(
            env,
            len(self.groups),
            self.config.group_size,
            env_kwargs=self.config.env_kwargs,
            process=ProcessSettings(self.config.process_reward, self.process_gamma, dict(self.config.process_weights), self.config.process_once),
            **env_pool_settings(self.config),
        )
        self.env_id = self.venv.spec.id if self.venv.spec is not None else None
        check_text_env(self.venv.single_observation_space, self.venv.single_action_space, self.env_id)
        if self.env_factory is not None and self.config.train_task_ids:
            check_task_ids(self.env_factory(), self.config.train_task_ids, "train_task_ids", "the training env")
        eval_split = self.config.eval_split or default_eval_split(self.env_id)
        if self.env_factory is not None and eval_split:
            # the ids are checked where learn() will evaluate on them (a caller evaluating its own way may carry others)
            evaluated_ids = self.config.eval_task_ids if self.config.eval_every > 0 else None
            check_eval_split(self.env_factory.with_kwargs(split=eval_split), eval_split, evaluated_ids)
        if isinstance(model, (str, os.PathLike)):
            model = resolve_model(str(model), self.env_id)
        self.model_name: str | None = model if isinstance(model, str) else None  # None: a given LLMPolicy
        self.config = resolve_config(self.config, self.env_id, self.model_name)
        self.policy = self._make_policy(model)
        if self.config.gradient_checkpointing:
            self.policy.enable_gradient_checkpointing()
        self.reference = self._make_reference(self.policy) if self.config.kl_coef > 0 else None  # before an engine shards the policy
        self.kl_beta = self.config.kl_coef  # the in-reward KL coefficient, moved by an adaptive controller
        self._before_engine()
        self.optimizer = self._make_optimizer(self.policy)
        self.iteration = 0
        self.history: list[dict[str, Any]] = []
        self._eval_venvs: dict[tuple[str | None, int], GroupedVectorEnv] = {}
        self._reporter = None  # made by the first _log, in the run folder
        self.output_dir = Path(self.config.output_dir) if self.config.output_dir else None  # None: learn() picks one
        self._run_open = False  # made, with config.json, by the first learn()

    # ------------------------------------------------------------------ the story
    @contextlib.contextmanager
    def _displaying(self, progress: TrainingProgress) -> Iterator[None]:
        """``progress`` is the display rollouts report to while the loop runs; it is closed when the
        loop ends, by an exception too, since an open bar's redraw thread keeps drawing over
        whatever comes next."""
        self._display = progress
        try:
            yield
        finally:
            self._display = None
            progress.close()

    def learn(
        self,
        iterations: int | None = None,
        *,
        callback: Callable[["Trainer", dict], bool | None] | None = None,
        resume: bool = False,
        overwrite: bool = False,
        time_budget_s: float | None = None,
    ) -> list[dict[str, Any]]:
        """Train until ``iterations`` (total, counting resumed ones); return the metric history.

        ``resume=True`` continues from ``output_dir/checkpoint.pt`` (it needs an ``output_dir``:
        without one every run starts a new folder), or from the start when the run left none; the
        checkpoint must be intact and belong to this trainer's run (``training/checkpoints.py``).
        The history is then the run's whole record, the checkpoint's rows and the new ones, as the
        uninterrupted run's would be; ``metrics.jsonl`` is rewritten to match it. A first
        ``learn()`` that is no resume refuses a folder holding another run unless ``overwrite``.
        Asking for fewer iterations than the run has done is an error. ``callback`` gets
        ``(trainer, metrics)`` after every iteration; returning False stops training.
        ``time_budget_s`` is a limit on this call: training ends at the first iteration after which
        another one (as long as the last) and the final evaluation (as long as the last
        ``evaluate()``) would not fit, and that iteration is evaluated, so the history ends with a
        held-out measurement. An iteration whose rollout is still running when the budget (less
        that evaluation) runs out is dropped and training stops; both are said on the console.
        When training ends (all iterations done, the budget spent or the callback's stop),
        ``policy/`` and ``learning_curve.png`` are saved in the run folder.
        """
        started = time.perf_counter()
        deadline = None if time_budget_s is None else started + time_budget_s
        total = positive_int("iterations", self.config.iterations if iterations is None else iterations)
        if resume and self.output_dir is None:
            raise UserError("resume=True needs output_dir: without one, learn() starts a new run folder")
        if self.config.generation_backend == "vllm-server" and self.config.vllm_weight_sync == "none":
            raise UserError("vllm_weight_sync='none' leaves the server generating with its launch weights: "
                            "training needs vllm_weight_sync='nccl' ('none' is for evaluate())")
        self._open_run(total, resume=resume, overwrite=overwrite)
        progress = TrainingProgress(
            self.config.progress and self.dist.is_main, f"{self.algo} {self.env_id or ''}".strip(), total, self.iteration,
            time_budget_s, speaks=self.dist.is_main,
        )
        with IterationGarbageCollection() as garbage, self._displaying(progress), self._threads():
            for it in range(self.iteration, total):
                garbage.iteration_starts()
                start = time.perf_counter()
                reserve = self._last_eval_s if self.config.eval_every > 0 else 0.0
                # one rank stopping mid-collection would leave the others waiting in the update
                self._collect_deadline = None if deadline is None or self.dist.world_size > 1 else deadline - reserve
                progress.phase(it, "collecting")
                try:
                    rollout, sampling = self.collect_batch(it)
                except CollectionDeadline:
                    progress.say(f"time budget reached while collecting iteration {it + 1}: its partial rollout is "
                                 f"dropped and training stops after {it} iterations")
                    if self.history:
                        self.save_checkpoint()
                    break
                finally:
                    self._collect_deadline = None
                self.policy.release_generation_memory()  # vLLM's sleep mode: the update gets the GPU
                collected = time.perf_counter()
                metrics = {"iteration": it + 1, **self.rollout_metrics(self.gathered(rollout)), **sampling}
                progress.phase(it, "updating")
                metrics["train/lr"] = self.schedule_lr(it, total)
                metrics.update(self.train_on(rollout, it))
                steps, tokens = self.dist.sum([len(rollout.rows), sum(len(r.response_ids) for r in rollout.rows)])
                del rollout  # freed now: the next iteration's garbage collection would walk its rows again
                metrics["env_steps"] = int(steps) + metrics.get("explorer/env_steps", 0) + metrics.get("filter/dropped_env_steps", 0)
                metrics["generated_tokens"] = int(tokens) + metrics.get("explorer/generated_tokens", 0) + metrics.get("filter/dropped_tokens", 0)
                metrics["time/collect_s"] = collected - start
                metrics["time/update_s"] = time.perf_counter() - collected
                out_of_time = not another_iteration_fits(time.perf_counter(), deadline, time.perf_counter() - start, reserve)
                out_of_time = self.dist.sum([float(out_of_time)])[0] > 0  # every rank stops together
                record = None
                if self._eval_due(it, total) or (out_of_time and self.config.eval_every > 0):
                    progress.phase(it, "evaluating on held-out tasks")
                    env_steps = sum(row["env_steps"] for row in self.history) + metrics["env_steps"]
                    evaluation, record = self.evaluate_record(iteration=it + 1, env_steps=env_steps)
                    metrics.update(evaluation)
                metrics["time/iteration_s"] = time.perf_counter() - start
                self.iteration = it + 1
                self.history.append(metrics)
                if self.dist.is_main:
                    if record is not None:
                        write_evaluation(self.output_dir, record)
                    self._log(metrics)
                if self._checkpoint_due(it, total):
                    self.save_checkpoint()
                progress.iteration_done(it, metrics["rollout/success"])
                if out_of_time and it + 1 < total:
                    progress.say(f"time budget: stopping after iteration {it + 1}, since another would not fit")
                if out_of_time or (callback is not None and callback(self, metrics) is False):
                    if not self._checkpoint_due(it, total):
                        self.save_checkpoint()
                    break
        self._save_results()
        self.dist.barrier()
        return self.history

    def _threads(self) -> contextlib.AbstractContextManager:
        """The drrn scorer trains and plays on one torch thread unless the user chose a count
        (``cpu_settings.one_thread``): its matrices are too small to share out, so a second thread
        only waits, and spins on a core another process needs. An LLM keeps torch's threads."""
        from rspo_gym.policies.action_scorer import ActionScorerPolicy

        return one_thread() if isinstance(self.policy, ActionScorerPolicy) else contextlib.nullcontext()

    def schedule_lr(self, it: int, total: int) -> float:
        """Set every optimizer group's lr for iteration ``it`` of ``total`` (``lr_scheduler``);
        the policy's lr. Each group keeps its base lr as ``base_lr`` (saved with the optimizer)."""
        c = self.config
        factor = lr_factor(it, total, c.lr_scheduler, c.lr_warmup_steps_ratio, c.min_lr_ratio)
        for optimizer in self.optimizers():
            for group in optimizer.param_groups:
                group["lr"] = group.setdefault("base_lr", group["lr"]) * factor
        return self.optimizer.param_groups[0]["lr"]

    def optimizers(self) -> list[torch.optim.Optimizer]:
        """Every optimizer the schedule drives (a separate critic's; RSPO adds its explorer's)."""
        return [self.optimizer] + ([self.critic_optimizer] if self.critic_optimizer is not None else [])

    # ------------------------------------------------------------------ collect
    def collect_config(self, it: int, *, evaluation: bool = False, stream: int = 1) -> CollectConfig:
        """Sampling settings of iteration ``it``; ``stream`` separates the random streams of policies."""
        c = self.config
        temperature = c.eval_temperature if evaluation else c.temperature
        seed = _seed(c.eval_seed) if evaluation else _seed(c.seed, it, stream, *self._draw())
        return CollectConfig(
            generation=GenerationConfig(
                max_new_tokens=c.max_new_tokens, temperature=temperature, top_p=c.top_p, seed=seed
            ),
            history_length=c.history_length,
            prompt_format=c.prompt_format or "window",
            think=c.think,
            constrained=c.constrained,
            max_turns=c.max_turns,
            max_prompt_length=c.max_prompt_length,
            deadline=None if evaluation else self._collect_deadline,
        )

    def tasks(self, it: int, stream: int = 0) -> dict[str, Any]:
        """The reset arguments of this rank's groups on iteration ``it``: seeds, or task ids from
        ``train_task_ids``. Drawn for all ``num_groups`` from the global seed and then cut to the
        rank's share, so the tasks played do not depend on the number of ranks. ``stream`` > 0
        draws another iteration's worth of tasks (RSPO's explorer warm-up), 0 the learner's."""
        c = self.config
        extra = (*self._draw(), stream) if stream else self._draw()
        if c.train_task_ids:
            rng = np.random.default_rng(_seed(c.seed, it, 2, *extra))
            replace_ = len(c.train_task_ids) < c.num_groups
            chosen = rng.choice(np.asarray(c.train_task_ids), size=c.num_groups, replace=replace_)
            return {"task_ids": [int(chosen[g]) for g in self.groups]}
        return {"seed": _seed(c.seed, it, 3, *extra) % (2**31 - c.num_groups) + self.groups.start}

    def row_seeds(self, it: int, group_size: int, stream: int = 1) -> list[int]:
        """Sampling seeds of this rank's sub-envs on iteration ``it``: one per (global group,
        member), so a trajectory is the same whichever rank or batch plays it."""
        return [_seed(self.config.seed, it, stream, g, m, *self._draw()) for g in self.groups for m in range(group_size)]

    def _draw(self) -> tuple[int, ...]:
        """What sets a later rollout of one iteration (``filter_groups``) apart in its seeds: nothing
        for the first, so a run without filtering draws what it always drew."""
        return (self._gen_batch,) if self._gen_batch else ()

    @property
    def gen_batch_stride(self) -> int:
        """Trajectory ids one rollout of an iteration spans: later rollouts start their ids there."""
        return self.venv.num_envs

    def gen_batch_ids(self, rollout: Rollout) -> Rollout:
        """A rollout with ids past those of the iteration's earlier rollouts (``filter_groups``)."""
        b = self._gen_batch
        return offset_ids(rollout, b * self.gen_batch_stride, b * len(self.groups))

    def collect_batch(self, it: int) -> tuple[Rollout, dict[str, float]]:
        """The rollout iteration ``it`` trains on, and its sampling metrics.

        Under ``filter_groups`` (DAPO's dynamic sampling): rollouts of fresh tasks are sampled
        until ``num_groups`` informative groups (``informative_groups`` of the groups the update
        reads, ``update_rollout``) are found, at most ``max_num_gen_batches`` of them (0: no cap);
        the last one allowed fills the places left with its other groups (verl-agent keeps its
        last try whole). The batch is cut to ``num_groups`` groups, as verl cuts to its batch size.
        """
        c = self.config
        if not c.filter_groups:
            return self.collect(it), {}
        need = len(self.groups)
        kept: list[Rollout] = []
        found = dropped_steps = dropped_tokens = 0
        gen_batches = 0
        while found < need:
            self._gen_batch = gen_batches
            try:
                part = self.collect(it)
            finally:
                self._gen_batch = 0
            gen_batches += 1
            view = self.reward_view(self.update_rollout(part, it), self.reward_kind(it))
            first = {}
            for row, (group, traj) in enumerate(zip(view.group_ids.tolist(), view.traj_ids.tolist())):
                first.setdefault(traj, (group, float(view.episode[row])))
            useful = informative_groups([g for g, _ in first.values()], [score for _, score in first.values()])
            take = useful[:need - found]
            found += len(take)
            last = c.max_num_gen_batches > 0 and gen_batches >= c.max_num_gen_batches
            if last:  # the cap: the places left go to this rollout's other groups
                played = dict.fromkeys(t.group_id for t in part.trajectories)
                take += [g for g in played if g not in take][:need - found]
            chosen = select_groups(part, take)
            dropped_steps += len(part.rows) - len(chosen.rows)
            dropped_tokens += sum(len(r.response_ids) for r in part.rows) - sum(len(r.response_ids) for r in chosen.rows)
            kept.append(chosen)
            if last:
                break
        metrics = {
            "filter/gen_batches": float(gen_batches), "filter/informative_groups": found / need,
            "filter/dropped_env_steps": dropped_steps, "filter/dropped_tokens": dropped_tokens,
        }
        return concat_rollouts(kept), metrics

    def update_rollout(self, rollout: Rollout, it: int) -> Rollout:
        """The rollout whose groups the learner's update normalises over (RSPO adds its replay)."""
        return rollout

    def collect(self, it: int) -> Rollout:
        """On-policy rollout of the learner on iteration ``it``'s tasks (this rank's groups)."""
        with self.dist.full_weights(self.policy):
            return self.gen_batch_ids(collect(
                self.policy, self.venv, self.collect_config(it), **self.tasks(it),
                row_seeds=self.row_seeds(it, self.config.group_size), on_turn=self.rollout_reporter(),
            ))

    def rollout_reporter(self, label: str = "") -> Callable[[RolloutCount], None] | None:
        """Where a training rollout says how far it is (``collect``'s ``on_turn``): learn()'s
        display, so the bar counts episodes while it says "collecting" (``label``: whose rollout,
        where an iteration plays several, as RSPO's explorer); None outside learn()."""
        display = self._display
        if display is None or display.bar is None:
            return None
        return lambda count: display.rollout(count, label)

    def update_reporter(self, label: str, rows: int) -> Callable[[int], None] | None:
        """Where an update says how far it is: called with each micro-batch's row count, it shows
        learn()'s display the rows passed of ``rows`` and the time left, so the bar does not sit
        on "updating" for the minutes an LLM's update takes on a CPU; None outside learn()."""
        display = self._display
        if display is None or display.bar is None:
            return None
        started, done = time.perf_counter(), [0]

        def report(micro_rows: int) -> None:
            done[0] += micro_rows
            display.update_step(done[0], rows, time.perf_counter() - started, label)

        return report

    def gathered(self, rollout: Rollout) -> Rollout:
        """Every rank's trajectories (no rows): what the rollout metrics read."""
        return Rollout([], self.dist.gather(rollout.trajectories))

    # ------------------------------------------------------------------ rewards and advantages
    def step_discount(self) -> float:
        """The discount between env steps in the advantage estimator (1: trajectory-level credit)."""
        return 1.0

    @property
    def process_gamma(self) -> float:
        """γ of the process reward's shaping term: the config's, else :meth:`step_discount`."""
        if self.config.process_gamma is not None:
            return self.config.process_gamma
        return self.step_discount()

    def reward_kind(self, it: int) -> str:
        return self.config.reward

    def reward_view(self, rollout: Rollout, kind: str) -> RewardView:
        """Training rewards of a rollout's rows for a reward kind (pure, see ``rewards.py``)."""
        rows = rollout.rows
        env_invalid_too = self.config.invalid_penalty_on == "format_or_env"
        won = {t.traj_id: t.won for t in rollout.trajectories}
        last = [i == len(rows) - 1 or rows[i + 1].traj_id != r.traj_id for i, r in enumerate(rows)]
        traj_ids = torch.tensor([r.traj_id for r in rows], dtype=torch.long)
        step = training_step_rewards(
            torch.tensor([r.reward for r in rows], dtype=torch.float64),
            torch.tensor([is_last and won[r.traj_id] for r, is_last in zip(rows, last)]),
            torch.tensor([r.process_reward for r in rows], dtype=torch.float64),
            kind,
            success_reward=self.config.success_reward,
            process_coef=self.config.process_coef,
            dense_outcome=self.config.dense_outcome,
        )
        return RewardView(
            step_rewards=step,
            episode=episode_scores(step, traj_ids),
            invalid=torch.tensor([not r.format_valid or (env_invalid_too and not r.valid) for r in rows]),
            group_ids=torch.tensor([r.group_id for r in rows], dtype=torch.long),
            traj_ids=traj_ids,
            anchors=[r.anchor for r in rows],
        )

    def estimate(self, view: RewardView, batch: TrainingBatch, old_values: torch.Tensor | None) -> Estimate:
        raise NotImplementedError(f"{type(self).__name__} must define its advantage estimator")

    # ------------------------------------------------------------------ update
    def train_on(self, rollout: Rollout, it: int) -> dict[str, float]:
        """Advantages for a rollout and the policy update on it."""
        view = self.reward_view(rollout, self.reward_kind(it))
        batch = to_batch(rollout.rows, self.policy.pad_token_id, self.policy.device)
        with self.dist.full_weights(self.policy):
            old_logprobs, old_values = self.old_policy_outputs(self.policy, batch)
        view, kl_metrics = self.kl_in_reward(view, batch, old_logprobs)
        estimate = self.estimate(view, batch, old_values)
        metrics = self.update(self.policy, self.optimizer, batch, estimate, it, old_values=old_values, old_logprobs=old_logprobs)
        metrics.update(kl_metrics)
        metrics.update(group_outcomes(self.gathered(rollout).trajectories))
        total, rows = self.dist.sum([float(view.episode.sum()), len(view.episode)])
        metrics["train/reward_mean"] = total / rows
        for key, value in (estimate.metrics or {}).items():
            metrics[f"adv/{key}"] = value
        return metrics

    def kl_in_reward(self, view: RewardView, batch: TrainingBatch, old_logprobs: torch.Tensor | None) -> tuple[RewardView, dict[str, float]]:
        """Under ``use_kl_in_reward``: the view with ``beta * KL(pi_old || pi_ref)`` per token as its
        ``token_penalty``, its metrics, and ``beta`` moved by the controller (verl's
        ``apply_kl_penalty``); otherwise the view as it is.

        ``pi_old`` is the recomputed old log-probs when there are any, else the rollout's own (the
        learner's, with transformers generation in float32). Forced tokens are out of the mask, as
        in the loss. ``current_kl`` and the row count the controller reads are the global batch's.
        """
        c = self.config
        if not c.use_kl_in_reward:
            return view, {}
        old = batch.old_logprobs if old_logprobs is None else old_logprobs
        ref = self.reference.logprobs(batch, temperature=c.temperature, max_tokens=c.max_tokens_per_micro_batch)["logprobs"]
        mask = batch.response_mask * ~forced_token_mask(batch.allowed, batch.response_mask)
        penalty, row_kl = kl_reward_penalty(old, ref, mask, self.kl_beta, c.kl_kind)
        kl_sum, rows = self.dist.sum([float(row_kl.sum()), len(row_kl)])
        current = kl_sum / max(rows, 1)
        metrics = {"train/reward_kl_penalty": current, "train/reward_kl_penalty_coeff": self.kl_beta}
        self.kl_beta = next_kl_coef(c.kl_ctrl, self.kl_beta, current, int(rows), c.kl_target, c.kl_horizon)
        return replace(view, token_penalty=penalty), metrics

    @property
    def recompute_old_logprobs(self) -> bool:
        """Whether the learner recomputes behaviour log-probs: the config's, else whenever the
        rollout's numerics differ from the update's: with vLLM (colocated or served), and with
        transformers generation under bfloat16 (a cached, token-by-token bf16 forward rounds
        otherwise than the update's full bf16 forward pass: ~6e-4 mean |log-prob| apart)."""
        c = self.config
        if c.recompute_old_logprobs is not None:
            return c.recompute_old_logprobs
        return c.generation_backend != "hf" or self.precision != "fp32"

    def on_policy_update(self, rows: int) -> bool:
        """Whether an update over ``rows`` rows on this rank is one optimizer step (one epoch,
        one mini-batch): its "old" log-probs are then the update's own, detached (verl's
        ``on_policy``), so the first ratio is exactly 1 and no old log-prob pass is needed."""
        return self.config.ppo_epochs == 1 and self.dist.sum([rows])[0] <= self.config.mini_batch_size

    def old_policy_outputs(self, policy, batch: TrainingBatch) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The PPO "old" log-probs (None: the recorded behaviour ones, or the update's own when it
        is one step) and, for a critic, old values.

        One no-grad pass gives both when both are needed.
        """
        recompute = self.recompute_old_logprobs and not self.on_policy_update(len(batch))
        if not (recompute or policy.value_head is not None):
            return None, None
        out = policy.logprobs(
            batch, temperature=self.config.temperature, values=policy.value_head is not None,
            max_tokens=self.config.max_tokens_per_micro_batch,
        )
        return (out["logprobs"] if recompute else None), out.get("values")

    def update(
        self,
        policy,
        optimizer: torch.optim.Optimizer,
        batch: TrainingBatch,
        estimate: Estimate,
        it: int,
        *,
        old_values: torch.Tensor | None = None,
        old_logprobs: torch.Tensor | None = None,
        is_weights: torch.Tensor | None = None,
        reference=None,
        label: str = "",
    ) -> dict[str, float]:
        """Clipped policy-gradient epochs over mini-batches, gradients accumulated over micro-batches.

        ``old_logprobs`` defaults to the behaviour log-probs; when the update is one optimizer
        step (one epoch, one mini-batch) the old log-probs are the update's own, detached, as in
        verl. ``is_weights`` (B, R) multiply the per-token policy loss (off-policy replay), and so
        does verl's truncated importance sampling under ``tis_imp_ratio_cap``. Forced tokens (one
        allowed id) are out of the loss and its metrics. Mini-batches are one process's over every
        rank's rows (``rank_minibatches``), so N ranks step as one process does. Micro-batches are
        ``micro_batch_size`` rows, or token-budget packs under ``max_tokens_per_micro_batch``, each
        cut to its own padding and weighted (``loss_weights``) so that accumulation equals one big
        batch; a mini-batch's rows nested in one another share a micro-batch when the passes pack
        them (``micro_batch_chains``). ``train/rollout_logprob_diff`` is the mean |rollout -
        training log-prob| over the first step's tokens, scored before any weight moves. learn()'s
        display counts the rows passed (``label``: whose update, as ``rollout_reporter``'s).
        """
        c = self.config
        reference = self.reference if reference is None and policy is self.policy else reference
        report = self.update_reporter(label, c.ppo_epochs * len(batch))
        mask = batch.response_mask * ~forced_token_mask(batch.allowed, batch.response_mask)
        on_policy = self.on_policy_update(len(batch))
        old = None if on_policy else (batch.old_logprobs if old_logprobs is None else old_logprobs)
        advantages = estimate.advantages.to(mask.dtype)
        if advantages.dim() == 1:
            advantages = advantages[:, None].expand_as(mask)
        ref_logprobs = None
        if reference is not None and c.kl_coef > 0 and not c.use_kl_in_reward:  # else the KL is in the reward
            ref_logprobs = reference.logprobs(batch, temperature=c.temperature, max_tokens=c.max_tokens_per_micro_batch)["logprobs"]
        lengths = batch.lengths()
        chains = self.micro_batch_chains(policy, batch)
        generator = torch.Generator().manual_seed(_seed(c.seed, it, 4))
        dist = self.dist
        counts = [int(n) for n in dist.gather([len(batch)])]
        sums: dict[str, float] = {}
        diff = [0.0, 0.0]  # |rollout - training| log-prob sum and tokens of the first step
        steps = 0
        policy.train(True)
        norms: dict[str, float] = {}
        for _ in range(c.ppo_epochs):
            total = sum(counts)
            if not c.shuffle_mini_batches:
                order = torch.arange(total)
            elif c.shuffle_chains and chains is not None and len(set(chains)) < len(chains) and dist.world_size == 1:
                order = chain_order(chains, generator)
            else:
                order = torch.randperm(total, generator=generator)
            for mb in rank_minibatches(counts, dist.rank, c.mini_batch_size, order):
                optimizer.zero_grad(set_to_none=True)
                if self.critic_optimizer is not None:
                    self.critic_optimizer.zero_grad(set_to_none=True)
                rows_of = mb.tolist()
                groups = micro_batches(
                    [lengths[i] for i in rows_of], c.micro_batch_size, c.max_tokens_per_micro_batch,
                    None if chains is None else [chains[i] for i in rows_of],
                )
                micros = [mb[group] for group in groups]
                used = [int((mask[m].sum(-1) > 0).sum()) for m in micros]
                rows, tokens, batch_rows = dist.sum([sum(used), float(mask[mb].sum()), len(mb)])  # the global mini-batch's
                weights = loss_weights(used, [float(mask[m].sum()) for m in micros], c.mini_batch_size, c.loss_agg, int(rows), tokens, int(batch_rows))
                share = dist.sum([sum(weights)])[0] or 1.0  # < 1 on a partial mini-batch: its metrics stay means
                # every rank runs as many passes (weight 0 on a rank with fewer), as engines need
                padding = dist.max(len(micros)) - len(micros)
                passes = list(zip(micros, weights)) + [(torch.zeros(1, dtype=torch.long), 0.0)] * padding
                for k, (micro, weight) in enumerate(passes):
                    with dist.accumulating(policy, last=k == len(passes) - 1):
                        terms = self._loss_terms(
                            policy, batch.index(micro).trimmed(), micro, mask, advantages, old, estimate, old_values,
                            is_weights, ref_logprobs, batch.old_logprobs,
                        )
                        dist.backward(terms.pop("loss") * weight)
                    rollout_diff = terms.pop("rollout_diff")
                    if steps == 0 and weight > 0:
                        diff = [diff[0] + rollout_diff[0], diff[1] + rollout_diff[1]]
                    for key, value in terms.items():
                        sums[key] = sums.get(key, 0.0) + value * weight / share
                    if report is not None and k < len(micros):
                        report(len(micro))
                for key, value in self._clip_gradients(policy).items():
                    norms[key] = norms.get(key, 0.0) + value
                optimizer.step()
                if self.critic_optimizer is not None:
                    self.critic_optimizer.step()
                steps += 1
        policy.train(False)
        policy.sync_weights()
        sums = dict(zip(sums, dist.sum(list(sums.values()))))  # each rank holds its rows' share
        result = {f"train/{k}": v / max(steps, 1) for k, v in {**sums, **norms}.items()}
        diff_sum, diff_tokens = dist.sum(diff)
        result["train/rollout_logprob_diff"] = diff_sum / max(diff_tokens, 1.0)
        return result

    def micro_batch_chains(self, policy, batch: TrainingBatch) -> list[int] | None:
        """Each row's chain of nested rows (``micro_batches``' ``chains``) when every pass over the
        update's micro-batches scores a chain from one pass (the policy's and a separate critic's),
        so that a chain shares a micro-batch and counts its host's tokens only; else None."""
        if self.critic is not None and not self.critic.pack_rows:
            return None
        return policy.chains(batch) if hasattr(policy, "chains") else None  # the action-scoring policy has none

    def _clip_gradients(self, policy) -> dict[str, float]:
        """Clip the policy's and the critic's gradients apart; their norms before clipping.

        One joint clip would let the critic's larger gradient (~10x the policy's at the start)
        shrink the policy's step; verl clips its actor and critic separately.
        """
        c = self.config
        norms = {"grad_norm": self.dist.clip_grad_norm(policy.policy_parameters(), c.max_grad_norm)}
        critic = policy.critic_parameters() or (self.critic.parameters() if self.critic is not None else [])
        if critic:
            norms["critic_grad_norm"] = self.dist.clip_grad_norm(critic, c.critic_max_grad_norm)
        return norms

    def _loss_terms(self, policy, sub, rows, loss_mask, advantages, old, estimate, old_values, is_weights, ref_logprobs, rollout) -> dict:
        """The micro-batch ``sub`` (rows ``rows`` of the batch, cut to its own padding)'s loss and metrics.

        The batch-wide ``(B, R)`` tensors (the loss mask, advantages, old and rollout log-probs,
        ...) are cut to the same rows and ``sub``'s response width; ``old`` None: the update's own
        log-probs, detached. ``rollout_diff`` is the sum of |rollout - training| log-probs over
        the loss tokens, and their count.
        """
        c = self.config
        out = policy.forward(sub, temperature=c.temperature, entropy=True, values=old_values is not None and self.critic is None)
        width = sub.response_mask.shape[1]
        mask = loss_mask[rows, :width]
        logp = out["logprobs"]
        old_logp = logp.detach() if old is None else old[rows, :width]
        weights = None if is_weights is None else is_weights[rows, :width]
        rollout_logp = rollout[rows, :width]
        if c.tis_imp_ratio_cap is not None:  # verl's truncated IS: training over rollout engine
            tis = truncated_is_weights(old_logp, rollout_logp, mask, cap=c.tis_imp_ratio_cap)
            weights = tis if weights is None else weights * tis
        norm = self.loss_scale_factor
        pg, pg_metrics = ppo_policy_loss(
            logp, old_logp, advantages[rows, :width], mask,
            clip=c.clip, clip_high=c.clip_high, dual_clip=c.dual_clip, agg=c.loss_agg, is_weights=weights, norm_factor=norm,
        )
        entropy = agg_loss(out["entropy"], mask, c.loss_agg, norm_factor=norm)
        loss = pg - c.entropy_coef * entropy
        terms = {"pg_loss": float(pg.detach()), "entropy": float(entropy.detach()), **pg_metrics}
        if ref_logprobs is not None:
            kl = agg_loss(kl_penalty(logp, ref_logprobs[rows, :width], c.kl_kind), mask, c.loss_agg, norm_factor=norm)
            loss = loss + c.kl_coef * kl
            terms["kl"] = float(kl.detach())
        if old_values is not None:
            returns = estimate.returns[rows, :width].to(mask.dtype)
            values = out["values"] if self.critic is None else self.critic.forward(sub)
            vloss, v_metrics = value_loss(values, old_values[rows, :width], returns, mask, clip=c.value_clip, agg=c.loss_agg, norm_factor=norm)
            loss = loss + c.vf_coef * vloss
            terms.update(value_loss=float(vloss.detach()), **v_metrics)
        terms["rollout_diff"] = (float(((logp.detach() - rollout_logp).abs() * mask).sum()), float(mask.sum()))
        terms["loss"] = loss
        return terms

    @property
    def loss_scale_factor(self) -> int:
        """The constant divisor of ``seq-mean-token-sum-norm``: the config's, else ``max_new_tokens``."""
        c = self.config
        return c.loss_scale_factor if c.loss_scale_factor is not None else c.max_new_tokens

    # ------------------------------------------------------------------ evaluation and metrics
    @staticmethod
    def rollout_metrics(rollout: Rollout, prefix: str = "rollout") -> dict[str, float]:
        trajectories = rollout.trajectories
        n = max(len(trajectories), 1)
        steps = max(sum(t.length for t in trajectories), 1)
        metrics = {
            f"{prefix}/success": sum(t.won for t in trajectories) / n,
            f"{prefix}/score": sum(t.score for t in trajectories) / n,
            f"{prefix}/outcome_return": sum(t.outcome for t in trajectories) / n,
            f"{prefix}/process_return": sum(t.process_return for t in trajectories) / n,
            f"{prefix}/process_progress": sum(t.process_progress for t in trajectories) / n,
            # per-event process rewards: events paid per episode (how hard the policy farms them)
            f"{prefix}/process_events": sum(sum(t.process_events.values()) for t in trajectories) / n,
            f"{prefix}/length": sum(t.length for t in trajectories) / n,
            f"{prefix}/invalid_rate": sum(t.invalid for t in trajectories) / steps,
            # the fraction of prompts (steps) that left out history to fit max_prompt_length
            f"{prefix}/truncated_prompts": sum(t.truncated_prompts for t in trajectories) / steps,
        }
        by_type: dict[str, list[bool]] = {}
        for t in trajectories:
            if t.task_type:
                by_type.setdefault(t.task_type, []).append(t.won)
        if len(by_type) > 1:
            for task_type, wins in sorted(by_type.items()):
                metrics[f"{prefix}/success_{task_type}"] = sum(wins) / len(wins)
        return metrics

    def evaluate(
        self, tasks: int | None = None, *, task_ids: list[int] | None = None, split: str | None = None,
        return_episodes: bool = False, temperature: float | None = None, training_envs: bool = False,
    ) -> dict[str, float] | tuple[dict[str, float], list[Trajectory]]:
        """Success and score on held-out tasks, one greedy-or-low-temperature episode each.

        ``task_ids`` and ``split`` override the config's ``eval_task_ids`` and ``eval_split`` for
        this call, so one trainer can be measured on its training set and on a held-out split. A
        task id listed k times is played k times, each episode with its own seed (several
        episodes per task narrow an interval for less than more tasks). ``return_episodes=True``
        also returns each episode's ``Trajectory`` in the order of the ids (as Stable-Baselines3's
        ``evaluate_policy(return_episode_rewards=True)``), for intervals over tasks and episodes.
        ``temperature`` overrides ``eval_temperature``; ``training_envs=True`` plays the training
        envs' own split (the goals the run trained on) instead of a held-out one.
        """
        c = self.config
        started = time.perf_counter()
        ids = self._evaluation_ids(tasks, task_ids)
        if self.env_factory is None:  # a user-given vector env: evaluate on it with the evaluation seed
            venv, share = self.venv, self.groups
            reset: dict[str, Any] = {"seed": c.eval_seed + share.start}
        else:
            share = group_share(len(ids), self.dist.world_size, self.dist.rank)  # this rank's tasks
            held_out = None if training_envs else split or c.eval_split or default_eval_split(self.env_id)
            venv = self._evaluation_env(len(share), held_out)
            reset = {"task_ids": [ids[i] for i in share]}
        config = self.collect_config(0, evaluation=True)
        if temperature is not None:
            checked = replace(c, eval_temperature=temperature)  # the config's own rule for the value
            config = replace(config, generation=replace(config.generation, temperature=checked.eval_temperature))
        seeds = [_seed(c.eval_seed, i, m) for i in share for m in range(venv.group_size)]
        with self.dist.full_weights(self.policy), self._evaluation_display(venv.num_envs) as on_turn, self._threads():
            rollout = collect(self.policy, venv, config, **reset, row_seeds=seeds, on_turn=on_turn)
        self._last_eval_s = time.perf_counter() - started
        gathered = self.gathered(rollout)
        metrics = self.rollout_metrics(gathered, prefix="eval")
        return (metrics, gathered.trajectories) if return_episodes else metrics

    def _evaluation_ids(self, tasks: int | None = None, task_ids: list[int] | None = None) -> list[int]:
        """The task ids ``evaluate()`` plays, one episode each, in order."""
        return list(task_ids or self.config.eval_task_ids or range(tasks or self.config.eval_tasks))

    def evaluation_seeds(self, count: int) -> list[int | None]:
        """The episode seed of each of ``count`` evaluation episodes, by position in the task list
        (so two runs evaluated on one task list with one ``eval_seed`` play the same episodes);
        None where a caller's own vector env is reset with one seed for all."""
        if self.env_factory is None:
            return [None] * count
        return [_seed(self.config.eval_seed, i, 0) for i in range(count)]

    def evaluate_record(
        self, *, task_ids: list[int] | None = None, split: str | None = None, iteration: int = 0, env_steps: int = 0,
    ) -> tuple[dict[str, float], dict[str, Any]]:
        """``evaluate()`` and its per-episode record (``training/eval_records.py``): what a run
        folder keeps of each evaluation, and what ``rspo-gym compare`` pairs runs on."""
        ids = self._evaluation_ids(task_ids=task_ids)
        metrics, episodes = self.evaluate(task_ids=ids, split=split, return_episodes=True)
        c = self.config
        record = evaluation_record(
            episodes, self.evaluation_seeds(len(episodes)), iteration=iteration, env_steps=env_steps,
            split=split or c.eval_split or default_eval_split(self.env_id), temperature=c.eval_temperature, eval_seed=c.eval_seed)
        return metrics, record

    @contextlib.contextmanager
    def _evaluation_display(self, episodes: int) -> Iterator[Callable[[RolloutCount], None] | None]:
        """Where an evaluation says how far it is: learn()'s display during training, else a bar
        of its own over its ``episodes`` (the quick start's first evaluation, ``rspo-gym eval``,
        a script's), shown by the main rank where ``progress`` is on."""
        if self._display is not None:
            yield self.rollout_reporter()
            return
        display = RolloutProgress(self.config.progress and self.dist.is_main, f"evaluating {self.env_id or ''}".strip(), episodes)
        try:
            yield display.update
        finally:
            display.close()

    def _evaluation_env(self, count: int, split: str | None) -> GroupedVectorEnv:
        """One vector env per (split, size), built on first use and kept for later evaluations."""
        if self.env_factory is None:
            return self.venv
        key = (split, count)
        if key not in self._eval_venvs:
            factory = self.env_factory.with_kwargs(split=split) if split else self.env_factory
            self._eval_venvs[key], _ = make_vector_env(factory, count, 1)
        return self._eval_venvs[key]

    def _eval_due(self, it: int, total: int) -> bool:
        every = self.config.eval_every
        return every > 0 and ((it + 1) % every == 0 or it + 1 == total)

    def _checkpoint_due(self, it: int, total: int) -> bool:
        every = self.config.checkpoint_every
        return (every > 0 and (it + 1) % every == 0) or it + 1 == total

    # ------------------------------------------------------------------ run folder and logging
    def _open_run(self, total: int, *, resume: bool = False, overwrite: bool = False) -> Path:
        """The run folder, made with its ``config.json`` by the first ``learn()`` (said in one line,
        as SB3's "Logging to ..."); later calls continue in it. The main process holds the folder's
        lock (``runs.lock_run_dir``) from before anything in it changes until ``close()``. A resume
        loads the checkpoint (if the run left one) and checks ``total`` against it before
        ``metrics.jsonl`` is rewritten to its history and ``config.json`` is written, so a refused
        resume leaves the folder as it was."""
        if not self._run_open:
            if self.output_dir is None and self.dist.is_main:
                name = run_name(self.algo, self.env_id, time.strftime("%Y%m%d-%H%M%S"))
                self.output_dir = create_run_dir(runs_dir(), name)
            self.output_dir = Path(self.dist.gather([str(self.output_dir)])[0])  # rank 0's folder
            if self.dist.is_main:
                check_run_folder(self.output_dir, resume=resume, iterations=total, need_run=False)
                try:
                    self.output_dir.mkdir(parents=True, exist_ok=True)
                    lock_run_dir(self.output_dir)
                    claim_run_dir(self.output_dir, resume=resume, overwrite=overwrite)
                except OSError as err:  # a folder made read-only, a full disk: one line, not a traceback
                    raise UserError(f"cannot prepare the run folder {self.output_dir}: {err.strerror or err}") from None
            self.dist.barrier()
        if resume and (self.output_dir / "checkpoint.pt").exists():
            self.load_checkpoint(self.output_dir / "checkpoint.pt")
        if total < self.iteration:
            raise UserError(
                f"the run is at iteration {self.iteration}; learn() counts iterations from its start: "
                f"ask for at least {self.iteration}, not {total}"
            )
        if resume and self.dist.is_main:
            restore_metrics(self.output_dir, self.history)
            trim_evaluations(self.output_dir, self.iteration)
        if not self._run_open:
            if self.dist.is_main:
                remove_leftovers(self.output_dir)  # a killed writer's temporary files
                save_config(self.config, self.output_dir / "config.json", env_id=self.env_id, model=self.model_name)
                print(f"Logging to {self.output_dir}")
            self._run_open = True
        return self.output_dir

    def _save_results(self) -> None:
        """The run's end products: ``policy/`` (Hugging Face format: ``from_pretrained`` and
        ``rspo-gym eval --model`` load it; a LoRA learner's merged into its base, with the adapter
        itself in peft's format in ``adapter/``) and ``learning_curve.png``, written by the main
        rank (sharded weights are gathered first, by every rank)."""
        from rspo_gym.plotting import plot_learning_curve

        weights = self.dist.full_state_dict(self.policy) if self.dist.shards_state else None
        if not self.dist.is_main:
            return
        with quiet_third_party_progress():
            gathered = {} if weights is None else {"weights": weights}  # an LLM policy's, under a sharding engine
            with atomic_folder(self.output_dir / "policy") as staging:  # a Ctrl-C keeps the previous policy/
                self.policy.save(staging, merged=True, **gathered)
            if self.policy.adapter is not None:
                with atomic_folder(self.output_dir / "adapter") as staging:
                    self.policy.save(staging)
        if not self.history:
            return
        title = f"{self.algo} on {self.env_id or 'a custom env'} ({self.model_name or 'given policy'})"
        plot_learning_curve(self.history, self.output_dir / "learning_curve.png", title=title)

    def _log(self, metrics: dict[str, Any]) -> None:
        """``metrics.jsonl`` and ``metrics.csv`` rewritten whole from the history (``atomic_write``):
        a kill or a full disk leaves the previous rows, never a torn file."""
        restore_metrics(self.output_dir, self.history)
        columns = sorted({key for row in self.history for key in row})
        with atomic_write(self.output_dir / "metrics.csv", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            writer.writerows(self.history)
        if self._reporter is None:
            self._reporter = make_reporter(self.config.report_to, self.output_dir, self.config.to_dict(), metrics["iteration"]) or False
        if self._reporter:
            self._reporter.log(metrics, metrics["iteration"])

    # ------------------------------------------------------------------ checkpoints
    def state(self) -> dict[str, Any]:
        """Everything needed to continue exactly: weights, optimizer, iteration, history."""
        return {
            "iteration": self.iteration,
            "history": self.history,
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "config": self.config.to_dict(),
            "kl_beta": self.kl_beta,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.iteration = state["iteration"]
        self.history = list(state["history"])
        self.kl_beta = state.get("kl_beta", self.config.kl_coef)  # checkpoints from before KL in the reward
        if "policy" in state:  # else the engine's sharded state, loaded by load_checkpoint
            self.policy.load_state_dict(state["policy"])
            load_optimizer_state(self.optimizer, state["optimizer"])

    def save_checkpoint(self, path: str | Path | None = None) -> Path:
        """Write ``checkpoint.pt`` and its tensor shards (``checkpoint_tensors/``) so that a crash
        leaves the previous checkpoint or this one, never half of one. It records the run it
        belongs to and the sha256 of every byte (``training/checkpoints.py``)."""
        path = Path(path) if path is not None else self._require_output_dir() / "checkpoint.pt"
        state = self.state()
        engine, label = _engine_folder(path), f"iteration-{self.iteration}"
        if self.dist.shards_state:  # FSDP / DeepSpeed: weights and optimizer sharded, in the engine's format
            # a fresh folder per save (rank 0's name): a kill before checkpoint.pt names it leaves the previous pair intact
            state["engine_state"] = self.dist.gather([save_tag(label)])[0]
            self.dist.save_engine_state(engine / state["engine_state"])
            del state["policy"], state["optimizer"]
        identity = run_identity(self)
        self.dist.barrier()  # ranks hold the same weights after the update: rank 0 writes them
        if self.dist.is_main:
            write_checkpoint(path, state, identity, label=label)
            if "engine_state" in state:  # the states no checkpoint names any more
                remove_stale(engine, keep=state["engine_state"])
        self.dist.barrier()
        return path

    def load_checkpoint(self, path: str | Path) -> None:
        """Continue from ``path``; refused in one line (``UserError``) when it is damaged or belongs
        to another run (another trainer, model or state-shaping config field)."""
        state = read_checkpoint(path, expected=run_identity(self))
        if not isinstance(state, dict):
            raise UserError(f"{path} holds no trainer state: resume from an intact copy, or start over (rspo-gym train --overwrite)")
        try:
            _check_history(state.get("history"))
            if "policy" not in state:  # written under FSDP / DeepSpeed (before per-save folders: the folder itself)
                self.dist.load_engine_state(_engine_folder(Path(path)) / state.get("engine_state", ""))
            self.load_state(state)  # copied onto the device by load_state
        except (RuntimeError, ValueError, KeyError, TypeError, AttributeError, IndexError) as err:
            # a shard whose header was altered (a swapped shape, its sha256 recomputed) loads, and does not fit
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise UserError(f"{path} does not fit this run's model and optimizer ({first}): resume from an intact copy, "
                            f"or start over (rspo-gym train --overwrite)") from None

    def _require_output_dir(self) -> Path:
        if self.output_dir is None:
            raise ValueError("no output_dir configured: pass a checkpoint path or set output_dir")
        return self.output_dir

    # ------------------------------------------------------------------ construction
    def _make_policy(self, model: Any):
        """The learner: float32 weights unless ``precision="bf16"``, autocast under ``bf16-mixed``.

        A given ``LLMPolicy`` keeps its backend, unless ``generation_backend="vllm"`` asks for an
        engine or ``lora_r`` for an adapter; its trainable weights become float32 master weights
        unless ``precision="bf16"`` (``float32_master_weights``).
        """
        from rspo_gym.policies.action_scorer import action_scorer_policy
        from rspo_gym.policies.hf_backend import HFBackend
        from rspo_gym.policies.llm import LLMPolicy

        scorer = action_scorer_policy(model, self.config, value_head=self.needs_values)  # model="drrn"
        if scorer is not None:
            self.precision = "fp32"
            return scorer
        if isinstance(model, LLMPolicy):
            if self.needs_values and model.value_head is None:
                raise ValueError(f"{type(self).__name__} needs a policy built with value_head=True")
            self.precision = resolve_precision(self.config.precision, model.device.type)
            if self.precision != "bf16":
                float32_master_weights(model)
            model.autocast_dtype = torch.bfloat16 if self.precision == "bf16-mixed" else None
            if self.config.generation_backend != "hf" and isinstance(model.backend, HFBackend):
                model.backend = self._generation_backend(model.model, model.tokenizer)
            if self.config.lora_r > 0 and model.adapter is None:
                model.add_lora(**self.lora_options())
            return model
        from rspo_gym.policies.models import load_model

        self.precision = resolve_precision(self.config.precision, "cuda" if torch.cuda.is_available() else "cpu")
        # A LoRA learner's base is frozen: under bf16-mixed it is stored in bfloat16 (half the
        # memory, nothing to lose) while peft keeps the adapters, the trained part, in float32.
        frozen_base = self.config.lora_r > 0 and self.precision == "bf16-mixed"
        dtype = torch.bfloat16 if self.precision == "bf16" or frozen_base else torch.float32
        network, tokenizer = load_model(model, seed=self.config.seed, dtype=dtype)
        policy = LLMPolicy(
            network, tokenizer, backend=self._generation_backend(network, tokenizer), value_head=self.needs_values,
            micro_batch_size=self.config.micro_batch_size, seed=self.config.seed,
            autocast_dtype=torch.bfloat16 if self.precision == "bf16-mixed" else None,
        )
        if self.config.lora_r > 0:
            policy.add_lora(**self.lora_options())
        return policy

    def lora_options(self) -> dict[str, Any]:
        """``LLMPolicy.add_lora`` arguments of the config's LoRA settings (learner and explorer alike)."""
        c = self.config
        return {"r": c.lora_r, "alpha": c.lora_alpha, "dropout": c.lora_dropout, "target_modules": c.lora_target_modules}

    def _generation_backend(self, model, tokenizer):
        """None (the policy's own ``HFBackend``), a vLLM engine colocated in this process, or a
        vLLM server's client (``policies/vllm_server.py``).

        The engine runs in the trainer's process (TRL's colocate mode), so weight pushes pass
        tensors by reference; a user who set ``VLLM_ENABLE_V1_MULTIPROCESSING`` keeps their choice.
        It computes in the learner's precision: bfloat16 under ``bf16-mixed`` and ``bf16``.
        """
        c = self.config
        if c.generation_backend == "hf":
            return None
        if c.generation_backend == "vllm-server":
            from rspo_gym.policies.vllm_server import server_backend

            return server_backend(model, tokenizer, c, rank=self.dist.rank, world_size=self.dist.world_size, barrier=self.dist.barrier)
        from rspo_gym.policies.vllm_backend import VLLMBackend

        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        cuda = next(model.parameters()).device.type == "cuda"
        sleep = c.vllm_enable_sleep_mode if c.vllm_enable_sleep_mode is not None else cuda
        options: dict[str, Any] = {"enable_sleep_mode": True} if sleep else {}
        if c.max_prompt_length is not None:
            options["max_model_len"] = c.max_prompt_length + c.max_new_tokens
        if self.dist.world_size > 1:  # one engine per rank, on the launcher's processes (TRL's colocate mode)
            options["distributed_executor_backend"] = "external_launcher"
        options.update(c.vllm_kwargs)
        return VLLMBackend(
            model, tokenizer, dtype="float32" if self.precision == "fp32" else "bfloat16", seed=c.seed,
            gpu_memory_utilization=c.vllm_gpu_memory_utilization, tensor_parallel_size=c.vllm_tensor_parallel_size, **options,
        )

    def _before_engine(self) -> None:
        """What must be taken from the learner's whole weights before an engine shards them
        (a subclass's copies; the KL reference is taken just before)."""

    def _make_optimizer(self, policy) -> torch.optim.Optimizer:
        """AdamW with the policy's parameters and, for PPO, the critic's in their own group (own lr),
        prepared by the engine together with the policy's modules."""
        c = self.config
        groups = [{"params": policy.policy_parameters(), "lr": c.learning_rate}]
        critic = policy.critic_parameters()
        if critic:
            groups.append({"params": critic, "lr": c.critic_lr if c.critic_lr is not None else 10 * c.learning_rate})
        # with the policy's modules, handed to the data-parallel engine (no-op in one process);
        # fused where the policy asks for it (the action-scoring policy: None is torch's default)
        optimizer = torch.optim.AdamW(groups, lr=c.learning_rate, weight_decay=c.weight_decay, fused=getattr(policy, "fused_optimizer", None))
        return self.dist.prepare(policy, optimizer)

    def _make_reference(self, policy):
        """The frozen KL reference: the base with adapters disabled for a LoRA learner (no copy),
        else a copy of the initial model, in bfloat16 unless the run is fp32, on the CPU between
        its forward passes under ``ref_offload``."""
        from rspo_gym.policies.llm import LLMPolicy

        if policy.adapter is not None:
            return policy.sibling(adapters_off=True)
        if not isinstance(policy, LLMPolicy):  # the action-scoring policy
            return policy.frozen_copy()
        model = copy.deepcopy(policy.model)
        if self.precision != "fp32":
            model.to(torch.bfloat16)
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        frozen = LLMPolicy(model, policy.tokenizer, micro_batch_size=policy.micro_batch_size, autocast_dtype=policy.autocast_dtype)
        if self.config.ref_offload:
            frozen.compute_device = policy.device
            model.to("cpu")
        return frozen

    def reset_reference(self) -> None:
        """Take the KL reference again, from the policy as it is now (no-op without one).

        The reference is taken when the trainer is built, before an engine shards the policy, so
        weights loaded into ``trainer.policy`` afterwards (a warm start such as
        ``partial_clone(trainer.policy, ...)``) would leave the KL anchored to the weights before
        them. Under a sharding engine (FSDP, DeepSpeed) load the weights through ``model=``
        instead: a sharded policy cannot be copied whole here.
        """
        if self.reference is None:
            return
        if self.dist.shards_state and self.policy.adapter is None:
            raise RuntimeError("reset_reference: the policy is sharded by the engine; pass the warm start as model= instead")
        self.reference = self._make_reference(self.policy)

    def close(self) -> None:
        """Close the envs and the logger and, under a launcher, leave the job's process group
        (every rank calls it; the trainer cannot train after it)."""
        self.venv.close()
        for venv in self._eval_venvs.values():
            venv.close()
        if self._reporter:
            self._reporter.close()
        if self.output_dir is not None and self.dist.is_main:
            unlock_run_dir(self.output_dir)
        self.dist.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={self.env_id!r}, iteration={self.iteration})"
