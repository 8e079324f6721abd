"""``report_to``: TensorBoard event files are written; a missing backend is a one-line error at
construction, before any model is loaded."""

import importlib.util

import pytest

from rspo_gym.training.reporting import check_report_to, make_reporter


def test_unknown_report_to_is_refused():
    with pytest.raises(ValueError, match=r"report_to must be one of \('none', 'tensorboard', 'wandb'\), got 'mlflow'"):
        check_report_to("mlflow")
    check_report_to("none")


def test_missing_wandb_says_what_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ValueError) as err:
        check_report_to("wandb")
    assert str(err.value) == ("report_to='wandb' needs the wandb package, which is not installed: "
                              "pip install wandb, then `wandb login` (or set WANDB_MODE=offline)")
    assert "\n" not in str(err.value)


def test_missing_wandb_fails_the_trainer_before_it_loads_anything(monkeypatch):
    pytest.importorskip("transformers")
    from rspo_gym.algos import GRPOTrainer

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ValueError, match="needs the wandb package"):
        GRPOTrainer("rspo/ALFWorld-v0", report_to="wandb")


def test_tensorboard_writes_event_files_with_the_metrics(tmp_path):
    pytest.importorskip("tensorboard")
    pytest.importorskip("torch")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    reporter = make_reporter("tensorboard", tmp_path, {})
    reporter.log({"iteration": 1, "rollout/success": 0.25, "note": "text", "flag": True}, 1)
    reporter.log({"iteration": 2, "rollout/success": 0.5}, 2)
    reporter.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert events.Tags()["scalars"] == ["rollout/success"]
    assert [(e.step, e.value) for e in events.Scalars("rollout/success")] == [(1, 0.25), (2, 0.5)]
    assert make_reporter("none", tmp_path, {}) is None


def test_trainer_reports_to_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    pytest.importorskip("transformers")
    from rspo_gym.algos import GRPOTrainer

    trainer = GRPOTrainer("rspo/ALFWorld-v0", output_dir=str(tmp_path), report_to="tensorboard", iterations=1,
                          num_groups=1, group_size=2, max_turns=1, eval_every=0, progress=False)
    trainer.learn()
    trainer.close()
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    quiet = GRPOTrainer("rspo/ALFWorld-v0", output_dir=str(tmp_path / "quiet"), iterations=1,
                        num_groups=1, group_size=2, max_turns=1, eval_every=0, progress=False)
    quiet.learn()
    assert not (tmp_path / "quiet" / "tensorboard").exists()  # report_to="none" by default


def test_a_resumed_run_replaces_the_tensorboard_steps_it_trains_again(tmp_path):
    """An interrupted run logged iterations 1-3 but checkpointed after 1: the resume logs 2 and 3 again."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rspo_gym.training.reporting import make_reporter

    interrupted = make_reporter("tensorboard", tmp_path, {})
    for step in (1, 2, 3):
        interrupted.log({"iteration": step, "loss": float(step)}, step)
    interrupted.close()
    resumed = make_reporter("tensorboard", tmp_path, {}, first_step=2)
    for step in (2, 3):
        resumed.log({"iteration": step, "loss": 10.0 * step}, step)
    resumed.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [(1, 1.0), (2, 20.0), (3, 30.0)]
