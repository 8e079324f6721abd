"""verl parity, part 2: the same update under every batching and precision.

Each test pins a departure from verl that changed training results: Dr.GRPO's normaliser taken
from each micro-batch's width, a bfloat16 policy trained without float32 master weights, the
first ratio of an on-policy step off 1 by rounding, forced tokens in the token-mean, and a loss
aggregation the update cannot step on.
"""

import warnings
from dataclasses import replace

import pytest
import torch

import rspo_gym  # noqa: F401

pytest.importorskip("transformers")

from rspo_gym.algos import GRPOTrainer  # noqa: E402
from rspo_gym.algos.config import TrainerConfig  # noqa: E402
from rspo_gym.algos.losses import truncated_is_weights  # noqa: E402
from rspo_gym.algos.trainer import Estimate  # noqa: E402
from rspo_gym.errors import UserError  # noqa: E402
from rspo_gym.rollout.trajectory import pack_by_tokens, to_batch  # noqa: E402

TINY = dict(num_groups=2, group_size=2, max_turns=3, eval_every=0, progress=False, seed=0)


def _step_gradients(trainer, batch, estimate, **overrides) -> list[torch.Tensor]:
    """The policy gradient each optimizer step of one ``update`` sees; no weight moves."""
    saved = trainer.config
    trainer.config = replace(saved, max_grad_norm=1e9, **overrides)
    seen = []
    trainer.optimizer.step = lambda *a, **k: seen.append(torch.cat([p.grad.flatten().clone() for p in trainer.policy.policy_parameters()]))
    trainer.update(trainer.policy, trainer.optimizer, batch, estimate, 0)
    trainer.config = saved
    return seen


def _compare(got: torch.Tensor, expected: torch.Tensor) -> tuple[float, float, float]:
    """(norm ratio, cosine, relative difference) of two gradients."""
    cosine = float(torch.nn.functional.cosine_similarity(got, expected, dim=0))
    return float(got.norm() / expected.norm()), cosine, float((got - expected).norm() / expected.norm())


def _float64_rollout(**settings):
    """A tiny-alfworld GRPO trainer in float64 (float32 sums would move ~1e-6 with the batch shape),
    one rollout's rows and batch, and an estimate that gives every row its own advantage."""
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", **TINY, **settings)
    trainer.policy.model.double()
    rows = trainer.collect(0).rows
    batch = to_batch(rows, trainer.policy.pad_token_id)
    return trainer, rows, batch, Estimate(torch.linspace(-1.0, 1.0, len(rows), dtype=torch.float64))


# ----------------------------------------------------------------------------- 1. Dr.GRPO's constant
@pytest.mark.slow
def test_dr_grpo_gradient_is_the_same_under_any_micro_batching_or_token_budget():
    trainer, rows, batch, estimate = _float64_rollout()
    assert len(rows) >= 10
    lengths = batch.lengths()
    budget = 3 * max(p + r for p, r in lengths)
    assert 1 < len(pack_by_tokens(lengths, budget)) < len(rows)
    settings = dict(loss_agg="seq-mean-token-sum-norm", mini_batch_size=len(rows))
    (one,) = _step_gradients(trainer, batch, estimate, micro_batch_size=len(rows), **settings)
    for micro in (dict(micro_batch_size=1), dict(micro_batch_size=5), dict(max_tokens_per_micro_batch=budget)):
        (got,) = _step_gradients(trainer, batch, estimate, **settings, **micro)
        ratio, cosine, difference = _compare(got, one)
        print(micro, f"norm x{ratio:.4f} cosine {cosine:.6f} relative difference {difference:.2e}")
        assert difference < 1e-6, micro
    # the divisor is the response length limit, not any batch's width
    (halved,) = _step_gradients(trainer, batch, estimate, loss_scale_factor=2 * trainer.config.max_new_tokens, micro_batch_size=1, **settings)
    assert _compare(halved, one / 2)[2] < 1e-6
    trainer.close()


