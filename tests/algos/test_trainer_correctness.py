"""The training loop around the estimators: precision, the critic, penalties, swaps, replay, batching.

Each test pins a behaviour that was once wrong (a side-by-side with verl and verl-agent found them):
pure bf16 AdamW losing small updates, the critic's gradient steering and clipping the policy's,
env-rejected commands penalised as format errors, GiGPO's step level ignoring the rank swap, an
off-by-one replay age, -1e5 advantages from all-equal groups, full steps on partial mini-batches;
and that the memory savings (token-budget micro-batches cut to their own padding, gradient
checkpointing) leave every gradient as the one big batch's.
"""

from dataclasses import replace

import pytest
import torch

import rspo_gym  # noqa: F401

pytest.importorskip("transformers")

from rspo_gym.algos import GiGPOTrainer, GRPOTrainer, PPOTrainer, RSPOTrainer  # noqa: E402
from rspo_gym.algos.config import GiGPOConfig, TrainerConfig  # noqa: E402
from rspo_gym.algos.gigpo import gigpo_estimate  # noqa: E402
from rspo_gym.algos.grpo import grpo_estimate  # noqa: E402
from rspo_gym.algos.rspo import merge_replay  # noqa: E402
from rspo_gym.algos.trainer import Estimate, RewardView  # noqa: E402
from rspo_gym.rollout.trajectory import Rollout, StepRow, Trajectory, pack_by_tokens, to_batch  # noqa: E402

TINY = dict(num_groups=2, group_size=2, max_turns=2, eval_every=0, progress=False, seed=0)


def _row(traj: int, *, group: int = 0, step: int = 0, reward: float = 0.0, process: float = 0.0,
         valid: bool = True, format_valid: bool = True, anchor: str = "o", source: str = "learner") -> StepRow:
    return StepRow([1, 2], [3], [0.0], reward, process, anchor, valid, format_valid, group, traj, step, "look", source)


def _trajectory(traj: int, *, group: int = 0, task_id: int = 0, won: bool = False, progress: float = 0.0,
                length: int = 1, source: str = "learner") -> Trajectory:
    return Trajectory(traj, group, task_id, "t", float(won), progress, progress, won, float(won), length, 0, source)


# ----------------------------------------------------------------------------- 1. precision
def _changed_where_gradient(precision: str) -> tuple[float, int, bool]:
    """One lr-1e-6 update: the share of weights with a gradient of at least Adam's eps (1e-8, where
    AdamW's first step is >= lr / 2) that changed, their count, and whether every parameter tensor
    with a non-zero gradient changed."""
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", precision=precision, learning_rate=1e-6, mini_batch_size=64, **TINY)
    rollout = trainer.collect(0)
    named = [(n, p) for n, p in trainer.policy.model.named_parameters() if p.requires_grad]
    before = {n: p.detach().clone() for n, p in named}
    trainer.train_on(rollout, 0)  # one mini-batch: the gradients of its step stay in .grad
    changed = total = 0
    every_tensor = True
    for name, parameter in named:
        moved = parameter.grad.float().abs() >= 1e-8
        differs = parameter.detach() != before[name]
        changed += int(differs[moved].sum())
        total += int(moved.sum())
        every_tensor &= bool(differs.any()) or not bool(parameter.grad.any())
    trainer.close()
    return changed / total, total, every_tensor


def test_mixed_precision_keeps_every_small_update_that_pure_bf16_loses():
    mixed, count, every_tensor = _changed_where_gradient("bf16-mixed")
    assert count > 100_000 and every_tensor
    assert mixed == 1.0  # float32 master weights: every weight with a gradient moves by ~lr
    pure, _, _ = _changed_where_gradient("bf16")
    assert pure < 0.05  # bfloat16 weights: an lr-1e-6 step is below half their spacing and rounds away


def test_precision_defaults_to_fp32_on_cpu_and_rejects_unknown_modes():
    trainer = GRPOTrainer("rspo/ALFWorld-v0", **TINY)
    assert trainer.precision == "fp32" and trainer.policy.autocast_dtype is None
    assert all(p.dtype == torch.float32 for p in trainer.policy.parameters())
    mixed = GRPOTrainer("rspo/ALFWorld-v0", precision="bf16-mixed", **TINY)
    assert mixed.policy.autocast_dtype == torch.bfloat16 and all(p.dtype == torch.float32 for p in mixed.policy.parameters())
    with pytest.raises(ValueError, match="precision"):
        GRPOTrainer("rspo/ALFWorld-v0", precision="fp8", **TINY)


# ----------------------------------------------------------------------------- 2. the critic
def _ppo_policy_after_one_update(vf_coef: float):
    trainer = PPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", vf_coef=vf_coef, **dict(TINY, num_groups=4, group_size=1, max_turns=3))
    metrics = trainer.train_on(trainer.collect(0), 0)
    weights = {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}
    head = {k: v.clone() for k, v in trainer.policy.value_head.state_dict().items()}
    lrs = [group["lr"] for group in trainer.optimizer.param_groups]
    trainer.close()
    return weights, head, metrics, lrs


