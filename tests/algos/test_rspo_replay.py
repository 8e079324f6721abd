"""RSPO's explorer mechanics: replay within a finite task pool, importance-weight levels, sync period."""

import pytest
import torch

import rspo_gym  # noqa: F401
from rspo_gym.algos import RSPOTrainer
from rspo_gym.errors import UserError

FAST = dict(model="drrn", num_groups=2, group_size=2, explorer_group_size=1, max_turns=3, eval_every=0, progress=False,
            seed=0, replay_age=2, checkpoint_every=0)
POOL = list(range(1000))


def _replayed_rows(**overrides) -> list[tuple[float, int]]:
    """Per iteration: replayed explorer rows in the learner's update, and that iteration's own explorer rows."""
    trainer = RSPOTrainer("rspo/ALFWorld-v0", train_task_ids=POOL, **{**FAST, **overrides})
    out = []
    for it in range(3):
        rollout = trainer.collect(it)
        metrics = trainer.train_on(rollout, it)
        out.append((metrics["explorer/replayed_rows"], metrics["explorer/env_steps"]))
    trainer.close()
    return out


def test_a_finite_pool_makes_replay_replay():
    without = _replayed_rows(replay_task_share=0.0)
    assert all(replayed == own for replayed, own in without)  # a 1,000-task pool: no task came back
    with_share = _replayed_rows(replay_task_share=1.0)
    assert with_share[0][0] == with_share[0][1]  # nothing older to replay yet
    assert all(replayed > own for replayed, own in with_share[1:])  # last iteration's explorer trajectories join


def test_replayed_tasks_are_the_explorers_buffered_ones():
    trainer = RSPOTrainer("rspo/ALFWorld-v0", train_task_ids=POOL, replay_task_share=0.5, **FAST)
    trainer.collect(0)
    buffered = {t.task_id for _, r in trainer.buffer for t in r.trajectories}
    assert trainer.tasks(1)["task_ids"][0] in buffered
    assert len(set(trainer.tasks(1)["task_ids"])) == 2
    trainer.close()


def test_replay_task_share_needs_a_pool():
    with pytest.raises(UserError, match="train_task_ids"):
        RSPOTrainer("rspo/ALFWorld-v0", replay_task_share=0.5, **FAST)


@pytest.mark.parametrize("level", ["step", "trajectory", "none"])
def test_importance_weight_levels(level):
    trainer = RSPOTrainer("rspo/ALFWorld-v0", is_level=level, is_cap=2.0, **FAST)
    trainer.collect(0)
    rollout = trainer.collect(1)  # the buffer now holds iteration 0's and 1's explorer trajectories
    for _ in range(3):  # move the learner away from the explorer, so that ratios differ from 1
        trainer.train_on(rollout, 1)
    from rspo_gym.training.rspo import merge_replay

    merged = merge_replay(rollout, trainer.buffer, 1, trainer.config.replay_age)
    inputs = trainer.learner_inputs(merged)
    mask = inputs["batch"].response_mask.bool()
    replayed = torch.tensor([r.source != "learner" for r in merged.rows])
    weights = inputs["is_weights"]
    assert torch.all(weights[~replayed][mask[~replayed]] == 1.0)
    w = weights[replayed][mask[replayed]]
    if level == "none":
        assert torch.all(w == 1.0)
        return
    assert torch.all(w <= 2.0 + 1e-6) and not torch.all(w == 1.0)
    traj = torch.tensor([r.traj_id for r in merged.rows])[replayed]
    per_traj = {int(t): weights[replayed][traj == t][mask[replayed][traj == t]] for t in traj.unique()}
    constant = all(torch.allclose(v, v[0].expand_as(v)) for v in per_traj.values())
    assert constant == (level == "trajectory") or max(len(v) for v in per_traj.values()) == 1
    trainer.close()