# ----------------------------------------------------------------------------- 2. bf16 weights passed in
def _changed_share(trainer) -> float:
    """After one lr-1e-6 update: the share of weights with a gradient >= 1e-8 that changed."""
    rollout = trainer.collect(0)
    named = [(n, p) for n, p in trainer.policy.model.named_parameters() if p.requires_grad]
    before = {n: p.detach().clone() for n, p in named}
    trainer.train_on(rollout, 0)
    changed = total = 0
    for name, parameter in named:
        moved = parameter.grad.float().abs() >= 1e-8
        changed += int((parameter.detach() != before[name])[moved].sum())
        total += int(moved.sum())
    return changed / total


@pytest.mark.slow
def test_a_bfloat16_policy_passed_in_trains_on_float32_master_weights_under_bf16_mixed():
    from rspo_gym.policies.llm import load_policy

    policy = load_policy("tiny-alfworld", device="cpu", dtype="bfloat16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "updates round away" warning: nothing does
        trainer = GRPOTrainer("rspo/ALFWorld-v0", policy, precision="bf16-mixed", learning_rate=1e-6, mini_batch_size=64, **TINY)
    assert all(p.dtype == torch.float32 for p in trainer.policy.policy_parameters())
    share = _changed_share(trainer)
    print(f"share of weights with a gradient that changed: {share:.4f}")
    assert share == 1.0
    trainer.close()


def test_load_policy_defaults_to_float32_weights_on_every_device(monkeypatch):
    from rspo_gym.policies import llm, models

    asked = []
    real = models.load_model
    monkeypatch.setattr(models, "load_model", lambda name, **kw: asked.append(kw["dtype"]) or real(name, **{**kw, "device": "cpu"}))
    policy = llm.load_policy("tiny-untrained", device="cuda")  # a CUDA load used to default to bfloat16
    assert asked == [torch.float32] and next(policy.model.parameters()).dtype == torch.float32


# ----------------------------------------------------------------------------- 4. off-policy by rounding
@pytest.mark.slow
def test_an_on_policy_bf16_step_starts_at_ratio_one_and_logs_the_rollout_gap():
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", precision="bf16-mixed", mini_batch_size=64, **TINY)
    assert trainer.recompute_old_logprobs  # bf16 generation rounds otherwise than the update
    metrics = trainer.train_on(trainer.collect(0), 0)
    print({k: metrics[k] for k in ("train/approx_kl", "train/clipfrac", "train/rollout_logprob_diff")})
    assert metrics["train/approx_kl"] == 0.0 and metrics["train/clipfrac"] == 0.0
    assert 0.0 < metrics["train/rollout_logprob_diff"] < 0.1
    fp32 = GRPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", precision="fp32", **TINY)
    assert not fp32.recompute_old_logprobs
    assert fp32.train_on(fp32.collect(0), 0)["train/rollout_logprob_diff"] < 1e-4
    trainer.close()
    fp32.close()


@pytest.mark.slow
def test_truncated_importance_sampling_weighs_each_token_by_the_capped_train_over_rollout_ratio():
    trainer, rows, batch, estimate = _float64_rollout(mini_batch_size=64)
    training = trainer.policy.logprobs(batch)["logprobs"]
    shift = torch.linspace(-1.0, 1.0, batch.response_mask.numel()).view_as(training)
    batch.old_logprobs = (training - shift).to(batch.old_logprobs.dtype) * batch.response_mask  # another engine's numbers
    (plain,) = _step_gradients(trainer, batch, estimate)
    (tis,) = _step_gradients(trainer, batch, estimate, tis_imp_ratio_cap=1.5)
    weights = truncated_is_weights(training, batch.old_logprobs, batch.response_mask, cap=1.5)
    assert 0 < float(weights[batch.response_mask > 0].min()) < 1 and float(weights.max()) == pytest.approx(1.5)
    saved = trainer.config
    trainer.config = replace(saved, max_grad_norm=1e9)
    seen = []
    trainer.optimizer.step = lambda *a, **k: seen.append(torch.cat([p.grad.flatten().clone() for p in trainer.policy.policy_parameters()]))
    trainer.update(trainer.policy, trainer.optimizer, batch, estimate, 0, is_weights=weights)
    assert _compare(tis, seen[0])[2] < 1e-9 and _compare(tis, plain)[2] > 1e-2
    assert TrainerConfig().tis_imp_ratio_cap is None  # off by default, as in verl
    trainer.close()


# ----------------------------------------------------------------------------- 5. forced tokens
@pytest.mark.slow
def test_forced_tokens_are_out_of_the_token_mean_and_its_metrics():
    trainer, rows, batch, estimate = _float64_rollout(mini_batch_size=64)
    assert batch.allowed is not None
    forced = ((batch.allowed >= 0).sum(-1) == 1) & (batch.response_mask > 0)
    share = float(forced.sum() / batch.response_mask.sum())
    print(f"forced share of response tokens: {share:.3f}")
    assert 0.2 < share < 1.0
    (got,) = _step_gradients(trainer, batch, estimate)
    free = replace(batch, allowed=batch.allowed.clone(), response_mask=batch.response_mask * ~forced)
    free.allowed[forced] = -1  # the forced positions gone: a batch of the free tokens alone
    (expected,) = _step_gradients(trainer, free, estimate)
    assert _compare(got, expected)[2] < 1e-9
    metrics = trainer.update(trainer.policy, trainer.optimizer, batch, estimate, 0)
    with torch.no_grad():
        entropy = trainer.policy.forward(batch, entropy=True)["entropy"]
    free_entropy = float((entropy * free.response_mask).sum() / free.response_mask.sum())
    assert metrics["train/entropy"] == pytest.approx(free_entropy, rel=1e-3)  # not diluted by forced zeros
    trainer.close()


# ----------------------------------------------------------------------------- 6. loss_agg "none"
def test_a_loss_aggregation_the_update_cannot_step_on_is_refused_in_the_config():
    with pytest.raises(UserError, match=r"^loss_agg must be one of token-mean, .*, got 'none'$"):
        TrainerConfig(loss_agg="none")


# ----------------------------------------------------------------------------- knobs
def test_the_lr_schedule_sets_warmup_cosine_and_floor_at_chosen_iterations():
    from rspo_gym.algos.schedules import lr_factor

    assert [lr_factor(s, 10) for s in (0, 5, 9)] == [1.0, 1.0, 1.0]  # verl's default: constant, no warmup
    assert [lr_factor(s, 10, "constant", 0.3) for s in (0, 1, 2, 3, 9)] == pytest.approx([0, 1 / 3, 2 / 3, 1, 1])
    cosine = [lr_factor(s, 10, "cosine", 0.2, 0.1) for s in (2, 6, 10)]
    assert cosine == pytest.approx([1.0, 0.1 + 0.9 * 0.5, 0.1])  # peak after warmup, half-way, the floor
    trainer = GRPOTrainer(
        "rspo/ALFWorld-v0", "tiny-untrained", lr_scheduler="cosine", lr_warmup_steps_ratio=0.25, min_lr_ratio=0.5,
        learning_rate=1e-3, **dict(TINY, max_turns=1, num_groups=1), iterations=4,
    )
    lrs = [row["train/lr"] for row in trainer.learn()]
    assert lrs == pytest.approx([0.0, 1e-3, 1e-3 * (0.5 + 0.5 * 0.75), 1e-3 * (0.5 + 0.5 * 0.25)])
    trainer.close()


def test_similarity_merges_two_near_identical_anchors_into_one_step_group():
    from rspo_gym.algos.advantages import gigpo_advantages

    anchors = ["You are in the kitchen. You see a fridge 1 and a mug 1.", "You are in the kitchen. You see a fridge 1 and a mug 2.",
               "You arrive at the garden."]
    args = (torch.tensor([10.0, 0.0, 0.0]), torch.tensor([1.0, 0.0, 0.0]), torch.zeros(3, dtype=torch.long), torch.tensor([0, 1, 2]), anchors)
    exact, exact_metrics = gigpo_advantages(*args, norm="mean")
    similar, metrics = gigpo_advantages(*args, norm="mean", similarity_thresh=0.95)
    assert exact_metrics["step_group/count"] == 3 and metrics["step_group/count"] == 2  # the two kitchens share one
    episode, _ = gigpo_advantages(*args, norm="mean", omega=0.0)
    assert (exact - episode).tolist() == [0.0, 0.0, 0.0]  # singletons: no step-level term
    assert (similar - episode).tolist() == pytest.approx([0.5, -0.5, 0.0])
    from rspo_gym.algos.config import GiGPOConfig

    assert GiGPOConfig().enable_similarity is False and GiGPOConfig().similarity_thresh == 0.95


# ----------------------------------------------------------------------------- KL in the reward
def test_kl_reward_penalty_and_controllers_match_hand_computed_values():
    from rspo_gym.algos.kl_control import KL_CONTROLLERS, kl_reward_penalty, next_kl_coef, penalised_scores
    from rspo_gym.algos.validation import CHOICES

    assert CHOICES["kl_ctrl"] == KL_CONTROLLERS
    old = torch.tensor([[-1.0, -2.0, -0.5], [-0.2, -0.3, 0.0]])
    ref = torch.tensor([[-1.5, -2.0, -9.0], [-0.1, -0.6, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # the third token is padding
    penalty, row_kl = kl_reward_penalty(old, ref, mask, 0.1, "k1")
    # k1 = old - ref: [0.5, 0] and [-0.1, 0.3]; beta 0.1; row means 0.25 and 0.1
    assert penalty.flatten().tolist() == pytest.approx([0.05, 0.0, 0.0, -0.01, 0.03, 0.0])
    assert row_kl.tolist() == pytest.approx([0.25, 0.1])
    assert penalised_scores(torch.tensor([10.0, 0.0]), penalty).tolist() == pytest.approx([9.95, -0.02])
    # adaptive: beta * (1 + clip(kl / target - 1, -0.2, 0.2) * rows / horizon)
    assert next_kl_coef("adaptive", 0.1, 0.175, 128, 0.1, 1000) == pytest.approx(0.1 * (1 + 0.2 * 0.128))
    assert next_kl_coef("adaptive", 0.1, 0.09, 128, 0.1, 1000) == pytest.approx(0.1 * (1 - 0.1 * 0.128))
    assert next_kl_coef("adaptive", 0.1, 0.0, 128, 0.1, 1000) == pytest.approx(0.1 * (1 - 0.2 * 0.128))
    assert next_kl_coef("fixed", 0.1, 5.0, 128, 0.1, 1000) == 0.1


def test_kl_in_the_reward_lowers_each_rows_score_moves_beta_and_leaves_the_loss():
    from rspo_gym.algos.grpo import grpo_estimate
    from rspo_gym.algos.kl_control import adaptive_kl_coef

    with pytest.raises(UserError, match=r"^use_kl_in_reward needs kl_coef > 0"):
        TrainerConfig(use_kl_in_reward=True)
    settings = dict(use_kl_in_reward=True, kl_coef=0.1, kl_kind="k3", kl_ctrl="adaptive", kl_target=1e-3, kl_horizon=50)
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", **TINY, **settings)
    with torch.no_grad():  # a reference the policy has drifted from
        for parameter in trainer.reference.model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    rollout = trainer.collect(0)
    seen = []
    estimate = trainer.estimate
    trainer.estimate = lambda view, batch, old_values: seen.append(view) or estimate(view, batch, old_values)
    metrics = trainer.train_on(rollout, 0)
    view = seen[0]
    plain = trainer.reward_view(rollout, trainer.config.reward)
    row_penalty = view.token_penalty.sum(-1)
    assert (row_penalty > 0).all()  # k3 > 0 on every row with a free token
    assert not torch.allclose(grpo_estimate(view, trainer.config).advantages, grpo_estimate(plain, trainer.config).advantages)
    assert "train/kl" not in metrics  # the loss carries no KL term
    kl = metrics["train/reward_kl_penalty"]
    assert metrics["train/reward_kl_penalty_coeff"] == 0.1 and kl > 1e-3
    assert trainer.kl_beta == pytest.approx(adaptive_kl_coef(0.1, kl, len(rollout.rows), 1e-3, 50)) and trainer.kl_beta > 0.1
    assert trainer.state()["kl_beta"] == trainer.kl_beta
    trainer.close()


# ----------------------------------------------------------------------------- DAPO's dynamic sampling
def _group_scores(trainer, rollout) -> dict[int, list[float]]:
    """Each group's trajectory scores under the reward the update reads."""
    view = trainer.reward_view(trainer.update_rollout(rollout, 0), trainer.reward_kind(0))
    first = {}
    for row, (group, traj) in enumerate(zip(view.group_ids.tolist(), view.traj_ids.tolist())):
        first.setdefault(traj, (group, float(view.episode[row])))
    scores: dict[int, list[float]] = {}
    for group, score in first.values():
        scores.setdefault(group, []).append(score)
    return scores


def _counting_collect(trainer) -> list[int]:
    calls = []
    collect = trainer.collect
    trainer.collect = lambda it: calls.append(it) or collect(it)
    return calls


def test_informative_groups_keep_mixed_outcomes_and_singletons():
    from rspo_gym.algos.dynamic_sampling import informative_groups

    assert informative_groups([3, 3, 3, 1, 1, 7], [10.0, 10.0, 10.0, 0.0, 10.0, 0.0]) == [1, 7]
    assert informative_groups([0, 0], [0.0, 0.0]) == []


@pytest.mark.slow
def test_a_filtered_batch_has_no_all_equal_group_and_samples_until_it_is_full():
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", **dict(TINY, seed=1), reward="dense", filter_groups=True, max_num_gen_batches=0)
    calls = _counting_collect(trainer)
    rollout, metrics = trainer.collect_batch(0)
    scores = _group_scores(trainer, rollout)
    assert len(scores) == 2 and all(len(set(s)) > 1 for s in scores.values()), scores
    assert len(calls) == metrics["filter/gen_batches"] >= 2 and metrics["filter/dropped_env_steps"] > 0  # an all-equal group was dropped
    assert len({t.traj_id for t in rollout.trajectories}) == len(rollout.trajectories) == 4
    trainer.config = replace(trainer.config, filter_groups=False)
    first, _ = trainer.collect_batch(0)  # the first rollout again, unfiltered
    assert any(len(set(s)) == 1 for s in _group_scores(trainer, first).values())  # what filtering removed
    trainer.close()


def test_the_cap_stops_sampling_and_fills_the_batch_from_the_last_rollout():
    # one turn cannot win ALFWorld: every group is all-lost
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", **dict(TINY, max_turns=1), filter_groups=True, max_num_gen_batches=3)
    calls = _counting_collect(trainer)
    rollout, metrics = trainer.collect_batch(0)
    assert len(calls) == 3 and metrics["filter/informative_groups"] == 0.0
    assert len({t.group_id for t in rollout.trajectories}) == trainer.config.num_groups
    trainer.close()


def test_rspo_explorer_filters_on_the_group_it_updates_and_replays_every_rollouts_explorer():
    from rspo_gym.algos import RSPOTrainer

    trainer = RSPOTrainer(
        "rspo/ALFWorld-v0", model="tiny-alfworld", base="grpo", swap="explorer", explorer_group_size=1,
        **dict(TINY, seed=1, max_turns=1), filter_groups=True, max_num_gen_batches=2,
    )
    history = trainer.learn(1)
    assert history[0]["filter/gen_batches"] == 2.0
    explored = trainer._explorer_rollout  # both rollouts' explorer trajectories, ids apart
    assert len(explored.trajectories) == 2 * trainer.config.num_groups
    assert len({t.traj_id for t in explored.trajectories}) == len(explored.trajectories)
    assert [born for born, _ in trainer.buffer] == [0, 0]
    trainer.close()


# ----------------------------------------------------------------------------- a separate critic
@pytest.mark.slow
def test_the_separate_critics_updates_leave_the_policys_weights_untouched_and_ppo_trains_with_it():
    from rspo_gym.algos import PPOTrainer
    from rspo_gym.algos.config import PPOConfig

    assert PPOConfig().critic == "head"
    settings = dict(TINY, group_size=1, num_groups=3, critic="separate", critic_model="tiny-untrained")
    quiet = PPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", vf_coef=0.5, critic_lr=1e-5, **settings)
    loud = PPOTrainer("rspo/ALFWorld-v0", model="tiny-alfworld", vf_coef=50.0, critic_lr=1e-1, **settings)
    assert quiet.policy.value_head is None
    assert not {p.data_ptr() for p in quiet.critic.parameters()} & {p.data_ptr() for p in quiet.policy.policy_parameters()}
    rollout = quiet.collect(0)
    initial = [p.detach().clone() for p in loud.critic.parameters()]
    for trainer in (quiet, loud):
        metrics = trainer.train_on(rollout, 0)
        assert metrics["train/critic_grad_norm"] > 0 and metrics["train/value_loss"] > 0
    # the critics' very different steps changed nothing of the policies' (the same step each)
    for mine, theirs in zip(quiet.policy.policy_parameters(), loud.policy.policy_parameters(), strict=True):
        assert torch.equal(mine, theirs)
    assert any(not torch.equal(before, after.detach()) for before, after in zip(initial, loud.critic.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(quiet.critic.parameters(), loud.critic.parameters()))
    history = quiet.learn(2)
    assert all(torch.isfinite(torch.tensor(row["train/value_loss"])) for row in history)
    assert "critic" in quiet.state() and len(quiet.optimizers()) == 2
    quiet.close()
    loud.close()


# ----------------------------------------------------------------------------- the verl-agent preset
def _preset_table() -> dict[str, tuple[str, str]]:
    """docs/verl_agent.md's rows that name one field alone: field -> (ALFWorld, WebShop) cells."""
    import re
    from pathlib import Path

    rows = {}
    for line in (Path(__file__).parents[2] / "docs" / "verl_agent.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and re.fullmatch(r"`\w+`", cells[3]):
            rows[cells[3].strip("`")] = tuple(re.sub(r"\s*\[\^\w+\]", "", c) for c in cells[1:3])
    return rows


def _cell(text: str):
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a bare word: low_var_kl, mean_norm, token-mean


def test_the_verl_agent_preset_equals_the_docs_table_and_is_one_word_from_python_and_the_cli(monkeypatch):
    from rspo_gym.algos import GiGPOTrainer
    from rspo_gym.algos.config import GiGPOConfig, TrainerConfig
    from rspo_gym.algos.presets import preset_overrides
    from rspo_gym import cli

    table = _preset_table()
    for column, env in enumerate(("rspo/ALFWorld-v0", "rspo/WebShop-v0")):
        preset = preset_overrides("verl-agent", env, GiGPOConfig)
        assert set(preset) <= set(table), set(preset) - set(table)  # every preset field has its row
        assert {field: _cell(table[field][column]) for field in preset} == preset, env
        GiGPOConfig(**preset)  # valid values
    shared = {"learning_rate": 1e-6, "kl_coef": 0.01, "kl_kind": "low_var_kl", "eval_temperature": 0.4, "max_new_tokens": 512,
              "constrained": False, "history_length": 2, "num_groups": 16, "group_size": 8}
    alfworld = preset_overrides("verl-agent", "rspo/ALFWorld-v0", GiGPOConfig)
    assert {k: alfworld[k] for k in shared} == shared and alfworld["max_prompt_length"] == 2048
    assert "gamma" not in preset_overrides("verl-agent", "rspo/ALFWorld-v0", TrainerConfig)
    with pytest.raises(UserError, match=r"^unknown preset 'verl'; expected one of verl-agent$"):
        preset_overrides("verl", "rspo/ALFWorld-v0", GiGPOConfig)
    trainer = GiGPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", preset="verl-agent", num_groups=1, group_size=2, progress=False)
    assert trainer.config.learning_rate == 1e-6 and trainer.config.max_prompt_length == 2048 and trainer.config.num_groups == 1
    trainer.close()
    args = cli.build_parser().parse_args(["train", "--algo", "gigpo", "--env", "rspo/WebShop-v0", "--preset", "verl-agent", "--set", "lr_scheduler=cosine"])
    given = {}
    monkeypatch.setattr(cli, "_trainer", lambda algo, env, model, overrides: given.update(overrides))
    with pytest.raises(AttributeError):  # the fake trainer (None) has no learn(): the overrides are what matters
        cli._train(args)
    assert given == {**preset_overrides("verl-agent", "rspo/WebShop-v0", GiGPOConfig), "lr_scheduler": "cosine"}  # no --seed: the config keeps its own
