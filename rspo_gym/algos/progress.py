"""What the training loop shows while it runs: a progress bar, phase messages, the time budget.

With a time budget the bar counts the budget's seconds, not iterations: an iteration count is an
upper bound that the budget usually cuts short, so a bar over it would promise hours under a
budget of minutes. The bar's text says what the loop is doing (collecting, updating, evaluating),
since one iteration can take a minute on a CPU. Third-party bars (transformers' shard writing,
the Hub's downloads) are silenced while the loop saves, so they do not break into the display.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["TrainingProgress", "another_iteration_fits", "quiet_third_party_progress"]


def another_iteration_fits(now: float, deadline: float | None, iteration_s: float, reserve_s: float) -> bool:
    """Whether an iteration as long as the last one, plus ``reserve_s`` (the final evaluation),
    still ends by ``deadline`` (a ``time.perf_counter()`` value; None: no budget)."""
    return deadline is None or now + iteration_s + reserve_s <= deadline


class TrainingProgress:
    """The loop's display: a tqdm bar on a terminal (or nothing), and messages above it.

    A daemon thread redraws the bar every ``refresh_s`` seconds, so its clock (and, under a time
    budget, its count) moves during a long rollout instead of sitting still until the next phase.
    """

    def __init__(self, enabled: bool, description: str, iterations: int, done: int, budget_s: float | None,
                 refresh_s: float = 1.0, speaks: bool = True):
        self.speaks = speaks  # False on every rank of a launched job but the main one
        self.iterations = iterations
        self.budget_s = budget_s
        self.started = time.perf_counter()
        self.bar = self._make_bar(description, iterations, done, budget_s) if enabled else None
        self._stop = threading.Event()
        if self.bar is not None:
            threading.Thread(target=self._tick, args=(refresh_s,), daemon=True).start()

    def _tick(self, refresh_s: float) -> None:
        while not self._stop.wait(refresh_s):
            with self.bar.get_lock():
                self._advance_clock()
                self.bar.refresh()

    def _advance_clock(self) -> None:
        if self.budget_s is not None:
            self.bar.n = min(self.bar.total, round(time.perf_counter() - self.started))

    @staticmethod
    def _make_bar(description: str, iterations: int, done: int, budget_s: float | None) -> Any:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return None
        if budget_s is None:
            return tqdm(total=iterations, initial=done, desc=description, leave=False)
        return tqdm(
            total=max(1, round(budget_s)), desc=description, leave=False,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s of the time budget{postfix}",
        )

    def phase(self, iteration: int, text: str) -> None:
        """Say what iteration ``iteration`` (0-based) is doing now."""
        if self.bar is None:
            return
        self._advance_clock()
        self.bar.set_postfix_str(f"iteration {iteration + 1}/{self.iterations}: {text}")

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

    def close(self) -> None:
        self._stop.set()
        if self.bar is not None:
            with self.bar.get_lock():
                self.bar.close()


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
