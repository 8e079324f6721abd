"""What long-running work shows while it runs: progress bars, phase messages, the time budget.

- ``TrainingProgress``: the training loop's bar. With a time budget it counts the budget's
  seconds, not iterations: an iteration count is an upper bound that the budget usually cuts
  short, so a bar over it would promise hours under a budget of minutes. Its text says what the
  loop is doing (collecting, updating, evaluating) and how far that phase's rollout is (episodes
  done of all, the turn, env steps per second), since one iteration can take a minute on a CPU;
  and how far the update is (rows done of all, seconds left), since an LLM's update on a CPU can
  take minutes more.
- ``RolloutProgress``: a rollout shown on its own (``Trainer.evaluate`` outside ``learn``: the
  quick start's held-out evaluation, ``rspo-gym eval``), a bar over its episodes.

Both draw a tqdm bar on stderr when it is a terminal or a notebook. Elsewhere (a log file, CI) a
bar's many redraws a second would flood the log, so its line is written once every
``LOG_EVERY_S`` seconds instead (``ThrottledLines``); a phase shorter than that leaves no line.
``enabled=False`` (the trainers' ``progress=False``) turns both off. Third-party bars
(transformers' shard writing, the Hub's downloads) are silenced while the loop saves, so they do
not break into the display.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rspo_gym.rollout.collector import RolloutCount

__all__ = [
    "LOG_EVERY_S", "RolloutProgress", "ThrottledLines", "TrainingProgress", "another_iteration_fits", "quiet_third_party_progress",
]

#: Seconds between two lines of a bar that is not on a terminal (read when a bar is made).
LOG_EVERY_S = 10.0


def another_iteration_fits(now: float, deadline: float | None, iteration_s: float, reserve_s: float) -> bool:
    """Whether an iteration as long as the last one, plus ``reserve_s`` (the final evaluation),
    still ends by ``deadline`` (a ``time.perf_counter()`` value; None: no budget)."""
    return deadline is None or now + iteration_s + reserve_s <= deadline


def _describe_rollout(count: RolloutCount) -> str:
    """``"3/8 episodes, turn 12, 410 steps/s"``: how far a rollout is, for a bar's text."""
    return f"{count.episodes_done}/{count.episodes} episodes, {_pace(count)}"


def _pace(count: RolloutCount) -> str:
    """``"turn 12, 410 steps/s"`` (a tenth of a step below 10 a second: an LLM on a CPU)."""
    rate = count.steps / count.seconds if count.seconds > 0 else 0.0
    return f"turn {count.turns}, {rate:.{1 if rate < 10 else 0}f} steps/s"


def _describe_update(rows_done: int, rows: int, seconds: float) -> str:
    """``"48/210 rows, 35 s left"``: how far an update is, its time left at the pace so far."""
    left = seconds / max(rows_done, 1) * (rows - rows_done)
    return f"{rows_done}/{rows} rows, {left:.0f} s left"


class ThrottledLines:
    """Where a bar draws when stderr is no terminal: tqdm redraws a bar with a carriage return
    several times a second, which a log keeps as one endless line or a flood of lines; this
    writes the bar's state as one plain line to ``sys.stderr`` at most every ``every_s`` seconds,
    the first ``every_s`` seconds after it is made."""

    def __init__(self, every_s: float | None = None):
        self.every_s = LOG_EVERY_S if every_s is None else every_s
        self._last = time.perf_counter()

    def write(self, text: str) -> int:
        line = text.strip()
        now = time.perf_counter()
        if line and now - self._last >= self.every_s:
            self._last = now
            print(line, file=sys.stderr, flush=True)
        return len(text)

    def flush(self) -> None:
        """Nothing to flush: every line is written whole."""


def _make_bar(terminal: bool | None, log_every_s: float | None, **options: Any) -> Any:
    """A tqdm bar (None without tqdm): live where ``terminal`` (None: stderr is a terminal, or a
    notebook kernel runs this), else drawing into ``ThrottledLines``."""
    if terminal is None:
        terminal = sys.stderr.isatty() or "ipykernel" in sys.modules
    try:
        from tqdm.auto import tqdm as live
        from tqdm.std import tqdm as plain
    except ImportError:
        return None
    if terminal:
        return live(leave=False, **options)
    return plain(file=ThrottledLines(log_every_s), leave=False, **options)


class _Display:
    """A bar (or nothing) that a daemon thread redraws every ``refresh_s`` seconds, so its clock
    moves during a long rollout turn instead of sitting still until the next update."""

    def __init__(self, enabled: bool, *, refresh_s: float, terminal: bool | None, log_every_s: float | None, **options: Any):
        self.bar = _make_bar(terminal, log_every_s, **options) if enabled else None
        self._stop = threading.Event()
        if self.bar is not None:
            threading.Thread(target=self._tick, args=(refresh_s,), daemon=True).start()

    def _tick(self, refresh_s: float) -> None:
        while not self._stop.wait(refresh_s):
            with self.bar.get_lock():
                self._advance_clock()
                self.bar.refresh()

    def _advance_clock(self) -> None:
        """Move what the bar counts with the clock (a time budget's seconds); most bars count work."""

    def close(self) -> None:
        self._stop.set()
        if self.bar is not None:
            with self.bar.get_lock():
                self.bar.close()


