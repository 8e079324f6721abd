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
