"""The training display: a time budget's bar counts seconds, a rollout's episodes are counted, a bar off a
terminal is a plain line now and then, third-party bars are silenced."""

import pytest

from rspo_gym.training.progress import (
    RolloutProgress, ThrottledLines, TrainingProgress, another_iteration_fits, quiet_third_party_progress,
)


def test_another_iteration_fits_counts_the_evaluation_reserve():
    assert another_iteration_fits(now=100.0, deadline=None, iteration_s=1e9, reserve_s=1e9)
    assert another_iteration_fits(now=100.0, deadline=160.0, iteration_s=40.0, reserve_s=20.0)
    assert not another_iteration_fits(now=100.0, deadline=160.0, iteration_s=40.0, reserve_s=20.5)
    assert not another_iteration_fits(now=100.0, deadline=130.0, iteration_s=40.0, reserve_s=0.0)


def test_budget_bar_counts_the_budget_not_the_iteration_bound():
    pytest.importorskip("tqdm")
    progress = TrainingProgress(True, "rspo", iterations=40, done=0, budget_s=540.0)
    progress.phase(0, "collecting")
    line = str(progress.bar)
    progress.close()
    assert progress.bar.total == 540
    assert "0/540 s of the time budget, iteration 1/40: collecting" in line
    assert "0/40" not in line and "left" not in line


def test_budget_bar_moves_between_phases():
    import time

    pytest.importorskip("tqdm")
    progress = TrainingProgress(True, "rspo", iterations=40, done=0, budget_s=60.0, refresh_s=0.05)
    progress.started -= 5.0  # as if the rollout had been running for 5 s without a phase change
    deadline = time.perf_counter() + 10
    while progress.bar.n < 5 and time.perf_counter() < deadline:
        time.sleep(0.02)
    progress.close()
    assert progress.bar.n >= 5


def test_iteration_bar_without_a_budget_and_messages_without_a_bar(capsys):
    pytest.importorskip("tqdm")
    progress = TrainingProgress(True, "grpo", iterations=3, done=1, budget_s=None)
    progress.iteration_done(1, 0.5)
    assert progress.bar.n == 2 and "iteration 2/3: done, success 0.50" in str(progress.bar)
    progress.close()
    silent = TrainingProgress(False, "grpo", iterations=3, done=0, budget_s=None)
    silent.phase(0, "collecting")
    silent.say("time budget: stopping")
    assert capsys.readouterr().out == "time budget: stopping\n"


def test_third_party_bars_are_silenced_and_restored():
    hf_logging = pytest.importorskip("transformers.utils.logging")
    assert hf_logging.is_progress_bar_enabled()
    with quiet_third_party_progress():
        assert not hf_logging.is_progress_bar_enabled()
    assert hf_logging.is_progress_bar_enabled()


def test_ranks_but_the_main_one_say_nothing(capsys):
    other_rank = TrainingProgress(False, "grpo", iterations=3, done=0, budget_s=None, speaks=False)
    other_rank.say("time budget: stopping")
    assert capsys.readouterr().out == ""


def _count(done, episodes, turns, steps, seconds):
    from rspo_gym.rollout.collector import RolloutCount

    return RolloutCount(episodes_done=done, episodes=episodes, turns=turns, steps=steps, seconds=seconds)


def test_a_training_bar_counts_the_rollout_of_its_phase():
    pytest.importorskip("tqdm")
    progress = TrainingProgress(True, "rspo", iterations=4, done=0, budget_s=None, terminal=False)
    progress.phase(1, "collecting")
    progress.rollout(_count(3, 8, 12, 80, 0.2))
    line = str(progress.bar)
    progress.rollout(_count(8, 8, 30, 200, 40.0), label="explorer")
    explorer = str(progress.bar)
    progress.close()
    assert "iteration 2/4: collecting, 3/8 episodes, turn 12, 400 steps/s" in line
    assert "iteration 2/4: collecting, explorer 8/8 episodes, turn 30, 5.0 steps/s" in explorer


def test_a_rollout_bar_counts_episodes():
    pytest.importorskip("tqdm")
    progress = RolloutProgress(True, "evaluating", episodes=8, terminal=False)
    progress.update(_count(3, 8, 5, 30, 2.0))
    line = str(progress.bar)
    progress.close()
    assert line.startswith("evaluating:  38%") and "3/8 episodes" in line and line.endswith(", turn 5, 15 steps/s")


def test_off_a_terminal_a_bar_is_a_plain_line_now_and_then(capsys):
    lines = ThrottledLines(every_s=0.0)
    lines.write("\rcollecting 1/8   ")
    lines.write("\r   ")  # a bar clearing its line writes nothing
    rare = ThrottledLines(every_s=3600.0)
    rare.write("\rcollecting 2/8")
    assert capsys.readouterr().err == "collecting 1/8\n"


def test_off_a_terminal_bars_write_lines_to_stderr_not_carriage_returns(capsys):
    pytest.importorskip("tqdm")
    progress = TrainingProgress(True, "grpo", iterations=3, done=0, budget_s=None, terminal=False, log_every_s=0.0)
    progress.phase(0, "collecting")
    progress.close()
    silent = TrainingProgress(False, "grpo", iterations=3, done=0, budget_s=None, terminal=False, log_every_s=0.0)
    silent.phase(0, "collecting")
    silent.close()
    err = capsys.readouterr().err
    assert "\r" not in err and err.splitlines()[-1].startswith("grpo:   0%") and "iteration 1/3: collecting" in err


def test_learn_closes_its_display_when_an_iteration_raises(tmp_path, monkeypatch):
    """A bar left open keeps its redraw thread drawing over whatever the user does next."""
    pytest.importorskip("tqdm")
    import rspo_gym.training.trainer as trainer_module
    from rspo_gym.algos import GRPOTrainer

    displays = []

    class Recorded(TrainingProgress):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            displays.append(self)

    monkeypatch.setattr(trainer_module, "TrainingProgress", Recorded)
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="drrn", num_groups=1, group_size=2, max_turns=2, eval_every=0,
                          progress=True, output_dir=str(tmp_path))

    def stop(_trainer, _metrics):
        raise RuntimeError("stopped by the callback")

    try:
        with pytest.raises(RuntimeError, match="stopped by the callback"):
            trainer.learn(2, callback=stop)
    finally:
        trainer.close()
    (display,) = displays
    assert display.bar is not None and display._stop.is_set()  # the redraw thread has stopped
    assert trainer._display is None  # later rollouts do not report to a closed bar
