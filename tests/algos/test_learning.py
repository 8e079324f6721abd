"""Learning tests: one update of each trainer moves the policy toward its winning trajectories.

They start from ``tiny-alfworld`` (the tiny model after our behaviour cloning of ALFWorld's
expert) on generated ``pick_and_place_simple`` training tasks, collect one grouped rollout,
update once, and compare the log-likelihood of each trajectory's actions before and after:
winning trajectories must gain relative to failing ones (an absolute gain is not implied:
normalised advantages move probability between trajectories, and GiGPO's step groups can lower
some steps of a winning trajectory). This is the signal
every improvement is made of, measured exactly for a fixed seed; held-out learning curves are in
the quick start and the README, since a CI-sized held-out evaluation is too noisy to assert on.
"""

import pytest
import torch

import rspo_gym  # noqa: F401

pytest.importorskip("transformers")

from rspo_gym.algos import GiGPOTrainer, GRPOTrainer, PPOTrainer, RSPOTrainer  # noqa: E402
from rspo_gym.quickstart import alfworld_task_ids  # noqa: E402
from rspo_gym.rollout.trajectory import to_batch  # noqa: E402

TRAINERS = [
    (GRPOTrainer, {}),
    (GiGPOTrainer, {}),
    (PPOTrainer, {"group_size": 1, "num_groups": 16}),
    (RSPOTrainer, {"base": "grpo", "explorer_group_size": 2}),
]


def _per_trajectory_logprob(policy, rollout):
    batch = to_batch(rollout.rows, policy.pad_token_id)
    logprobs = policy.logprobs(batch, temperature=1.0)["logprobs"]
    row_sums = (logprobs * batch.response_mask).sum(dim=1)
    totals: dict[int, float] = {}
    for row, value in zip(rollout.rows, row_sums.tolist()):
        totals[row.traj_id] = totals.get(row.traj_id, 0.0) + value
    return totals


@pytest.mark.slow
@pytest.mark.parametrize("cls,extra", TRAINERS, ids=["grpo", "gigpo", "ppo", "rspo-grpo"])
def test_one_update_favours_winning_trajectories(cls, extra):
    trainer = cls(
        "rspo/ALFWorld-v0",
        model="tiny-alfworld",
        train_task_ids=alfworld_task_ids("train", "pick_and_place_simple", 16),
        **{"num_groups": 4, "group_size": 4, **extra},
        history_length=6,
        max_turns=20,
        temperature=0.7,
        learning_rate=1e-3,
        eval_every=0,
        progress=False,
        seed=2,
    )
    rollout = trainer.collect(1)  # iteration 1 of seed 2: mixed outcomes within groups
    won = {t.traj_id for t in rollout.trajectories if t.won}
    lost = {t.traj_id for t in rollout.trajectories if not t.won}
    assert won and lost, "the fixed-seed rollout must hold both outcomes"
    before = _per_trajectory_logprob(trainer.policy, rollout)
    trainer.train_on(rollout, 1)
    after = _per_trajectory_logprob(trainer.policy, rollout)
    gain = {k: after[k] - before[k] for k in before}
    mean_won = sum(gain[k] for k in won) / len(won)
    mean_lost = sum(gain[k] for k in lost) / len(lost)
    assert mean_won > mean_lost
    assert torch.isfinite(torch.tensor(list(gain.values()))).all()
