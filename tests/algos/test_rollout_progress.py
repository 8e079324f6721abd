"""Rollouts say how far they are: inside ``learn()`` the training bar counts the episodes of the
phase it names (collecting, RSPO's explorer, evaluating), and ``evaluate()`` called on its own (the
quick start's first evaluation, ``rspo-gym eval``) draws a bar of its own, unless ``progress=False``."""

import pytest

from rspo_gym.training import progress as progress_module
from rspo_gym.training import trainer as trainer_module
from rspo_gym.training.progress import TrainingProgress
from rspo_gym.rollout.collector import RolloutCount

pytest.importorskip("torch")

FAST = dict(model="drrn", iterations=1, num_groups=1, group_size=2, max_turns=2, eval_tasks=1)


def test_collect_counts_episodes_turns_and_steps():
    from rspo_gym.training.envs import make_vector_env
    from rspo_gym.policies.action_scorer import ActionScorerPolicy
    from rspo_gym.rollout.collector import CollectConfig, collect

    venv, _ = make_vector_env("rspo/ALFWorld-v0", 1, 3)
    counts: list[RolloutCount] = []
    collect(ActionScorerPolicy(), venv, CollectConfig(constrained=True, max_turns=2), seed=0, on_turn=counts.append)
    venv.close()
    assert [(c.episodes_done, c.episodes, c.turns, c.steps) for c in counts] == [(0, 3, 1, 3), (0, 3, 2, 6), (3, 3, 2, 6)]
    assert counts[0].seconds <= counts[-1].seconds


class _Recording(TrainingProgress):
    """The training display, remembering the text of every rollout count it was given."""

    texts: list[str] = []

    def rollout(self, count: RolloutCount, label: str = "") -> None:
        super().rollout(count, label)
        _Recording.texts.append(self.bar.postfix)


def test_learn_counts_the_episodes_of_each_phase(tmp_path, monkeypatch):
    from rspo_gym import RSPOTrainer

    monkeypatch.setattr(trainer_module, "TrainingProgress", _Recording)
    monkeypatch.setattr(_Recording, "texts", [])
    trainer = RSPOTrainer("rspo/ALFWorld-v0", **FAST, explorer_group_size=1, eval_every=1, output_dir=str(tmp_path / "run"))
    trainer.learn()
    trainer.close()
    for start in ("iteration 1/1: collecting, 2/2 episodes, turn 2, ", "iteration 1/1: collecting, explorer 1/1 episodes, turn 2, ",
                  "iteration 1/1: evaluating on held-out tasks, 1/1 episodes, turn 2, "):
        assert any(text.startswith(start) and text.endswith(" steps/s") for text in _Recording.texts), (start, _Recording.texts)


@pytest.mark.parametrize("shown", [True, False])
def test_evaluate_alone_draws_its_own_bar_unless_progress_is_off(shown, monkeypatch, capsys):
    from rspo_gym import GRPOTrainer

    monkeypatch.setattr(progress_module, "LOG_EVERY_S", 0.0)  # every redraw a line (stderr is no terminal here)
    trainer = GRPOTrainer("rspo/ALFWorld-v0", **FAST, progress=shown)
    trainer.evaluate(tasks=2)
    trainer.close()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("evaluating rspo/ALFWorld-v0:")]
    if shown:
        assert lines and lines[-1].startswith("evaluating rspo/ALFWorld-v0: 100%") and "2/2 episodes" in lines[-1], lines
        assert ", turn 2, " in lines[-1] and lines[-1].endswith(" steps/s")
    else:
        assert lines == []


class _RecordingUpdates(TrainingProgress):
    """The training display, remembering the text of every update step it was shown."""

    texts: list[str] = []

    def update_step(self, rows_done: int, rows: int, seconds: float, label: str = "") -> None:
        super().update_step(rows_done, rows, seconds, label)
        _RecordingUpdates.texts.append(self.bar.postfix)


def test_learn_counts_the_rows_of_the_update(tmp_path, monkeypatch):
    """The update phase (minutes for an LLM on a CPU) says how many of its rows are done and the
    time left, for the learner and for RSPO's explorer, instead of a bare "updating"."""
    from rspo_gym import RSPOTrainer

    monkeypatch.setattr(trainer_module, "TrainingProgress", _RecordingUpdates)
    monkeypatch.setattr(_RecordingUpdates, "texts", [])
    trainer = RSPOTrainer("rspo/ALFWorld-v0", **{**FAST, "group_size": 4}, explorer_group_size=1, micro_batch_size=2, ppo_epochs=2,
                          eval_every=0, output_dir=str(tmp_path / "run"))
    trainer.learn()
    trainer.close()
    texts = _RecordingUpdates.texts
    learner = [t for t in texts if t.startswith("iteration 1/1: updating, ") and "explorer" not in t]
    assert learner and all(" rows, " in t and t.endswith(" s left") for t in learner), texts
    done, total = learner[-1].split(", ")[1].split(" ")[0].split("/")
    assert done == total and int(total) > 2, texts  # both epochs' rows, counted to the end
    assert any(t.startswith("iteration 1/1: updating, explorer ") for t in texts), texts
