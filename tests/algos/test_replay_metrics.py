"""The measures of what RSPO's replay does to its learner (``rspo_gym.algos.replay_metrics``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from rspo_gym.algos.losses import truncated_is_weights  # noqa: E402
from rspo_gym.algos.replay_metrics import (  # noqa: E402
    is_weight_stats, logp_gain, revisits, run_labels, task_labels, transfer_sample, transfer_summary,
)


def test_weights_split_by_outcome_on_response_tokens_only():
    # the learner's and the explorer's log-probs of three replayed rows, the last token of row 0 padding
    learner = torch.tensor([[-1.0, -0.5, 0.0], [-4.0, -1.0, -2.0], [-0.2, -0.1, -3.0]])
    explorer = torch.tensor([[-2.0, -0.5, 0.0], [-1.0, -1.0, -2.0], [-0.2, -1.0, -0.1]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 1]])
    weights = truncated_is_weights(learner, explorer, mask, cap=2.0)
    stats = is_weight_stats(weights, mask, torch.tensor([True, True, False]))
    # won: min(e, 2) = 2, 1 (row 0); exp(-3) = 0.0498, 1, 1 (row 1)
    assert stats["replay_win_tokens"] == 5.0
    assert stats["is_weight_win"] == pytest.approx((2 + 1 + torch.exp(torch.tensor(-3.0)).item() + 1 + 1) / 5, abs=1e-6)
    assert stats["is_weight_win_low"] == pytest.approx(1 / 5)
    # lost: 1, min(e^0.9, 2) = 2, exp(-2.9) = 0.055
    assert stats["replay_loss_tokens"] == 3.0
    assert stats["is_weight_loss"] == pytest.approx((1 + 2 + torch.exp(torch.tensor(-2.9)).item()) / 3, abs=1e-6)
    assert stats["is_weight_loss_low"] == pytest.approx(1 / 3)


def test_no_replayed_rows_give_zero_means_with_zero_counts():
    stats = is_weight_stats(torch.zeros(0, 4), torch.zeros(0, 4), torch.zeros(0, dtype=torch.bool))
    assert stats == {"replay_win_tokens": 0.0, "is_weight_win": 0.0, "is_weight_win_low": 0.0,
                     "replay_loss_tokens": 0.0, "is_weight_loss": 0.0, "is_weight_loss_low": 0.0}


def test_logp_gain_averages_over_response_tokens():
    before = torch.tensor([[-2.0, -1.0, -7.0], [-3.0, -0.5, 0.0]])
    after = torch.tensor([[-1.0, -1.5, 9.0], [-2.5, -0.25, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]])
    tokens, gain = logp_gain(before, after, mask)
    assert tokens == 4.0
    assert gain == pytest.approx((1.0 - 0.5 + 0.5 + 0.25) / 4)
    assert logp_gain(before[:0], after[:0], mask[:0]) == (0.0, 0.0)


def played(task, won, source="learner"):
    return SimpleNamespace(task_id=task, won=won, source=source)


def test_labels_need_a_learner_group_and_an_explorer_only_win():
    labels = task_labels([
        played(1, False), played(1, False), played(1, True, "explorer"), played(1, False, "explorer"),
        played(2, False), played(2, False), played(2, False, "explorer"),
        played(3, True), played(3, False), played(3, True, "explorer"),
        played(4, True, "explorer"),  # no learner group: not labelled
    ])
    assert labels == {1: ("explorer_only", 0.0), 2: ("nobody", 0.0), 3: ("learner", 0.5)}


def test_revisits_credit_the_last_label_and_keep_the_newest():
    pending = {}
    first = task_labels([played(1, False), played(1, True, "explorer"), played(2, False), played(2, False, "explorer"),
                         played(3, True), played(3, False, "explorer")])
    metrics, pending = revisits(pending, first)
    assert metrics == {"revisits_explorer_only": 0.0, "revisit_success_explorer_only": 0.0,
                       "revisits_nobody": 0.0, "revisit_success_nobody": 0.0}
    assert pending == {1: "explorer_only", 2: "nobody"}
    # task 1 again: the learner wins 3 of 4; task 2 again: nobody wins, and the explorer now alone does
    second = task_labels([*(played(1, w) for w in (True, True, True, False)),
                          *(played(2, False) for _ in range(4)), played(2, True, "explorer")])
    metrics, pending = revisits(pending, second)
    assert metrics == {"revisits_explorer_only": 1.0, "revisit_success_explorer_only": 0.75,
                       "revisits_nobody": 1.0, "revisit_success_nobody": 0.0}
    assert pending == {2: "explorer_only"}


def test_run_labels_keep_the_strongest_label_a_goal_ever_got():
    labels = run_labels({}, task_labels([played(1, False), played(1, True, "explorer"), played(2, False), played(2, False, "explorer")]))
    assert labels == {1: "explorer_only", 2: "nobody"}
    # later plays: nobody wins 1 (it stays explorer-only), the explorer alone wins 2, the learner wins 1's sibling 3
    later = task_labels([played(1, False), played(1, False, "explorer"), played(2, False), played(2, True, "explorer"),
                         played(3, True), played(3, False, "explorer")])
    labels = run_labels(labels, later)
    assert labels == {1: "explorer_only", 2: "explorer_only", 3: "learner"}
    # a learner win anywhere makes the goal the learner's for good
    assert run_labels(labels, {1: ("learner", 0.25)})[1] == "learner"
    assert run_labels(labels, {3: ("nobody", 0.0)})[3] == "learner"


def test_transfer_sample_is_seeded_capped_and_ignores_insertion_order():
    labels = {task: ("explorer_only" if task % 3 == 0 else "nobody" if task % 3 == 1 else "learner") for task in range(30)}
    sample = transfer_sample(labels, 4, seed=7)
    assert set(sample) == {"explorer_only", "nobody"}
    assert len(sample["explorer_only"]) == len(sample["nobody"]) == 4
    assert all(t % 3 == 0 for t in sample["explorer_only"]) and all(t % 3 == 1 for t in sample["nobody"])
    assert sample["nobody"] == sorted(sample["nobody"])
    shuffled = dict(reversed(list(labels.items())))
    assert transfer_sample(shuffled, 4, seed=7) == sample
    assert transfer_sample(labels, 4, seed=8) != sample
    assert transfer_sample(labels, 100, seed=7)["explorer_only"] == list(range(0, 30, 3))  # fewer goals than asked: all
    assert transfer_sample({2: "nobody", "b": "nobody"}, 5, seed=0)["nobody"] == ["b", 2]  # ids that do not compare: by repr


def test_transfer_is_a_difference_in_differences_of_goal_means():
    start = {"explorer_only": [0.0, 0.25, 0.5], "nobody": [0.0, 0.0, 0.25, 0.25]}
    end = {"explorer_only": [0.5, 0.25, 0.75], "nobody": [0.25, 0.0, 0.25, 0.5]}
    out = transfer_summary(start, end)
    assert out["explorer_only_tasks"] == 3.0 and out["nobody_tasks"] == 4.0
    assert out["explorer_only_start"] == pytest.approx(0.25) and out["explorer_only_end"] == pytest.approx(0.5)
    assert out["nobody_start"] == pytest.approx(0.125) and out["nobody_end"] == pytest.approx(0.25)
    assert out["transfer"] == pytest.approx(0.25 - 0.125)
    empty = transfer_summary({"explorer_only": [], "nobody": [0.0]}, {"explorer_only": [], "nobody": [1.0]})
    assert empty["explorer_only_tasks"] == 0.0 and empty["nobody_gain"] == 1.0
    assert empty["transfer"] != empty["transfer"]  # NaN: nothing to compare, never a made-up 0


def test_the_trainer_measures_the_replay_of_its_merged_update():
    """Wiring: the trainer splits the replayed rows by their trajectory's outcome, and before any
    update the log-prob gain of every winning row is 0 (the extra forward reads the same weights)."""
    from dataclasses import replace

    from rspo_gym.algos import RSPOTrainer
    from rspo_gym.training.rspo import merge_replay

    fast = dict(model="drrn", num_groups=2, group_size=2, explorer_group_size=1, max_turns=3, eval_every=0, progress=False,
                seed=0, replay_age=2, checkpoint_every=0, is_cap=2.0)
    trainer = RSPOTrainer("rspo/ALFWorld-v0", **fast)
    trainer.train_on(trainer.collect(0), 0)  # the learner moves away from the explorer: weights differ from 1
    rollout = trainer.collect(1)
    merged = merge_replay(rollout, trainer.buffer, 1, trainer.config.replay_age)
    # call one replayed and one learner trajectory won, whatever they played
    replayed_traj = next(t.traj_id for t in merged.trajectories if t.source != "learner")
    own_traj = next(t.traj_id for t in merged.trajectories if t.source == "learner")
    merged = type(merged)(merged.rows, [replace(t, won=t.traj_id in (replayed_traj, own_traj)) for t in merged.trajectories])
    inputs = trainer.learner_inputs(merged)
    metrics = trainer.replay_metrics(merged, inputs)
    trainer.close()

    mask = inputs["batch"].response_mask.bool()
    replayed = torch.tensor([r.source != "learner" for r in merged.rows])
    winning = torch.tensor([r.traj_id == replayed_traj for r in merged.rows])
    assert metrics["explorer/replay_win_tokens"] == float(mask[winning].sum()) > 0
    assert metrics["explorer/replay_win_tokens"] + metrics["explorer/replay_loss_tokens"] == float(mask[replayed].sum())
    assert metrics["explorer/is_weight_win"] == pytest.approx(float(inputs["is_weights"][winning][mask[winning]].mean()))
    assert metrics["explorer/replay_win_logp_tokens"] == metrics["explorer/replay_win_tokens"]
    assert metrics["explorer/own_win_logp_tokens"] > 0
    assert metrics["explorer/replay_win_logp_gain"] == pytest.approx(0.0, abs=1e-5)
    assert metrics["explorer/own_win_logp_gain"] == pytest.approx(0.0, abs=1e-5)