@pytest.mark.parametrize("every, syncs", [(0, 0), (1, 2), (2, 1)])
def test_the_explorer_syncs_every_k_iterations_or_never(monkeypatch, every, syncs):
    trainer = RSPOTrainer("rspo/ALFWorld-v0", explorer_sync_every=every, **FAST)
    calls = []
    monkeypatch.setattr(trainer, "sync_explorer", lambda: calls.append(1))
    for it in range(3):
        trainer.collect(it)
    assert len(calls) == syncs
    trainer.close()


def _explorer_moments(trainer) -> int:
    return sum(len(state) for state in trainer.explorer_optimizer.state.values())


@pytest.mark.parametrize("keep", [False, True])
def test_the_explorer_keeps_its_optimizer_state_across_a_sync_only_when_asked(keep):
    trainer = RSPOTrainer("rspo/ALFWorld-v0", explorer_sync_every=1, explorer_keep_optimizer=keep, **FAST)
    trainer.train_on(trainer.collect(0), 0)
    before = {k: {n: t.clone() for n, t in s.items() if torch.is_tensor(t)} for k, s in trainer.explorer_optimizer.state_dict()["state"].items()}
    assert before and _explorer_moments(trainer) > 0
    trainer.collect(1)  # syncs first
    assert trainer.history == [] and trainer._synced
    after = trainer.explorer_optimizer.state_dict()["state"]
    if keep:
        assert all(torch.equal(after[k][n], t) for k, s in before.items() for n, t in s.items())
    else:
        assert after == {}
    trainer.close()


def test_the_explorer_syncs_once_the_learner_overtakes_it(monkeypatch):
    trainer = RSPOTrainer("rspo/ALFWorld-v0", explorer_sync_every=0, explorer_sync_on_overtake=True, explorer_overtake_window=2, **FAST)
    calls = []
    monkeypatch.setattr(trainer, "sync_explorer", lambda: calls.append(1))
    ahead, behind = {"rollout/success": 0.1, "explorer/success": 0.5}, {"rollout/success": 0.6, "explorer/success": 0.2}
    for history, synced in [([], False), ([ahead, ahead], False), ([ahead, behind], False), ([behind, behind], True),
                            ([behind, {**behind, "explorer/synced": 1.0}], False)]:
        trainer.history = history
        trainer.collect(len(history))
        assert trainer._synced == synced, history
    assert len(calls) == 1
    trainer.close()


def test_a_warm_explorer_trains_alone_first_and_its_steps_are_counted():
    trainer = RSPOTrainer("rspo/ALFWorld-v0", explorer_warmup_iterations=2, explorer_sync_every=0, **FAST)
    learner = {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}
    rollout = trainer.collect(0)
    explorer = trainer.explorer.model.state_dict()
    assert any(not torch.equal(learner[k], explorer[k]) for k in learner)  # two dense-reward updates already
    assert all(torch.equal(learner[k], v) for k, v in trainer.policy.model.state_dict().items())  # the learner waited
    metrics = trainer.train_on(rollout, 0)
    own = len(trainer._explorer_rollout.rows)
    # two warm-up iterations of 2 tasks x 1 explorer member, at most 3 turns each
    assert 4 <= metrics["explorer/warmup_env_steps"] <= 12
    assert metrics["explorer/env_steps"] == own + metrics["explorer/warmup_env_steps"]
    own_tokens = sum(len(r.response_ids) for r in trainer._explorer_rollout.rows)
    assert metrics["explorer/warmup_generated_tokens"] > 0  # the warm-up's tokens count as its steps do
    assert metrics["explorer/generated_tokens"] == own_tokens + metrics["explorer/warmup_generated_tokens"]
    assert metrics["explorer/success_gap"] == metrics["explorer/success"] - trainer.rollout_metrics(rollout)["rollout/success"]
    second = trainer.train_on(trainer.collect(1), 1)
    assert "explorer/warmup_env_steps" not in second and second["explorer/env_steps"] == len(trainer._explorer_rollout.rows)
    assert second["explorer/generated_tokens"] == sum(len(r.response_ids) for r in trainer._explorer_rollout.rows)
    trainer.close()