def test_the_policy_update_does_not_depend_on_the_value_loss_weight():
    without, head0, metrics0, lrs = _ppo_policy_after_one_update(0.0)
    with_critic, head1, metrics1, _ = _ppo_policy_after_one_update(1.0)
    assert all(torch.equal(without[k], with_critic[k]) for k in without)
    assert metrics0["train/grad_norm"] == metrics1["train/grad_norm"]  # the policy's norm, before clipping
    assert metrics0["train/critic_grad_norm"] == 0.0 < metrics1["train/critic_grad_norm"]
    assert not all(torch.equal(head0[k], head1[k]) for k in head0)  # the critic itself did learn
    assert lrs == [pytest.approx(1e-4), pytest.approx(1e-3)]  # its own group: 10 x the policy's lr


# ----------------------------------------------------------------------------- 3. invalid penalty
def _penalised(invalid_penalty_on: str | None) -> list[bool]:
    settings = {} if invalid_penalty_on is None else {"invalid_penalty_on": invalid_penalty_on}
    trainer = GRPOTrainer("rspo/ALFWorld-v0", **TINY, **settings)
    rows = [_row(0, step=0), _row(0, step=1, valid=False), _row(0, step=2, format_valid=False)]
    view = trainer.reward_view(Rollout(rows, [_trajectory(0, length=3)]), "outcome")
    return view.invalid.tolist()


def test_only_malformed_replies_are_penalised_by_default_as_in_verl_agent():
    assert _penalised(None) == [False, False, True]  # a command the env rejects is its no-op
    assert _penalised("format_or_env") == [False, True, True]
    with pytest.raises(ValueError, match="invalid_penalty_on"):
        GRPOTrainer("rspo/ALFWorld-v0", invalid_penalty_on="env", **TINY)


# ----------------------------------------------------------------------------- 4. rank swap under GiGPO
def test_rank_swap_reaches_gigpo_step_returns():
    trainer = RSPOTrainer("rspo/ALFWorld-v0", base="gigpo", swap="rank", **TINY)
    # two failed two-step trajectories of one task: the outcome says nothing, progress does
    rows = [_row(0, step=0, anchor="start"), _row(0, step=1, anchor="a"), _row(1, step=0, anchor="start"), _row(1, step=1, anchor="b")]
    trajectories = [_trajectory(0, progress=0.8, length=2), _trajectory(1, progress=0.2, length=2)]
    view = trainer.reward_view(Rollout(rows, trajectories), "outcome")
    assert view.episode.tolist() == pytest.approx([0.8, 0.8, 0.2, 0.2])
    assert view.step_rewards.tolist() == pytest.approx([0.0, 0.8, 0.0, 0.2])  # paid on the last step
    batch = to_batch(rows, 0)
    advantages = trainer.estimate(view, batch, None).advantages
    # the shared first state is a step group of two: its step-level advantage follows the swap
    episode_only = gigpo_estimate(replace(view, anchors=["x0", "x1", "x2", "x3"]), trainer.config).advantages
    assert advantages[0] - episode_only[0] > 0.5 and advantages[2] - episode_only[2] < -0.5


