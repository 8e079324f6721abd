"""RSPO's end-of-run transfer measurement (``RSPOTrainer.measure_transfer``, ``training/transfer.py``):
the start weights it keeps, the episodes it plays, the weights it puts back, what it writes."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from rspo_gym.algos import RSPOTrainer  # noqa: E402
from rspo_gym.errors import UserError  # noqa: E402
from rspo_gym.training.transfer import detached_copy  # noqa: E402

FAST = dict(model="drrn", base="grpo", num_groups=4, group_size=2, explorer_group_size=1, eval_every=0, progress=False,
            seed=0, checkpoint_every=0, transfer_tasks=12, transfer_episodes=2)


def _same(a, b) -> bool:
    """Two state dicts hold the same values, bit for bit."""
    if isinstance(a, torch.Tensor):
        return torch.equal(a.cpu(), b.cpu())
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _per_goal(trainer, goals: list[int], episodes: int) -> list[float]:
    ids = [t for t in goals for _ in range(episodes)]
    _, played = trainer.evaluate(task_ids=ids, return_episodes=True, temperature=1.0, training_envs=True)
    won: dict[int, list[float]] = {}
    for t in played:
        won.setdefault(t.task_id, []).append(float(t.won))
    return [sum(won[t]) / len(won[t]) for t in goals]


def test_transfer_plays_the_same_episodes_with_the_start_and_the_final_weights(tmp_path):
    trainer = RSPOTrainer("rspo/WebShop-v1", iterations=2, output_dir=tmp_path / "run", **FAST)
    # the weights learning starts from are those in place at learn(), not at construction (the
    # matrix loads a warm start in between)
    other = RSPOTrainer("rspo/WebShop-v1", iterations=2, **{**FAST, "seed": 5})
    trainer.policy.load_state_dict(other.policy.state_dict())
    other.close()
    start = detached_copy(trainer.policy.state_dict())
    trainer.learn()

    assert _same(trainer._start_weights["model"], start["model"])
    assert trainer.run_labels and set(trainer.run_labels.values()) <= {"learner", "explorer_only", "nobody"}
    written = json.loads((tmp_path / "run" / "transfer.json").read_text(),
                         parse_constant=lambda name: pytest.fail(f"transfer.json holds {name}"))
    assert written["labelled"]["nobody"] == sum(1 for v in trainer.run_labels.values() if v == "nobody")

    # a chosen set of labels: goals the untrained scorer sometimes wins at T = 1.0
    trainer.run_labels = {t: "explorer_only" for t in range(20)} | {t: "nobody" for t in range(20, 40)}
    final = detached_copy(trainer.policy.state_dict())
    result = trainer.measure_transfer(temperature=1.0)
    # the final weights are back (the scorer's command registry only grows with the texts it has seen)
    assert _same(trainer.policy.state_dict()["model"], final["model"])

    goals = result["goals"]
    assert len(goals["explorer_only"]["task_ids"]) == len(goals["nobody"]["task_ids"]) == 12
    ids = goals["explorer_only"]["task_ids"] + goals["nobody"]["task_ids"]
    end = _per_goal(trainer, ids, 2)
    trainer.policy.load_state_dict(start)
    before = _per_goal(trainer, ids, 2)
    trainer.close()
    assert goals["explorer_only"]["end"] + goals["nobody"]["end"] == end
    assert goals["explorer_only"]["start"] + goals["nobody"]["start"] == before
    assert sum(end) + sum(before) > 0  # the comparison is not of zeros only
    assert result["transfer"] == pytest.approx((sum(end[:12]) - sum(before[:12]) - sum(end[12:]) + sum(before[12:])) / 12)
    assert result["temperature"] == 1.0 and result["episodes"] == 2


def test_labels_and_start_weights_travel_in_the_checkpoint(tmp_path):
    trainer = RSPOTrainer("rspo/ALFWorld-v0", iterations=1, max_turns=3, output_dir=tmp_path / "run", **FAST)
    trainer.learn()
    assert len(trainer.run_labels) == 4  # every goal the learner played in its one iteration
    state = trainer.state()
    trainer.close()
    resumed = RSPOTrainer("rspo/ALFWorld-v0", iterations=1, max_turns=3, **FAST)
    resumed.load_state(state)
    assert resumed.run_labels == trainer.run_labels
    assert _same(resumed._start_weights, trainer._start_weights)
    resumed.close()


def test_transfer_is_refused_where_it_cannot_be_measured():
    with pytest.raises(UserError, match="swap='explorer'"):
        RSPOTrainer("rspo/ALFWorld-v0", swap="rank", **FAST)
    with pytest.raises(UserError, match="transfer_tasks x transfer_episodes"):
        RSPOTrainer("rspo/ALFWorld-v0", **{**FAST, "transfer_tasks": 40_000})
    trainer = RSPOTrainer("rspo/ALFWorld-v0", **{**FAST, "transfer_tasks": 0})
    with pytest.raises(UserError, match="transfer_tasks > 0"):
        trainer.measure_transfer()
    trainer.close()


def test_a_resumed_run_measures_from_its_first_start_and_overwrite_removes_the_old_measure(tmp_path):
    folder = tmp_path / "run"
    first = RSPOTrainer("rspo/ALFWorld-v0", iterations=1, max_turns=3, output_dir=folder, **{**FAST, "checkpoint_every": 1})
    start = detached_copy(first.policy.state_dict())
    first.learn()
    first.close()
    resumed = RSPOTrainer("rspo/ALFWorld-v0", iterations=2, max_turns=3, output_dir=folder, **{**FAST, "checkpoint_every": 1, "seed": 0})
    resumed.policy.load_state_dict(RSPOTrainer("rspo/ALFWorld-v0", **{**FAST, "seed": 9}).policy.state_dict())  # not the run's start
    resumed.learn(resume=True)
    resumed.close()
    assert _same(resumed._start_weights["model"], start["model"])
    assert len(resumed.run_labels) == 8  # both iterations' goals
    assert (folder / "transfer.json").is_file()

    fresh = RSPOTrainer("rspo/ALFWorld-v0", iterations=1, max_turns=3, output_dir=folder, **{**FAST, "transfer_tasks": 0})
    fresh.learn(overwrite=True)
    fresh.close()
    assert not (folder / "transfer.json").exists()  # no stale measure of another run beside this one's record