class TrainingProgress(_Display):
    """The loop's display: a bar (or nothing), and messages above it.

    ``terminal``: draw a live bar (None: when stderr is a terminal); otherwise its line is
    written every ``log_every_s`` seconds (None: ``LOG_EVERY_S``).
    """

    def __init__(self, enabled: bool, description: str, iterations: int, done: int, budget_s: float | None,
                 refresh_s: float = 1.0, speaks: bool = True, *, terminal: bool | None = None, log_every_s: float | None = None):
        self.speaks = speaks  # False on every rank of a launched job but the main one
        self.iterations = iterations
        self.budget_s = budget_s
        self.started = time.perf_counter()
        self._iteration, self._phase = done, "starting"
        super().__init__(enabled, refresh_s=refresh_s, terminal=terminal, log_every_s=log_every_s,
                         **self._bar_options(description, iterations, done, budget_s))

    def _advance_clock(self) -> None:
        if self.budget_s is not None:
            self.bar.n = min(self.bar.total, round(time.perf_counter() - self.started))

    @staticmethod
    def _bar_options(description: str, iterations: int, done: int, budget_s: float | None) -> dict[str, Any]:
        if budget_s is None:
            return {"total": iterations, "initial": done, "desc": description}
        return {
            "total": max(1, round(budget_s)), "desc": description,
            "bar_format": "{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s of the time budget{postfix}",
        }

    def phase(self, iteration: int, text: str) -> None:
        """Say what iteration ``iteration`` (0-based) is doing now."""
        self._iteration, self._phase = iteration, text
        if self.bar is None:
            return
        self._advance_clock()
        self.bar.set_postfix_str(f"iteration {iteration + 1}/{self.iterations}: {text}")

    def rollout(self, count: RolloutCount, label: str = "") -> None:
        """How far the phase's rollout is (``label``: whose, when a phase has several, e.g. RSPO's
        explorer). Drawn by the clock thread, and here only when the rollout ends: a fast policy
        plays hundreds of turns a second."""
        if self.bar is None:
            return
        who = f"{label} " if label else ""
        self.bar.set_postfix_str(f"iteration {self._iteration + 1}/{self.iterations}: {self._phase}, {who}{_describe_rollout(count)}",
                                 refresh=count.episodes_done == count.episodes)

    def update_step(self, rows_done: int, rows: int, seconds: float, label: str = "") -> None:
        """How far the phase's update is: ``rows_done`` of the ``rows`` it passes over (every
        epoch's), after ``seconds``; ``label`` as ``rollout``'s. Drawn by the clock thread, and
        here only when the update ends: a fast policy passes hundreds of micro-batches a second."""
        if self.bar is None:
            return
        who = f"{label} " if label else ""
        self.bar.set_postfix_str(f"iteration {self._iteration + 1}/{self.iterations}: {self._phase}, {who}"
                                 f"{_describe_update(rows_done, rows, seconds)}", refresh=rows_done == rows)

    def iteration_done(self, iteration: int, success: float) -> None:
        if self.bar is None:
            return
        if self.budget_s is None:
            self.bar.update(1)
        self.phase(iteration, f"done, success {success:.2f}")

    def say(self, text: str) -> None:
        """A message line that stays (above the bar when there is one); silent unless ``speaks``."""
        if not self.speaks:
            return
        if self.bar is not None:
            self.bar.write(text)
        else:
            print(text, flush=True)


class RolloutProgress(_Display):
    """A rollout shown on its own: a bar over its ``episodes``, with the turn and env steps per
    second (``terminal`` and ``log_every_s`` as ``TrainingProgress``'s)."""

    def __init__(self, enabled: bool, description: str, episodes: int, refresh_s: float = 1.0, *,
                 terminal: bool | None = None, log_every_s: float | None = None):
        super().__init__(
            enabled, refresh_s=refresh_s, terminal=terminal, log_every_s=log_every_s, total=episodes, desc=description,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n}/{total} episodes [{elapsed}<{remaining}]{postfix}",
        )

    def update(self, count: RolloutCount) -> None:
        """Show ``count``: drawn by the clock thread, and here only when the rollout ends."""
        if self.bar is None:
            return
        self.bar.n = count.episodes_done
        self.bar.set_postfix_str(_pace(count), refresh=count.episodes_done == count.episodes)


@contextlib.contextmanager
def quiet_third_party_progress() -> Iterator[None]:
    """Silence transformers' and the Hub's own progress bars for the duration, then restore them."""
    restore = []
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        pass
    else:
        if hf_logging.is_progress_bar_enabled():
            hf_logging.disable_progress_bar()
            restore.append(hf_logging.enable_progress_bar)
    try:
        from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    except ImportError:
        pass
    else:
        if not are_progress_bars_disabled():
            disable_progress_bars()
            restore.append(enable_progress_bars)
    try:
        yield
    finally:
        for enable in restore:
            enable()