# ----------------------------------------------------------------------------- 5. replay age
def test_replay_age_counts_the_updates_a_trajectory_joins():
    learner = Rollout([_row(0)], [_trajectory(0)])
    buffer = [(born, Rollout([_row(5, source="explorer")], [_trajectory(5, source="explorer")])) for born in (0, 1, 2)]
    merged = merge_replay(learner, buffer, 2, 2)  # replay_age=2
    replayed = sorted(t.traj_id // 1_000_000 - 1 for t in merged.trajectories if t.source == "explorer")
    assert replayed == [1, 2]  # born at 2 (age 0) and 1 (age 1); age 2 is past replay_age=2
    with pytest.raises(ValueError, match="replay_age"):
        RSPOTrainer("rspo/ALFWorld-v0", replay_age=0, explorer_group_size=1, **TINY)


@pytest.mark.slow
def test_the_buffer_keeps_exactly_what_the_next_update_replays():
    trainer = RSPOTrainer("rspo/ALFWorld-v0", base="grpo", explorer_group_size=1, replay_age=1, **TINY)
    trainer.learn(2)
    assert [born for born, _ in trainer.buffer] == [1]
    assert trainer.history[-1]["explorer/replayed_rows"] == trainer.history[-1]["explorer/env_steps"]


# ----------------------------------------------------------------------------- 6. all-equal groups
@pytest.mark.parametrize("estimate,config", [(grpo_estimate, TrainerConfig), (gigpo_estimate, GiGPOConfig)])
def test_trajectory_statistics_of_an_all_failed_group_stay_finite(estimate, config):
    # one group, three failed trajectories; the second step of trajectory 0 was malformed
    view = RewardView(
        step_rewards=torch.zeros(4, dtype=torch.float64),
        episode=torch.zeros(4, dtype=torch.float64),
        invalid=torch.tensor([False, True, False, False]),
        group_ids=torch.zeros(4, dtype=torch.long),
        traj_ids=torch.tensor([0, 0, 1, 2]),
        anchors=["a", "b", "c", "d"],
    )
    advantages = estimate(view, config(episode_stats="trajectories")).advantages
    assert advantages.tolist() == pytest.approx([0.0, -0.1, 0.0, 0.0], abs=1e-6)  # verl: -0.1 / 1e-6
    steps = estimate(view, config(episode_stats="steps")).advantages  # verl-agent's default, unchanged
    assert steps.abs().max() < 10


# ----------------------------------------------------------------------------- 7. partial mini-batches
def _last_step_gradient(trainer, batch, estimate, mini_batch_size: int) -> torch.Tensor:
    """The gradient of the last optimizer step of one epoch over ``batch`` (no weight moves)."""
    trainer.config = replace(trainer.config, mini_batch_size=mini_batch_size, max_grad_norm=1e9)
    seen = []
    trainer.optimizer.step = lambda *a, **k: seen.append(torch.cat([p.grad.flatten() for p in trainer.policy.model.parameters() if p.requires_grad]))
    trainer.update(trainer.policy, trainer.optimizer, batch, estimate, 0)
    return seen[-1]


@pytest.mark.slow
def test_a_partial_last_mini_batch_gets_a_proportionally_smaller_gradient():
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", **dict(TINY, max_turns=3))
    rows = trainer.collect(0).rows[:5]
    batch = to_batch(rows, trainer.policy.pad_token_id)
    estimate = Estimate(torch.linspace(-1.0, 1.0, len(rows)))
    partial = _last_step_gradient(trainer, batch, estimate, 4)  # steps of 4 rows, then 1
    alone = _last_step_gradient(trainer, batch, estimate, 1)  # the same last row as a full step
    assert torch.allclose(partial, alone / 4, atol=1e-9, rtol=1e-5)


def test_weight_decay_defaults_to_verls():
    assert TrainerConfig().weight_decay == 0.01
    trainer = GiGPOTrainer("rspo/ALFWorld-v0", **TINY)
    assert trainer.optimizer.param_groups[0]["weight_decay"] == 0.01


# ----------------------------------------------------------------------------- 8. micro-batches and memory
def _step_gradients(trainer, rollout, **overrides) -> list[torch.Tensor]:
    """The gradient (policy and critic) each optimizer step of ``train_on`` sees; no weight moves."""
    saved = trainer.config
    trainer.config = replace(saved, max_grad_norm=1e9, **overrides)
    seen = []
    trainer.optimizer.step = lambda *a, **k: seen.append(torch.cat([p.grad.flatten() for p in trainer.policy.parameters()]))
    trainer.train_on(rollout, 0)
    trainer.config = saved
    return seen


def _same_gradients(got: list[torch.Tensor], expected: list[torch.Tensor], tolerance: float) -> bool:
    return len(got) == len(expected) and all(float((g - e).norm() / e.norm()) < tolerance for g, e in zip(got, expected))


@pytest.mark.slow
@pytest.mark.parametrize("make, loss_agg", [
    (lambda: GRPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", kl_coef=0.01, **TINY), "seq-mean-token-mean"),
    (lambda: PPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", **TINY), "token-mean"),
], ids=["grpo-kl-seq-mean", "ppo-token-mean"])
def test_accumulation_over_row_or_token_budget_micro_batches_equals_one_batch(make, loss_agg):
    trainer = make()
    rollout = trainer.collect(0)
    for module in (trainer.policy.model, trainer.policy.value_head, getattr(trainer.reference, "model", None)):
        if module is not None:  # float64: float32 sums over ~800-token prompts move ~3e-6 with the batch shape
            module.double()
    lengths = to_batch(rollout.rows, trainer.policy.pad_token_id).lengths()
    budget = 2 * max(p + r for p, r in lengths)
    assert 1 < len(pack_by_tokens(lengths, budget)) < len(lengths)  # the budget groups some rows, not all
    settings = dict(loss_agg=loss_agg, mini_batch_size=3)  # steps of 3 rows (the last one partial)
    one_batch = _step_gradients(trainer, rollout, micro_batch_size=3, **settings)
    assert len(one_batch) > 1
    for micro in (dict(micro_batch_size=1), dict(max_tokens_per_micro_batch=budget)):
        # float32 remains in the log-softmax and the values: ~1e-6 where it does, ~1e-15 elsewhere
        assert _same_gradients(_step_gradients(trainer, rollout, **settings, **micro), one_batch, 1e-5), micro
    trainer.close()


@pytest.mark.slow
def test_gradient_checkpointing_gives_the_same_update():
    plain = GRPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", **TINY)
    checkpointed = GRPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", gradient_checkpointing=True, **TINY)
    assert any(getattr(m, "gradient_checkpointing", False) for m in checkpointed.policy.model.modules())
    assert not any(getattr(m, "gradient_checkpointing", False) for m in plain.policy.model.modules())
    rollout = plain.collect(0)
    assert _same_gradients(_step_gradients(checkpointed, rollout), _step_gradients(plain, rollout), 1e-6)
    with pytest.raises(ValueError, match="max_tokens_per_micro_batch"):
        GRPOTrainer("rspo/ALFWorld-v0", max_tokens_per_micro_batch=0, **TINY)
    plain.close()
    checkpointed.close()
