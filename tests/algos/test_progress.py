"""The training display: a time budget's bar counts seconds, third-party bars are silenced."""

import pytest

from rspo_gym.algos.progress import TrainingProgress, another_iteration_fits, quiet_third_party_progress


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
